/* http backend: an OpenAI-compatible completions server (llama.cpp's
 * llama-server, vLLM, SGLang, TGI, ...) as a black box (docs/http.md).
 *
 *     genfence run --backend http:http://127.0.0.1:8080[,model=NAME,k=20,timeout=60,retries=2,stream=on]
 *
 * What the API gives is the top-k log-probabilities of the next token, so a
 * forward is one POST /v1/completions per position asked for: the prompt as
 * token ids, max_tokens 1, temperature 0, logprobs k. The logits row written
 * holds the k reported log-probabilities at their ids and the remainder mass
 * spread evenly over the rest (check_step): full logits are absent (a log-probability differs from its logit by
 * the row's log-sum-exp, so the top-1 minus top-2 margin is exact, and the
 * greedy token is the server's). GF_LOGITS_ALL is one request per position
 * (teacher forcing by prefixes). The "cache" is the token history; the
 * server's own prompt cache is what it exercises.
 *
 * Every reply is checked before a row is written, and a broken one fails its
 * call, named (TEST06-style integrity): the reply is JSON, has one step, ids
 * inside the vocabulary, the chosen token is the reported top-1 at
 * temperature 0 and carries its own logprob, log-probabilities are <= 0 and
 * sum to at most 1, finish_reason agrees with the token (stop for EOS, length
 * otherwise), usage counts agree with the prompt and the step; with
 * stream=on the same request streamed reassembles byte for byte to the same
 * text, ends with data: [DONE] and nothing after it. info probes what the
 * server supports (genfence backends). */
#define _GNU_SOURCE
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

#define GF_EXPORT __attribute__((visibility("default")))
/* the lowest log-probability a row holds (llama-server reports p = 0 as -FLT_MAX) */
#define HB_LP_FLOOR (-1e4)

typedef struct hb_model {
    hb_conf conf;
    gf_model_config cfg;
    char model[128]; /* the request's "model" */
} hb_model;

typedef struct hb_cache {
    int32_t B, max_len, length;
    int32_t *tokens; /* (B, max_len) */
    uint8_t *real;   /* (B, max_len) 1 = a real key, 0 = padding */
} hb_cache;

static gf_status hb_probe(char *why, size_t why_len) { return hb_net_init(why, why_len); }

/* The first model id of GET /v1/models, into out; GF_OK with "" when the
 * server lists none. */
static gf_status first_model(const hb_conf *c, char *out, size_t out_len)
{
    out[0] = '\0';
    hb_reply r;
    gf_status st = hb_request(c, "/v1/models", NULL, &r);
    if (st != GF_OK)
        return st;
    if (r.status != 200) {
        char msg[256];
        hb_error_text(r.body, r.len, msg, sizeof msg);
        st = gf_error_set(GF_E_UNAVAILABLE, "http: GET %s/v1/models: HTTP %ld: %s", c->url, r.status, msg);
    } else {
        json_t *root = json_loadb(r.body, r.len, 0, NULL);
        json_t *id = json_object_get(json_array_get(json_object_get(root, "data"), 0), "id");
        if (!root)
            st = gf_error_set(GF_E_BACKEND, "http: GET %s/v1/models: the reply is not JSON", c->url);
        else if (json_is_string(id))
            snprintf(out, out_len, "%s", json_string_value(id));
        json_decref(root);
    }
    hb_reply_free(&r);
    return st;
}

