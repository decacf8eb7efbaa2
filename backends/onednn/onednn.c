/* oneDNN backend: the shared F32 forward (backends/host_forward) with every dense
 * product done by a oneDNN 2.x matmul primitive (C API: op descriptor, then
 * primitive descriptor, then primitive).
 *
 * Primitives are created once per shape (M, K, N, weight layout, bias) and
 * reused: every layer's q/k/v product shares one primitive per M, and so on.
 * The per-model cache keeps at most GF_DNNL_MAX_PRIMS of them, evicting the
 * least recently used (an uncached verify run sees every M from 1 to the
 * context length). Weights stay in the layouts backends/host_forward keeps and are
 * wrapped, not copied: GPT-2's Conv1D (K, N) is tag ab; the Llama family's
 * nn.Linear (N, K) weights (q, k, v, o, gate, up, down, LM head, and GPT-2's
 * LM head) are the same (K, N) matrix with tag ba. Source and destination memory objects
 * are made once per primitive and re-pointed with dnnl_memory_set_data_handle.
 *
 * One row (decode, M = 1) is a matrix-vector product, which the matmul
 * primitive streams at 0.57-0.81 of the one-thread read bandwidth (per
 * shape, ONEDNN_VERBOSE's times on the GPT-2-small shape, Intel Xeon);
 * oneDNN's dnnl_sgemm (its gemv kernels) at 0.94-1.07. So a one-row product is
 * dn_gemv: cut into a fixed number of blocks (gemv_blocks, set by the
 * product's size and the machine's CPU count, never by the thread option),
 * each one single-threaded dnnl_sgemm, the blocks shared among the threads of
 * a pool. The same calls on the same data whatever --threads says, so the
 * bits do not depend on it; a row alone (dnnl_sgemm) and the same row in a
 * batch (the matmul) can differ in the last bits, like openblas's sgemv and
 * sgemm: batch and split invariance are gated, not bitwise.
 *
 * Threads: Debian's libdnnl uses OpenMP; options->threads is the most any
 * product uses: the module sets omp_set_num_threads(options->threads) for
 * products of at least GF_DNNL_PAR_MIN_MACS multiply-adds and 1 below (an
 * OpenMP fork/join costs more than such a product; OpenBLAS makes the same
 * call internally), both when it creates a primitive and before it runs it.
 * Built as a module loaded at run time: genfence itself never
 * links oneDNN. */
#include <dnnl.h>
#include <dnnl_debug.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gfv.h"
#include "ref_pool.h" /* ref's spin-then-sleep pool (backends/ref): the one-row blocks' threads */

#define GF_EXPORT         __attribute__((visibility("default")))
#define GF_DNNL_MAX_PRIMS 256
/* Products smaller than this (M K N multiply-adds) run on one thread: an
 * OpenMP fork/join costs more than it saves there, and on a loaded machine a
 * descheduled worker stalls every barrier (decode products here are 16K-65K). */
#define GF_DNNL_PAR_MIN_MACS (1 << 20)
/* A one-row product of at least this many multiply-adds is cut into
 * gemv_blocks blocks shared among the threads (GPT-2-small's 768 x 768
 * product, 590K, took 0.17 ms on one thread and 0.135 on two); a smaller one
 * (the tiny models' 16K-65K) is one dnnl_sgemm on the caller. */
#define GF_DNNL_GEMV_PAR_MIN_MACS (1 << 18)
/* the most blocks a one-row product is cut into */
#define GF_DNNL_GEMV_MAX_BLOCKS 16

typedef struct dn_prim {
    int32_t M, K, N, trans_w, has_bias;
    dnnl_primitive_t prim;
    dnnl_memory_t src, dst; /* no buffer of their own; re-pointed per call */
    uint64_t last_use;
} dn_prim;

