/* genfence bench: what this machine can do (read bandwidth, fp32 FMA and
 * sgemm peaks) and the parameter counts the rates are computed from. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* a probe compiled at -O0 would measure the compiler */
#endif
#define _GNU_SOURCE
#include "bench.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GF_BENCH_X86 1
#endif

#include "sys.h"

/* ---- read bandwidth ---- */

typedef struct bw_job {
    const float *p;
    size_t n;
    int reps; /* sweeps of p per timed pass */
    float sum;
} bw_job;

/* 64 independent lanes (four chains of 16-lane vector adds under AVX-512):
 * the loop vectorizes at -O3 without reassociation, and a cache-resident
 * buffer is read at the cache's rate rather than one add chain's latency.
 * One clone per ISA, so the probe reads as wide as a backend's kernels. */
#if defined(GF_BENCH_X86) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void *
bw_worker(void *arg)
{
    bw_job *j = arg;
    float acc[64] = {0};
    for (int r = 0; r < j->reps; r++)
        for (size_t i = 0; i + 64 <= j->n; i += 64)
            for (int k = 0; k < 64; k++)
                acc[k] += j->p[i + k];
    float s = 0;
    for (int k = 0; k < 64; k++)
        s += acc[k];
    j->sum = s;
    return NULL;
}

double gf_bench_read_bw(int threads, size_t bytes, int passes)
{
    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    size_t n = bytes / sizeof(float);
    n -= n % (64 * (size_t)threads);
    if (n == 0)
        return NAN;
    /* a pass reads at least 256 MiB: a small buffer is swept again and again
     * (it stays in the caches, as a small model's weights do between tokens),
     * so thread start-up is a sliver of the time measured */
    const size_t pass_min = (size_t)256 << 20;
    const int reps = n * sizeof(float) >= pass_min ? 1 : (int)(pass_min / (n * sizeof(float)));
    float *buf = mmap(NULL, n * sizeof(float), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return NAN;
    for (size_t i = 0; i < n; i++)
        buf[i] = 1.0f;
    double best = 0;
    volatile float sink = 0;
    for (int pass = 0; pass < passes; pass++) {
        pthread_t tid[64];
        bw_job jobs[64];
        size_t per = n / threads;
        double t0 = gf_now_s();
        for (int t = 0; t < threads; t++) {
            jobs[t] = (bw_job){.p = buf + per * t, .n = per, .reps = reps};
            if (t && pthread_create(&tid[t], NULL, bw_worker, &jobs[t]) != 0)
                bw_worker(&jobs[t]), tid[t] = 0;
        }
        bw_worker(&jobs[0]);
        for (int t = 1; t < threads; t++)
            if (tid[t])
                pthread_join(tid[t], NULL);
        double dt = gf_now_s() - t0;
        for (int t = 0; t < threads; t++)
            sink += jobs[t].sum;
        double gbps = (double)n * sizeof(float) * reps / dt * 1e-9;
        if (gbps > best)
            best = gbps;
    }
    (void)sink;
    munmap(buf, n * sizeof(float));
    return best;
}

/* ---- fp32 FMA peak ---- */

enum { FMA_ITERS = 20000000 };

typedef struct fma_job {
    int isa; /* 0 scalar, 1 avx2+fma, 2 avx512f */
    double flops;
    float out;
} fma_job;

#ifdef GF_BENCH_X86
__attribute__((target("avx2,fma"))) static float fma_avx2(long iters)
{
    __m256 a[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++)
        a[k] = _mm256_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = _mm256_fmadd_ps(a[k], x, y);
    __m256 s = a[0];
    for (int k = 1; k < 12; k++)
        s = _mm256_add_ps(s, a[k]);
    float v[8];
    _mm256_storeu_ps(v, s);
    return v[0] + v[7];
}

__attribute__((target("avx512f"))) static float fma_avx512(long iters)
{
    __m512 a[12], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < 12; k++)
        a[k] = _mm512_set1_ps((float)k);
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = _mm512_fmadd_ps(a[k], x, y);
    __m512 s = a[0];
    for (int k = 1; k < 12; k++)
        s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}
