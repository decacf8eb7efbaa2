/* genfence bench: machine probes and in-memory models of a named shape
 * (harness/cli only; cmd_bench.c is the command). */
#ifndef GENFENCE_HARNESS_BENCH_H
#define GENFENCE_HARNESS_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "genfence/model_desc.h"
#include "genfence/status.h"

/* ---- probes (bench_probe.c) ---- */

/* Best of `passes` sums over a `bytes` buffer split among `threads` threads:
 * GB/s (1e9 bytes/s). A buffer far larger than the caches gives the rate from
 * memory; a smaller one is swept again and again within a pass (at least
 * 256 MiB read), so it gives the rate from the caches it fits in. */
double gf_bench_read_bw(int threads, size_t bytes, int passes);
/* Register-only fp32 FMA throughput (the widest vector FMA this CPU has,
 * enough independent chains to fill the pipes) on `threads` threads:
 * GFLOP/s, counting an FMA as 2. *isa_out (optional) names the ISA used. */
double gf_bench_fma_peak(int threads, const char **isa_out);
/* cblas_sgemm of n x n x n from OpenBLAS (dlopen'ed libopenblas.so.0, its
 * own thread count set to `threads`), best of 3: GFLOP/s; NAN when the
 * library is not there. */
double gf_bench_sgemm_peak(int threads, int n);
/* "model name" of /proc/cpuinfo (or "unknown CPU") into dst. */
void gf_bench_cpu_name(char *dst, size_t cap);

/* ---- model shapes with seeded random weights (bench_shape.c) ---- */

typedef struct gf_bench_shape {
    gf_model_desc desc;
    gf_layer_weights *layers; /* (L) */
    float *arena;             /* every tensor, one allocation */
    size_t n_floats;
} gf_bench_shape;

/* The names --shape accepts, NULL-terminated. */
extern const char *const gf_bench_shape_names[];
/* The config of shape `name`: 0 ok, -1 unknown name. */
int gf_bench_shape_config(const char *name, gf_model_config *cfg_out);
/* Build shape `name` with weights drawn from `seed` (uniform, std 0.02;
 * norm weights 1, biases 0). *out cleared on failure. */
gf_status gf_bench_shape_build(const char *name, uint64_t seed, gf_bench_shape *out);
void gf_bench_shape_free(gf_bench_shape *s); /* NULL-safe */

/* ---- counts from a config ---- */

/* Weights of the layer matrices (every layer, no norms or biases). */
double gf_bench_layer_matmul_params(const gf_model_config *c);
/* Every parameter the model has (embeddings, positions, norms, biases, the
 * head when untied). */
double gf_bench_param_count(const gf_model_config *c);

/* ---- the command's records (cmd_bench.c runs, bench_report.c prints) ---- */

enum {
    GF_BENCH_PROMPT = 16,
    GF_BENCH_PREFILL = 128,
    GF_BENCH_ROWS = 8,
    GF_BENCH_STEPS = 16,
    GF_BENCH_MAX_REPEATS = 101
};
/* the memory probe's buffer: far past any cache of the machines it runs on */
#define GF_BENCH_BW_BYTES ((size_t)1 << 30)

typedef struct bench_opts {
    const char *model, *shape;
    const char *load_dir;    /* what each backend's child loads: model, or the folder shape was written to */
    const char *write_shape; /* --write-shape DIR: write the shape there and stop */
    const char *backends[32];
    int n_backends, threads, new_tokens, repeats, uncached, probe, json, rates;
    double max_rss_ratio; /* > 0: a backend whose peak RSS is above this many times the weights fails */
} bench_opts;

/* Each repeat's figure (the medians below are of these), kept for the JSON:
 * the spread says how steady the machine was. */
