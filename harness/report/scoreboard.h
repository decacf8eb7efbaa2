/* The conformance table (genfence scoreboard, docs/conformance.md): run
 * reports in, one Markdown page out. */
#ifndef GENFENCE_HARNESS_SCOREBOARD_H
#define GENFENCE_HARNESS_SCOREBOARD_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

/* The page for n run reports (docs[i] read from paths[i]): a header naming
 * each run (machine, genfence and backend versions, date, command), one table
 * (rows: cases in load order; columns: backend + weight / KV type in order of
 * appearance; cells: verdict, the figure that decided it -- KL mean and top-1
 * for the statistical tier, max |delta| and safety factor for comparisons,
 * checks otherwise -- and near ties), then every finding (fail, crash,
 * timeout, error, stale) with its reason and reproduce line, and the skips'
 * reasons. include (optional): text appended after a marker, as it is.
 * Paths under a run's working directory are written relative to it.
 * self (optional): the command line that made the page, quoted in it.
 * 0 ok; -1 with a message in err (a report that is not a genfence run
 * report). */
int gf_scoreboard_markdown(json_t *const *docs, const char *const *paths, size_t n, const char *include,
                           const char *include_name, const char *self, gf_buf *out, char *err, size_t err_len);

#endif