typedef struct dn_model {
    gfv_model base; /* first: the common slots take this pointer */
    int threads;
    int gemv_blocks;     /* blocks of a large one-row product: the CPU count's power of two, 2..16 */
    int gemv_ran;        /* dn_gemv has run (model_paths says dnnl_sgemm) */
    float *gemv_part;    /* (gemv_blocks - 1, gemv_part_n) partial sums of a one-row (K, N) product */
    ref_pool *pool;      /* threads workers (the caller included) for the one-row blocks; NULL at one thread */
    int32_t gemv_part_n; /* the widest N of the trans_w 0 weights */
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    dnnl_memory_t *w_mem, *b_mem; /* (n_lin) wrapping base.lin[i].w / .b */
    dn_prim *prims;               /* (GF_DNNL_MAX_PRIMS) */
    int32_t n_prims;
    uint64_t tick;
    char paths[256]; /* the matmul impls its primitives got, in cpu_path's words, comma-separated (model_paths) */
} dn_model;

/* ---- library facts, computed once ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_why[512]; /* "" if usable */
static char g_library[160], g_detail[256], g_path[64];
/* onednn:isa=NAME (dnnl_set_max_cpu_isa): the cap is set once per process,
 * before oneDNN's first primitive, so probe creates none; the first call with
 * the options (info, model_load) sets it and probes a matmul. */
static int g_setup;    /* the cap is set (or left as is) and the matmul probed */
static char g_isa[32]; /* the isa= it was set up for ("" = none) */
static pthread_mutex_t g_setup_mu = PTHREAD_MUTEX_INITIALIZER;

/* the ISA names dnnl_set_max_cpu_isa takes (ONEDNN_MAX_CPU_ISA's values) and
 * the /proc/cpuinfo flags each needs */
static const struct {
    const char *name;
    dnnl_cpu_isa_t isa;
    const char *flags;
} k_isas[] = {
    {"sse41", dnnl_cpu_isa_sse41, "sse4_1"},
    {"avx", dnnl_cpu_isa_avx, "avx"},
    {"avx2", dnnl_cpu_isa_avx2, "avx2 fma"},
    {"avx2_vnni", dnnl_cpu_isa_avx2_vnni, "avx2 fma avx_vnni"},
    {"avx512_core", dnnl_cpu_isa_avx512_core, "avx512f avx512bw avx512vl avx512dq"},
    {"avx512_core_vnni", dnnl_cpu_isa_avx512_core_vnni, "avx512f avx512bw avx512vl avx512dq avx512_vnni"},
    {"avx512_core_bf16", dnnl_cpu_isa_avx512_core_bf16, "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16"},
    {"avx512_core_amx", dnnl_cpu_isa_avx512_core_amx,
     "avx512f avx512bw avx512vl avx512dq avx512_vnni avx512_bf16 amx_tile amx_int8 amx_bf16"},
    {"all", dnnl_cpu_isa_all, ""},
};
enum { N_ISAS = sizeof k_isas / sizeof k_isas[0] };

/* Has this CPU every flag in the space-separated list (its /proc/cpuinfo flags)? */
static int cpu_has_flags(const char *list)
{
    static char flags[8192];
    static int read_done;
    if (!read_done) {
        read_done = 1;
        FILE *f = fopen("/proc/cpuinfo", "r");
        char line[8192];
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "flags", 5) && strchr(line, ':')) {
                snprintf(flags, sizeof flags, " %s", strchr(line, ':') + 1);
                flags[strcspn(flags, "\n")] = ' ';
                break;
            }
        if (f)
            fclose(f);
    }
    char want[64];
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, " ");
        snprintf(want, sizeof want, " %.*s ", (int)n, p);
        if (n && !strstr(flags, want))
            return 0;
        p += n;
        while (*p == ' ')
            p++;
    }
    return 1;
}

static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    case dnnl_cpu_isa_all: return "all";
    default: return NULL;
    }
}

/* The ISA oneDNN will dispatch to: dnnl_get_effective_cpu_isa() is the cap
 * (all = none set); report what this CPU offers beneath it. */
static const char *effective_isa(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    if (isa != dnnl_cpu_isa_all) {
        const char *n = isa_name(isa);
        return n ? n : dnnl_cpu_isa2str(isa);
    }
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512dq"))
        return __builtin_cpu_supports("avx512vnni") ? "avx512_core_vnni" : "avx512_core";
    if (__builtin_cpu_supports("avx2"))
        return "avx2";
    if (__builtin_cpu_supports("avx"))
        return "avx";
    if (__builtin_cpu_supports("sse4.1"))
        return "sse41";
    return "none";
}

