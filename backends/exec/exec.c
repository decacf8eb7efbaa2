/* exec backend: any engine, in any language, as a child process speaking the
 * genfence backend protocol over its stdin and stdout (docs/protocol.md).
 *
 *     genfence run --backend "exec:.venv/bin/python tools/backends/transformers_backend.py"
 *
 * The text after "exec:" is the client's command line (gf_backend_options
 * .config), split into words as exec_wire.h says (quotes, no shell). Each
 * model_load starts one client process and speaks to it until model_free,
 * which closes its stdin and kills its process group; info starts a client
 * for the handshake and the info request only (cached per command and thread
 * count in this process). probe has no command line: it succeeds iff this
 * process can start children at all; the client's own probe runs at
 * model_load (GF_E_UNAVAILABLE with its reason).
 *
 * Every slot is one request and one reply. The adapter checks the shapes and
 * lengths of what comes back, and one contract rule a remote cache could
 * otherwise hide: after a cached forward the client's cache length must be
 * the old length + T. Wire failures (crash, hang, garbage, a wrong length)
 * are GF_E_BACKEND with the reason and kill the client; the client's own
 * errors arrive with its status and message, through last_error. */
#define _GNU_SOURCE
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_wire.h"
#include "genfence/backend.h"
#include "genfence/sampler.h"

#define GF_EXPORT __attribute__((visibility("default")))

typedef struct ex_model {
    gx_conn conn;
    gf_model_config cfg;
    uint32_t features; /* GX_FEATURE_* from the client's hello */
} ex_model;

typedef struct ex_cache {
    ex_model *m;
    uint32_t id; /* the client's handle */
    int32_t B, max_len;
    int32_t length; /* the contract's length: T summed over forwards since reset */
} ex_cache;

static gf_backend_ops k_exec_ops;
static gf_status ex_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *sp,
                           const gf_rng_draws *draws, int32_t *ids_out);
static gf_status ex_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req);
static gf_status ex_speculate(void *model, const gf_spec_request *req, int32_t *accepted_out, int32_t *next_out);
static gf_status ex_logprobs(void *model, const float *logits, int32_t B, int32_t V, const gf_sampler_params *sp,
                             int32_t mode, double *out);

/* A bounds-checked reader over a reply body. */
typedef struct rd {
    const uint8_t *p, *end;
    int bad;
} rd;

static uint32_t rd_u32(rd *r)
{
    if (r->end - r->p < 4) {
        r->bad = 1;
        return 0;
    }
    return gx_get_u32(&r->p);
}

static void rd_str(rd *r, char *out, size_t cap)
{
    uint32_t n = rd_u32(r);
    out[0] = '\0';
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = 1;
        return;
    }
    size_t k = n < cap - 1 ? n : cap - 1;
    memcpy(out, r->p, k);
    out[k] = '\0';
    r->p += n;
}

/* Read a whole reply body of exactly `want` bytes (want < 0: any length up to
 * 64 KiB, for the replies with strings). */
static gf_status read_reply(gx_conn *c, uint32_t op, const void *body, size_t len, long want, rd *r)
{
    uint32_t n = 0;
    gf_status st = gx_request(c, op, body, len, &n);
    if (st != GF_OK)
        return st;
    if (want >= 0 && n != (uint32_t)want)
        return gx_fail(c, "%s: reply of %u bytes, the protocol says %ld (wrong length)", c->what, n, want);
    if (want < 0 && n > 65536)
        return gx_fail(c, "%s: reply of %u bytes (at most 65536; garbage on stdout?)", c->what, n);
    const uint8_t *b = NULL;
    st = gx_read_body(c, n, &b);
    if (st != GF_OK)
        return st;
    r->p = b;
    r->end = b + n;
    r->bad = 0;
    return GF_OK;
}

/* Spawn the client named by config and shake hands: hello (versions and
 * features), then its probe. On failure c is closed. */
