/* The llamacpp backend's trace slot (backend.h, "the trace slot") through
 * ggml's graph callback (llama_context_params.cb_eval): while a traced
 * llama_decode runs, the callback asks for the tensors llama.cpp names at the
 * sublayer boundaries of its Llama and GPT-2 graphs (src/models/llama.cpp,
 * gpt2.cpp) and copies them out:
 *   embedding          "inpL" (GPT-2: tokens + positions); Llama's is unnamed
 *   attention output   "attn_out-L" (Llama); GPT-2 names none: derived as
 *                      ffn_inp-L minus the block's input
 *   attention residual "ffn_inp-L"
 *   MLP output         "ffn_out-L"; derived as l_out-L minus ffn_inp-L where absent
 *   MLP residual       "l_out-L"
 *   final norm         "result_norm"
 * A derived point carries one more rounding of the stream (docs/llamacpp.md).
 * What a graph does not name stays not given: Llama's embedding (the token
 * rows' get_rows result is unnamed; "inp_embd" there is the input of the
 * embeddings path, never computed for tokens). Padding queries are never in
 * llama.cpp's batch (llamacpp.c): their rows are not given, and genfence
 * leaves padding out of the comparison. */
#include <stdlib.h>
#include <string.h>

#include <ggml-backend.h>
#include <ggml.h>

#include "lc.h"

static _Thread_local lc_trace *t_trace; /* the traced decode on this thread, or NULL */

gf_status lc_trace_begin(lc_trace *tr, const gf_trace_request *req, int32_t n_layer, int32_t n_embd, int gpt2,
                         int32_t n_tokens, const int32_t *row, const int32_t *pos)
{
    memset(tr, 0, sizeof *tr);
    tr->req = req;
    tr->L = n_layer;
    tr->D = n_embd;
    tr->gpt2 = gpt2;
    tr->n = n_tokens;
    tr->row = row;
    tr->pos = pos;
    tr->last_p = 1 << 30; /* the first named tensor starts ubatch 0 */
    const int32_t P = GF_TRACE_POINTS(n_layer);
    tr->buf = calloc((size_t)P * n_tokens * n_embd, sizeof *tr->buf); /* (P, n, D) */
    tr->got = calloc((size_t)P, 1);
    if (!tr->buf || !tr->got) {
        lc_trace_end(tr);
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory for a (%d, %d, %d) trace", P, n_tokens, n_embd);
    }
    t_trace = tr;
    return GF_OK;
}

/* the point a tensor name stands for (-1: none) */
static int32_t point_of(const lc_trace *tr, const char *name)
{
    if (tr->gpt2 && !strcmp(name, "inpL"))
        return 0;
    if (!strcmp(name, "result_norm"))
        return gf_trace_index(tr->L, GF_TRACE_FINAL_NORM, 0);
    static const struct {
        const char *prefix;
        gf_trace_kind kind;
    } k[] = {{"attn_out-", GF_TRACE_ATTN_OUT},
             {"ffn_inp-", GF_TRACE_ATTN_RESID},
             {"ffn_out-", GF_TRACE_MLP_OUT},
             {"l_out-", GF_TRACE_MLP_RESID}};
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        size_t n = strlen(k[i].prefix);
        if (!strncmp(name, k[i].prefix, n)) {
            char *end;
            long l = strtol(name + n, &end, 10);
            if (*end == '\0' && l >= 0 && l < tr->L)
                return gf_trace_index(tr->L, k[i].kind, (int32_t)l);
        }
    }
    return -1;
}

bool lc_trace_eval(struct ggml_tensor *t, bool ask, void *user)
{
    (void)user;
    lc_trace *tr = t_trace;
    if (!tr)
        return ask ? false : true;
    int32_t p = point_of(tr, t->name);
    if (ask)
        return p >= 0 && t->type == GGML_TYPE_F32 && t->ne[0] == tr->D;
    if (p < 0 || t->type != GGML_TYPE_F32 || t->ne[0] != tr->D || !ggml_is_contiguous(t))
        return true;
    if (p <= tr->last_p) { /* the points come in order: a lower one starts the next ubatch */
        tr->ub_off = tr->ub_next;
        tr->ub_next += (int32_t)t->ne[1];
    }
    tr->last_p = p;
    int32_t rows = (int32_t)t->ne[1];
    if (tr->ub_off + rows > tr->n) {
        tr->bad = 1; /* fewer rows than the batch (llama.cpp dropped some): not given */
        return true;
    }
    ggml_backend_tensor_get(t, tr->buf + ((size_t)p * tr->n + tr->ub_off) * tr->D, 0,
                            (size_t)rows * tr->D * sizeof(float));
    tr->got[p] = 1;
    return true;
}

void lc_trace_finish(lc_trace *tr)
{
    t_trace = NULL;
    if (!tr->buf || tr->bad)
        return;
    const int32_t L = tr->L, D = tr->D, n = tr->n;
    float *at = tr->buf;
#define PT(p) (at + (size_t)(p)*n * D)
    for (int32_t l = 0; l < L; l++) { /* the points llama.cpp's graph does not name, from the ones it does */
        int32_t in = l ? gf_trace_index(L, GF_TRACE_MLP_RESID, l - 1) : 0;
        int32_t ao = gf_trace_index(L, GF_TRACE_ATTN_OUT, l), ar = gf_trace_index(L, GF_TRACE_ATTN_RESID, l);
        int32_t mo = gf_trace_index(L, GF_TRACE_MLP_OUT, l), mr = gf_trace_index(L, GF_TRACE_MLP_RESID, l);
        if (!tr->got[ao] && tr->got[ar] && tr->got[in]) {
            for (size_t i = 0; i < (size_t)n * D; i++)
                PT(ao)[i] = PT(ar)[i] - PT(in)[i];
            tr->got[ao] = 1;
        }
        if (!tr->got[mo] && tr->got[mr] && tr->got[ar]) {
            for (size_t i = 0; i < (size_t)n * D; i++)
                PT(mo)[i] = PT(mr)[i] - PT(ar)[i];
            tr->got[mo] = 1;
        }
    }
    for (int32_t p = 0; p < GF_TRACE_POINTS(L); p++)
        for (int32_t i = 0; tr->got[p] && i < n; i++)
            gf_trace_put_row(tr->req, p, tr->row[i], tr->pos[i], PT(p) + (size_t)i * D);
#undef PT
}

void lc_trace_end(lc_trace *tr)
{
    if (t_trace == tr)
        t_trace = NULL;
    free(tr->buf);
    free(tr->got);
    tr->buf = NULL;
    tr->got = NULL;
}