static void matmul_md(int32_t M, int32_t K, int32_t N, int trans_w, int has_bias, dnnl_memory_desc_t *src,
                      dnnl_memory_desc_t *wei, dnnl_memory_desc_t *bia, dnnl_memory_desc_t *dst)
{
    dnnl_dims_t sd = {M, K}, wd = {K, N}, bd = {1, N}, dd = {M, N};
    dnnl_memory_desc_init_by_tag(src, 2, sd, dnnl_f32, dnnl_ab);
    dnnl_memory_desc_init_by_tag(wei, 2, wd, dnnl_f32, trans_w ? dnnl_ba : dnnl_ab);
    if (has_bias)
        dnnl_memory_desc_init_by_tag(bia, 2, bd, dnnl_f32, dnnl_ab);
    else
        memset(bia, 0, sizeof *bia);
    dnnl_memory_desc_init_by_tag(dst, 2, dd, dnnl_f32, dnnl_ab);
}

/* Create a matmul primitive descriptor for one shape. */
static dnnl_status_t matmul_pd(dnnl_engine_t eng, int32_t M, int32_t K, int32_t N, int trans_w, int has_bias,
                               dnnl_primitive_desc_t *pd)
{
    dnnl_memory_desc_t src, wei, bia, dst;
    matmul_md(M, K, N, trans_w, has_bias, &src, &wei, &bia, &dst);
    dnnl_matmul_desc_t op;
    dnnl_status_t s = dnnl_matmul_desc_init(&op, &src, &wei, has_bias ? &bia : NULL, &dst);
    if (s != dnnl_success)
        return s;
    return dnnl_primitive_desc_create(pd, &op, NULL, eng, NULL);
}

static void init_once(void)
{
    /* no dnnl_get_effective_cpu_isa here: querying the ISA fixes it, and
     * isa=NAME must still be able to set it (dn_setup writes g_library) */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("sse4.1")) {
        snprintf(g_why, sizeof g_why, "this CPU lacks SSE4.1, the least ISA oneDNN's x64 CPU engine needs");
        return;
    }
}

/* The options: NULL / "" or isa=NAME; the ISA cap set and a matmul probed, once
 * per process. GF_OK, or the error recorded. */