static gf_status ex_start(const char *config, gx_conn *c, uint32_t *features, char *name, size_t name_cap)
{
    *features = 0;
    memset(c, 0, sizeof *c);
    c->sock = c->err_fd = -1;
    if (!config || !config[0])
        return gf_error_set(GF_E_UNAVAILABLE, "exec runs a protocol client, and none was named: "
                                              "--backend 'exec:PROGRAM ARGS...' (docs/protocol.md)");
    char **argv = NULL;
    int argc = 0;
    gf_status st = gx_split_argv(config, &argv, &argc);
    if (st != GF_OK)
        return st;
    st = gx_spawn(c, argv, 0);
    free(argv);
    if (st != GF_OK)
        return st;
    uint8_t hello[12], *p = hello;
    gx_put_u32(&p, GX_MAGIC);
    gx_put_u32(&p, GX_PROTOCOL_VERSION);
    gx_put_u32(&p, GF_BACKEND_ABI_VERSION);
    rd r;
    st = read_reply(c, GX_HELLO, hello, sizeof hello, -1, &r);
    if (st == GF_OK) {
        uint32_t magic = rd_u32(&r), version = rd_u32(&r);
        *features = rd_u32(&r);
        char desc[256];
        rd_str(&r, name, name_cap);
        rd_str(&r, desc, sizeof desc);
        if (r.bad || magic != GX_MAGIC)
            st = gx_fail(c, "hello: the reply is not a genfence protocol hello (magic 0x%08x; garbage on stdout?)",
                         magic);
        else if (version != GX_PROTOCOL_VERSION) {
            gx_fail(c, "hello: the client speaks protocol version %u; this genfence speaks version %u", version,
                    (unsigned)GX_PROTOCOL_VERSION);
            st = GF_E_ABI;
        }
    }
    if (st == GF_OK)
        st = read_reply(c, GX_PROBE, NULL, 0, 0, &r);
    if (st != GF_OK) {
        gx_close(c, 0);
        return st;
    }
    return GF_OK;
}

/* A model-less slot's client (sample, speculate: genfence calls them with
 * model NULL): the last command handshaken in this process that offers the
 * slot's feature (set by info and model_load), started on first use. */
typedef struct ml_client {
    char *config;
    gx_conn conn;
    uint32_t features;
} ml_client;

static ml_client g_sample_client = {.conn = {.sock = -1, .err_fd = -1}};
static ml_client g_spec_client = {.conn = {.sock = -1, .err_fd = -1}};
static ml_client g_lp_client = {.conn = {.sock = -1, .err_fd = -1}};

static void ml_note(ml_client *mc, const char *config)
{
    if (mc->config && !strcmp(mc->config, config))
        return;
    free(mc->config);
    mc->config = strdup(config);
    gx_close(&mc->conn, 1.0);
    mc->conn = (gx_conn){.sock = -1, .err_fd = -1};
    mc->features = 0;
}

/* The connection a slot call goes to: the model's, or with model NULL the
 * slot's model-less client (started here on first use). GF_E_UNSUPPORTED
 * when the client does not announce feature (what names the slot). */
static gf_status ml_conn(ex_model *m, ml_client *mc, uint32_t feature, const char *what, gx_conn **x_out)
{
    gx_conn *x = m ? &m->conn : &mc->conn;
    uint32_t features = m ? m->features : mc->features;
    *x_out = x;
    if (!m && x->pid <= 0 && !x->dead) {
        if (!mc->config)
            return gf_error_set(GF_E_UNSUPPORTED, "exec: no client offering a %s was started in this process", what);
        char name[128];
        gf_status st = ex_start(mc->config, x, &mc->features, name, sizeof name);
        if (st != GF_OK)
            return st;
        features = mc->features;
    }
    if (!(features & feature))
        return gf_error_set(GF_E_UNSUPPORTED, "exec client '%s' has no %s (hello features 0x%x)", x->prog, what,
                            features);
    return GF_OK;
}

static void note_features(const char *config, uint32_t features)
{
    if (features & GX_FEATURE_TRACE) /* the trace slot: a client that offers forward_trace (12) */
        k_exec_ops.forward_trace = ex_forward_trace;
    /* a model-less slot exists once a client that offers it is known (docs/protocol.md) */
    if (features & GX_FEATURE_SAMPLE) {
        ml_note(&g_sample_client, config);
        k_exec_ops.sample = ex_sample;
    }
    if (features & GX_FEATURE_SPECULATE) { /* speculate (13) */
        ml_note(&g_spec_client, config);
        k_exec_ops.speculate = ex_speculate;
    }
    if (features & GX_FEATURE_LOGPROBS) { /* logprobs (14) */
        ml_note(&g_lp_client, config);
        k_exec_ops.logprobs = ex_logprobs;
    }
}

