/* Helpers shared by the subcommands (harness/cli only). */
#ifndef GENFENCE_HARNESS_CLI_H
#define GENFENCE_HARNESS_CLI_H

#include <stddef.h>

#include "case.h"
#include "kinds.h"
#include "json.h"
#include "parse.h"
#include "session.h"

/* "genfence: <message>\n" on stderr. */
void gf_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The filter (regex, kinds, tags as for gf_case_filter_init) in *cf and the
 * case files (gf_cases_load, with every kind genfence has) in *set, for
 * subcommand cmd: 0 ok (free both); -1 with nothing to free after printing
 * "CMD: <filter error>" or each schema error then "CMD: N errors in the case
 * files<note>" (select.c). */
/* "no case found in FILE, FILE2 (N case files read)" into buf: the files
 * read (up to 3 named), else the paths given, else the default suite. */
void gf_case_none_found(char *buf, size_t cap, const gf_case_set *set, char *const *paths, size_t n_paths);
int gf_case_select_load(const char *cmd, const char *note, const char *regex, char **kinds, size_t n_kinds, char **tags,
                        size_t n_tags, const char *const *paths, size_t n_paths, gf_case_filter *cf, gf_case_set *set);

/* --shard I/N for run and list: 1 if s is exactly "I/N" with 1 <= I <= N
 * (then *i_out, *n_out set), else 0 (select.c). */
int gf_shard_parse(const char *s, int *i_out, int *n_out);

/* One slicing rule for run and list: the cases the filters match are
 * numbered 0, 1, ... in load order (*counter, advanced here) and case c
 * belongs to shard c mod N + 1. Always 1 when n == 0 (no sharding). */
int gf_shard_takes(size_t *counter, int i, int n);

#endif