enum { GF_BENCH_SAMPLE_MODE_KINDS = 5 };
typedef struct mode_result {
    int ran;
    double prefill_s;                   /* median: the prompt's forward + the first token */
    double decode_s;                    /* median per later token */
    double total_s;                     /* median of the whole generation */
    double prefill_cpu_s, decode_cpu_s; /* the same, in process CPU seconds (all threads) */
    int tokens;                         /* new tokens per run */
    int n_samples;                      /* the repeats */
    /* (GF_BENCH_SAMPLE_MODE_KINDS, n_samples): prefill, decode, total,
     * prefill CPU, decode CPU seconds of each repeat, in run order */
    double samples[GF_BENCH_SAMPLE_MODE_KINDS][GF_BENCH_MAX_REPEATS];
} mode_result;

typedef struct rate_result {
    int ran;
    int tokens;                               /* positions per call (prefill) or rows (batched decode) */
    double s;                                 /* median seconds per call */
    double cpu_s;                             /* median process CPU seconds per call (all threads) */
    int n_samples;                            /* the repeats */
    double samples[GF_BENCH_MAX_REPEATS];     /* (n_samples) seconds per call of each repeat, in run order */
    double cpu_samples[GF_BENCH_MAX_REPEATS]; /* (n_samples) CPU seconds per call of each repeat */
} rate_result;

/* What a child sends back. */
typedef struct bench_row {
    int ok;
    char err[512];
    char library[192], detail[192];
    char cpu_path[192], weights[192], kv_cache[192]; /* gf_backend_info's ("" = not said) */
    int dtype, threads;
    mode_result cached, uncached;
    rate_result prefill, batched;
    size_t cache_bytes;
    long maxrss_kb; /* filled by the parent from wait4 */
    int rss_over;   /* peak RSS over --max-rss-ratio times the weights (the parent's verdict) */
} bench_row;

typedef struct probe_result {
    double bw_gbps, fma_gflops, sgemm_gflops;
    /* the read rate at a decoded token's working set: ws_bytes (the f32
     * weights one token reads) swept again and again, as decode does; below
     * the caches' size it is the roofline that binds, not bw_gbps */
    double ws_gbps, ws_bytes;
    char fma_isa[32];
} probe_result;

/* The machine's state where a benchmark's figures depend on it, read at the
 * start and the end of the run (bench_report.c). */
typedef struct bench_state {
    double load[3];    /* /proc/loadavg's 1, 5, 15 minute averages; NAN unreadable */
    char governor[64]; /* cpufreq scaling_governor of every CPU ("performance",
                          "schedutil x2, performance x14" when they differ);
                          "" where no cpufreq is exposed (a VM) */
    double mhz;        /* cpu0's current frequency (scaling_cur_freq), NAN unreadable */
    double at_s;       /* gf_now_s() when read */
} bench_state;
void gf_bench_state_read(bench_state *st); /* probe.c */

/* Both machine probes (before and after the backends) and the state around them. */
typedef struct bench_machine {
    probe_result probes[2]; /* before, after; NAN where not run */
    int n_probes;
    bench_state start, end;
} bench_machine;

typedef struct bench_model {
    gf_model_config cfg;
    char name[512];       /* the directory or "gpt2-small (random weights, seed 1)" */
    double params;        /* every parameter */
    double matmul_params; /* layer matrices */
    double head_params;   /* the output layer, V x D */
} bench_model;

/* The config of o's model (config.json or the shape) into *m: 0 ok, -1 after
 * printing why. */
int bench_model_init(const bench_opts *o, bench_model *m);
/* Bytes per weight at a compute dtype (4 for fp32). */
double bench_dtype_bytes(int dtype);
/* FLOPs of `tokens` new positions after `ctx0` cached ones, with `rows`
 * logits rows through the output layer. */
double bench_flops(const bench_model *m, int tokens, int ctx0, int rows);
void bench_print_table(const bench_opts *o, const bench_model *m, const probe_result *p, const bench_machine *mach,
                       const bench_row *rows);
/* One backend's rows of the first table (its error instead when it failed),
 * to f: the table at the end, and stderr as each backend finishes. */
void bench_print_row(FILE *f, const bench_opts *o, int i, const bench_model *m, const probe_result *p,
                     const bench_row *r);
void bench_print_json(const bench_opts *o, const bench_model *m, const probe_result *p, const bench_machine *mach,
                      const bench_row *rows);

#endif