static gf_status ex_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        if (why && why_len)
            snprintf(why, why_len, "exec: this process cannot start a child (fork failed)");
        return GF_E_UNAVAILABLE;
    }
    return GF_OK;
}

/* info: one handshake + info request per (command, threads), cached here. */
typedef struct info_entry {
    char *config;
    int32_t threads;
    gf_backend_info info;
    char library[256], detail[512], invariance[256];
    char probes[256]; /* the client's declared probes (hello feature bit 3), "" = not said */
} info_entry;

static gf_status ex_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    static info_entry cache[8];
    static size_t n_cache;
    const char *config = opts ? opts->config : NULL;
    int32_t threads = opts && opts->threads > 0 ? opts->threads : 1;
    gf_error_clear();
    for (size_t i = 0; config && i < n_cache; i++)
        if (cache[i].threads == threads && !strcmp(cache[i].config, config)) {
            return gf_backend_info_put(info_out, &cache[i].info); /* at most the caller's struct_size */
        }
    gx_conn c;
    uint32_t features;
    char name[128];
    gf_status st = ex_start(config, &c, &features, name, sizeof name);
    if (st != GF_OK)
        return st;
    uint8_t body[4], *p = body;
    gx_put_u32(&p, (uint32_t)threads);
    rd r;
    st = read_reply(&c, GX_INFO, body, sizeof body, -1, &r);
    info_entry e = {.threads = threads};
    if (st == GF_OK) {
        uint32_t dtype = rd_u32(&r);
        int32_t used = (int32_t)rd_u32(&r);
        char lib[200], det[300];
        rd_str(&r, lib, sizeof lib);
        rd_str(&r, det, sizeof det);
        if (features & GX_FEATURE_INVARIANCE) /* hello's bit 2: the declaration follows */
            rd_str(&r, e.invariance, sizeof e.invariance);
        if (features & GX_FEATURE_PROBES) /* hello's bit 3: the mechanism probes it runs, after it */
            rd_str(&r, e.probes, sizeof e.probes);
        if (r.bad || dtype < GF_COMPUTE_F32 || dtype > GF_COMPUTE_F64)
            st = gx_fail(&c, "info: malformed reply (dtype %u)", dtype);
        snprintf(e.library, sizeof e.library, "%s", lib);
        snprintf(e.detail, sizeof e.detail, "client '%s'%s%s; %s", name, det[0] ? ": " : "", det, config);
        e.info = (gf_backend_info){.struct_size = sizeof e.info, .dtype = (gf_compute_dtype)dtype, .threads = used};
    }
    gx_close(&c, 1.0);
    if (st != GF_OK)
        return st;
    note_features(config, features);
    info_entry *slot = &cache[n_cache < 8 ? n_cache++ : 7];
    free(slot->config);
    *slot = e;
    slot->config = strdup(config);
    slot->info.library = slot->library;
    slot->info.detail = slot->detail;
    slot->info.invariance = slot->invariance[0] ? slot->invariance : NULL;
    slot->info.probes = slot->probes[0] ? slot->probes : NULL;
    return gf_backend_info_put(info_out, &slot->info); /* at most the caller's struct_size */
}

static void ex_model_free(void *model)
{
    ex_model *m = model;
    if (!m)
        return;
    gx_close(&m->conn, 2.0);
    free(m);
}