#endif

static float fma_scalar(long iters)
{
    float a[12];
    for (int k = 0; k < 12; k++)
        a[k] = (float)k;
    for (long i = 0; i < iters; i++)
        for (int k = 0; k < 12; k++)
            a[k] = a[k] * 0.999999f + 1e-7f;
    float s = 0;
    for (int k = 0; k < 12; k++)
        s += a[k];
    return s;
}

static void *fma_worker(void *arg)
{
    fma_job *j = arg;
#ifdef GF_BENCH_X86
    if (j->isa == 2) {
        j->out = fma_avx512(FMA_ITERS / 2);
        j->flops = 2.0 * 16 * 12 * (FMA_ITERS / 2);
        return NULL;
    }
    if (j->isa == 1) {
        j->out = fma_avx2(FMA_ITERS);
        j->flops = 2.0 * 8 * 12 * FMA_ITERS;
        return NULL;
    }
#endif
    j->out = fma_scalar(FMA_ITERS / 4);
    j->flops = 2.0 * 12 * (FMA_ITERS / 4);
    return NULL;
}

static double fma_run(int threads, int isa)
{
    pthread_t tid[64];
    fma_job jobs[64];
    double t0 = gf_now_s(), flops = 0;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (fma_job){.isa = isa};
        if (t && pthread_create(&tid[t], NULL, fma_worker, &jobs[t]) != 0)
            fma_worker(&jobs[t]), tid[t] = 0;
    }
    fma_worker(&jobs[0]);
    for (int t = 1; t < threads; t++)
        if (tid[t])
            pthread_join(tid[t], NULL);
    double dt = gf_now_s() - t0;
    volatile float sink = 0;
    for (int t = 0; t < threads; t++)
        flops += jobs[t].flops, sink += jobs[t].out;
    (void)sink;
    return flops / dt * 1e-9;
}

double gf_bench_fma_peak(int threads, const char **isa_out)
{
    if (threads < 1)
        threads = 1;
    if (threads > 64)
        threads = 64;
    int isa = 0;
    const char *name = "scalar";
#ifdef GF_BENCH_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        isa = 1, name = "AVX2+FMA";
    double best = 0;
    int best_isa = isa;
    for (int rep = 0; rep < 2; rep++) {
        double g = fma_run(threads, isa);
        if (g > best)
            best = g;
    }
    if (__builtin_cpu_supports("avx512f")) {
        for (int rep = 0; rep < 2; rep++) {
            double g = fma_run(threads, 2);
            if (g > best)
                best = g, best_isa = 2;
        }
    }
    if (best_isa == 2)
        name = "AVX-512F";
    if (isa_out)
        *isa_out = name;
    return best;
#else
    if (isa_out)
        *isa_out = name;
    return fma_run(threads, 0);
#endif
}

/* ---- sgemm peak through OpenBLAS, if present ---- */

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float, float *,
                         int);
typedef void (*setthreads_fn)(int);

double gf_bench_sgemm_peak(int threads, int n)
{
    void *dl = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!dl)
        return NAN;
    sgemm_fn sgemm = (sgemm_fn)dlsym(dl, "cblas_sgemm");
    setthreads_fn set = (setthreads_fn)dlsym(dl, "openblas_set_num_threads");
    double best = NAN;
    float *a = malloc((size_t)n * n * sizeof *a), *b = malloc((size_t)n * n * sizeof *b),
          *c = malloc((size_t)n * n * sizeof *c);
    if (sgemm && a && b && c) {
        if (set)
            set(threads);
        for (size_t i = 0; i < (size_t)n * n; i++)
            a[i] = (float)(i % 7) * 0.1f, b[i] = (float)(i % 5) * 0.1f;
        best = 0;
        for (int rep = 0; rep < 4; rep++) { /* the first call warms the library */
            double t0 = gf_now_s();
            sgemm(101 /* row major */, 111 /* no trans */, 111, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            double g = 2.0 * n * n * (double)n / (gf_now_s() - t0) * 1e-9;
            if (rep && g > best)
                best = g;
        }
    }
    free(a);
    free(b);
    free(c);
    /* not dlclose'd: OpenBLAS's threads outlive the call */
    return best;
}