static gf_status dn_setup(const gf_backend_options *opts)
{
    const char *cfg = opts ? opts->config : NULL;
    const char *want = "";
    if (cfg && cfg[0]) {
        if (strncmp(cfg, "isa=", 4) || strchr(cfg, ','))
            return gf_error_set(GF_E_INVALID_ARG, "onednn: unknown option in 'onednn:%s' (the one option is isa=NAME)",
                                cfg);
        want = cfg + 4;
    }
    int k = -1;
    for (int i = 0; want[0] && i < N_ISAS; i++)
        if (!strcmp(want, k_isas[i].name))
            k = i;
    if (want[0] && (k < 0 || !cpu_has_flags(k_isas[k].flags))) {
        char valid[512] = "";
        for (int i = 0; i < N_ISAS; i++)
            if (cpu_has_flags(k_isas[i].flags)) {
                size_t n = strlen(valid);
                snprintf(valid + n, sizeof valid - n, "%s%s", n ? ", " : "", k_isas[i].name);
            }
        return gf_error_set(GF_E_INVALID_ARG, "onednn: isa '%s' %s; valid here: %s", want,
                            k < 0 ? "is not a oneDNN ISA name" : "is not supported by this CPU", valid);
    }
    pthread_mutex_lock(&g_setup_mu);
    gf_status st = GF_OK;
    if (g_setup) {
        if (strcmp(g_isa, want))
            st = gf_error_set(GF_E_UNAVAILABLE,
                              "onednn: oneDNN's ISA is set in this process for isa '%s'; isa '%s' needs a process of "
                              "its own (not --in-process)",
                              g_isa[0] ? g_isa : "(default)", want[0] ? want : "(default)");
        pthread_mutex_unlock(&g_setup_mu);
        return st;
    }
    if (k >= 0) {
        dnnl_status_t cs = dnnl_set_max_cpu_isa(k_isas[k].isa);
        if (cs != dnnl_success) {
            pthread_mutex_unlock(&g_setup_mu);
            return gf_error_set(GF_E_BACKEND, "onednn: dnnl_set_max_cpu_isa(%s) failed: %s", want, dnnl_status2str(cs));
        }
    }
    snprintf(g_isa, sizeof g_isa, "%s", want);
    g_setup = 1;
    /* the effective ISA under the cap, in the library line */
    const dnnl_version_t *v = dnnl_version();
    const char *hash = v && v->hash && strcmp(v->hash, "N/A") ? v->hash : NULL;
    snprintf(g_library, sizeof g_library, "oneDNN %d.%d.%d%s%s, ISA %s", v ? v->major : 0, v ? v->minor : 0,
             v ? v->patch : 0, hash ? " " : "", hash ? hash : "", k >= 0 ? want : effective_isa());
    dnnl_engine_t eng = NULL;
    dnnl_status_t s = dnnl_engine_create(&eng, dnnl_cpu, 0);
    if (s != dnnl_success) {
        pthread_mutex_unlock(&g_setup_mu);
        return gf_error_set(GF_E_UNAVAILABLE, "onednn: oneDNN cannot create a CPU engine: %s", dnnl_status2str(s));
    }
    /* one decode-shaped product, to learn which implementation serves it */
    dnnl_primitive_desc_t pd = NULL;
    s = matmul_pd(eng, 1, 64, 64, 0, 1, &pd);
    const char *impl = NULL;
    if (s == dnnl_success)
        dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl);
    if (s != dnnl_success)
        st = gf_error_set(GF_E_UNAVAILABLE, "onednn: oneDNN cannot create an f32 matmul: %s", dnnl_status2str(s));
    else {
        snprintf(g_detail, sizeof g_detail,
                 "OpenMP (%d cpus), matmul impl %s%s%s; primitives cached per shape; one-row products by "
                 "dnnl_sgemm in fixed blocks",
                 omp_get_num_procs(), impl ? impl : "?", k >= 0 ? "; max ISA isa=" : "", k >= 0 ? want : "");
        snprintf(g_path, sizeof g_path, "%s%s,dnnl_sgemm%s", impl ? impl : "?", k >= 0 ? " (isa)" : "",
                 k >= 0 ? " (isa)" : "");
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    dnnl_engine_destroy(eng);
    pthread_mutex_unlock(&g_setup_mu);
    return st;
}

static gf_status dn_probe(char *why, size_t why_len)
{
    pthread_once(&g_once, init_once);
    if (why && why_len)
        snprintf(why, why_len, "%s", g_why);
    return g_why[0] ? GF_E_UNAVAILABLE : GF_OK;
}

static int clamp_threads(const gf_backend_options *opts) { return opts && opts->threads > 0 ? opts->threads : 1; }

static gf_status dn_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    gf_backend_info mine, *info = &mine; /* a whole struct of this header; info_out gets at most its size */
    pthread_once(&g_once, init_once);
    if (g_why[0])
        return gf_error_set(GF_E_UNAVAILABLE, "onednn: %s", g_why);
    gf_status st = dn_setup(opts);
    if (st != GF_OK)
        return st;
    memset(info, 0, sizeof *info);
    info->struct_size = sizeof *info;
    info->dtype = GF_COMPUTE_F32;
    info->threads = clamp_threads(opts);
    info->library = g_library;
    info->detail = g_detail[0] ? g_detail : NULL;
    info->cpu_path = g_path[0] ? g_path : NULL;
    info->model_features = GFV_MODEL_FEATURES;
    info->probes = "all"; /* every dense product through the matmul, or one row through dnnl_sgemm */
    /* measured on holmes-gpt and holmes-llama (cases/invariance.yaml,
     * docs/backends.md): bitwise on every axis but batch and split, threads
     * included (a product below GF_DNNL_PAR_MIN_MACS runs on one thread; a
     * one-row product's blocks do not depend on the thread count); a row
     * alone goes through dnnl_sgemm and in a batch through the matmul */
    info->invariance = "all=bitwise,batch=gated,split=gated";
    return gf_backend_info_put(info_out, info);
}

