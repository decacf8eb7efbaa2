/* gf_engine: a checked handle on one backend and one loaded model. */
#include "genfence/engine.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_log.h"
#include "desc_copy.h"
#include "engine_trace.h"
#include "guard.h"

struct gf_engine {
    const gf_backend_ops *ops;
    void *model; /* the backend's handle */
    gf_model_config cfg;
    long long n_forward; /* forward calls so far (1-based in messages) */
    /* what forward gets instead of the caller's buffers (guard.h), kept
     * between calls: logits_out (B, T|1, V), tokens and position_ids (B, T),
     * key_mask (B, Tk) */
    gf_guard g_logits, g_tokens, g_pos, g_mask;
    gf_call_log *log;       /* (optional) gf_engine_log_to */
    gf_desc_copy desc_copy; /* what model_load was given, poisoned after it (NULL map: desc itself) */
};

/* ---- call trace (engine.h) ---- */
static gf_call_trace *g_trace;
static long long g_trace_step = -1, g_trace_total;
static struct {
    const char *slot;
    long long n;
} g_trace_calls[16];

void gf_engine_trace_to(gf_call_trace *t)
{
    g_trace = t;
    if (t)
        memset(t, 0, sizeof *t);
}

void gf_engine_trace_step(long long step) { g_trace_step = step; }

/* ---- the poisoned descriptions (desc_copy.h) ---- */
static int g_desc_poison = 1;

int gf_engine_desc_poison(int on)
{
    int was = g_desc_poison;
    g_desc_poison = on != 0;
    return was;
}

/* Name e's poisoned copy in the call trace (add) or drop it (!add). */
static void trace_poisoned(const gf_engine *e, int add)
{
    gf_call_trace *t = g_trace;
    if (!t || !e->desc_copy.map)
        return;
    const uintptr_t lo = (uintptr_t)e->desc_copy.map, hi = lo + e->desc_copy.len;
    const int32_t cap = (int32_t)(sizeof t->poisoned / sizeof t->poisoned[0]);
    if (add) {
        if (t->n_poisoned >= cap)
            return;
        int32_t i = t->n_poisoned;
        t->poisoned[i].lo = lo;
        t->poisoned[i].hi = hi;
        snprintf(t->poisoned[i].backend, sizeof t->poisoned[i].backend, "%s", e->ops->name);
        t->n_poisoned = i + 1;
        return;
    }
    for (int32_t i = 0; i < t->n_poisoned && i < cap; i++)
        if (t->poisoned[i].lo == lo) {
            memmove(&t->poisoned[i], &t->poisoned[i + 1], (size_t)(t->n_poisoned - i - 1) * sizeof t->poisoned[0]);
            t->n_poisoned--;
            break;
        }
}

/* Count the call of slot (a string literal) and, when tracing, write it down
 * before the backend runs. */
long long gf_trace_enter(const char *slot, int32_t B, int32_t T, int32_t cache_length)
{
    long long n = 0;
    g_trace_total++;
    for (size_t i = 0; i < sizeof g_trace_calls / sizeof g_trace_calls[0]; i++)
        if (!g_trace_calls[i].slot || g_trace_calls[i].slot == slot || !strcmp(g_trace_calls[i].slot, slot)) {
            g_trace_calls[i].slot = slot;
            n = ++g_trace_calls[i].n;
            break;
        }
    gf_call_trace *t = g_trace;
    if (!t)
        return n;
    t->in_call = 0;
    snprintf(t->slot, sizeof t->slot, "%s", slot);
    t->call = n;
    t->step = g_trace_step;
    t->B = B;
    t->T = T;
    t->cache_length = cache_length;
    t->calls_total = g_trace_total;
    t->n_bufs = 0;
    t->logits_mode[0] = '\0';
    t->in_call = 1;
    return n;
}