static gf_status ex_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    const char *config = opts ? opts->config : NULL;
    if (!desc || !desc->name || !desc->name[0])
        return gf_error_set(GF_E_UNSUPPORTED, "exec: the model has no directory (gf_model_desc.name is NULL); "
                                              "a protocol client loads its weights from the model directory");
    ex_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "exec: out of memory");
    char name[128];
    gf_status st = ex_start(config, &m->conn, &m->features, name, sizeof name);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    m->cfg = desc->config;
    char path[PATH_MAX];
    if (!realpath(desc->name, path))
        snprintf(path, sizeof path, "%s", desc->name);
    const gf_model_config *g = &desc->config;
    size_t len = 8 + 4 + strlen(path) + 80;
    uint8_t *body = gx_body(&m->conn, len), *p = body;
    if (!body) {
        ex_model_free(m);
        return GF_E_NOMEM;
    }
    gx_put_u32(&p, (uint32_t)(opts && opts->threads > 0 ? opts->threads : 1));
    gx_put_str(&p, path);
    const uint32_t words[] = {g->arch,
                              g->activation,
                              g->norm,
                              g->pos,
                              (uint32_t)g->vocab_size,
                              (uint32_t)g->n_positions,
                              (uint32_t)g->n_embd,
                              (uint32_t)g->n_layer,
                              (uint32_t)g->n_head,
                              (uint32_t)g->n_kv_head,
                              (uint32_t)g->d_head,
                              (uint32_t)g->d_ff};
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        gx_put_u32(&p, words[i]);
    gx_put_f32(&p, g->norm_eps);
    gx_put_f32(&p, g->rope_theta);
    gx_put_u32(&p, (uint32_t)g->bos_id);
    gx_put_u32(&p, (uint32_t)g->eos_id);
    gx_put_u32(&p, (uint32_t)g->tied_head);
    gx_put_u32(&p, (uint32_t)g->qkv_bias);
    gx_put_u32(&p, (uint32_t)g->rope_scaling);
    gx_put_f32(&p, g->rope_factor);
    rd r;
    st = read_reply(&m->conn, GX_MODEL_LOAD, body, (size_t)(p - body), 8, &r);
    if (st == GF_OK) {
        int32_t V = (int32_t)rd_u32(&r), npos = (int32_t)rd_u32(&r);
        if (V != g->vocab_size || npos != g->n_positions)
            st = gx_fail(&m->conn,
                         "model_load: the client loaded a model with vocab %d and %d positions; "
                         "genfence's has vocab %d and %d positions (not the same model?)",
                         V, npos, g->vocab_size, g->n_positions);
    }
    if (st != GF_OK) {
        ex_model_free(m);
        return st;
    }
    note_features(config, m->features);
    *model_out = m;
    return GF_OK;
}

static gf_status ex_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    ex_model *m = model;
    *cache_out = NULL;
    ex_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "exec: out of memory");
    uint8_t body[8], *p = body;
    gx_put_u32(&p, (uint32_t)batch);
    gx_put_u32(&p, (uint32_t)max_len);
    rd r;
    gf_status st = read_reply(&m->conn, GX_CACHE_CREATE, body, sizeof body, 4, &r);
    if (st != GF_OK) {
        free(c);
        return st;
    }
    c->m = m;
    c->id = rd_u32(&r);
    c->B = batch;
    c->max_len = max_len;
    *cache_out = c;
    return GF_OK;
}

static gf_status cache_call(ex_cache *c, uint32_t op, long want, rd *r)
{
    uint8_t body[4], *p = body;
    gx_put_u32(&p, c->id);
    return read_reply(&c->m->conn, op, body, sizeof body, want, r);
}

static gf_status ex_cache_reset(void *cache)
{
    ex_cache *c = cache;
    rd r;
    gf_status st = cache_call(c, GX_CACHE_RESET, 0, &r);
    if (st == GF_OK)
        c->length = 0;
    return st;
}

static void ex_cache_free(void *cache)
{
    ex_cache *c = cache;
    if (!c)
        return;
    rd r;
    if (!c->m->conn.dead)
        cache_call(c, GX_CACHE_FREE, 0, &r); /* nothing to report from a free */
    free(c);
}

static int32_t ex_cache_length(const void *cache)
{
    rd r;
    if (cache_call((ex_cache *)cache, GX_CACHE_LENGTH, 4, &r) != GF_OK)
        return -1; /* the message says why */
    return (int32_t)rd_u32(&r);
}

static size_t ex_cache_bytes(const void *cache)
{
    rd r;
    if (cache_call((ex_cache *)cache, GX_CACHE_BYTES, 8, &r) != GF_OK)
        return 0;
    return (size_t)gx_get_u64(&r.p);
}

