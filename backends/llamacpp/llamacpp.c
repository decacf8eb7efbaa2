/* llama.cpp backend: genfence's ABI over llama.cpp's C API (llama.h).
 *
 * model_load writes the description as a GGUF (lc_gguf.c: GPT-2, Llama, Qwen2), quantises it with
 * llama_model_quantize for f16 / q8_0, and loads it with
 * llama_model_load_from_file. A genfence KV cache is a llama_context (the
 * context owns llama.cpp's KV memory): row b of the batch is llama.cpp
 * sequence b, each token goes in with the position id genfence gives, and
 * logits are requested per token (every position for GF_LOGITS_ALL, each
 * row's last for GF_LOGITS_LAST).
 *
 * Padding: a key the mask marks as padding is never decoded, so llama.cpp's
 * sequence b holds exactly row b's real keys; the genfence cache length
 * counts positions held (pads included), as the contract says. llama.cpp
 * masks by position (a query at position p sees its sequence's keys at
 * positions <= p) and requires each sequence's positions to be consecutive;
 * with strictly consecutive positions over a row's real keys (what genfence's
 * position-from-mask rule gives) that is the contract's offset causal mask
 * ANDed with the key mask. What llama.cpp cannot express is refused with
 * GF_E_UNSUPPORTED and says why: a key masked real that was padding when
 * decoded (or evicted), non-consecutive positions in a row, and the logits of
 * a padding query that has a real key before it. A held key that a later mask
 * pads (a sliding window) is evicted: llama_memory_seq_rm of its position. A padding query with no real key
 * before it sees only its own key (the contract); its logits come from
 * decoding that token alone at its position in a spare sequence (B), which
 * is then cleared.
 *
 * The uncached forward runs on a scratch context kept by the model (cleared
 * each call, grown when a call needs more rows or positions, released when a
 * cache is made). */
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ggml-backend.h>
#include <ggml.h>
#include <llama.h>

#include "lc.h"

#define GF_EXPORT __attribute__((visibility("default")))

#ifndef GF_LLAMACPP_PROVENANCE
#define GF_LLAMACPP_PROVENANCE "llama.cpp (provenance unknown)"
#endif

/* ---- llama.cpp's log: quiet unless GENFENCE_LLAMACPP_LOG=1; the last error kept ---- */

static _Thread_local char t_llama_err[512];
static int g_log_verbose;

static void lc_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    static _Thread_local enum ggml_log_level last = GGML_LOG_LEVEL_NONE;
    if (level != GGML_LOG_LEVEL_CONT)
        last = level;
    if (g_log_verbose)
        fputs(text, stderr);
    if (last != GGML_LOG_LEVEL_ERROR)
        return;
    size_t n = strlen(t_llama_err);
    if (level != GGML_LOG_LEVEL_CONT)
        n = 0; /* a new error replaces the old one */
    snprintf(t_llama_err + n, sizeof t_llama_err - n, "%s", text);
    for (size_t i = strlen(t_llama_err); i > 0 && t_llama_err[i - 1] == '\n'; i--)
        t_llama_err[i - 1] = '\0';
}

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static void lc_init_once(void)
{
    const char *v = getenv("GENFENCE_LLAMACPP_LOG");
    g_log_verbose = v && v[0] == '1';
    llama_log_set(lc_log, NULL);
    llama_backend_init();
}

/* ---- options ---- */

static const struct {
    const char *name;
    enum llama_ftype ftype;
} k_wtypes[LC_W_COUNT] = {
    [LC_W_F32] = {"f32", LLAMA_FTYPE_ALL_F32},
    [LC_W_F16] = {"f16", LLAMA_FTYPE_MOSTLY_F16},
    [LC_W_Q8_0] = {"q8_0", LLAMA_FTYPE_MOSTLY_Q8_0},
    [LC_W_Q6_K] = {"q6_k", LLAMA_FTYPE_MOSTLY_Q6_K},
    [LC_W_Q5_K_M] = {"q5_k_m", LLAMA_FTYPE_MOSTLY_Q5_K_M},
    [LC_W_Q4_K_M] = {"q4_k_m", LLAMA_FTYPE_MOSTLY_Q4_K_M},
    [LC_W_Q4_0] = {"q4_0", LLAMA_FTYPE_MOSTLY_Q4_0},
};

const char *lc_wtype_name(lc_wtype w) { return w >= 0 && w < LC_W_COUNT ? k_wtypes[w].name : "f32"; }

static const char *const k_kv_names[] = {"f32", "f16", "q8_0", "q4_0"}; /* by lc_kvtype */

const char *lc_kvtype_name(int t) { return t >= 0 && t <= LC_KV_Q4_0 ? k_kv_names[t] : "f32"; }

const char *lc_kv_desc(const lc_config *c, char *buf, size_t len)
{
    if (c->kv_k == c->kv_v)
        snprintf(buf, len, "%s", lc_kvtype_name(c->kv_k));
    else
        snprintf(buf, len, "k=%s,v=%s", lc_kvtype_name(c->kv_k), lc_kvtype_name(c->kv_v));
    return buf;
}