static gf_status dn_fail(dnnl_status_t s, const char *what, int32_t M, int32_t K, int32_t N)
{
    return gf_error_set(GF_E_BACKEND, "onednn: %s for a (%d x %d) x (%d x %d) matmul failed: %s", what, M, K, K, N,
                        dnnl_status2str(s));
}

static void prim_destroy(dn_prim *p)
{
    if (p->prim)
        dnnl_primitive_destroy(p->prim);
    if (p->src)
        dnnl_memory_destroy(p->src);
    if (p->dst)
        dnnl_memory_destroy(p->dst);
    memset(p, 0, sizeof *p);
}

/* The OpenMP threads a product of this shape runs on (see GF_DNNL_PAR_MIN_MACS). */
static int threads_for(const dn_model *m, int32_t M, const gfv_lin *L)
{
    return (double)M * L->K * L->N >= GF_DNNL_PAR_MIN_MACS ? m->threads : 1;
}

static void use_threads(int nt)
{
    if (omp_get_max_threads() != nt)
        omp_set_num_threads(nt);
}

/* " (isa)" where an isa= cap is in force (g_path ends with it), else "": each
 * item of a model's paths carries it, as g_path's do */
static const char *isa_suffix(void)
{
    const size_t gl = strlen(g_path);
    return gl > 6 && !strcmp(g_path + gl - 6, " (isa)") ? " (isa)" : "";
}

/* The impl oneDNN chose for pd, in cpu_path's words (g_path: the impl, and
 * " (isa)" under an isa= cap), added to m->paths once. */
static void note_path(dn_model *m, dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl)
        impl = "?";
    char item[96];
    snprintf(item, sizeof item, "%s%s", impl, isa_suffix());
    for (const char *d = m->paths; *d;) {
        size_t k = strcspn(d, ",");
        if (k == strlen(item) && !strncmp(d, item, k))
            return;
        d += k + (d[k] == ',');
    }
    size_t u = strlen(m->paths);
    snprintf(m->paths + u, sizeof m->paths - u, "%s%s", u ? "," : "", item);
}

static gf_status dn_model_paths(void *model, char *buf, size_t len)
{
    const dn_model *m = model;
    snprintf(buf, len, "%s%s%s%s", m->paths, m->paths[0] && m->gemv_ran ? "," : "", m->gemv_ran ? "dnnl_sgemm" : "",
             m->gemv_ran ? isa_suffix() : "");
    return GF_OK;
}

/* The primitive for this shape: from the cache, or created (evicting the least
 * recently used when full). It is created under the thread count it will run
 * with: oneDNN fixes some of its parallelism (the bias pass of the gemm-based
 * matmul) when the primitive descriptor is made. */
static gf_status get_prim(dn_model *m, int32_t M, const gfv_lin *L, dn_prim **out)
{
    const int has_bias = L->b != NULL;
    dn_prim *victim = NULL;
    for (int32_t i = 0; i < m->n_prims; i++) {
        dn_prim *p = &m->prims[i];
        if (p->M == M && p->K == L->K && p->N == L->N && p->trans_w == L->trans_w && p->has_bias == has_bias) {
            p->last_use = ++m->tick;
            *out = p;
            return GF_OK;
        }
        if (!victim || p->last_use < victim->last_use)
            victim = p;
    }
    dn_prim *p;
    if (m->n_prims < GF_DNNL_MAX_PRIMS) {
        p = &m->prims[m->n_prims++];
    } else {
        p = victim;
        prim_destroy(p);
    }
    use_threads(threads_for(m, M, L));
    dnnl_primitive_desc_t pd = NULL;
    dnnl_status_t s = matmul_pd(m->engine, M, L->K, L->N, L->trans_w, has_bias, &pd);
    if (s != dnnl_success)
        goto fail_pd;
    note_path(m, pd);
    s = dnnl_primitive_create(&p->prim, pd);
    if (s != dnnl_success)
        goto fail_pd;
    dnnl_memory_desc_t src, wei, bia, dst;
    matmul_md(M, L->K, L->N, L->trans_w, has_bias, &src, &wei, &bia, &dst);
    if ((s = dnnl_memory_create(&p->src, &src, m->engine, DNNL_MEMORY_NONE)) != dnnl_success ||
        (s = dnnl_memory_create(&p->dst, &dst, m->engine, DNNL_MEMORY_NONE)) != dnnl_success)
        goto fail_pd;
    dnnl_primitive_desc_destroy(pd);
    p->M = M;
    p->K = L->K;
    p->N = L->N;
    p->trans_w = L->trans_w;
    p->has_bias = has_bias;
    p->last_use = ++m->tick;
    *out = p;
    return GF_OK;
fail_pd:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    prim_destroy(p);
    if (p == &m->prims[m->n_prims - 1])
        m->n_prims--;
    return dn_fail(s, "creating the primitive", M, L->K, L->N);
}