/* The checks on one step's reply (the file comment); row (V) filled. */
static gf_status check_step(const hb_model *m, const hb_completion *c, int32_t n_prompt, float *row)
{
    const int32_t V = m->cfg.vocab_size, eos = m->cfg.eos_id;
    if (c->n_steps != 1)
        return gf_error_set(GF_E_BACKEND,
                            "http: integrity: a max_tokens=1 request came back with %d logprobs "
                            "steps (finish_reason '%s')",
                            c->n_steps, c->finish);
    const hb_step *s = &c->steps[0];
    if (s->n_top < 1)
        return gf_error_set(GF_E_BACKEND, "http: the reply has no top_logprobs (logprobs=%d asked)", m->conf.k);
    double sum = 0, own = NAN;
    for (int32_t t = 0; t < s->n_top; t++) {
        int32_t id = s->top_id[t];
        double lp = s->top_lp[t];
        if (id < 0 || id >= V)
            return gf_error_set(GF_E_BACKEND,
                                "http: integrity: top_logprobs[%d] names token %d, outside the "
                                "model's vocabulary [0, %d)",
                                t, id, V);
        if (!(lp <= 1e-6) || isnan(lp))
            return gf_error_set(GF_E_BACKEND,
                                "http: integrity: top_logprobs[%d] (token %d) is %g, not a "
                                "log-probability (<= 0)",
                                t, id, lp);
        if (t > 0 && lp > s->top_lp[t - 1] + 1e-6)
            return gf_error_set(GF_E_BACKEND,
                                "http: integrity: top_logprobs are not in descending order "
                                "(entry %d: %g after %g)",
                                t, lp, s->top_lp[t - 1]);
        sum += exp(lp);
        if (id == s->id)
            own = lp;
    }
    if (sum > 1 + 1e-3)
        return gf_error_set(GF_E_BACKEND, "http: integrity: the top-%d probabilities sum to %.6f > 1", s->n_top, sum);
    if (s->id < 0 || s->id >= V)
        return gf_error_set(GF_E_BACKEND, "http: integrity: the chosen token %d is outside [0, %d)", s->id, V);
    /* temperature 0: the chosen token is the most likely one (a tie allowed) */
    if (s->logprob < s->top_lp[0] - 1e-5 || (!isnan(own) && fabs(own - s->logprob) > 1e-5) ||
        (isnan(own) && s->n_top >= m->conf.k && s->logprob > s->top_lp[s->n_top - 1] + 1e-5))
        return gf_error_set(GF_E_BACKEND,
                            "http: integrity: wrong logprobs: at temperature 0 the server chose token "
                            "%d (logprob %.6g, listed as %.6g) but reports token %d as most likely "
                            "(%.6g)",
                            s->id, s->logprob, own, s->top_id[0], s->top_lp[0]);
    if (eos >= 0 && c->finish[0]) {
        int is_eos = s->id == eos;
        if (is_eos ? strcmp(c->finish, "stop") != 0 : strcmp(c->finish, "length") != 0)
            return gf_error_set(GF_E_BACKEND,
                                "http: integrity: finish_reason '%s' for token %d after max_tokens=1 "
                                "(EOS is %d: want '%s')",
                                c->finish, s->id, eos, is_eos ? "stop" : "length");
    }
    if (c->usage_prompt >= 0 && c->usage_prompt != n_prompt && m->conf.chat)
        return gf_error_set(GF_E_BACKEND,
                            "http: api=chat: the server's chat template made a prompt of %d tokens into %lld "
                            "(usage.prompt_tokens): its logprobs are not the next-token rows after genfence's tokens "
                            "(serve a template that passes the message through: docs/http.md)",
                            n_prompt, (long long)c->usage_prompt);
    if (c->usage_prompt >= 0 && c->usage_prompt != n_prompt)
        return gf_error_set(GF_E_BACKEND, "http: integrity: usage.prompt_tokens %lld for a prompt of %d tokens",
                            (long long)c->usage_prompt, n_prompt);
    if (c->usage_completion >= 0 && c->usage_completion != c->n_steps)
        return gf_error_set(GF_E_BACKEND, "http: integrity: usage.completion_tokens %lld for %d generated",
                            (long long)c->usage_completion, c->n_steps);
    /* The tokens the server did not list share the remainder mass 1 - sum
     * evenly, each at most the k-th log-probability (docs/http.md): the
     * argmax and the top-1 - top-2 margin are the server's, and the row's
     * softmax is the reported top-k plus the remainder. -inf is no logit the
     * engine takes; a log-probability under HB_LP_FLOOR is clamped to it. */
    double last = s->top_lp[s->n_top - 1] < HB_LP_FLOOR ? HB_LP_FLOOR : s->top_lp[s->n_top - 1];
    double rest = 1.0 - sum, fill = last;
    if (V > s->n_top && rest > 0)
        fill = log(rest / (double)(V - s->n_top));
    if (!(fill <= last))
        fill = last;
    if (fill < HB_LP_FLOOR)
        fill = HB_LP_FLOOR;
    for (int32_t v = 0; v < V; v++)
        row[v] = (float)fill;
    for (int32_t t = 0; t < s->n_top; t++)
        row[s->top_id[t]] = (float)(s->top_lp[t] < HB_LP_FLOOR ? HB_LP_FLOOR : s->top_lp[t]);
    return GF_OK;
}