/* "f32" .. "q4_0" as an lc_kvtype, or -1 */
static int kv_parse(const char *v)
{
    for (int t = 0; t <= LC_KV_Q4_0; t++)
        if (!strcmp(v, k_kv_names[t]))
            return t;
    return -1;
}

static enum ggml_type kv_ggml(int t)
{
    return t == LC_KV_F16    ? GGML_TYPE_F16
           : t == LC_KV_Q8_0 ? GGML_TYPE_Q8_0
           : t == LC_KV_Q4_0 ? GGML_TYPE_Q4_0
                             : GGML_TYPE_F32;
}

gf_status lc_config_parse(const char *config, lc_config *out)
{
    lc_config c = {.wtype = LC_W_F32, .kv_k = -1, .kv_v = -1, .flash_attn = 0, .extra_bufts = 1};
    char buf[128];
    if (config && strlen(config) >= sizeof buf)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: options '%.32s...' too long", config);
    snprintf(buf, sizeof buf, "%s", config ? config : "");
    int first = 1;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save), first = 0) {
        int w = -1;
        for (int i = 0; first && i < LC_W_COUNT; i++)
            if (!strcmp(t, k_wtypes[i].name))
                w = i;
        if (w >= 0)
            c.wtype = (lc_wtype)w;
        else if (!strncmp(t, "kv=", 3) || !strncmp(t, "k=", 2) || !strncmp(t, "v=", 2)) {
            const char *v = strchr(t, '=') + 1;
            int ty = kv_parse(v);
            if (ty < 0)
                return gf_error_set(GF_E_INVALID_ARG,
                                    "llamacpp: '%s' in 'llamacpp:%s': a KV cache type is f32, f16, q8_0 or q4_0", t,
                                    config);
            if (t[0] != 'v')
                c.kv_k = ty;
            if (t[0] != 'k' || t[1] == 'v')
                c.kv_v = ty;
        } else if (!strcmp(t, "fa=on"))
            c.flash_attn = 1;
        else if (!strcmp(t, "fa=off"))
            c.flash_attn = 0;
        else if (!strcmp(t, "repack=on"))
            c.extra_bufts = 1;
        else if (!strcmp(t, "repack=off"))
            c.extra_bufts = 0;
        else if (!strncmp(t, "batch=", 6) || !strncmp(t, "ubatch=", 7)) {
            const char *v = strchr(t, '=') + 1;
            char *end = NULL;
            long n = strtol(v, &end, 10);
            if (!v[0] || *end || n < 1 || n > 1 << 20)
                return gf_error_set(GF_E_INVALID_ARG, "llamacpp: '%s' in 'llamacpp:%s': a count 1..1048576", t, config);
            *(t[0] == 'b' ? &c.n_batch : &c.n_ubatch) = (int32_t)n;
        } else
            return gf_error_set(
                GF_E_INVALID_ARG,
                "llamacpp: unknown option '%s' in 'llamacpp:%s' (weights f32|f16|q8_0|q6_k|q5_k_m|q4_k_m|q4_0 first, "
                "then kv=T, k=T, v=T (T: f32|f16|q8_0|q4_0), fa=on|off, repack=on|off, batch=N, "
                "ubatch=N)",
                t, config);
    }
    const int kv_default = c.wtype != LC_W_F32 ? LC_KV_F16 : LC_KV_F32;
    if (c.kv_k < 0)
        c.kv_k = kv_default;
    if (c.kv_v < 0)
        c.kv_v = kv_default;
    if (c.kv_v >= LC_KV_Q8_0 && !c.flash_attn) /* llama_init_from_model would refuse every context */
        return gf_error_set(GF_E_INVALID_ARG,
                            "llamacpp: a %s V cache in 'llamacpp:%s' needs fa=on (llama.cpp: quantized V cache "
                            "requires flash_attn)",
                            lc_kvtype_name(c.kv_v), config);
    if (c.n_batch && c.n_ubatch > c.n_batch)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: ubatch=%d in 'llamacpp:%s' is more than batch=%d", c.n_ubatch,
                            config, c.n_batch);
    *out = c;
    return GF_OK;
}

/* ---- model and caches ---- */

typedef struct lc_model {
    struct llama_model *lm;
    gf_model_config cfg;
    lc_config conf;
    int threads;
    struct llama_context *scratch; /* uncached forward */
    int32_t scratch_rows, scratch_len;
} lc_model;

/* A slot of a row: padding (never decoded), a key llama.cpp holds, or a key
 * it held until a later mask dropped it (removed with llama_memory_seq_rm). */
enum { LC_PAD = 0, LC_HELD = 1, LC_EVICTED = 2 };

typedef struct lc_cache {
    lc_model *m;
    struct llama_context *ctx;
    int32_t B, max_len, length;
    uint8_t *state; /* (B, max_len) LC_PAD, LC_HELD or LC_EVICTED */
    int32_t *pos;   /* (B, max_len) position a held / evicted key was decoded at */
    /* per-call scratch, (B, max_len) */
    int32_t *out_idx; /* batch index of each new slot's logits, -1 none */
} lc_cache;

