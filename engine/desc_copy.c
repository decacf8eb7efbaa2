/* The model description model_load is given, copied and poisoned once it
 * returns (desc_copy.h). */
#include "desc_copy.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "guard.h"

#define PART 64 /* every part of the copy starts 64-byte aligned */

/* gf_layer_weights is a run of float pointers: the copy moves each one */
enum { N_LAYER_PTRS = sizeof(gf_layer_weights) / sizeof(const float *) };
_Static_assert(sizeof(gf_layer_weights) % sizeof(const float *) == 0, "gf_layer_weights holds float pointers only");

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

/* Where tensor p of the list t (n_t) lies in the copy at base (off: each
 * tensor's offset), NULL for NULL. A pointer the list does not hold (none:
 * gf_desc_tensors names every field) stays the caller's. */
static const float *moved(const float *p, const gf_desc_tensor *t, size_t n_t, const size_t *off, unsigned char *base)
{
    if (!p)
        return NULL;
    for (size_t i = 0; i < n_t; i++)
        if (t[i].data == p)
            return (const float *)(const void *)(base + off[i]);
    return p;
}

gf_status gf_desc_copy_make(gf_desc_copy *c, const gf_model_desc *d)
{
    memset(c, 0, sizeof *c);
    gf_status st = GF_OK;
    size_t n_t = gf_desc_tensors(d, NULL, 0, NULL, 0), names_cap = n_t * 40 + 1;
    gf_desc_tensor *t = calloc(n_t ? n_t : 1, sizeof *t); /* (n_t) */
    size_t *off = calloc(n_t ? n_t : 1, sizeof *off);     /* (n_t) byte offsets in the copy */
    char *names = malloc(names_cap);
    if (!t || !off || !names) {
        st = gf_error_set(GF_E_NOMEM, "model_load guard: out of memory");
        goto done;
    }
    n_t = gf_desc_tensors(d, t, n_t, names, names_cap);
    const size_t L = d->weights.layers && d->config.n_layer > 0 ? (size_t)d->config.n_layer : 0;
    const int has_win = gf_model_desc_has(d, layer_window) && d->layer_window && L;
    const size_t name_len = d->name ? strlen(d->name) + 1 : 0;
    size_t o = round_up(sizeof *d, PART);
    const size_t o_layers = o;
    o += round_up(L * sizeof(gf_layer_weights), PART);
    const size_t o_win = o;
    o += round_up(has_win ? L * sizeof(int32_t) : 0, PART);
    const size_t o_name = o;
    o += round_up(name_len, PART);
    for (size_t i = 0; i < n_t; i++) {
        off[i] = o;
        o += round_up(t[i].n * sizeof(float), PART);
    }
    long pg = sysconf(_SC_PAGESIZE);
    size_t len = round_up(o, pg > 0 ? (size_t)pg : 4096);
    void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) {
        st = gf_error_set(GF_E_NOMEM, "model_load guard: cannot map %zu bytes for the description's copy", len);
        goto done;
    }
    unsigned char *base = map;
    for (size_t i = 0; i < n_t; i++)
        memcpy(base + off[i], t[i].data, t[i].n * sizeof(float));
    gf_model_desc *nd = (gf_model_desc *)map;
    memcpy(nd, d, sizeof *d);
    gf_model_weights *w = &nd->weights;
    w->wte = moved(w->wte, t, n_t, off, base);
    w->wpe = moved(w->wpe, t, n_t, off, base);
    w->lnf_w = moved(w->lnf_w, t, n_t, off, base);
    w->lnf_b = moved(w->lnf_b, t, n_t, off, base);
    w->lm_head = moved(w->lm_head, t, n_t, off, base); /* tied: wte's copy, as wte */
    w->rope_inv_freq = moved(w->rope_inv_freq, t, n_t, off, base);
    if (L) {
        gf_layer_weights *nl = (gf_layer_weights *)(void *)(base + o_layers); /* (L) */
        for (size_t l = 0; l < L; l++) {
            const float *p[N_LAYER_PTRS];
            memcpy(p, &d->weights.layers[l], sizeof p);
            for (size_t k = 0; k < N_LAYER_PTRS; k++)
                p[k] = moved(p[k], t, n_t, off, base);
            memcpy(&nl[l], p, sizeof p);
        }
        w->layers = nl;
    }
    if (has_win) {
        int32_t *win = (int32_t *)(void *)(base + o_win); /* (L) */
        memcpy(win, d->layer_window, L * sizeof *win);
        nd->layer_window = win;
    }
    if (name_len) {
        memcpy(base + o_name, d->name, name_len);
        nd->name = (const char *)(base + o_name);
    }
    c->map = map;
    c->len = len;
    c->desc = nd;
done:
    free(t);
    free(off);
    free(names);
    return st;
}

void gf_desc_copy_poison(gf_desc_copy *c)
{
    if (!c->map)
        return;
    madvise(c->map, c->len, MADV_DONTNEED); /* the copy's memory back; the range stays reserved */
    mprotect(c->map, c->len, PROT_NONE);
}

void gf_desc_copy_release(gf_desc_copy *c)
{
    if (!c)
        return;
    if (c->map)
        munmap(c->map, c->len);
    memset(c, 0, sizeof *c);
}