typedef struct dn_gemv_task {
    dn_model *m;
    const gfv_lin *L;
    const float *x;
    float *y;
    int32_t step;                              /* a block's rows of W */
    dnnl_status_t st[GF_DNNL_GEMV_MAX_BLOCKS]; /* per block */
} dn_gemv_task;

/* blocks [lo, hi) of a one-row product, each one single-threaded dnnl_sgemm */
static void dn_gemv_blocks(void *arg, int64_t lo, int64_t hi, int thread)
{
    (void)thread;
    dn_gemv_task *t = arg;
    const gfv_lin *L = t->L;
    const int32_t K = L->K, N = L->N, span = L->trans_w ? N : K;
    use_threads(1); /* a pool worker's ICV, or the caller's */
    for (int64_t c = lo; c < hi; c++) {
        const int32_t r0 = (int32_t)c * t->step, r1 = r0 + t->step < span ? r0 + t->step : span;
        if (r1 <= r0)
            t->st[c] = dnnl_success;
        else if (L->trans_w)
            t->st[c] = dnnl_sgemm('N', 'T', 1, r1 - r0, K, 1.f, t->x, K, L->w + (size_t)r0 * K, K, L->b ? 1.f : 0.f,
                                  t->y + r0, N);
        else
            t->st[c] = dnnl_sgemm('N', 'N', 1, N, r1 - r0, 1.f, t->x + r0, K, L->w + (size_t)r0 * N, N,
                                  c == 0 && L->b ? 1.f : 0.f,
                                  c ? t->m->gemv_part + (size_t)(c - 1) * t->m->gemv_part_n : t->y, N);
    }
}

/* y (1, N) = x (1, K) W + b in m->gemv_blocks fixed blocks (one below
 * GF_DNNL_GEMV_PAR_MIN_MACS), each one single-threaded dnnl_sgemm, shared
 * among the pool's threads (the same calls whatever the thread count):
 * - trans_w 1, W (N, K): block c is the outputs n0..n1, W's rows n0..n1;
 * - trans_w 0, W (K, N): block c is the inputs k0..k1, W's rows k0..k1 (a
 *   block of columns would read each row in short strided pieces, 10-20%
 *   slower at one thread), a partial sum over all N outputs; block 0's goes
 *   into y, the others' into gemv_part, added to y in block order.
 * y holds the bias first, added by beta = 1. The threads are ref's pool, not
 * OpenMP's: libgomp's workers sleep between parallel regions unless
 * OMP_WAIT_POLICY=active is set before the library loads, and a decode step's
 * 49 products each paid their wake-up (23.4 against 18.9 ms per GPT-2-small
 * token at two threads, with OpenMP's threads, without and with that variable). */