static int clamp_threads(const gf_backend_options *opts) { return opts && opts->threads > 0 ? opts->threads : 1; }

static gf_status lc_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    pthread_once(&g_once, lc_init_once);
    if (ggml_backend_dev_count() < 1) {
        if (why && why_len)
            snprintf(why, why_len, "llama.cpp found no ggml device (no CPU backend loaded)");
        return GF_E_UNAVAILABLE;
    }
    return GF_OK;
}

/* The CPU kernel path these options run (for info's cpu_path and detail):
 * ggml's extra buffer types of the CPU device (AMX, CPU_REPACK, ...) take the
 * weights they have kernels for when use_extra_bufts is on; here that is AMX
 * for q8_0 when the AMX type is registered (the CPU has AMX), CPU_REPACK for
 * q8_0 only on ARM (NEON; on x86 it repacks q4_0 / q4_K / iq4_nl, none of
 * which this backend makes), and plain ggml kernels otherwise. The ISA word
 * is the best of ggml's CPU features as llama_print_system_info lists them. */
static void cpu_path_of(const lc_config *c, char *path, size_t path_len, char *bufts, size_t bufts_len)
{
    int amx = 0, repack = 0;
    bufts[0] = '\0';
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    ggml_backend_reg_t reg = dev ? ggml_backend_dev_backend_reg(dev) : NULL;
    ggml_backend_dev_get_extra_bufts_t get =
        reg ? (ggml_backend_dev_get_extra_bufts_t)ggml_backend_reg_get_proc_address(reg,
                                                                                    "ggml_backend_dev_get_extra_bufts")
            : NULL;
    for (ggml_backend_buffer_type_t *b = get ? get(dev) : NULL; b && *b; b++) {
        const char *nm = ggml_backend_buft_name(*b);
        size_t n = strlen(bufts);
        snprintf(bufts + n, bufts_len - n, "%s%s", n ? ", " : "", nm);
        amx |= strstr(nm, "AMX") != NULL;
        repack |= strstr(nm, "REPACK") != NULL;
    }
    const char *info = llama_print_system_info();
    static const char *const isas[] = {"AMX_INT8", "AVX512", "AVX2", "AVX", "SSE3", "SVE", "NEON", NULL};
    const char *isa = "generic";
    for (int i = 0; isas[i]; i++) {
        char want[32];
        snprintf(want, sizeof want, " %s = 1", isas[i]);
        if (strstr(info, want)) {
            isa = isas[i];
            break;
        }
    }
    int neon = strstr(info, " NEON = 1") != NULL;
    const char *kind = "plain";
    if (c->extra_bufts && c->wtype == LC_W_Q8_0 && amx)
        kind = "AMX";
    else if (c->extra_bufts && c->wtype == LC_W_Q8_0 && repack && neon)
        kind = "repack";
    snprintf(path, path_len, "%s (%s%s)", kind, isa, c->extra_bufts ? "" : ", repack=off");
}

static gf_status lc_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    static char library[256], detail[768], path[96], bufts[160], kv[32];
    lc_config c;
    gf_status st = lc_config_parse(opts ? opts->config : NULL, &c);
    if (st != GF_OK)
        return st;
    lc_kv_desc(&c, kv, sizeof kv);
    pthread_once(&g_once, lc_init_once);
    snprintf(library, sizeof library, "%s; ggml %s", GF_LLAMACPP_PROVENANCE, ggml_version());
    cpu_path_of(&c, path, sizeof path, bufts, sizeof bufts);
    char nb[24] = "all", nub[24] = "512";
    if (c.n_batch)
        snprintf(nb, sizeof nb, "%d", c.n_batch);
    if (c.n_ubatch)
        snprintf(nub, sizeof nub, "%d", c.n_ubatch);
    snprintf(detail, sizeof detail,
             "weights %s, kv %s, flash attention %s, batch %s, ubatch %s; kernel path %s, extra buffer types %s; %s",
             lc_wtype_name(c.wtype), kv, c.flash_attn ? "on" : "off", nb, nub, path,
             !c.extra_bufts ? "off (repack=off)"
             : bufts[0]     ? bufts
                            : "none here",
             llama_print_system_info());
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    /* F32 only when nothing is stored in a narrower type */
    info->dtype = c.wtype == LC_W_F32 && c.kv_k == LC_KV_F32 && c.kv_v == LC_KV_F32 ? GF_COMPUTE_F32 : GF_COMPUTE_F16;
    info->threads = clamp_threads(opts);
    info->library = library;
    info->detail = detail;
    /* what the statistical tier keys its thresholds on (docs/cases.md) */
    info->weights = lc_wtype_name(c.wtype);
    info->kv_cache = kv;
    info->cpu_path = path;
    /* every mechanism through the GGUF it converts to, but the MLPs its gpt2
     * graph lacks (it hard-codes the tanh GELU: lc_check_desc refuses erf
     * GELU and ReLU); a declared probe it refused would be a finding */
    info->probes = "all,-gelu_erf,-relu,-rope_dynamic"; /* and no rope scaling but linear / llama3 */
    /* llama.cpp promises no bitwise invariance on any axis: genfence holds it
     * to the gate on every one, and what it is here is a finding
     * (docs/llamacpp.md, "Invariance") */
    info->invariance = "all=gated";
    return gf_backend_info_put(info_out, info);
}