/* forward (10), or with req forward_trace (12): the same request, and after
 * the logits the reply holds i32 P, i32 D, u8 given[P], f32 trace[P, B, T, D];
 * from a client with GX_FEATURE_TRACE_KV then i32 L, i32 KVd, i32 Tk,
 * u8 kv_given[L], f32 kv[L, 2, B, Tk, KVd] (docs/protocol.md) */
/* the keys and values after a trace (GX_FEATURE_TRACE_KV): i32 L, i32 KVd,
 * i32 Tk, u8 kv_given[L], f32 kv[L, 2, B, Tk, KVd], into req */
static gf_status read_kv(gx_conn *x, const gf_trace_request *req, int32_t L, int32_t KVd, int32_t B, int32_t Tk)
{
    const size_t n = 12 + (size_t)L + 4 * 2 * (size_t)L * (size_t)B * (size_t)Tk * (size_t)KVd;
    uint8_t *t = malloc(n);
    float *kr = malloc(2 * (size_t)KVd * sizeof *kr); /* (2, KVd): one key row, one value row */
    gf_status st =
        t && kr ? gx_read_into(x, t, n) : gx_fail(x, "forward_trace: out of memory for %zu bytes of keys", n);
    const uint8_t *h = t;
    int32_t gl = st == GF_OK ? (int32_t)gx_get_u32(&h) : 0, gk = st == GF_OK ? (int32_t)gx_get_u32(&h) : 0;
    int32_t gt = st == GF_OK ? (int32_t)gx_get_u32(&h) : 0;
    if (st == GF_OK && (gl != L || gk != KVd || gt != Tk))
        st = gx_fail(x,
                     "forward_trace: keys and values of (L %d, KVd %d, Tk %d), the call has (%d, %d, %d) (wrong shape)",
                     gl, gk, gt, L, KVd, Tk);
    const uint8_t *kg = h, *kv = h + L;
    for (int32_t l = 0; st == GF_OK && l < L; l++)
        for (int32_t b = 0; kg[l] && b < B; b++)
            for (int32_t j = 0; j < Tk; j++) {
                for (int w = 0; w < 2; w++)
                    memcpy(kr + (size_t)w * KVd, kv + 4 * ((((size_t)(2 * l + w) * B + b) * Tk + j) * (size_t)KVd),
                           (size_t)KVd * sizeof *kr);
                gf_trace_put_kv_row(req, l, b, j, kr, kr + KVd);
            }
    free(t);
    free(kr);
    return st;
}