static gf_status dn_gemv(dn_model *m, const gfv_lin *L, const float *x, float *y)
{
    const double macs = (double)L->K * L->N;
    /* a small product is one block: it runs on the caller alone anyway */
    const int32_t K = L->K, N = L->N, nb = macs >= GF_DNNL_GEMV_PAR_MIN_MACS ? m->gemv_blocks : 1;
    const int32_t span = L->trans_w ? N : K;
    dn_gemv_task t = {.m = m, .L = L, .x = x, .y = y, .step = ((span + nb - 1) / nb + 15) / 16 * 16};
    /* every product is one of m->base.lin's, and gemv_part_n is the widest N
     * of their trans_w 0 weights (dn_load), so the partial sums hold any */
    if (L->b)
        memcpy(y, L->b, (size_t)N * sizeof *y);
    ref_pool_run(m->pool, dn_gemv_blocks, &t, nb, REF_PAR_MIN_WORK + macs);
    m->gemv_ran = 1;
    for (int c = 0; c < nb; c++)
        if (t.st[c] != dnnl_success)
            return dn_fail(t.st[c], "dnnl_sgemm", 1, K, N);
    for (int c = 1; !L->trans_w && c < nb && c * t.step < span; c++) {
        const float *p = m->gemv_part + (size_t)(c - 1) * m->gemv_part_n;
        for (int32_t n = 0; n < N; n++)
            y[n] += p[n];
    }
    return GF_OK;
}

/* y (M, N) = x (M, K) W + b */
static gf_status dn_linear(gfv_model *base, int32_t id, const float *x, float *y, int32_t M)
{
    dn_model *m = (dn_model *)base;
    const gfv_lin *L = &base->lin[id];
    if (M == 1)
        return dn_gemv(m, L, x, y);
    dn_prim *p;
    gf_status st = get_prim(m, M, L, &p);
    if (st != GF_OK)
        return st;
    use_threads(threads_for(m, M, L));
    dnnl_status_t s;
    if ((s = dnnl_memory_set_data_handle(p->src, (void *)x)) != dnnl_success ||
        (s = dnnl_memory_set_data_handle(p->dst, y)) != dnnl_success)
        return dn_fail(s, "binding buffers", M, L->K, L->N);
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, p->src},
                               {DNNL_ARG_WEIGHTS, m->w_mem[id]},
                               {DNNL_ARG_DST, p->dst},
                               {DNNL_ARG_BIAS, m->b_mem[id]}};
    s = dnnl_primitive_execute(p->prim, m->stream, L->b ? 4 : 3, args);
    if (s == dnnl_success)
        s = dnnl_stream_wait(m->stream);
    if (s != dnnl_success)
        return dn_fail(s, "executing", M, L->K, L->N);
    return GF_OK;
}

static void dn_model_free(void *handle)
{
    dn_model *m = handle;
    if (!m)
        return;
    for (int32_t i = 0; m->prims && i < m->n_prims; i++)
        prim_destroy(&m->prims[i]);
    free(m->prims);
    for (int32_t i = 0; i < m->base.n_lin; i++) {
        if (m->w_mem && m->w_mem[i])
            dnnl_memory_destroy(m->w_mem[i]);
        if (m->b_mem && m->b_mem[i])
            dnnl_memory_destroy(m->b_mem[i]);
    }
    free(m->w_mem);
    free(m->b_mem);
    free(m->gemv_part);
    ref_pool_free(m->pool);
    if (m->stream)
        dnnl_stream_destroy(m->stream);
    if (m->engine)
        dnnl_engine_destroy(m->engine);
    gfv_model_release(&m->base);
    free(m);
}