/* A llama_context freed, and the heap's free pages handed back: a context's
 * KV and compute buffers are tens of MiB, and glibc keeps freed chunks
 * below its (dynamic) mmap threshold in the heap, resident, where contexts
 * of other sizes made later do not always fit. bench's process on
 * gpt2-small peaked at 1.13x to 1.21x the weights, run to run, for the same
 * live memory without this. */
static void ctx_free(struct llama_context *ctx)
{
    if (!ctx)
        return;
    llama_free(ctx);
#ifdef __GLIBC__
    malloc_trim(0);
#endif
}

/* The uncached forwards' context let go: grown anew, or a cache about to be
 * made (lc_cache_create) */
static void scratch_drop(lc_model *m)
{
    ctx_free(m->scratch);
    m->scratch = NULL;
}

static void lc_model_free(void *handle)
{
    lc_model *m = handle;
    if (!m)
        return;
    scratch_drop(m);
    if (m->lm)
        llama_model_free(m->lm);
    free(m);
}

static gf_status temp_path(char *path, size_t len)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, len, "%s/genfence-llamacpp-XXXXXX", dir && dir[0] ? dir : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0)
        return gf_error_set(GF_E_IO, "llamacpp: cannot create a temporary file %s", path);
    close(fd);
    return GF_OK;
}

static gf_status lc_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    pthread_once(&g_once, lc_init_once);
    lc_config conf;
    gf_status st = lc_config_parse(opts ? opts->config : NULL, &conf);
    if (st != GF_OK)
        return st;
    st = lc_check_desc(desc);
    if (st != GF_OK)
        return st;
    lc_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory");
    m->cfg = desc->config;
    m->conf = conf;
    m->threads = clamp_threads(opts);
    char f32_path[512] = "", q_path[512] = "";
    st = temp_path(f32_path, sizeof f32_path);
    if (st == GF_OK)
        st = lc_gguf_write(desc, f32_path);
    const char *load_path = f32_path;
    if (st == GF_OK && conf.wtype != LC_W_F32) {
        st = temp_path(q_path, sizeof q_path);
        if (st == GF_OK) {
            struct llama_model_quantize_params qp = llama_model_quantize_default_params();
            qp.nthread = m->threads;
            qp.ftype = k_wtypes[conf.wtype].ftype;
            t_llama_err[0] = '\0';
            if (llama_model_quantize(f32_path, q_path, &qp) != 0)
                st = gf_error_set(GF_E_BACKEND, "llamacpp: llama_model_quantize to %s failed: %s",
                                  lc_wtype_name(conf.wtype), t_llama_err);
            load_path = q_path;
        }
    }
    if (st == GF_OK) {
        struct llama_model_params mp = llama_model_default_params();
        mp.n_gpu_layers = 0;
        mp.load_mode = LLAMA_LOAD_MODE_NONE;        /* read into memory: the file is removed below */
        mp.use_extra_bufts = conf.extra_bufts != 0; /* repack=off: AMX and repacked kernels off */
        t_llama_err[0] = '\0';
        m->lm = llama_model_load_from_file(load_path, mp);
        if (!m->lm)
            st = gf_error_set(GF_E_BACKEND, "llamacpp: llama.cpp refused the converted model: %s",
                              t_llama_err[0] ? t_llama_err : "(no message)");
    }
    if (f32_path[0])
        unlink(f32_path);
    if (q_path[0])
        unlink(q_path);
    if (st == GF_OK && llama_vocab_n_tokens(llama_model_get_vocab(m->lm)) != m->cfg.vocab_size)
        st = gf_error_set(GF_E_BACKEND, "llamacpp: llama.cpp's vocabulary has %d tokens, the model %d",
                          llama_vocab_n_tokens(llama_model_get_vocab(m->lm)), m->cfg.vocab_size);
    if (st != GF_OK) {
        lc_model_free(m);
        return st;
    }
    *model_out = m;
    return GF_OK;
}

/* A llama_context for `rows` sequences of up to `len` positions each, plus
 * the spare sequence `rows` for padding queries. The cells are rows x len,
 * no spare cell: a padding query is decoded (pad_logits) only in a row that
 * holds no real key before it, so that row holds at most len - 1 cells and
 * one is free. llama.cpp pads the count to 256, so a spare cell on a count
 * already a multiple (B = 8 rows of 32: 256) doubled the K and V. */