static gf_status ex_forward_any(void *model, void *cache, const gf_batch *in, float *logits_out,
                                const gf_trace_request *req)
{
    ex_model *m = model;
    ex_cache *c = cache;
    gx_conn *x = &m->conn;
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids || !logits_out)
        return gf_error_set(GF_E_INVALID_ARG, "exec: batch needs B >= 1, T >= 1, tokens, position_ids and logits");
    const int32_t B = in->B, T = in->T, V = m->cfg.vocab_size;
    const int32_t Tk = c ? c->length + T : T;
    const size_t BT = (size_t)B * (size_t)T;
    const size_t mask_n = in->key_mask ? (size_t)B * (size_t)Tk : 0;
    uint8_t *body = gx_body(x, 24 + 8 * BT + mask_n), *p = body;
    if (!body)
        return GF_E_NOMEM;
    gx_put_u32(&p, c ? c->id : 0);
    gx_put_u32(&p, (uint32_t)B);
    gx_put_u32(&p, (uint32_t)T);
    gx_put_u32(&p, (uint32_t)Tk);
    gx_put_u32(&p, in->logits_mode == GF_LOGITS_LAST ? 1u : 0u);
    gx_put_u32(&p, in->key_mask ? 1u : 0u);
    memcpy(p, in->tokens, 4 * BT); /* (B, T) int32 LE */
    p += 4 * BT;
    memcpy(p, in->position_ids, 4 * BT); /* (B, T) int32 LE */
    p += 4 * BT;
    if (mask_n) {
        memcpy(p, in->key_mask, mask_n); /* (B, Tk) uint8 */
        p += mask_n;
    }
    uint32_t n = 0;
    gf_status st = gx_request(x, req ? GX_FORWARD_TRACE : GX_FORWARD, body, (size_t)(p - body), &n);
    if (st != GF_OK)
        return st;
    const size_t rows = in->logits_mode == GF_LOGITS_LAST ? (size_t)B : BT;
    const int32_t L = m->cfg.n_layer, D = m->cfg.n_embd, P = GF_TRACE_POINTS(L);
    const size_t trace_n = req ? 8 + (size_t)P + 4 * (size_t)P * BT * (size_t)D : 0; /* the trace after the logits */
    const int kvx = req && (m->features & GX_FEATURE_TRACE_KV);
    const int32_t KVd = (m->cfg.n_kv_head > 0 ? m->cfg.n_kv_head : m->cfg.n_head) * m->cfg.d_head;
    const size_t kv_n = kvx ? 12 + (size_t)L + 4 * 2 * (size_t)L * (size_t)B * (size_t)Tk * (size_t)KVd : 0;
    const size_t want = 12 + 4 * rows * (size_t)V + trace_n + kv_n;
    uint8_t head[12];
    if (n < 12)
        return gx_fail(x, "forward: reply of %u bytes, the protocol says %zu (wrong length)", n, want);
    if ((st = gx_read_into(x, head, sizeof head)) != GF_OK)
        return st;
    const uint8_t *q = head;
    int32_t got_rows = (int32_t)gx_get_u32(&q), got_V = (int32_t)gx_get_u32(&q), length = (int32_t)gx_get_u32(&q);
    if ((size_t)got_rows != rows || got_V != V)
        return gx_fail(x, "forward: reply holds (%d rows, V %d) logits, the request needs (%zu, %d) (wrong shape)",
                       got_rows, got_V, rows, V);
    if (n != want)
        return gx_fail(x, "%s: reply of %u bytes for %zu x %d logits%s, the protocol says %zu (wrong length)",
                       req ? "forward_trace" : "forward", n, rows, V, req ? " and the trace" : "", want);
    if ((st = gx_read_into(x, logits_out, 4 * rows * (size_t)V)) != GF_OK) /* (rows, V) f32 LE */
        return st;
    if (req) {
        uint8_t *t = malloc(trace_n); /* i32 P, i32 D, u8 given[P], f32 (P, B, T, D) */
        if (!t)
            return gx_fail(x, "forward_trace: out of memory for a %zu-byte trace", trace_n);
        if ((st = gx_read_into(x, t, trace_n)) != GF_OK) {
            free(t);
            return st;
        }
        const uint8_t *h = t;
        int32_t gp = (int32_t)gx_get_u32(&h), gd = (int32_t)gx_get_u32(&h);
        if (gp != P || gd != D) {
            free(t);
            return gx_fail(x, "forward_trace: reply holds (%d points, D %d), the model has (%d, %d) (wrong shape)", gp,
                           gd, P, D);
        }
        const uint8_t *given = h;
        const float *tr = (const float *)(given + P); /* unaligned-safe: copied row by row below */
        float *row = malloc((size_t)D * sizeof *row);
        for (int32_t pt = 0; row && pt < P; pt++)
            for (int32_t b = 0; given[pt] && b < B; b++)
                for (int32_t tt = 0; tt < T; tt++) {
                    memcpy(row, (const uint8_t *)tr + 4 * ((((size_t)pt * B + b) * T + tt) * (size_t)D),
                           (size_t)D * sizeof *row);
                    gf_trace_put_row(req, pt, b, tt, row);
                }
        free(row);
        free(t);
    }
    if (kvx && (st = read_kv(x, req, L, KVd, B, Tk)) != GF_OK)
        return st;
    if (c) {
        int32_t expect = c->length + T;
        c->length = expect;
        if (length != expect)
            return gf_error_set(GF_E_BACKEND,
                                "exec client '%s': its cache holds %d positions after a forward of "
                                "%d; the contract says %d (length + T, once per call)",
                                x->prog, length, T, expect);
    }
    return GF_OK;
}

static gf_status ex_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return ex_forward_any(model, cache, in, logits_out, NULL);
}

static gf_status ex_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    return ex_forward_any(model, cache, in, logits_out, req);
}

/* The plain sampler's fields as sample, speculate and logprobs send them:
 * f64 temperature, i32 use_top_k, top_k, use_top_p, u32 pad (keeps top_p
 * 8-aligned in the body), f64 top_p. */
