/* A kept set in a result record, bounded (kept_list.h). */
#include "kept_list.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "json.h"

typedef struct kept_entry {
    double p;
    int32_t id;
} kept_entry;

/* more probable first; equal p (or NaN): the lower id */
static int by_prob(const void *a, const void *b)
{
    const kept_entry *x = a, *y = b;
    if (x->p > y->p)
        return -1;
    if (x->p < y->p)
        return 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int by_id(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

void gf_ids_sha256(const int32_t *ids, size_t n, char hex_out[65])
{
    gf_sha256 h;
    gf_sha256_init(&h);
    for (size_t i = 0; i < n; i++) {
        char d[16];
        int len = snprintf(d, sizeof d, "%s%d", i ? "," : "", (int)ids[i]);
        gf_sha256_update(&h, d, (size_t)len);
    }
    gf_sha256_hex(&h, hex_out);
}

int gf_kept_json(json_t *row, const int32_t *kept, size_t n, const double *p, const char *probs_key)
{
    const size_t shown = n < GF_KEPT_SHOWN ? n : GF_KEPT_SHOWN;
    int32_t *ids = malloc((shown ? shown : 1) * sizeof *ids);
    double *ps = malloc((shown ? shown : 1) * sizeof *ps);
    int rc = -1;
    if (!ids || !ps)
        goto done;
    char hex[65];
    gf_ids_sha256(kept, n, hex); /* the full set, ascending */
    if (n > shown) {
        kept_entry *e = malloc(n * sizeof *e);
        if (!e)
            goto done;
        for (size_t i = 0; i < n; i++)
            e[i] = (kept_entry){p[kept[i]], kept[i]};
        qsort(e, n, sizeof *e, by_prob);
        for (size_t j = 0; j < shown; j++)
            ids[j] = e[j].id;
        free(e);
        qsort(ids, shown, sizeof *ids, by_id);
    } else {
        memcpy(ids, kept, n * sizeof *ids);
    }
    double mass = 0;
    for (size_t j = 0; j < shown; j++)
        mass += ps[j] = p[ids[j]];
    json_object_set_new(row, "kept", gf_json_ints(ids, shown));
    if (probs_key)
        json_object_set_new(row, probs_key, gf_json_doubles(ps, shown));
    json_object_set_new(row, "kept_ids_shown", json_integer((json_int_t)shown));
    json_object_set_new(row, "kept_ids_total", json_integer((json_int_t)n));
    json_object_set_new(row, "kept_ids_sha256", json_string(hex));
    gf_json_set_number(row, "shown_mass", mass, NULL);
    rc = 0;
done:
    free(ids);
    free(ps);
    return rc;
}