static gf_status context_new(lc_model *m, int32_t rows, int32_t len, struct llama_context **out)
{
    struct llama_context_params cp = llama_context_default_params();
    uint32_t cells = (uint32_t)rows * (uint32_t)len;
    cp.n_ctx = cells;
    uint32_t nb = m->conf.n_batch > 0 ? (uint32_t)m->conf.n_batch : cells;
    uint32_t nub = m->conf.n_ubatch > 0 ? (uint32_t)m->conf.n_ubatch : 512;
    cp.n_batch = nb < cells ? nb : cells;
    cp.n_ubatch = nub < cp.n_batch ? nub : cp.n_batch;
    cp.n_seq_max = (uint32_t)rows + 1;
    cp.n_threads = m->threads;
    cp.n_threads_batch = m->threads;
    cp.type_k = kv_ggml(m->conf.kv_k);
    cp.type_v = kv_ggml(m->conf.kv_v);
    cp.flash_attn_type = m->conf.flash_attn ? LLAMA_FLASH_ATTN_TYPE_ENABLED : LLAMA_FLASH_ATTN_TYPE_DISABLED;
    cp.kv_unified = true;
    cp.no_perf = true;
    cp.embeddings = false;
    cp.offload_kqv = false;
    cp.cb_eval = lc_trace_eval; /* asks for nothing unless a traced decode runs (lc_trace.c) */
    cp.cb_eval_user_data = NULL;
    t_llama_err[0] = '\0';
    *out = llama_init_from_model(m->lm, cp);
    if (!*out)
        return gf_error_set(GF_E_BACKEND, "llamacpp: llama_init_from_model (%d sequences, %u cells) failed: %s",
                            rows + 1, cells, t_llama_err[0] ? t_llama_err : "(no message)");
    return GF_OK;
}

static void cache_state_free(lc_cache *c)
{
    free(c->state);
    free(c->pos);
    free(c->out_idx);
    c->state = NULL;
    c->pos = c->out_idx = NULL;
}

static gf_status cache_state_init(lc_cache *c, int32_t B, int32_t max_len)
{
    c->B = B;
    c->max_len = max_len;
    c->length = 0;
    c->state = calloc((size_t)B * max_len, 1);
    c->pos = calloc((size_t)B * max_len, sizeof *c->pos);
    c->out_idx = malloc((size_t)B * max_len * sizeof *c->out_idx);
    if (!c->state || !c->pos || !c->out_idx) {
        cache_state_free(c);
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory for the cache");
    }
    return GF_OK;
}

static void lc_cache_free(void *cache)
{
    lc_cache *c = cache;
    if (!c)
        return;
    ctx_free(c->ctx);
    cache_state_free(c);
    free(c);
}

static gf_status lc_cache_create(void *model, int32_t batch, int32_t max_len, void **cache_out)
{
    *cache_out = NULL;
    lc_model *m = model;
    if (batch < 1 || max_len < 1 || max_len > m->cfg.n_positions)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: cache batch %d, max_len %d (must be 1..%d)", batch, max_len,
                            m->cfg.n_positions);
    lc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory");
    c->m = m;
    /* the uncached forwards' context is a speed cache, not a cache's memory:
     * released before a cache's own is made, so the two are never both held
     * (an uncached forward after this makes it again, once, at the size it
     * had grown to) */
    scratch_drop(m);
    gf_status st = cache_state_init(c, batch, max_len);
    if (st == GF_OK)
        st = context_new(m, batch, max_len, &c->ctx);
    if (st != GF_OK) {
        lc_cache_free(c);
        return st;
    }
    *cache_out = c;
    return GF_OK;
}

static gf_status lc_cache_reset(void *cache)
{
    lc_cache *c = cache;
    llama_memory_clear(llama_get_memory(c->ctx), true);
    c->length = 0;
    memset(c->state, LC_PAD, (size_t)c->B * c->max_len);
    return GF_OK;
}

static int32_t lc_cache_length(const void *cache) { return ((const lc_cache *)cache)->length; }

static size_t lc_cache_bytes(const void *cache)
{
    const lc_cache *c = cache;
    const gf_model_config *g = &c->m->cfg;
    /* llama.cpp's K and V: n_ctx cells (padded to 256) of H_kv d_head each, per layer, in their ggml type's row size */
    size_t kv_dim = g->arch == GF_ARCH_LLAMA ? (size_t)g->n_kv_head * g->d_head : (size_t)g->n_embd;
    size_t per_cell = ggml_row_size(kv_ggml(c->m->conf.kv_k), (int64_t)kv_dim) +
                      ggml_row_size(kv_ggml(c->m->conf.kv_v), (int64_t)kv_dim);
    return (size_t)g->n_layer * llama_n_ctx(c->ctx) * per_cell;
}

/* ---- forward ---- */

