/* OpenBLAS backend: the shared F32 forward (backends/host_forward) with every dense
 * product done by Debian's OpenBLAS.
 *
 * Single rows (decode, and the LM head of GF_LOGITS_LAST with B = 1) use
 * sgemv: OpenBLAS 0.3.21's sgemm with m = 1 is several times slower than its
 * sgemv here. Several rows (prefill, batched decode, GF_LOGITS_ALL) use
 * sgemm. Weights stay in the layouts backends/host_forward keeps: GPT-2's Conv1D
 * (K, N) [in, out] (transposed sgemv, plain sgemm) and, for the Llama family,
 * nn.Linear (N, K) [out, in] (plain sgemv, sgemm with B transposed) for q,
 * k, v, o, gate, up, down and the LM head (GPT-2's too: its embedding). The bias is copied
 * into y first and the product accumulated onto it (beta = 1).
 *
 * Threads: openblas_set_num_threads(options->threads) before each forward
 * (the setting is process-wide; OpenBLAS itself keeps small products on one
 * thread). Built as a module loaded at run time: genfence itself never links
 * OpenBLAS.
 *
 * Options: `openblas:coretype=NAME` runs OpenBLAS's kernels for core NAME
 * (its OPENBLAS_CORETYPE override: Haswell, SkylakeX, Zen, ...). OpenBLAS
 * picks its core once, when the library loads, so the module does not link
 * it: it dlopens it at the first call that has the options (info, model_load;
 * never probe, which has none), with OPENBLAS_CORETYPE set to NAME for that
 * dlopen. Every (case, backend) runs in its own child, so two configs in one
 * run each get their core. NAME is refused (GF_E_INVALID_ARG, the valid names
 * listed) when this OpenBLAS has no kernels for it (no gotoblas_NAME table)
 * or runs another core for it (not supported by this CPU); a second core in
 * one process (--in-process) is refused too. */
#include <cblas.h>
#include <ctype.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gfv.h"

#define GF_EXPORT __attribute__((visibility("default")))

/* the runtime library's soname (what the module's DT_NEEDED was when it
 * linked OpenBLAS; Debian's alternatives point it at the pthread build) */
#define GF_OPENBLAS_SONAME "libopenblas.so.0"

/* ---- OpenBLAS, loaded at first use ---- */

static struct {
    void *h;
    char core[32]; /* the coretype it was loaded for ("" = OpenBLAS's own choice) */
    void (*sgemm)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const enum CBLAS_TRANSPOSE, const blasint,
                  const blasint, const blasint, const float, const float *, const blasint, const float *, const blasint,
                  const float, float *, const blasint);
    void (*sgemv)(const enum CBLAS_ORDER, const enum CBLAS_TRANSPOSE, const blasint, const blasint, const float,
                  const float *, const blasint, const float *, const blasint, const float, float *, const blasint);
    char *(*get_config)(void);
    char *(*get_corename)(void);
    int (*get_num_procs)(void);
    int (*get_num_threads)(void);
    void (*set_num_threads)(int);
} g_ob;

/* OpenBLAS's x86-64 core names (its dynamic.c corename table), as
 * OPENBLAS_CORETYPE takes them; a name is valid here when this library has
 * its kernel table (gotoblas_UPPERCASE). */
static const char *const k_cores[] = {
    "Katmai",      "Coppermine",  "Northwood",    "Prescott",   "Banias",         "Atom",         "Core2",
    "Penryn",      "Dunnington",  "Nehalem",      "Athlon",     "Opteron",        "Opteron_SSE3", "Barcelona",
    "Nano",        "Sandybridge", "Bobcat",       "Bulldozer",  "Piledriver",     "Haswell",      "Steamroller",
    "Excavator",   "Zen",         "SkylakeX",     "Cooperlake", "SapphireRapids", "Neoverse_N1",  "Neoverse_V1",
    "Neoverse_N2", "ThunderX",    "ThunderX2T99", "TSV110",     "Cortex_A57",     "Cortex_A72",   "Cortex_A73",
    "Falkor",      "Emag8180",    "A64FX",        "Power8",     "Power9",         "Power10",      NULL};

static int core_has_kernels(void *h, const char *name)
{
    char sym[64] = "gotoblas_";
    size_t n = strlen(sym);
    for (const char *p = name; *p && n + 1 < sizeof sym; p++)
        sym[n++] = (char)toupper((unsigned char)*p);
    sym[n] = '\0';
    return dlsym(h, sym) != NULL;
}

/* "Haswell, SkylakeX, Zen, ..." : the names this library has kernels for */
static void valid_cores(void *h, char *buf, size_t cap)
{
    buf[0] = '\0';
    for (int i = 0; k_cores[i]; i++)
        if (!h || core_has_kernels(h, k_cores[i])) {
            size_t n = strlen(buf);
            snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", k_cores[i]);
        }
}

