/* left_padding_positions: position ids and key mask of a left-padded batch
 * (cumsum(mask) - 1, next position = mask.sum()). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "genfence/sampler.h"
#include "case.h"
#include "record.h"

typedef struct pad_spec {
    double *mask, *pos;
    size_t rows, cols, prow, pcol;
    int32_t *next;
    size_t n_next;
} pad_spec;

static void pad_free(void *p)
{
    pad_spec *s = p;
    if (s) {
        free(s->mask);
        free(s->pos);
        free(s->next);
    }
    free(s);
}

static int parse_pad(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    pad_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    int bad = gf_y_matrix(ctx, m, "mask", GF_Y_REQUIRED, 0, &s->mask, &s->rows, &s->cols) < 0;
    bad |= gf_y_matrix(ctx, m, "expect_positions", 0, 0, &s->pos, &s->prow, &s->pcol) < 0;
    bad |= gf_y_ints(ctx, m, "expect_next", 0, 0, 2147483647LL, 0, &s->next, &s->n_next) < 0;
    if (bad)
        return -1;
    for (size_t i = 0; i < s->rows * s->cols; i++)
        if (s->mask[i] != 0 && s->mask[i] != 1) {
            gf_y_error(ctx, gf_y_get(ctx, m, "mask", 0), "'mask' entries must be 0 or 1");
            return -1;
        }
    if (s->pos && (s->prow != s->rows || s->pcol != s->cols)) {
        gf_y_error(ctx, gf_y_get(ctx, m, "expect_positions", 0), "'expect_positions' is %zu x %zu; 'mask' is %zu x %zu",
                   s->prow, s->pcol, s->rows, s->cols);
        return -1;
    }
    if (s->next && s->n_next != s->rows) {
        gf_y_error(ctx, gf_y_get(ctx, m, "expect_next", 0), "'expect_next' has %zu entries; 'mask' has %zu rows",
                   s->n_next, s->rows);
        return -1;
    }
    return 0;
}

static void run_pad(const gf_case *c, gf_krun *k)
{
    const pad_spec *s = c->spec;
    const int32_t B = (int32_t)s->rows, T = (int32_t)s->cols;
    uint8_t *mask = malloc((size_t)B * T);
    int32_t *pos = malloc((size_t)B * T * sizeof *pos), *next = malloc((size_t)B * sizeof *next);
    if (!mask || !pos || !next) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < (size_t)B * T; i++)
        mask[i] = s->mask[i] != 0;
    gf_positions_from_mask(mask, B, T, pos, next);
    gf_k_metric_json(k, "engine", json_string("gf_positions_from_mask"));
    json_t *got = json_array();
    for (int32_t b = 0; b < B; b++)
        json_array_append_new(got, gf_json_ints(pos + (size_t)b * T, (size_t)T));
    gf_k_metric_json(k, "positions", got);
    gf_k_metric_json(k, "next", gf_json_ints(next, (size_t)B));
    char a[512], e[512];
    if (s->pos) {
        for (int32_t b = 0; b < B; b++) {
            int32_t *want = malloc((size_t)T * sizeof *want);
            if (!want)
                break;
            int eq = 1;
            for (int32_t t = 0; t < T; t++) {
                want[t] = (int32_t)s->pos[(size_t)b * T + t];
                eq &= want[t] == pos[(size_t)b * T + t];
            }
            char name[64];
            snprintf(name, sizeof name, "row %d positions", b);
            gf_k_check(k, eq, name, "got %s, expected %s", gf_k_ids_str(a, sizeof a, pos + (size_t)b * T, (size_t)T),
                       gf_k_ids_str(e, sizeof e, want, (size_t)T));
            free(want);
        }
    }
    if (s->next)
        gf_k_check(k, !memcmp(next, s->next, (size_t)B * sizeof *next), "next positions", "got %s, expected %s",
                   gf_k_ids_str(a, sizeof a, next, (size_t)B), gf_k_ids_str(e, sizeof e, s->next, (size_t)B));
    /* intrinsic: each row's real tokens get 0..n-1, as if unpadded */
    int intrinsic = 1;
    for (int32_t b = 0; b < B; b++) {
        int32_t want = 0;
        for (int32_t t = 0; t < T; t++)
            if (mask[(size_t)b * T + t])
                intrinsic &= pos[(size_t)b * T + t] == want++;
    }
    gf_k_check(k, intrinsic, "real tokens get 0..n-1", "%s",
               intrinsic ? "every row" : "a row's real positions are not 0..n-1");
done:
    free(mask);
    free(pos);
    free(next);
}

const gf_kind_def gf_kind_left_padding_positions = {
    .name = "left_padding_positions",
    .summary = "position ids from a left-padding mask",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_NONE,
    .parse = parse_pad,
    .free_spec = pad_free,
    .run = run_pad,
};