static gf_status check_batch(const lc_model *m, const lc_cache *c, const gf_batch *in)
{
    if (!in || in->B < 1 || in->T < 1 || !in->tokens || !in->position_ids)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: batch needs B >= 1, T >= 1, tokens and position_ids");
    if (c->B != in->B)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: batch has %d rows, cache has %d", in->B, c->B);
    if (c->length + in->T > c->max_len)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "llamacpp: cache holds %d of %d positions; %d more do not fit",
                            c->length, c->max_len, in->T);
    for (int64_t i = 0; i < (int64_t)in->B * in->T; i++) {
        if (in->tokens[i] < 0 || in->tokens[i] >= m->cfg.vocab_size)
            return gf_error_set(GF_E_INVALID_ARG, "llamacpp: token %d at (%lld, %lld) outside [0, %d)", in->tokens[i],
                                (long long)(i / in->T), (long long)(i % in->T), m->cfg.vocab_size);
        if (in->position_ids[i] < 0 || in->position_ids[i] >= m->cfg.n_positions)
            return gf_error_set(GF_E_INVALID_ARG, "llamacpp: position %d at (%lld, %lld) outside [0, %d)",
                                in->position_ids[i], (long long)(i / in->T), (long long)(i % in->T),
                                m->cfg.n_positions);
    }
    return GF_OK;
}

static const char *decode_meaning(int32_t rc)
{
    switch (rc) {
    case 1: return "no KV slot for the batch";
    case 2: return "aborted";
    case -1: return "invalid input batch";
    default: return rc < -1 ? "fatal error" : "warning";
    }
}

/* Logits of token `tok` alone at position `pos` (a padding query that sees
 * only its own key), decoded in the spare sequence c->B and removed again. */
static gf_status pad_logits(lc_cache *c, int32_t tok, int32_t pos, float *out)
{
    const int32_t V = c->m->cfg.vocab_size;
    llama_memory_t mem = llama_get_memory(c->ctx);
    llama_seq_id spare = c->B;
    llama_memory_seq_rm(mem, spare, -1, -1);
    struct llama_batch one = llama_batch_init(1, 0, 1);
    one.n_tokens = 1;
    one.token[0] = tok;
    one.pos[0] = pos;
    one.n_seq_id[0] = 1;
    one.seq_id[0][0] = spare;
    one.logits[0] = 1;
    t_llama_err[0] = '\0';
    int32_t rc = llama_decode(c->ctx, one);
    llama_batch_free(one);
    gf_status st = GF_OK;
    if (rc != 0)
        st = gf_error_set(GF_E_BACKEND, "llamacpp: llama_decode of a padding query returned %d (%s): %s", rc,
                          decode_meaning(rc), t_llama_err);
    else {
        const float *lg = llama_get_logits_ith(c->ctx, 0);
        if (!lg)
            st = gf_error_set(GF_E_BACKEND, "llamacpp: no logits for a padding query");
        else
            memcpy(out, lg, (size_t)V * sizeof *out);
    }
    llama_memory_seq_rm(mem, spare, -1, -1);
    return st;
}

/* The contract checks llama.cpp cannot meet otherwise (nothing is changed
 * until all rows pass), then the evictions (a held key the mask now pads is
 * removed from its sequence: sliding windows), then one llama_decode of every
 * real new token, then the padding queries whose logits are wanted. */