static gf_status dn_model_load(const gf_model_desc *desc, const gf_backend_options *opts, void **model_out)
{
    *model_out = NULL;
    gf_error_clear();
    char why[512];
    if (dn_probe(why, sizeof why) != GF_OK)
        return gf_error_set(GF_E_UNAVAILABLE, "onednn: %s", why);
    gf_status sst = dn_setup(opts);
    if (sst != GF_OK)
        return sst;
    dn_model *m = calloc(1, sizeof *m);
    if (!m)
        return gf_error_set(GF_E_NOMEM, "onednn: out of memory");
    gf_status st = gfv_model_init(&m->base, desc, "onednn", dn_linear);
    if (st != GF_OK) {
        free(m);
        return st;
    }
    m->threads = clamp_threads(opts);
    for (m->gemv_blocks = 2; m->gemv_blocks < omp_get_num_procs() && m->gemv_blocks < GF_DNNL_GEMV_MAX_BLOCKS;)
        m->gemv_blocks *= 2;
    dnnl_status_t s = dnnl_engine_create(&m->engine, dnnl_cpu, 0);
    if (s == dnnl_success)
        s = dnnl_stream_create(&m->stream, m->engine, dnnl_stream_default_flags);
    if (s != dnnl_success) {
        dn_model_free(m);
        return gf_error_set(GF_E_BACKEND, "onednn: cannot create the CPU engine and stream: %s", dnnl_status2str(s));
    }
    m->w_mem = calloc((size_t)m->base.n_lin, sizeof *m->w_mem);
    m->b_mem = calloc((size_t)m->base.n_lin, sizeof *m->b_mem);
    m->prims = calloc(GF_DNNL_MAX_PRIMS, sizeof *m->prims);
    for (int32_t i = 0; i < m->base.n_lin; i++)
        if (m->base.lin[i].w && !m->base.lin[i].trans_w && m->base.lin[i].N > m->gemv_part_n)
            m->gemv_part_n = m->base.lin[i].N;
    m->gemv_part = malloc(((size_t)(m->gemv_blocks - 1) * m->gemv_part_n + 1) * sizeof *m->gemv_part);
    if (m->threads > 1)
        m->pool = ref_pool_create(m->threads < m->gemv_blocks ? m->threads : m->gemv_blocks);
    if (!m->w_mem || !m->b_mem || !m->prims || !m->gemv_part || (m->threads > 1 && !m->pool)) {
        dn_model_free(m);
        return gf_error_set(GF_E_NOMEM, "onednn: out of memory");
    }
    /* wrap the weights and biases (no copy); their descriptors are the ones
     * every primitive of that shape expects */
    for (int32_t i = 0; i < m->base.n_lin; i++) {
        const gfv_lin *L = &m->base.lin[i];
        if (!L->w) /* a linear this family does not use */
            continue;
        dnnl_memory_desc_t src, wei, bia, dst;
        matmul_md(1, L->K, L->N, L->trans_w, L->b != NULL, &src, &wei, &bia, &dst);
        s = dnnl_memory_create(&m->w_mem[i], &wei, m->engine, (void *)L->w);
        if (s == dnnl_success && L->b)
            s = dnnl_memory_create(&m->b_mem[i], &bia, m->engine, (void *)L->b);
        if (s != dnnl_success) {
            dn_model_free(m);
            return gf_error_set(GF_E_BACKEND, "onednn: cannot wrap weight %d: %s", i, dnnl_status2str(s));
        }
    }
    *model_out = m;
    return GF_OK;
}

static gf_status dn_forward(void *model, void *cache, const gf_batch *in, float *logits_out)
{
    return gfv_forward(&((dn_model *)model)->base, cache, in, logits_out);
}

static gf_status dn_forward_trace(void *model, void *cache, const gf_batch *in, float *logits_out,
                                  const gf_trace_request *req)
{
    return gfv_forward_trace(&((dn_model *)model)->base, cache, in, logits_out, req);
}

static const gf_backend_ops k_onednn_ops = {
    .abi_version = GF_BACKEND_ABI_VERSION,
    .struct_size = sizeof(gf_backend_ops),
    .name = "onednn",
    .description = "oneDNN matmul primitives (cached per shape) for the dense products, F32 host loops for the rest",
    .probe = dn_probe,
    .info = dn_info,
    .model_load = dn_model_load,
    .model_free = dn_model_free,
    .cache_create = gfv_cache_create,
    .cache_reset = gfv_cache_reset,
    .cache_free = gfv_cache_free,
    .cache_length = gfv_cache_length,
    .cache_bytes = gfv_cache_bytes,
    .forward = dn_forward,
    .sample = NULL,
    .last_error = gfv_last_error,
    .forward_trace = dn_forward_trace,
    .model_paths = dn_model_paths,
};

GF_EXPORT const gf_backend_ops *genfence_backend_entry(void) { return &k_onednn_ops; }