/* The options: "" / NULL, or coretype=NAME. */
static gf_status ob_config(const gf_backend_options *opts, char *core, size_t cap)
{
    core[0] = '\0';
    const char *cfg = opts ? opts->config : NULL;
    if (!cfg || !cfg[0])
        return GF_OK;
    if (strncmp(cfg, "coretype=", 9) || !cfg[9] || strchr(cfg, ','))
        return gf_error_set(GF_E_INVALID_ARG,
                            "openblas: unknown option in 'openblas:%s' (the one option is coretype=NAME)", cfg);
    snprintf(core, cap, "%s", cfg + 9);
    return GF_OK;
}

/* Load OpenBLAS for core (""= its own choice): GF_OK, or the error recorded. */
static gf_status ob_load(const char *core)
{
    if (g_ob.h) {
        if (strcasecmp(core, g_ob.core))
            return gf_error_set(GF_E_UNAVAILABLE,
                                "openblas: OpenBLAS is loaded in this process for core '%s'; coretype '%s' needs a "
                                "process of its own (not --in-process)",
                                g_ob.core[0] ? g_ob.core : g_ob.get_corename(), core[0] ? core : "(default)");
        return GF_OK;
    }
    char *old = NULL;
    const char *prev = getenv("OPENBLAS_CORETYPE");
    if (prev)
        old = strdup(prev);
    if (core[0])
        setenv("OPENBLAS_CORETYPE", core, 1);
    void *h = dlopen(GF_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (core[0]) { /* the caller's environment as it was */
        if (old)
            setenv("OPENBLAS_CORETYPE", old, 1);
        else
            unsetenv("OPENBLAS_CORETYPE");
    }
    free(old);
    if (!h)
        return gf_error_set(GF_E_UNAVAILABLE, "openblas: cannot load %s", dlerror());
    *(void **)&g_ob.sgemm = dlsym(h, "cblas_sgemm");
    *(void **)&g_ob.sgemv = dlsym(h, "cblas_sgemv");
    *(void **)&g_ob.get_config = dlsym(h, "openblas_get_config");
    *(void **)&g_ob.get_corename = dlsym(h, "openblas_get_corename");
    *(void **)&g_ob.get_num_procs = dlsym(h, "openblas_get_num_procs");
    *(void **)&g_ob.get_num_threads = dlsym(h, "openblas_get_num_threads");
    *(void **)&g_ob.set_num_threads = dlsym(h, "openblas_set_num_threads");
    if (!g_ob.sgemm || !g_ob.sgemv || !g_ob.get_config || !g_ob.get_corename || !g_ob.get_num_procs ||
        !g_ob.get_num_threads || !g_ob.set_num_threads)
        return gf_error_set(GF_E_UNAVAILABLE, "openblas: %s lacks the cblas / openblas_* functions",
                            GF_OPENBLAS_SONAME);
    g_ob.h = h; /* never closed: its worker threads stay parked in it */
    snprintf(g_ob.core, sizeof g_ob.core, "%s", core);
    if (core[0]) {
        const char *ran = g_ob.get_corename();
        int known = 0;
        for (int i = 0; k_cores[i]; i++)
            known |= !strcasecmp(core, k_cores[i]) && core_has_kernels(h, k_cores[i]);
        if (!known || !ran || strcasecmp(ran, core)) {
            char valid[1024];
            valid_cores(h, valid, sizeof valid);
            return gf_error_set(GF_E_INVALID_ARG, "openblas: coretype '%s' %s (OpenBLAS runs core %s); valid here: %s",
                                core,
                                known ? "is not supported by this CPU" : "is not a core this OpenBLAS has kernels for",
                                ran ? ran : "?", valid);
        }
    }
    return GF_OK;
}

typedef struct ob_model {
    gfv_model base; /* first: the common slots take this pointer */
    int threads;
} ob_model;

static int clamp_threads(const gf_backend_options *opts)
{
    int t = opts && opts->threads > 0 ? opts->threads : 1;
    return t;
}

static gf_status ob_probe(char *why, size_t why_len)
{
    if (why && why_len)
        why[0] = '\0';
    /* no options here, so OpenBLAS is not loaded (that would fix its core):
     * info and model_load load it, and say unavailable when it cannot be */
    return GF_OK;
}

static gf_status ob_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    static char library[256], detail[256], path[96];
    char want[32];
    gf_status st = ob_config(opts, want, sizeof want);
    if (st == GF_OK)
        st = ob_load(want);
    if (st != GF_OK)
        return st;
    if (g_ob.get_num_procs() < 1)
        return gf_error_set(GF_E_UNAVAILABLE, "openblas: OpenBLAS reports no usable processors");
    const char *cfg = g_ob.get_config();
    const char *core = g_ob.get_corename();
    /* openblas_get_config() reads e.g. "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Zen MAX_THREADS=64" */
    snprintf(library, sizeof library, "%s", cfg ? cfg : "OpenBLAS (unknown configuration)");
    snprintf(detail, sizeof detail, "core %s%s, %d cpus; sgemv for single rows, sgemm for several", core ? core : "?",
             want[0] ? " (coretype option)" : "", g_ob.get_num_procs());
    snprintf(path, sizeof path, "%s%s", core ? core : "?", want[0] ? " (coretype)" : "");
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = GF_COMPUTE_F32;
    info->threads = clamp_threads(opts);
    info->library = library;
    info->detail = detail;
    info->cpu_path = path;
    info->model_features = GFV_MODEL_FEATURES;
    info->probes = "all"; /* every dense product through sgemm, whatever the shape */
    /* what OpenBLAS guarantees on every core type, not what one core
     * measured (cases/invariance.yaml, docs/backends.md): a single row goes
     * through sgemv, several through sgemm, and sgemm's threads split its
     * sums, so the batch size, the prefill's chunks and the thread count
     * move logits within the gate; and a row's place in a multi-row sgemm
     * (position, mixed) picks its micro-kernel by where the M blocking
     * leaves it: bitwise on the Cooperlake kernels, 9.5e-6 apart on the
     * Haswell ones (OPENBLAS_CORETYPE=Haswell on an AMD EPYC). Gated there,
     * and the kind reports how far from bitwise a core is. */
    info->invariance = "all=bitwise,batch=gated,split=gated,threads=gated,position=gated,mixed=gated";
    return gf_backend_info_put(info_out, info);
}