static gf_status run_forward(lc_cache *c, const gf_batch *in, float *logits_out, const gf_trace_request *req)
{
    const int32_t B = in->B, T = in->T, start = c->length, Tk = start + T, S = c->max_len;
    const int32_t V = c->m->cfg.vocab_size;
    const int all = in->logits_mode == GF_LOGITS_ALL;
#define KEY(b, j) (!in->key_mask || in->key_mask[(size_t)(b)*Tk + (j)])
    int32_t n_real = 0;
    for (int32_t b = 0; b < B; b++) {
        /* llama.cpp's view of the row after the evictions: the largest
         * position it still holds (-1: none), which the next must follow */
        int32_t last = -1, any_real = 0;
        for (int32_t j = 0; j < start; j++) {
            uint8_t sj = c->state[(size_t)b * S + j];
            if (KEY(b, j) && sj != LC_HELD)
                return gf_error_set(GF_E_UNSUPPORTED,
                                    "llamacpp: row %d key %d is masked real but was %s; llama.cpp's cache cannot "
                                    "add a key to a sequence after the fact",
                                    b, j, sj == LC_PAD ? "padding when decoded" : "evicted by an earlier mask");
            if (KEY(b, j)) {
                any_real = 1;
                if (c->pos[(size_t)b * S + j] > last)
                    last = c->pos[(size_t)b * S + j];
            }
        }
        for (int32_t t = 0; t < T; t++) {
            int32_t p = in->position_ids[(size_t)b * T + t];
            int wanted = all || t == T - 1;
            if (KEY(b, start + t)) {
                if (last >= 0 && p != last + 1)
                    return gf_error_set(GF_E_UNSUPPORTED,
                                        "llamacpp: row %d key %d has position %d after %d; llama.cpp requires a "
                                        "sequence's positions to be consecutive",
                                        b, start + t, p, last);
                last = p;
                any_real = 1;
                n_real++;
            } else if (wanted && any_real) {
                return gf_error_set(GF_E_UNSUPPORTED,
                                    "llamacpp: logits of row %d's padding query %d, which has a real key before it: "
                                    "llama.cpp never decodes a key the mask pads",
                                    b, start + t);
            }
        }
    }
    /* evictions: held keys the mask now pads */
    llama_memory_t mem = llama_get_memory(c->ctx);
    for (int32_t b = 0; b < B; b++)
        for (int32_t j = 0; j < start; j++)
            if (!KEY(b, j) && c->state[(size_t)b * S + j] == LC_HELD) {
                llama_pos p = c->pos[(size_t)b * S + j];
                if (!llama_memory_seq_rm(mem, b, p, p + 1))
                    return gf_error_set(GF_E_BACKEND, "llamacpp: llama_memory_seq_rm of row %d position %d refused", b,
                                        (int)p);
                c->state[(size_t)b * S + j] = LC_EVICTED;
            }
    gf_status st = GF_OK;
    float *stash = NULL; /* (n_real, V): the logits of a forward decoded batch=N tokens at a time */
    if (n_real > 0) {
        struct llama_batch lb = llama_batch_init(n_real, 0, 1);
        int32_t *trow = req ? malloc((size_t)n_real * 2 * sizeof *trow) : NULL; /* (n_real) row | position */
        if (req && !trow) {
            llama_batch_free(lb);
            return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory for the trace's token map");
        }
        int32_t n = 0;
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++) {
                c->out_idx[(size_t)b * T + t] = -1;
                if (!KEY(b, start + t))
                    continue;
                /* traced: every token's output, so llama.cpp keeps every row to the end (no inp_out_ids) */
                int wanted = all || t == T - 1 || req;
                if (trow) {
                    trow[n] = b;
                    trow[n_real + n] = t;
                }
                lb.token[n] = in->tokens[(size_t)b * T + t];
                lb.pos[n] = in->position_ids[(size_t)b * T + t];
                lb.n_seq_id[n] = 1;
                lb.seq_id[n][0] = b;
                lb.logits[n] = (int8_t)wanted;
                if (wanted)
                    c->out_idx[(size_t)b * T + t] = n;
                n++;
            }
        lb.n_tokens = n;
        t_llama_err[0] = '\0';
        lc_trace tr = {0};
        if (req && (st = lc_trace_begin(&tr, req, c->m->cfg.n_layer, c->m->cfg.n_embd, c->m->cfg.arch == GF_ARCH_GPT2,
                                        n, trow, trow + n_real)) != GF_OK) {
            free(trow);
            llama_batch_free(lb);
            return st;
        }
        const int32_t nb = c->m->conf.n_batch;
        int32_t rc = 0;
        if (nb > 0 && n > nb && !req) { /* batch=N: N tokens a decode, each piece's logits kept */
            stash = malloc((size_t)n * (size_t)V * sizeof *stash);
            if (!stash) {
                free(trow);
                llama_batch_free(lb);
                return gf_error_set(GF_E_NOMEM, "llamacpp: out of memory for %d rows of logits", n);
            }
            for (int32_t off = 0; rc == 0 && off < n; off += nb) {
                struct llama_batch piece = lb;
                piece.n_tokens = n - off < nb ? n - off : nb;
                piece.token += off;
                piece.pos += off;
                piece.n_seq_id += off;
                piece.seq_id += off;
                piece.logits += off;
                rc = llama_decode(c->ctx, piece);
                for (int32_t i = 0; rc == 0 && i < piece.n_tokens; i++) {
                    const float *lg = piece.logits[i] ? llama_get_logits_ith(c->ctx, i) : NULL;
                    if (lg)
                        memcpy(stash + (size_t)(off + i) * V, lg, (size_t)V * sizeof *stash);
                }
            }
        } else if (nb > 0 && n > nb) {
            rc = -100; /* a traced forward is one decode: the trace maps one decode's tensors */
        } else {
            rc = llama_decode(c->ctx, lb);
        }
        if (rc == -100) {
            free(trow);
            llama_batch_free(lb);
            return gf_error_set(GF_E_UNSUPPORTED, "llamacpp: a traced forward of %d tokens with batch=%d", n, nb);
        }
        if (req) {
            if (rc == 0)
                lc_trace_finish(&tr);
            lc_trace_end(&tr);
        }
        free(trow);
        llama_batch_free(lb);
        if (rc != 0) {
            free(stash);
            return gf_error_set(GF_E_BACKEND, "llamacpp: llama_decode of %d tokens returned %d (%s): %s", n, rc,
                                decode_meaning(rc), t_llama_err);
        }
    } else {
        for (size_t i = 0; i < (size_t)B * T; i++)
            c->out_idx[i] = -1;
    }
    /* the decoded tokens' logits first: a padding query's decode replaces them */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t b = 0; st == GF_OK && b < B; b++)
            for (int32_t t = 0; st == GF_OK && t < T; t++) {
                int wanted = all || t == T - 1;
                int32_t idx = wanted ? c->out_idx[(size_t)b * T + t] : -1;
                if (!wanted || (pass == 0) != (idx >= 0))
                    continue;
                float *dst = logits_out + (all ? (size_t)b * T + t : (size_t)b) * V;
                if (idx >= 0) {
                    const float *lg = stash ? stash + (size_t)idx * V : llama_get_logits_ith(c->ctx, idx);
                    if (!lg)
                        st = gf_error_set(GF_E_BACKEND, "llamacpp: no logits for row %d position %d", b, start + t);
                    else
                        memcpy(dst, lg, (size_t)V * sizeof *dst);
                } else if (t > 0 && all && !KEY(b, start + t - 1) &&
                           in->tokens[(size_t)b * T + t] == in->tokens[(size_t)b * T + t - 1] &&
                           in->position_ids[(size_t)b * T + t] == in->position_ids[(size_t)b * T + t - 1]) {
                    memcpy(dst, dst - V, (size_t)V * sizeof *dst); /* same token alone at the same position */
                } else {
                    st = pad_logits(c, in->tokens[(size_t)b * T + t], in->position_ids[(size_t)b * T + t], dst);
                }
            }
    /* the real keys are in llama.cpp's cache whatever happened after the decode */
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = 0; t < T; t++)
            if (KEY(b, start + t)) {
                c->state[(size_t)b * S + start + t] = LC_HELD;
                c->pos[(size_t)b * S + start + t] = in->position_ids[(size_t)b * T + t];
            }
    free(stash);
    c->length = Tk;