/* A guarded buffer of the call in progress, for the crash context. */
static void trace_buf(const char *name, const gf_guard *g, const char *shape)
{
    gf_call_trace *t = g_trace;
    if (!t || !g->map || t->n_bufs >= (int32_t)(sizeof t->bufs / sizeof t->bufs[0]))
        return;
    int32_t i = t->n_bufs;
    snprintf(t->bufs[i].name, sizeof t->bufs[i].name, "%s", name);
    snprintf(t->bufs[i].shape, sizeof t->bufs[i].shape, "%s", shape);
    t->bufs[i].map_lo = (uintptr_t)g->map;
    t->bufs[i].map_hi = (uintptr_t)g->map + g->map_len;
    t->bufs[i].data = (uintptr_t)g->data;
    t->bufs[i].n = g->n;
    t->n_bufs = i + 1;
}

/* Threads of this process now (/proc/self/task), 0 if it cannot say. */
static int32_t threads_now(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return 0;
    int32_t n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

void gf_trace_leave(void)
{
    if (!g_trace)
        return;
    /* after model_free: how many threads are still running, so that a crash
     * after it can say whether one of them outlived the model */
    g_trace->in_call = 0;
    if (!strcmp(g_trace->slot, "model_free"))
        g_trace->threads_after = threads_now();
}

gf_status gf_backend_check_ops(const gf_backend_ops *ops)
{
    if (!ops)
        return gf_error_set(GF_E_ABI, "backend table is NULL");
    const char *name = ops->name ? ops->name : "(unnamed)";
    if (ops->abi_version != GF_BACKEND_ABI_VERSION)
        return gf_error_set(GF_E_ABI, "backend '%s' was built for ABI version %u; this genfence speaks version %u",
                            name, ops->abi_version, GF_BACKEND_ABI_VERSION);
    if (!ops->name || !ops->name[0])
        return gf_error_set(GF_E_ABI, "backend table has no name");
    if (ops->struct_size < GF_BACKEND_OPS_BASE_SIZE)
        return gf_error_set(GF_E_ABI,
                            "backend '%s' has a table of %u bytes, shorter than the version-%u baseline "
                            "(%zu bytes, every slot through forward); it was not built against genfence/backend.h",
                            name, ops->struct_size, GF_BACKEND_ABI_VERSION, (size_t)GF_BACKEND_OPS_BASE_SIZE);
    if (ops->struct_size > sizeof(gf_backend_ops))
        return gf_error_set(GF_E_ABI,
                            "backend '%s' was built against a newer genfence: its table has %u bytes, this "
                            "genfence knows %zu (ABI version %u); rebuild it against this genfence's headers "
                            "or use a newer genfence",
                            name, ops->struct_size, sizeof(gf_backend_ops), GF_BACKEND_ABI_VERSION);
    const struct {
        const void *slot;
        const char *what;
    } required[] = {
        {(const void *)ops->probe, "probe"},
        {(const void *)ops->model_load, "model_load"},
        {(const void *)ops->model_free, "model_free"},
        {(const void *)ops->cache_create, "cache_create"},
        {(const void *)ops->cache_reset, "cache_reset"},
        {(const void *)ops->cache_free, "cache_free"},
        {(const void *)ops->cache_length, "cache_length"},
        {(const void *)ops->cache_bytes, "cache_bytes"},
        {(const void *)ops->forward, "forward"},
    };
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if (!required[i].slot)
            return gf_error_set(GF_E_ABI, "backend '%s' lacks the required slot '%s'", name, required[i].what);
    return GF_OK;
}

const char *gf_backend_last_error(const gf_backend_ops *ops, void *model)
{
    const char *t = ops && GF_OPS_HAS(ops, last_error) ? ops->last_error(model) : NULL;
    return t ? t : "";
}

int gf_backend_has_sample(const gf_backend_ops *ops) { return ops && GF_OPS_HAS(ops, sample); }

uint32_t gf_backend_sample_profiles(const gf_backend_ops *ops)
{
    if (!ops || !GF_OPS_HAS(ops, sample_profiles) || !GF_OPS_HAS(ops, sample_ex))
        return 0;
    return ops->sample_profiles(); /* constant for the backend: not a traced call */
}

gf_status gf_backend_available(const gf_backend_ops *ops, char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    char buf[512] = "";
    gf_status st;
    gf_trace_enter("probe", 0, 0, -1);
    gf_status gs = gf_guard_probe(ops, buf, sizeof buf, &st); /* why: a guarded copy (guard.h) */
    gf_trace_leave();
    if (gs != GF_OK) { /* it wrote outside why: a broken backend, not an unavailable one */
        if (why && why_len)
            snprintf(why, why_len, "%s", gf_error_msg());
        return gs;
    }
    if (st == GF_OK)
        return GF_OK;
    if (why && why_len)
        snprintf(why, why_len, "%s", buf[0] ? buf : gf_status_str(st));
    return GF_E_UNAVAILABLE;
}

gf_status gf_backend_describe(const gf_backend_ops *ops, const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info defaults = {.struct_size = sizeof defaults,
                                .dtype = GF_COMPUTE_F32,
                                .threads = opts && opts->threads > 0 ? opts->threads : 1};
    *info_out = defaults;
    if (!ops->info)
        return GF_E_UNSUPPORTED;
    gf_backend_options o = {.struct_size = sizeof o, .threads = defaults.threads};
    if (opts)
        o = *opts;
    /* "the callee fills at most the caller's struct_size" (backend.h): the
     * slot gets a guarded copy holding this genfence's struct_size, so a
     * backend built against a grown gf_backend_info that writes its own
     * sizeof is caught by the pattern after our struct, not let loose on
     * the caller's stack */
    gf_guard g = {0};
    gf_backend_info *gi = gf_guard_place(&g, sizeof *gi, &defaults);
    if (!gi)
        return gf_error_prefix(GF_E_NOMEM, "backend '%s': info", ops->name);
    gf_trace_enter("info", 0, 0, -1);
    gf_status st = ops->info(&o, gi);
    gf_trace_leave();
    char who[200], shape[64];
    snprintf(who, sizeof who, "backend '%s': info", ops->name);
    snprintf(shape, sizeof shape, "(struct_size = %zu bytes)", sizeof *gi);
    gf_status gs = gf_guard_verdict(&g, who, "info_out", shape, NULL, 1, "byte");
    if (gs == GF_OK && st == GF_OK && (gi->struct_size < sizeof gi->struct_size || gi->struct_size > sizeof *gi))
        gs = gf_error_set(GF_E_BACKEND,
                          "%s: says it filled %u bytes of info_out, which has %zu (the callee fills at most the "
                          "caller's struct_size and says how many it filled)",
                          who, gi->struct_size, sizeof *gi);
    if (gs == GF_OK && st == GF_OK) {
        /* the fields past what it filled keep their defaults */
        memcpy(info_out, gi, gi->struct_size);
        info_out->struct_size = sizeof *info_out;
    }
    gf_guard_release(&g);
    if (gs != GF_OK)
        return gs;
    if (st != GF_OK)
        return st;
    if (!info_out->dtype)
        info_out->dtype = GF_COMPUTE_F32;
    return GF_OK;
}

/* What each GF_MODEL_NEEDS_* bit is, for the refusal below. */
#define GF_MODEL_NEED_TABLE(X)                                                                \
    X(GF_MODEL_NEEDS_SLIDING_WINDOW, "sliding-window attention (config.json sliding_window)") \
    X(GF_MODEL_NEEDS_ROPE_ATTN_FACTOR, "rotary cos/sin scaled by an attention factor (rope_scaling yarn / longrope)")

gf_status gf_backend_check_needs(const gf_backend_ops *ops, const gf_model_desc *desc, const gf_backend_options *opts)
{
    uint32_t needs = gf_model_desc_has(desc, needs) ? desc->needs : 0;
    if (!needs)
        return GF_OK;
    gf_backend_info info;
    uint32_t has = gf_backend_describe(ops, opts, &info) == GF_OK ? info.model_features : 0;
    uint32_t missing = needs & ~has;
    if (!missing)
        return GF_OK;
    char what[400] = "";
    size_t n = 0;
#define GF_NEED_NAME(bit, text)               \
    if ((missing & (bit)) && n < sizeof what) \
        n += (size_t)snprintf(what + n, sizeof what - n, "%s%s", n ? "; " : "", text);
    GF_MODEL_NEED_TABLE(GF_NEED_NAME)
#undef GF_NEED_NAME
    if (missing & ~(uint32_t)GF_MODEL_NEEDS_KNOWN && n < sizeof what)
        snprintf(what + n, sizeof what - n, "%sfeature bits 0x%x this genfence does not know", n ? "; " : "",
                 missing & ~(uint32_t)GF_MODEL_NEEDS_KNOWN);
    return gf_error_set(GF_E_UNSUPPORTED,
                        "backend '%s' does not implement what %s needs: %s (its info does not declare it in "
                        "model_features), so the model is not loaded onto it",
                        ops->name, desc->name ? desc->name : "the model", what);
}

/* Add the backend's name and vendor text to the current message. */
static gf_status backend_error(const gf_engine *e, gf_status st)
{
    const char *vendor = gf_backend_last_error(e->ops, e->model);
    if (vendor[0])
        return gf_error_prefix(st, "backend '%s' (%s)", e->ops->name, vendor);
    return gf_error_prefix(st, "backend '%s'", e->ops->name);
}

gf_status gf_engine_create(const gf_backend_ops *ops, const gf_model_desc *desc, const gf_backend_options *opts,
                           gf_engine **engine_out)
{
    *engine_out = NULL;
    gf_status st = gf_backend_check_ops(ops);
    if (st != GF_OK)
        return st;
    char why[512] = "";
    st = gf_backend_available(ops, why, sizeof why);
    if (st == GF_E_UNAVAILABLE)
        return gf_error_set(GF_E_UNAVAILABLE, "backend '%s' is unavailable here: %s", ops->name, why);
    if (st != GF_OK)
        return gf_error_set(st, "backend '%s': %s", ops->name, why);
    if ((st = gf_backend_check_needs(ops, desc, opts)) != GF_OK)
        return st;
    gf_engine *e = calloc(1, sizeof *e);
    if (!e)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    e->ops = ops;
    e->cfg = desc->config;
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    if (opts)
        o = *opts;
    /* what model_load reads: a copy poisoned once it returns (desc_copy.h), or desc itself */
    const gf_model_desc *given = desc;
    if (g_desc_poison) {
        if ((st = gf_desc_copy_make(&e->desc_copy, desc)) != GF_OK) {
            free(e);
            return st;
        }
        given = e->desc_copy.desc;
    }
    /* the desc and its weights are read-only to the backend: summed before, checked after (guard.h) */
    gf_desc_guard dg;
    st = gf_desc_guard_take(&dg, given);
    if (st != GF_OK) {
        gf_desc_copy_release(&e->desc_copy);
        free(e);
        return st;
    }
    gf_error_clear();
    gf_trace_enter("model_load", 0, 0, -1);
    st = ops->model_load(given, &o, &e->model);
    gf_trace_leave();
    char who[200];
    snprintf(who, sizeof who, "backend '%s': model_load", ops->name);
    gf_status gs = gf_desc_guard_verdict(&dg, given, who);
    gf_desc_guard_release(&dg);
    gf_desc_copy_poison(&e->desc_copy); /* from here on a read through a kept pointer faults */
    if (gs != GF_OK) {
        if (st == GF_OK) {
            gf_trace_enter("model_free", 0, 0, -1);
            ops->model_free(e->model);
            gf_trace_leave();
        }
        gf_desc_copy_release(&e->desc_copy);
        free(e);
        return gs;
    }
    if (st != GF_OK) {
        backend_error(e, st);
        gf_desc_copy_release(&e->desc_copy);
        free(e);
        return st;
    }
    trace_poisoned(e, 1);
    *engine_out = e;
    return GF_OK;
}

void gf_engine_destroy(gf_engine *e)
{
    if (!e)
        return;
    gf_trace_enter("model_free", 0, 0, -1);
    e->ops->model_free(e->model);
    gf_trace_leave();
    trace_poisoned(e, 0);
    gf_desc_copy_release(&e->desc_copy);
    gf_guard_release(&e->g_logits);
    gf_guard_release(&e->g_tokens);
    gf_guard_release(&e->g_pos);
    gf_guard_release(&e->g_mask);
    free(e);
}

const gf_backend_ops *gf_engine_ops(const gf_engine *e) { return e->ops; }
const gf_model_config *gf_engine_config(const gf_engine *e) { return &e->cfg; }

gf_status gf_engine_cache_create(gf_engine *e, int32_t batch, int32_t max_len, void **cache_out)
{
    *cache_out = NULL;
    gf_error_clear();
    gf_trace_enter("cache_create", batch, max_len, -1);
    gf_status st = e->ops->cache_create(e->model, batch, max_len, cache_out);
    gf_trace_leave();
    if (st == GF_OK && e->log)
        gf_call_log_cache_create(e->log, *cache_out, batch, max_len);
    return st == GF_OK ? GF_OK : backend_error(e, st);
}

void gf_engine_cache_free(gf_engine *e, void *cache)
{
    if (!cache)
        return;
    if (e->log)
        gf_call_log_cache_op(e->log, GF_CALL_CACHE_FREE, cache);
    gf_trace_enter("cache_free", 0, 0, -1);
    e->ops->cache_free(cache);
    gf_trace_leave();
}

gf_status gf_engine_cache_reset(gf_engine *e, void *cache)
{
    gf_error_clear();
    if (e->log)
        gf_call_log_cache_op(e->log, GF_CALL_CACHE_RESET, cache);
    gf_trace_enter("cache_reset", 0, 0, e->ops->cache_length(cache));
    gf_status st = e->ops->cache_reset(cache);
    gf_trace_leave();
    if (st != GF_OK)
        return backend_error(e, gf_error_prefix(st, "cache_reset"));
    /* a reset that leaves the cache full is the backend's fault: caught here,
     * not later as a context limit (bad input) when the next prefill overflows */
    int32_t len = e->ops->cache_length(cache);
    if (len != 0)
        return gf_error_set(GF_E_BACKEND,
                            "backend '%s': cache_reset returned GF_OK but cache_length is %d after it; the contract "
                            "says 0",
                            e->ops->name, len);
    return GF_OK;
}

int32_t gf_engine_cache_length(gf_engine *e, const void *cache)
{
    gf_trace_enter("cache_length", 0, 0, -1);
    int32_t n = e->ops->cache_length(cache);
    gf_trace_leave();
    return n;
}

size_t gf_engine_cache_bytes(gf_engine *e, const void *cache)
{
    gf_trace_enter("cache_bytes", 0, 0, -1);
    size_t n = e->ops->cache_bytes(cache);
    gf_trace_leave();
    return n;
}

/* What forward's logits_out holds before the call: a NaN whose payload no
 * arithmetic makes, so a logit the backend never wrote is named as such. */
#define GF_UNWRITTEN_BITS 0x7fa5f00du

/* One fault model for forward (issue 11): whatever the backend gets wrong —
 * an error status (other than unavailable / unsupported: "cannot run this
 * here", out of memory, and the context limit), a cache length not advanced by exactly
 * T, a non-finite logit (the weights are finite: the loader refuses NaN/Inf),
 * a write outside logits_out or into its inputs (issue 12: every buffer is a
 * guarded copy, guard.h) — is GF_E_BACKEND (or GF_E_NOMEM), never the
 * bad-input codes, with the call index and the shapes in the message.
 * logits_out gets the backend's logits only after a clean call. */
static gf_status engine_forward(gf_engine *e, void *cache, const gf_batch *in, float *logits_out,
                                const gf_trace_request *req)
{
    gf_error_clear();
    /* a token the model cannot take is the caller's bad input (error, exit
     * 2), never handed to the backend, whose refusal would read as its fault */
    for (int32_t b = 0; in->tokens && b < in->B; b++)
        for (int32_t t = 0; t < in->T; t++) {
            int32_t id = in->tokens[(size_t)b * (size_t)in->T + (size_t)t];
            if (id < 0 || id >= e->cfg.vocab_size)
                return gf_error_set(GF_E_INVALID_ARG,
                                    "forward (B %d, T %d): token %d at (row %d, position %d) is outside the model's "
                                    "vocabulary [0, %d); not sent to backend '%s'",
                                    in->B, in->T, id, b, t, e->cfg.vocab_size, e->ops->name);
        }
    long long call = ++e->n_forward;
    int32_t len0 = cache ? e->ops->cache_length(cache) : 0;
    if (e->log && !req)
        gf_call_log_forward(e->log, cache, len0, in);
    char where[200];
    snprintf(where, sizeof where, "forward call #%lld (B %d, T %d, %s %d)", call, in->B, in->T,
             cache ? "cache length" : "uncached, keys", cache ? len0 : in->T);
    int32_t rows_t = in->logits_mode == GF_LOGITS_LAST ? 1 : in->T, V = e->cfg.vocab_size;
    int32_t Tk = cache ? len0 + in->T : in->T;
    size_t n = (size_t)in->B * (size_t)rows_t * (size_t)V, nt = (size_t)in->B * (size_t)in->T;
    size_t nk = (size_t)in->B * (size_t)(Tk > 0 ? Tk : 1);
    gf_batch g = *in; /* the backend sees guarded copies only */
    float *lg = gf_guard_place(&e->g_logits, n * sizeof *lg, NULL);
    int ok = lg != NULL;
    if (ok && in->tokens)
        ok = (g.tokens = gf_guard_place(&e->g_tokens, nt * sizeof *in->tokens, in->tokens)) != NULL;
    if (ok && in->position_ids)
        ok = (g.position_ids = gf_guard_place(&e->g_pos, nt * sizeof *in->position_ids, in->position_ids)) != NULL;
    if (ok && in->key_mask)
        ok = (g.key_mask = gf_guard_place(&e->g_mask, nk, in->key_mask)) != NULL;
    if (!ok)
        return gf_error_prefix(GF_E_NOMEM, "backend '%s': %s", e->ops->name, where);
    const uint32_t unwritten = GF_UNWRITTEN_BITS;
    for (size_t i = 0; i < n; i++)
        memcpy(&lg[i], &unwritten, sizeof unwritten);
    gf_trace_enter("forward", in->B, in->T, cache ? len0 : -1);
    if (g_trace) { /* what a fault on a guard page hit (harness/run/pool.c names it) */
        char sh[48];
        snprintf(g_trace->logits_mode, sizeof g_trace->logits_mode, "%s",
                 in->logits_mode == GF_LOGITS_LAST ? "last" : "all");
        snprintf(sh, sizeof sh, "(B, %s, V) = (%d, %d, %d) floats", rows_t == in->T ? "T" : "1", in->B, rows_t, V);
        trace_buf("logits_out", &e->g_logits, sh);
        snprintf(sh, sizeof sh, "(B, T) = (%d, %d) int32", in->B, in->T);
        if (in->tokens)
            trace_buf("tokens", &e->g_tokens, sh);
        if (in->position_ids)
            trace_buf("position_ids", &e->g_pos, sh);
        snprintf(sh, sizeof sh, "(B, Tk) = (%d, %d) bytes", in->B, Tk);
        if (in->key_mask)
            trace_buf("key_mask", &e->g_mask, sh);
    }
    gf_status st = req ? e->ops->forward_trace(e->model, cache, &g, lg, req) : e->ops->forward(e->model, cache, &g, lg);
    gf_trace_leave();
    {
        char who[260], shape[96];
        snprintf(who, sizeof who, "backend '%s': %s", e->ops->name, where);
        snprintf(shape, sizeof shape, "((B, %s, V) = (%d, %d, %d) floats)", rows_t == in->T ? "T" : "1", in->B, rows_t,
                 V);
        gf_status gs = gf_guard_verdict(&e->g_logits, who, "logits_out", shape, NULL, 4, "float");
        snprintf(shape, sizeof shape, "((B, T) = (%d, %d) int32)", in->B, in->T);
        if (gs == GF_OK && in->tokens)
            gs = gf_guard_verdict(&e->g_tokens, who, "tokens", shape, in->tokens, 4, "int32");
        if (gs == GF_OK && in->position_ids)
            gs = gf_guard_verdict(&e->g_pos, who, "position_ids", shape, in->position_ids, 4, "int32");
        snprintf(shape, sizeof shape, "((B, Tk) = (%d, %d) bytes)", in->B, Tk);
        if (gs == GF_OK && in->key_mask)
            gs = gf_guard_verdict(&e->g_mask, who, "key_mask", shape, in->key_mask, 1, "byte");
        if (gs != GF_OK)
            return gs;
    }
    if (st != GF_OK) {
        /* kept: cannot run here (skip), out of memory, and the context limit
         * (length + T > max_len: the caller's request does not fit) */
        gf_status as = st == GF_E_UNAVAILABLE || st == GF_E_UNSUPPORTED || st == GF_E_NOMEM || st == GF_E_CONTEXT_LIMIT
                           ? st
                           : GF_E_BACKEND;
        if (as != st)
            gf_error_prefix(as, "%s returned '%s'", where, gf_status_str(st));
        else
            gf_error_prefix(as, "%s", where);
        return backend_error(e, as);
    }
    if (cache) {
        int32_t len1 = e->ops->cache_length(cache);
        if (len1 != len0 + in->T)
            return gf_error_set(GF_E_BACKEND,
                                "backend '%s': %s: cache_length is %d after it; the contract says %d (length + T, "
                                "once per call)",
                                e->ops->name, where, len1, len0 + in->T);
    }
    for (size_t i = 0; i < n; i++)
        if (!isfinite(lg[i])) {
            size_t b = i / ((size_t)rows_t * V), t = i / (size_t)V % (size_t)rows_t, v = i % (size_t)V;
            uint32_t bits;
            memcpy(&bits, &lg[i], sizeof bits);
            return gf_error_set(GF_E_BACKEND, "backend '%s': %s: logit (row %zu, position %zu, token %zu) is %s",
                                e->ops->name, where, b, in->logits_mode == GF_LOGITS_LAST ? (size_t)in->T - 1 : t, v,
                                bits == unwritten ? "never written (still genfence's NaN fill)"
                                : isnan(lg[i])    ? "NaN"
                                : lg[i] > 0       ? "+inf"
                                                  : "-inf");
        }
    memcpy(logits_out, lg, n * sizeof *lg);
    return GF_OK;
}

gf_status gf_engine_forward(gf_engine *e, void *cache, const gf_batch *in, float *logits_out)
{
    size_t logged = e->log ? e->log->n : 0;
    gf_status st = engine_forward(e, cache, in, logits_out, NULL);
    if (e->log && e->log->n > logged) /* the replay skips a call that failed (a context limit a case expects) */
        e->log->v[e->log->n - 1].status = st;
    return st;
}

int gf_backend_has_trace(const gf_backend_ops *ops) { return ops && GF_OPS_HAS(ops, forward_trace); }

gf_status gf_engine_forward_trace(gf_engine *e, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    if (!gf_backend_has_trace(e->ops))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' has no trace slot", e->ops->name);
    memset(req->given, 0, (size_t)GF_TRACE_POINTS(req->n_layer));
    if (gf_trace_wants_kv(req))
        memset(req->kv_given, 0, (size_t)req->n_layer);
    return engine_forward(e, cache, in, logits_out, req);
}

gf_status gf_engine_model_paths(gf_engine *e, char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
    if (!GF_OPS_HAS(e->ops, model_paths))
        return gf_error_set(GF_E_UNSUPPORTED, "backend '%s' has no model_paths slot", e->ops->name);
    gf_status st = e->ops->model_paths(e->model, buf, len);
    if (len)
        buf[len - 1] = '\0';
    if (st != GF_OK) {
        const char *t = gf_backend_last_error(e->ops, e->model);
        return gf_error_set(st, "backend '%s': model_paths: %s", e->ops->name, t && t[0] ? t : gf_status_str(st));
    }
    return GF_OK;
}

void gf_engine_log_to(gf_engine *e, gf_call_log *log) { e->log = log; }
gf_call_log *gf_engine_log(const gf_engine *e) { return e->log; }