/* y (M, N) = x (M, K) W + b */
static gf_status ob_linear(gfv_model *base, int32_t id, const float *x, float *y, int32_t M)
{
    const gfv_lin *L = &base->lin[id];
    const int32_t K = L->K, N = L->N;
    float beta = 0.0f;
    if (L->b) {
        for (int32_t i = 0; i < M; i++)
            memcpy(y + (size_t)i * N, L->b, (size_t)N * sizeof(float));
        beta = 1.0f;
    }
    if (M == 1) {
        if (L->trans_w) /* W (N, K): y = W x */
            g_ob.sgemv(CblasRowMajor, CblasNoTrans, N, K, 1.0f, L->w, K, x, 1, beta, y, 1);
        else /* W (K, N): y = W^T x */
            g_ob.sgemv(CblasRowMajor, CblasTrans, K, N, 1.0f, L->w, N, x, 1, beta, y, 1);
    } else {
        g_ob.sgemm(CblasRowMajor, CblasNoTrans, L->trans_w ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, x, K, L->w,
                   L->trans_w ? K : N, beta, y, N);
    }
    return GF_OK;
}

static void ob_model_free(void *handle)
{
    ob_model *m = handle;
    if (!m)
        return;
    gfv_model_release(&m->base);
    free(m);
}

static gf_status ob_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    char want[32];
    gf_status st = ob_config(opts, want, sizeof want);
    if (st == GF_OK)
        st = ob_load(want);
    if (st != GF_OK)
        return st;
    ob_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "openblas: out of memory");
    st = gfv_model_init(&m->base, desc, "openblas", ob_linear);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    m->threads = clamp_threads(opts);
    *model_out = m;
    return GF_OK;
}

static gf_status ob_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    ob_model *m = model;
    if (g_ob.get_num_threads() != m->threads)
        g_ob.set_num_threads(m->threads);
    return gfv_forward(&m->base, cache, in, logits_out);
}

static gf_status ob_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    ob_model *m = model;
    if (g_ob.get_num_threads() != m->threads)
        g_ob.set_num_threads(m->threads);
    return gfv_forward_trace(&m->base, cache, in, logits_out, req);
}

static const gf_backend_ops k_openblas_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "openblas",
    .description = "OpenBLAS sgemv/sgemm for the dense products, F32 host loops for the rest",
    .probe = ob_probe,
    .info = ob_info,
    .model_load = ob_model_load,
    .model_free = ob_model_free,
    .cache_create = gfv_cache_create,
    .cache_reset = gfv_cache_reset,
    .cache_free = gfv_cache_free,
    .cache_length = gfv_cache_length,
    .cache_bytes = gfv_cache_bytes,
    .forward = ob_forward,
    .sample = NULL,
    .last_error = gfv_last_error,
    .forward_trace = ob_forward_trace,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_openblas_ops; }
