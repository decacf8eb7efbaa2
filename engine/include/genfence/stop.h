/* Stop strings over streamed text (engine/stop_strings.c, docs/sampler.md):
 * the text a generation emits stops exactly before the first occurrence of
 * any stop string, as vLLM's `stop` (without include_stop_str_in_output)
 * and HF's stop_strings cut it. Text that could still be the start of a stop
 * string is held back until the next piece decides it, and so is an
 * incomplete UTF-8 sequence at the end of a piece, so what comes out is
 * always whole characters (feed it gf_utf8_stream's output, or raw bytes). */
#ifndef GENFENCE_STOP_H
#define GENFENCE_STOP_H

#include <stddef.h>

#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gf_stop_strings gf_stop_strings;

/* n stop strings, each non-empty (copied). *out NULL on failure. */
gf_status gf_stop_strings_create(const char *const *stops, size_t n, gf_stop_strings **out);
void gf_stop_strings_destroy(gf_stop_strings *s); /* NULL-safe */

/* The bytes of text that are final now go to out (out_cap >= len + the
 * longest stop string); returns how many. *stopped becomes 1 when a stop
 * string completed: out then ends right before it, and every later feed
 * writes nothing. */
size_t gf_stop_strings_feed(gf_stop_strings *s, const char *text, size_t len, char *out, size_t out_cap, int *stopped);
/* End of the stream without a stop: the held-back bytes (out_cap >= the
 * longest stop string + 4). */
size_t gf_stop_strings_finish(gf_stop_strings *s, char *out, size_t out_cap);

#ifdef __cplusplus
}
#endif
#endif