/* Stream the same request and compare (stream=on). */
static gf_status check_stream(const hb_model *m, const int32_t *prompt, int32_t n, const hb_completion *plain)
{
    hb_reply r;
    hb_ask a = {.prompt = prompt, .n = n, .max_tokens = 1, .seed = -1, .stream = 1};
    gf_status st = hb_complete(&m->conf, m->model, &a, 0, &r);
    if (st != GF_OK)
        return gf_error_prefix(st, "http: stream");
    hb_completion sc;
    st = hb_parse_stream(r.body, r.len, &sc);
    hb_reply_free(&r);
    if (st != GF_OK)
        return st;
    if (sc.text_len != plain->text_len || memcmp(sc.text, plain->text, sc.text_len)) {
        size_t i = 0;
        while (i < sc.text_len && i < plain->text_len && sc.text[i] == plain->text[i])
            i++;
        st = gf_error_set(GF_E_BACKEND,
                          "http: integrity: the streamed text (%zu bytes) differs from the plain "
                          "reply's (%zu bytes) from byte %zu",
                          sc.text_len, plain->text_len, i);
    } else if (sc.finish[0] && plain->finish[0] && strcmp(sc.finish, plain->finish)) {
        st = gf_error_set(GF_E_BACKEND, "http: integrity: streamed finish_reason '%s', plain '%s'", sc.finish,
                          plain->finish);
    }
    hb_completion_free(&sc);
    return st;
}

/* One position: the next-token row after prompt (n ids), into row (V). */
static gf_status one_step(const hb_model *m, const int32_t *prompt, int32_t n, float *row)
{
    if (n < 1) { /* nothing to condition on (a row of padding): a flat row */
        for (int32_t v = 0; v < m->cfg.vocab_size; v++)
            row[v] = 0.0f;
        return GF_OK;
    }
    hb_reply r;
    hb_ask a = {.prompt = prompt, .n = n, .max_tokens = 1, .seed = -1};
    gf_status st = hb_complete(&m->conf, m->model, &a, 0, &r);
    if (st == GF_E_CONTEXT_LIMIT && n <= m->cfg.n_positions) /* within the model's context: the server's rule */
        return gf_error_prefix(st,
                               "http: %d tokens are within the model's %d positions, but a completion needs room for "
                               "the token it generates (llama-server: n_prompt >= n_ctx is refused)",
                               n, m->cfg.n_positions);
    if (st != GF_OK)
        return st;
    hb_completion c;
    st = hb_parse_completion(r.body, r.len, &c);
    hb_reply_free(&r);
    if (st == GF_OK)
        st = check_step(m, &c, n, row);
    if (st == GF_OK && m->conf.stream)
        st = check_stream(m, prompt, n, &c);
    hb_completion_free(&c);
    return st;
}

static gf_status hb_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    hb_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    gf_status st = hb_conf_parse(opts ? opts->config : NULL, &m->conf);
    if (st == GF_OK && desc->config.vocab_size < 2)
        st = gf_error_set(GF_E_INVALID_ARG, "http: vocab_size %d", desc->config.vocab_size);
    m->cfg = desc->config;
    if (st == GF_OK && m->conf.model[0])
        snprintf(m->model, sizeof m->model, "%s", m->conf.model);
    else if (st == GF_OK)
        st = first_model(&m->conf, m->model, sizeof m->model);
    if (st == GF_OK && m->conf.integrity) {
        char summary[512];
        st = hb_integrity(&m->conf, m->model, m->cfg.vocab_size, m->cfg.eos_id, summary, sizeof summary);
    }
    if (st != GF_OK) {
        free(m);
        return st;
    }
    *model_out = m;
    return GF_OK;
}

static void hb_model_free(void *model) { free(model); }

static gf_status hb_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    *cache_out = NULL;
    (void)model;
    if (batch < 1 || max_len < 1)
        return gf_error_set(GF_E_INVALID_ARG, "http: cache of %d rows x %d positions", batch, max_len);
    hb_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    c->B = batch;
    c->max_len = max_len;
    c->tokens = calloc((size_t)batch * (size_t)max_len, sizeof *c->tokens);
    c->real = calloc((size_t)batch * (size_t)max_len, 1);
    if (!c->tokens || !c->real) {
        free(c->tokens);
        free(c->real);
        free(c);
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    }
    *cache_out = c;
    return GF_OK;
}

static gf_status hb_cache_reset(void *cache)
{
    ((hb_cache *)cache)->length = 0;
    return GF_OK;
}

static void hb_cache_free(void *cache)
{
    hb_cache *c = cache;
    if (!c)
        return;
    free(c->tokens);
    free(c->real);
    free(c);
}