void gf_bench_cpu_name(char *dst, size_t cap)
{
    snprintf(dst, cap, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "model name", 10))
            continue;
        char *colon = strchr(line, ':');
        if (!colon)
            break;
        colon++;
        while (*colon == ' ' || *colon == '\t')
            colon++;
        colon[strcspn(colon, "\n")] = '\0';
        snprintf(dst, cap, "%s", colon);
        break;
    }
    fclose(f);
}

/* The first line of a small file into dst (newline dropped): 0 ok, -1 unreadable. */
static int read_line(const char *path, char *dst, size_t cap)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int ok = fgets(dst, (int)cap, f) != NULL;
    fclose(f);
    if (!ok)
        return -1;
    dst[strcspn(dst, "\n")] = '\0';
    return 0;
}

void gf_bench_state_read(bench_state *st)
{
    char line[256];
    st->at_s = gf_now_s();
    st->load[0] = st->load[1] = st->load[2] = NAN;
    if (read_line("/proc/loadavg", line, sizeof line) == 0)
        sscanf(line, "%lf %lf %lf", &st->load[0], &st->load[1], &st->load[2]);
    st->mhz = NAN;
    if (read_line("/sys/devices/system/cpu/cpu0/cpufreq/scaling_cur_freq", line, sizeof line) == 0)
        st->mhz = atof(line) / 1000.0;
    /* every CPU's governor, counted per distinct name (at most 4 names) */
    char names[4][32];
    int counts[4] = {0}, n_names = 0;
    for (int cpu = 0; cpu < 4096; cpu++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_governor", cpu);
        if (read_line(path, line, sizeof line) != 0)
            break;
        int k = 0;
        while (k < n_names && strcmp(names[k], line))
            k++;
        if (k == n_names && n_names < 4)
            snprintf(names[n_names++], sizeof names[0], "%.31s", line);
        if (k < n_names)
            counts[k]++;
    }
    st->governor[0] = '\0';
    for (int k = 0; k < n_names; k++) {
        size_t len = strlen(st->governor);
        if (n_names == 1)
            snprintf(st->governor, sizeof st->governor, "%s", names[0]);
        else
            snprintf(st->governor + len, sizeof st->governor - len, "%s%s x%d", k ? ", " : "", names[k], counts[k]);
    }
}

/* ---- counts ---- */

double gf_bench_layer_matmul_params(const gf_model_config *c)
{
    const double D = c->n_embd, F = c->d_ff, Q = (double)c->n_head * c->d_head, KV = (double)c->n_kv_head * c->d_head;
    if (c->arch == GF_ARCH_LLAMA)
        return c->n_layer * (D * Q + 2 * D * KV + Q * D + 3 * D * F);
    return c->n_layer * (D * 3 * D + D * D + 2 * D * F);
}

double gf_bench_param_count(const gf_model_config *c)
{
    const double D = c->n_embd, F = c->d_ff, V = c->vocab_size, Q = (double)c->n_head * c->d_head,
                 KV = (double)c->n_kv_head * c->d_head;
    double p = gf_bench_layer_matmul_params(c) + V * D + (c->tied_head ? 0 : V * D);
    if (c->arch == GF_ARCH_LLAMA)
        return p + c->n_layer * (2 * D + (c->qkv_bias ? Q + 2 * KV : 0)) + D;
    /* GPT-2: positions, 2 LayerNorms + 4 biases per layer, the final LayerNorm */
    return p + (double)c->n_positions * D + c->n_layer * (4 * D + 3 * D + D + F + D) + 2 * D;
}