static void put_plain(uint8_t **p, const gf_sampler_params *sp)
{
    gx_put_f64(p, sp->temperature);
    gx_put_u32(p, (uint32_t)sp->use_top_k);
    gx_put_u32(p, (uint32_t)sp->top_k);
    gx_put_u32(p, (uint32_t)sp->use_top_p);
    gx_put_u32(p, 0);
    gx_put_f64(p, sp->top_p);
}

/* The sampler over the wire: the model's client, or (model NULL, sampler-only
 * use) a client started from the last command that offered a sampler. */
static gf_status ex_sample(void *model, const float *logits, int32_t B, const gf_sampler_params *sp,
                           const gf_rng_draws *draws, int32_t *ids_out)
{
    gf_error_clear();
    if (!logits || !sp || !draws || !draws->u || !ids_out || B < 1 || draws->V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "exec: sample needs logits, params, draws (V >= 1) and ids_out");
    gx_conn *x;
    gf_status st = ml_conn(model, &g_sample_client, GX_FEATURE_SAMPLE, "sampler", &x);
    if (st != GF_OK)
        return st;
    const int32_t V = draws->V;
    const size_t BV = (size_t)B * (size_t)V;
    uint8_t *body = gx_body(x, 48 + 12 * BV), *p = body;
    if (!body)
        return GF_E_NOMEM;
    gx_put_u32(&p, (uint32_t)B);
    gx_put_u32(&p, (uint32_t)V);
    put_plain(&p, sp);
    gx_put_u64(&p, sp->seed);
    memcpy(p, logits, 4 * BV); /* (B, V) f32 LE */
    p += 4 * BV;
    memcpy(p, draws->u, 8 * BV); /* (B, V) f64 LE */
    p += 8 * BV;
    rd r;
    st = read_reply(x, GX_SAMPLE, body, (size_t)(p - body), 4L * B, &r);
    if (st != GF_OK)
        return st;
    for (int32_t b = 0; b < B; b++)
        ids_out[b] = (int32_t)rd_u32(&r);
    return GF_OK;
}

/* The speculate slot over the wire (13): one round of the rejection sampler
 * (gf_spec_request) on the model's client, or (model NULL, as genfence's
 * speculative kinds call it) a client started from the last command that
 * offered it. The request's values arrive validated (gf_backend_speculate);
 * a reply out of range is a protocol failure. */
static gf_status ex_speculate(void *model, const gf_spec_request *rq, int32_t *accepted_out, int32_t *next_out)
{
    gf_error_clear();
    if (!rq || rq->struct_size < sizeof *rq || rq->K < 1 || rq->V < 1 || !rq->target_logits || !rq->draft ||
        !rq->params || !rq->u_accept || !rq->u_draw || !accepted_out || !next_out)
        return gf_error_set(GF_E_INVALID_ARG, "exec: speculate needs a request (K, V >= 1, target_logits, draft, "
                                              "params, u_accept, u_draw) and both outputs");
    gx_conn *x;
    gf_status st = ml_conn(model, &g_spec_client, GX_FEATURE_SPECULATE, "speculate", &x);
    if (st != GF_OK)
        return st;
    const gf_sampler_params *sp = rq->params;
    const int32_t K = rq->K, V = rq->V;
    const size_t KV = (size_t)K * (size_t)V, K1V = KV + (size_t)V;
    const size_t n =
        56 + 4 * K1V + 4 * (size_t)K + (rq->draft_probs ? 8 * KV : 0) + 8 * (size_t)K + 8 * ((size_t)K + 1);
    uint8_t *body = gx_body(x, n), *p = body;
    if (!body)
        return GF_E_NOMEM;
    gx_put_u32(&p, (uint32_t)K);
    gx_put_u32(&p, (uint32_t)V);
    gx_put_u32(&p, (uint32_t)rq->rule);
    gx_put_u32(&p, rq->draft_probs ? 1u : 0u);
    put_plain(&p, sp);
    gx_put_u64(&p, sp->seed);
    memcpy(p, rq->target_logits, 4 * K1V); /* (K + 1, V) f32 LE */
    p += 4 * K1V;
    memcpy(p, rq->draft, 4 * (size_t)K); /* (K) i32 LE */
    p += 4 * (size_t)K;
    if (rq->draft_probs) {
        memcpy(p, rq->draft_probs, 8 * KV); /* (K, V) f64 LE */
        p += 8 * KV;
    }
    memcpy(p, rq->u_accept, 8 * (size_t)K); /* (K) f64 LE */
    p += 8 * (size_t)K;
    memcpy(p, rq->u_draw, 8 * ((size_t)K + 1)); /* (K + 1) f64 LE */
    p += 8 * ((size_t)K + 1);
    rd r;
    st = read_reply(x, GX_SPECULATE, body, (size_t)(p - body), 8, &r);
    if (st != GF_OK)
        return st;
    const int32_t acc = (int32_t)rd_u32(&r), next = (int32_t)rd_u32(&r);
    if (acc < 0 || acc > K)
        return gx_fail(x, "speculate: the client accepted %d of K %d draft tokens (out of range: 0 .. K)", acc, K);
    if (next < 0 || next >= V)
        return gx_fail(x, "speculate: the client's next token %d is outside [0, V %d)", next, V);
    *accepted_out = acc;
    *next_out = next;
    return GF_OK;
}