#undef KEY
    return st;
}

static gf_status lc_forward_any(void *model, void *cache, const gf_batch *in, float *logits_out,
                                const gf_trace_request *req)
{
    lc_model *m = model;
    if (cache) {
        gf_status st = check_batch(m, cache, in);
        return st != GF_OK ? st : run_forward(cache, in, logits_out, req);
    }
    /* uncached: the scratch context, cleared, as a cache of exactly T positions */
    if (!in || in->B < 1 || in->T < 1)
        return gf_error_set(GF_E_INVALID_ARG, "llamacpp: batch needs B >= 1, T >= 1, tokens and position_ids");
    if (in->T > m->cfg.n_positions)
        return gf_error_set(GF_E_CONTEXT_LIMIT, "llamacpp: %d positions exceed n_positions %d", in->T,
                            m->cfg.n_positions);
    if (m->scratch && (m->scratch_rows < in->B || (int64_t)m->scratch_rows * m->scratch_len < (int64_t)in->B * in->T))
        scratch_drop(m);
    gf_status st = GF_OK;
    if (!m->scratch) {
        /* grown geometrically: an uncached generation asks for T + 1 each step */
        int32_t rows = in->B > m->scratch_rows ? in->B : m->scratch_rows;
        int32_t len = m->scratch_len;
        while ((int64_t)rows * len < (int64_t)in->B * in->T)
            len = len < 16 ? 16 : 2 * len;
        if (len > m->cfg.n_positions)
            len = m->cfg.n_positions;
        if (len < in->T)
            len = in->T;
        st = context_new(m, rows, len, &m->scratch);
        if (st != GF_OK)
            return st;
        m->scratch_rows = rows;
        m->scratch_len = len;
    }
    llama_memory_clear(llama_get_memory(m->scratch), true);
    lc_cache local = {.m = m, .ctx = m->scratch};
    st = cache_state_init(&local, in->B, in->T);
    if (st != GF_OK)
        return st;
    /* rows are sequences 0..B-1, the spare is B: all < scratch_rows + 1 */
    st = check_batch(m, &local, in);
    if (st == GF_OK)
        st = run_forward(&local, in, logits_out, req);
    cache_state_free(&local);
    llama_memory_clear(llama_get_memory(m->scratch), true);
    return st;
}

static gf_status lc_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return lc_forward_any(model, cache, in, logits_out, NULL);
}

static gf_status lc_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    return lc_forward_any(model, cache, in, logits_out, req);
}

/* The module's own last message (its copy of status.c), which quotes
 * llama.cpp's logged error where there was one. */
static const char *lc_last_error(void *model)
{
    (void)model;
    return gf_error_msg();
}

static const gf_backend_ops k_llamacpp_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "llamacpp",
    .description = "llama.cpp's C API (llama_decode over a GGUF converted at load): f32, f16, q8_0 weights",
    .probe = lc_probe,
    .info = lc_info,
    .model_load = lc_model_load,
    .model_free = lc_model_free,
    .cache_create = lc_cache_create,
    .cache_reset = lc_cache_reset,
    .cache_free = lc_cache_free,
    .cache_length = lc_cache_length,
    .cache_bytes = lc_cache_bytes,
    .forward = lc_forward,
    .sample = lc_sample,
    .last_error = lc_last_error,
    .sample_profiles = lc_sample_profiles, /* lc_sample.c: the llamacpp profile */
    .sample_ex = lc_sample_ex,
    .forward_trace = lc_forward_trace, /* lc_trace.c: ggml's graph callback */
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_llamacpp_ops; }
