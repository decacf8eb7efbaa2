/* A kept set in a result record, bounded: a 128k-wide row that keeps every
 * token would otherwise write 128k ids and probabilities per entry (11 MB of
 * run.json for cases/peers/ alone). The checks always use the full set; only
 * what the record shows is cut. */
#ifndef GENFENCE_KINDS_KEPT_LIST_H
#define GENFENCE_KINDS_KEPT_LIST_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* The most ids a record lists per kept set. */
#define GF_KEPT_SHOWN 32

/* Sets on row:
 *   "kept"             the kept ids in ascending order; when more than
 *                      GF_KEPT_SHOWN are kept, only the GF_KEPT_SHOWN most
 *                      probable (by p; equal p: the lower id), still ascending
 *   "probs"            (when probs_key) their p, in the order of "kept"
 *   "kept_ids_shown"   how many "kept" lists
 *   "kept_ids_total"   n, the size of the full kept set
 *   "kept_ids_sha256"  sha256 of the full set as decimal ids joined by ","
 *                      in ascending order ("0,1,5"), so two runs compare:
 *                      hashlib.sha256(",".join(map(str, ids)).encode())
 *   "shown_mass"       the sum of p over the shown ids (1 when nothing is cut
 *                      and p is renormalised)
 * kept: (n) ascending token ids; p: (V) indexed by token id. Returns 0, or -1
 * out of memory (row is then left without these keys). */
int gf_kept_json(json_t *row, const int32_t *kept, size_t n, const double *p, const char *probs_key);

/* sha256 of the n ids as decimal text joined by "," ("0,1,5"), in the order given. */
void gf_ids_sha256(const int32_t *ids, size_t n, char hex_out[65]);

#endif