/* The logprobs slot over the wire (14): B rows of logits under plain
 * params (temperature, top_k, top_p: what sample carries; a profile's
 * call, params->ext set, is declined) and the mode; the reply is the
 * (B, V) values in f64. The values arrive validated (gf_backend_logprobs);
 * a reply of the wrong length is a protocol failure. */
static gf_status ex_logprobs(void *model, const float *logits, int32_t B, int32_t V, const gf_sampler_params *sp,
                             int32_t mode, double *out)
{
    gf_error_clear();
    if (!logits || !sp || !out || B < 1 || V < 1)
        return gf_error_set(GF_E_INVALID_ARG, "exec: logprobs needs logits, params, out and B, V >= 1");
    if (sp->ext)
        return gf_error_set(GF_E_UNSUPPORTED, "exec: the protocol's logprobs (14) carries plain sampler parameters "
                                              "(temperature, top_k, top_p), not a profile's filters");
    gx_conn *x;
    gf_status st = ml_conn(model, &g_lp_client, GX_FEATURE_LOGPROBS, "logprobs", &x);
    if (st != GF_OK)
        return st;
    const size_t BV = (size_t)B * (size_t)V;
    uint8_t *body = gx_body(x, 48 + 4 * BV), *p = body;
    if (!body)
        return GF_E_NOMEM;
    gx_put_u32(&p, (uint32_t)B);
    gx_put_u32(&p, (uint32_t)V);
    gx_put_u32(&p, (uint32_t)mode);
    gx_put_u32(&p, 0); /* padding: keeps temperature 8-aligned in the body */
    put_plain(&p, sp);
    memcpy(p, logits, 4 * BV); /* (B, V) f32 LE */
    p += 4 * BV;
    rd r = {0};
    st = read_reply(x, GX_LOGPROBS, body, (size_t)(p - body), (long)(8 * BV), &r);
    if (st != GF_OK)
        return st;
    memcpy(out, r.p, 8 * BV); /* (B, V) f64 LE: read_reply checked the length */
    return GF_OK;
}

/* The module's own message (its private copy of engine/status.c). */
static const char *ex_last_error(void *model)
{
    (void)model;
    return gf_error_msg();
}

/* Not const: the sample, forward_trace and speculate slots are filled in once
 * a client that offers one has been handshaken in this process
 * (note_features). */
static gf_backend_ops k_exec_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "exec",
    .description = "a protocol client over a pipe, any engine in any language: --backend 'exec:COMMAND ARGS...' "
                   "(docs/protocol.md)",
    .probe = ex_probe,
    .info = ex_info,
    .model_load = ex_model_load,
    .model_free = ex_model_free,
    .cache_create = ex_cache_create,
    .cache_reset = ex_cache_reset,
    .cache_free = ex_cache_free,
    .cache_length = ex_cache_length,
    .cache_bytes = ex_cache_bytes,
    .forward = ex_forward,
    .sample = NULL,
    .last_error = ex_last_error,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_exec_ops; }