static int32_t hb_cache_length(const void *cache) { return ((const hb_cache *)cache)->length; }
static size_t hb_cache_bytes(const void *cache)
{
    const hb_cache *c = cache;
    return (size_t)c->B * (size_t)c->max_len * (sizeof *c->tokens + 1);
}

static gf_status hb_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    hb_model *m = model;
    hb_cache *c = cache;
    gf_error_clear();
    const int32_t B = in->B, T = in->T, V = m->cfg.vocab_size;
    const int32_t L0 = c ? c->length : 0, Tk = L0 + T;
    if (c && (B != c->B || Tk > c->max_len))
        return gf_error_set(Tk > c->max_len ? GF_E_CONTEXT_LIMIT : GF_E_INVALID_ARG,
                            "http: cached forward of B %d, T %d onto length %d (cache: B %d, max_len %d)", B, T, L0,
                            c->B, c->max_len);
    int32_t *seq = malloc((size_t)Tk * sizeof *seq); /* (Tk): one row's real tokens */
    if (!seq)
        return gf_error_set(GF_E_NOMEM, "http: out of memory");
    gf_status st = GF_OK;
    for (int32_t b = 0; b < B && st == GF_OK; b++) {
        /* the row's keys: the cache's, then the T new ones; padding dropped */
        int32_t n = 0;
        int32_t *upto = malloc((size_t)Tk * sizeof *upto); /* (Tk): real keys up to and including j */
        if (!upto) {
            st = gf_error_set(GF_E_NOMEM, "http: out of memory");
            break;
        }
        for (int32_t j = 0; j < Tk; j++) {
            int32_t tok = j < L0 ? c->tokens[(size_t)b * c->max_len + j] : in->tokens[(size_t)b * T + (j - L0)];
            int real = j < L0 ? c->real[(size_t)b * c->max_len + j]
                              : (!in->key_mask || in->key_mask[(size_t)b * Tk + j] || j >= L0 + T);
            if (j < L0 && real && in->key_mask && !in->key_mask[(size_t)b * Tk + j]) {
                /* a mask that drops a real key of the history (an evicting
                 * cache): the server keeps its whole history, so asking would
                 * silently answer another question */
                st = gf_error_set(GF_E_UNSUPPORTED,
                                  "http: row %d: the key mask drops key %d, a real token of the cache's history: a "
                                  "server keeps its whole history and numbers positions itself (an evicting cache "
                                  "cannot be asked for over the API)",
                                  b, j);
                break;
            }
            if (tok < 0 || tok >= V) {
                st = gf_error_set(GF_E_INVALID_ARG, "http: token %d at row %d position %d outside [0, %d)", tok, b, j,
                                  V);
                break;
            }
            if (real)
                seq[n++] = tok;
            upto[j] = n;
        }
        if (st == GF_OK && in->logits_mode == GF_LOGITS_LAST)
            st = one_step(m, seq, upto[Tk - 1], logits_out + (size_t)b * V);
        for (int32_t t = 0; st == GF_OK && in->logits_mode == GF_LOGITS_ALL && t < T; t++)
            st = one_step(m, seq, upto[L0 + t], logits_out + ((size_t)b * T + t) * V);
        free(upto);
        if (st != GF_OK)
            gf_error_prefix(st, "http: row %d", b);
    }
    free(seq);
    if (st == GF_OK && c) {
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++) {
                size_t at = (size_t)b * c->max_len + L0 + t;
                c->tokens[at] = in->tokens[(size_t)b * T + t];
                c->real[at] = !in->key_mask || in->key_mask[(size_t)b * Tk + L0 + t];
            }
        c->length = Tk;
    }
    return st;
}

static const char *hb_last_error(void *model)
{
    (void)model;
    return gf_error_msg(); /* this module's own copy of status.c */
}

static const gf_backend_ops k_http_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "http",
    .description = "an OpenAI-compatible completions server (llama-server, vLLM, TGI ...) over HTTP: "
                   "--backend http:URL[,model=NAME,k=20,timeout=60,retries=2,stream=on,integrity=on,api=chat]; top-k "
                   "logprobs, "
                   "no full logits",
    .probe = hb_probe,
    .info = hb_info,
    .model_load = hb_model_load,
    .model_free = hb_model_free,
    .cache_create = hb_cache_create,
    .cache_reset = hb_cache_reset,
    .cache_free = hb_cache_free,
    .cache_length = hb_cache_length,
    .cache_bytes = hb_cache_bytes,
    .forward = hb_forward,
    .sample = NULL,
    .last_error = hb_last_error,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_http_ops; }
