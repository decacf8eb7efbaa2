/* genfence bench: the model's counts, and the tables / JSON the command prints. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "cli.h"
#include "genfence/model.h"
#include "sys.h"

int bench_model_init(const bench_opts *o, bench_model *m)
{
    memset(m, 0, sizeof *m);
    if (o->shape) {
        if (gf_bench_shape_config(o->shape, &m->cfg) != 0) {
            gf_cli_error("bench: unknown shape '%s' (known: gpt2-small, llama-small, qwen2-0.5b)", o->shape);
            return -1;
        }
        snprintf(m->name, sizeof m->name, "%s shape (random weights, seed 1)", o->shape);
    } else {
        char path[4096];
        snprintf(path, sizeof path, "%s/config.json", o->model);
        if (gf_config_load(path, &m->cfg) != GF_OK) {
            gf_cli_error("bench: %s", gf_error_msg());
            return -1;
        }
        snprintf(m->name, sizeof m->name, "%s", o->model);
    }
    m->params = gf_bench_param_count(&m->cfg);
    m->matmul_params = gf_bench_layer_matmul_params(&m->cfg);
    m->head_params = (double)m->cfg.vocab_size * m->cfg.n_embd;
    return 0;
}

double bench_dtype_bytes(int dtype)
{
    switch (dtype) {
    case GF_COMPUTE_F16:
    case GF_COMPUTE_BF16: return 2;
    case GF_COMPUTE_F64: return 8;
    default: return 4;
    }
}

static const char *dtype_name(int dtype)
{
    switch (dtype) {
    case GF_COMPUTE_F16: return "f16";
    case GF_COMPUTE_BF16: return "bf16";
    case GF_COMPUTE_F64: return "f64";
    default: return "f32";
    }
}

double bench_flops(const bench_model *m, int tokens, int ctx0, int rows)
{
    const gf_model_config *c = &m->cfg;
    double attn = 0; /* q.k and p.v over every key each new position sees */
    for (int t = 0; t < tokens; t++)
        attn += 4.0 * c->n_layer * c->n_head * c->d_head * (ctx0 + t + 1);
    return 2.0 * m->matmul_params * tokens + attn + 2.0 * m->head_params * rows;
}

/* Bytes of weights one decoded token reads: every layer matrix and the head. */
static double decode_bytes(const bench_model *m, const bench_row *r)
{
    return (m->matmul_params + m->head_params) * bench_dtype_bytes(r->dtype);
}

/* The compute roof: sgemm when measured, else the FMA peak. */
static double peak_gflops(const probe_result *p, const char **which)
{
    if (isfinite(p->sgemm_gflops) && p->sgemm_gflops > 0) {
        *which = "sgemm";
        return p->sgemm_gflops;
    }
    *which = "fma";
    return p->fma_gflops;
}

static double prefill_gflops(const bench_model *m, const bench_row *r)
{
    return r->prefill.ran ? bench_flops(m, r->prefill.tokens, 0, 1) / r->prefill.s * 1e-9 : NAN;
}

static double batched_gflops(const bench_model *m, const bench_row *r)
{
    /* each step: B rows of one token over a 16 + s cache; the middle step stands for all */
    return r->batched.ran
               ? r->batched.tokens * bench_flops(m, 1, GF_BENCH_PROMPT + GF_BENCH_STEPS / 2, 1) / r->batched.s * 1e-9
               : NAN;
}

static double weight_mib(const bench_model *m) { return m->params * 4 / 1048576.0; }

/* A figure in a fixed-width cell, "-" where it was not measured (NaN: the
 * probe skipped or failed), never "nan". */
static const char *cell(char *buf, size_t cap, int width, int prec, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "%*s", width, "-");
    else
        snprintf(buf, cap, "%*.*f", width, prec, v);
    return buf;
}

/* "read 12.3 GB/s" or "read bandwidth not measured" */
static void machine_figure(char *buf, size_t cap, const char *what, const char *unit, double v, const char *isa)
{
    if (isnan(v))
        snprintf(buf, cap, "%s not measured", what);
    else
        snprintf(buf, cap, "%s %.1f %s%s%s%s", what, v, unit, isa && isa[0] ? " (" : "", isa ? isa : "",
                 isa && isa[0] ? ")" : "");
}

void bench_print_row(FILE *f, const bench_opts *o, int i, const bench_model *m, const probe_result *p,
                     const bench_row *r)
{
    if (!r->ok) {
        fprintf(f, "%-12s error: %s\n", o->backends[i], r->err);
        return;
    }
    char c1[32], c2[32];
    for (int mode = 0; mode < 2; mode++) {
        const mode_result *x = mode ? &r->uncached : &r->cached;
        if (!x->ran)
            continue;
        double gbps = decode_bytes(m, r) / x->decode_s * 1e-9;
        fprintf(f, "%-12s %-9s %9.1f %15.3f %14.3f %10.1f %9.2f %s %s %9.3f", o->backends[i],
                mode ? "uncached" : "cached", x->tokens / x->total_s, x->prefill_s * 1e3 / GF_BENCH_PROMPT,
                x->decode_s * 1e3, 1.0 / x->decode_s, gbps, cell(c1, sizeof c1, 7, 2, gbps / p->bw_gbps),
                cell(c2, sizeof c2, 7, 2, gbps / p->ws_gbps), x->decode_cpu_s * 1e3);
        if (!mode && r->uncached.ran)
            fprintf(f, " %9.2f", r->uncached.total_s / r->cached.total_s);
        fprintf(f, "\n");
    }
}

void bench_print_table(const bench_opts *o, const bench_model *m, const probe_result *p, const bench_machine *ms,
                       const bench_row *rows)
{
    char cpu[256];
    gf_bench_cpu_name(cpu, sizeof cpu);
    const char *which;
    double peak = peak_gflops(p, &which);
    printf("model    %s: %.1fM parameters, %.1f MiB of f32 weights, %.1f MB read per decoded f32 token\n", m->name,
           m->params / 1e6, weight_mib(m), (m->matmul_params + m->head_params) * 4 / 1e6);
    char bw[96], ws[128], fma[128], sg[96];
    machine_figure(bw, sizeof bw, "read", "GB/s", p->bw_gbps, NULL);
    const double ws_mb = (m->matmul_params + m->head_params) * 4 / 1e6;
    if (isnan(p->ws_gbps))
        snprintf(ws, sizeof ws, ", read at a token's %.1f MB not measured", ws_mb);
    else if (ws_mb * 1e6 >= (double)GF_BENCH_BW_BYTES)
        ws[0] = 0; /* the working set is the big probe's */
    else
        snprintf(ws, sizeof ws, " (%.1f GB/s at a token's %.1f MB)", p->ws_gbps, ws_mb);
    machine_figure(fma, sizeof fma, "fp32 FMA peak", "GFLOP/s", p->fma_gflops, p->fma_isa);
    machine_figure(sg, sizeof sg, "sgemm", "GFLOP/s", p->sgemm_gflops, NULL);
    printf("machine  %s, %d CPUs; at %d thread%s: %s%s, %s, %s%s\n", cpu, gf_cpu_count(), o->threads,
           o->threads > 1 ? "s" : "", bw, ws, fma, sg, o->probe ? "" : " (--no-probe)");
    printf("state    load average %.2f at the start, %.2f at the end; governor %s\n", ms->start.load[0],
           ms->end.load[0], ms->start.governor[0] ? ms->start.governor : "not readable");
    printf("workload %d-token prompt, %d greedy tokens, 1 warm-up, median of %d; prefill %d tokens; "
           "decode B=%d\n\n",
           GF_BENCH_PROMPT, o->new_tokens, o->repeats, GF_BENCH_PREFILL, GF_BENCH_ROWS);
    printf("%-12s %-9s %9s %15s %14s %10s %9s %7s %7s %9s %9s\n", "backend", "mode", "tok/s", "prefill ms/tok",
           "decode ms/tok", "decode t/s", "GB/s", "of BW", "of WS", "cpu ms/t", "c/u");
    for (int i = 0; i < o->n_backends; i++)
        bench_print_row(stdout, o, i, m, p, &rows[i]);
    printf("\n%-12s %12s %9s %7s %12s %9s %7s %10s %8s %9s\n", "backend", "prefill t/s", "GFLOP/s",
           which[0] == 's' ? "of gemm" : "of fma", "B=8 tok/s", "GFLOP/s", "of peak", "RSS MiB", "RSS/wts",
           "cache MiB");
    for (int i = 0; i < o->n_backends; i++) {
        const bench_row *r = &rows[i];
        if (!r->ok)
            continue;
        double pg = prefill_gflops(m, r), bg = batched_gflops(m, r);
        double rss = r->maxrss_kb / 1024.0;
        char c1[32], c2[32], c3[32], c4[32], c5[32], c6[32]; /* "-": not run (--no-rates) */
        printf("%-12s %s %s %s %s %s %s %10.0f %8.2f%s %9.1f\n", o->backends[i],
               cell(c3, sizeof c3, 12, 1, r->prefill.ran ? r->prefill.tokens / r->prefill.s : NAN),
               cell(c4, sizeof c4, 9, 1, pg), cell(c1, sizeof c1, 7, 2, pg / peak),
               cell(c5, sizeof c5, 12, 1, r->batched.ran ? r->batched.tokens / r->batched.s : NAN),
               cell(c6, sizeof c6, 9, 1, bg), cell(c2, sizeof c2, 7, 2, bg / peak), rss, rss / weight_mib(m),
               r->rss_over ? "!" : " ", r->cache_bytes / 1048576.0);
    }
    printf("\n");
    for (int i = 0; i < o->n_backends; i++)
        if (rows[i].ok)
            printf("%-12s %s, %d thread%s; %s%s%s\n", o->backends[i], dtype_name(rows[i].dtype), rows[i].threads,
                   rows[i].threads == 1 ? "" : "s", rows[i].library, rows[i].detail[0] ? "; " : "", rows[i].detail);
    if (isnan(p->bw_gbps) || isnan(peak))
        printf("-: not measured (the machine probe %s)\n", o->probe ? "failed" : "was skipped: --no-probe");
    printf("GB/s: weight bytes per decoded token / decode time; of BW: that over the read bandwidth;\n"
           "of WS: over the read rate at that many bytes swept again and again (a token's working set:\n"
           "where it fits in the caches, the roofline decode is held to; else the same as of BW);\n"
           "cpu ms/t: decode CPU time per token of the backend's process (all its threads; on a busy\n"
           "machine wall time over it shows how long the backend waited for a CPU);\n"
           "c/u: uncached over cached wall time; RSS/wts: peak RSS of the backend's process over the\n"
           "f32 weights (! over --max-rss-ratio); cache: the cached generation's k and v (prompt + new tokens long, at "
           "most n_positions).\n");
}

/* n figures in seconds as a JSON array, times `scale` (1e3: ms); null for NaN */
static json_t *ms_array(const double *v, int n, double scale)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, isfinite(v[i]) ? json_real(v[i] * scale) : json_null());
    return a;
}

static json_t *mode_json(const bench_model *m, const bench_row *r, const mode_result *x, double bw, double ws)
{
    if (!x->ran)
        return json_null();
    json_t *j = json_object();
    double gbps = decode_bytes(m, r) / x->decode_s * 1e-9;
    json_object_set_new(j, "new_tokens", json_integer(x->tokens));
    gf_json_set_number(j, "seconds", x->total_s, NULL);
    gf_json_set_number(j, "tokens_per_s", x->tokens / x->total_s, NULL);
    gf_json_set_number(j, "prefill_ms", x->prefill_s * 1e3, NULL);
    gf_json_set_number(j, "prefill_ms_per_token", x->prefill_s * 1e3 / GF_BENCH_PROMPT, NULL);
    gf_json_set_number(j, "decode_ms_per_token", x->decode_s * 1e3, NULL);
    gf_json_set_number(j, "decode_tokens_per_s", 1.0 / x->decode_s, NULL);
    gf_json_set_number(j, "decode_weight_gbps", gbps, NULL);
    gf_json_set_number(j, "decode_of_bandwidth", gbps / bw, "no bandwidth measured");
    gf_json_set_number(j, "decode_of_working_set_bandwidth", gbps / ws, "no bandwidth measured");
    gf_json_set_number(j, "prefill_cpu_ms", x->prefill_cpu_s * 1e3, NULL);
    gf_json_set_number(j, "decode_cpu_ms_per_token", x->decode_cpu_s * 1e3, NULL);
    /* each repeat's figures, in run order (the medians above are of these) */
    static const char *const keys[GF_BENCH_SAMPLE_MODE_KINDS] = {"prefill_ms", "decode_ms_per_token", "seconds",
                                                                 "prefill_cpu_ms", "decode_cpu_ms_per_token"};
    json_t *samples = json_object();
    for (int k = 0; k < GF_BENCH_SAMPLE_MODE_KINDS; k++)
        json_object_set_new(samples, keys[k], ms_array(x->samples[k], x->n_samples, k == 2 ? 1 : 1e3));
    json_object_set_new(j, "samples", samples);
    return j;
}

static json_t *rate_json(const rate_result *x, double gflops, double peak, const char *count_key)
{
    if (!x->ran)
        return json_null();
    json_t *j = json_object();
    json_object_set_new(j, count_key, json_integer(x->tokens));
    gf_json_set_number(j, "ms", x->s * 1e3, NULL);
    gf_json_set_number(j, "tokens_per_s", x->tokens / x->s, NULL);
    gf_json_set_number(j, "gflops", gflops, NULL);
    gf_json_set_number(j, "of_peak", gflops / peak, "no peak measured");
    gf_json_set_number(j, "cpu_ms", x->cpu_s * 1e3, NULL);
    json_t *samples = json_object();
    json_object_set_new(samples, "ms", ms_array(x->samples, x->n_samples, 1e3));
    json_object_set_new(samples, "cpu_ms", ms_array(x->cpu_samples, x->n_samples, 1e3));
    json_object_set_new(j, "samples", samples);
    return j;
}

static json_t *probe_json(const probe_result *p)
{
    json_t *j = json_object();
    gf_json_set_number(j, "read_gbps", p->bw_gbps, "probe failed");
    gf_json_set_number(j, "read_working_set_gbps", p->ws_gbps, "probe failed");
    gf_json_set_number(j, "fma_peak_gflops", p->fma_gflops, "probe failed");
    json_object_set_new(j, "fma_isa", json_string(p->fma_isa));
    gf_json_set_number(j, "sgemm_peak_gflops", p->sgemm_gflops, "libopenblas.so.0 not found");
    return j;
}

static json_t *state_json(const bench_state *st)
{
    json_t *j = json_object(), *load = json_array();
    for (int i = 0; i < 3; i++)
        json_array_append_new(load, isfinite(st->load[i]) ? json_real(st->load[i]) : json_null());
    json_object_set_new(j, "loadavg", load); /* 1, 5, 15 minutes */
    json_object_set_new(j, "governor", st->governor[0] ? json_string(st->governor) : json_null());
    if (!st->governor[0])
        json_object_set_new(j, "governor_reason", json_string("no cpufreq scaling_governor under /sys (a VM?)"));
    gf_json_set_number(j, "cpu0_mhz", st->mhz, "no cpufreq");
    return j;
}

/* "" -> null, else the text */
static json_t *said(const char *s) { return s[0] ? json_string(s) : json_null(); }

void bench_print_json(const bench_opts *o, const bench_model *m, const probe_result *p, const bench_machine *ms,
                      const bench_row *rows)
{
    char cpu[256];
    gf_bench_cpu_name(cpu, sizeof cpu);
    const char *which;
    double peak = peak_gflops(p, &which);
    json_t *root = json_object(), *jm = json_object(), *mach = json_object(), *wl = json_object();
    json_object_set_new(jm, "name", json_string(m->name));
    json_object_set_new(jm, "shape", o->shape ? json_string(o->shape) : json_null());
    gf_json_set_number(jm, "params", m->params, NULL);
    gf_json_set_number(jm, "weight_bytes_f32", m->params * 4, NULL);
    gf_json_set_number(jm, "decode_bytes_per_token_f32", (m->matmul_params + m->head_params) * 4, NULL);
    json_object_set_new(root, "model", jm);
    json_object_set_new(mach, "cpu", json_string(cpu));
    json_object_set_new(mach, "cpus", json_integer(gf_cpu_count()));
    json_object_set_new(mach, "threads", json_integer(o->threads));
    gf_json_set_number(mach, "read_gbps", p->bw_gbps, o->probe ? "probe failed" : "--no-probe");
    /* the read rate at a token's working set (model.decode_bytes_per_token_f32) */
    gf_json_set_number(mach, "read_working_set_gbps", p->ws_gbps, o->probe ? "probe failed" : "--no-probe");
    gf_json_set_number(mach, "fma_peak_gflops", p->fma_gflops, o->probe ? "probe failed" : "--no-probe");
    json_object_set_new(mach, "fma_isa", json_string(p->fma_isa));
    gf_json_set_number(mach, "sgemm_peak_gflops", p->sgemm_gflops,
                       o->probe ? "libopenblas.so.0 not found" : "--no-probe");
    json_object_set_new(mach, "peak_used", json_string(which));
    /* the figures above are the best of these probes (before and after the backends) */
    json_t *probes = json_array();
    for (int i = 0; i < ms->n_probes; i++)
        json_array_append_new(probes, probe_json(&ms->probes[i]));
    json_object_set_new(mach, "probes", probes);
    json_object_set_new(mach, "state_start", state_json(&ms->start));
    json_object_set_new(mach, "state_end", state_json(&ms->end));
    gf_json_set_number(mach, "wall_s", ms->end.at_s - ms->start.at_s, NULL);
    json_object_set_new(root, "machine", mach);
    json_object_set_new(wl, "prompt_tokens", json_integer(GF_BENCH_PROMPT));
    json_object_set_new(wl, "new_tokens", json_integer(o->new_tokens));
    json_object_set_new(wl, "warmup", json_integer(1));
    json_object_set_new(wl, "repeats", json_integer(o->repeats));
    json_object_set_new(wl, "rates", json_boolean(o->rates));
    gf_json_set_number(wl, "max_rss_ratio", o->max_rss_ratio > 0 ? o->max_rss_ratio : NAN, "none");
    json_object_set_new(wl, "prefill_tokens", json_integer(GF_BENCH_PREFILL));
    json_object_set_new(wl, "batch_rows", json_integer(GF_BENCH_ROWS));
    json_object_set_new(wl, "uncached", json_boolean(o->uncached));
    json_object_set_new(root, "workload", wl);
    json_t *arr = json_array();
    for (int i = 0; i < o->n_backends; i++) {
        const bench_row *r = &rows[i];
        json_t *b = json_object();
        json_object_set_new(b, "backend", json_string(o->backends[i]));
        json_object_set_new(b, "ok", json_boolean(r->ok));
        json_object_set_new(b, "error", r->ok ? json_null() : json_string(r->err));
        if (r->ok) {
            json_object_set_new(b, "dtype", json_string(dtype_name(r->dtype)));
            json_object_set_new(b, "threads", json_integer(r->threads));
            json_object_set_new(b, "library", json_string(r->library));
            json_object_set_new(b, "detail", json_string(r->detail));
            json_object_set_new(b, "cpu_path", said(r->cpu_path));
            json_object_set_new(b, "weights", said(r->weights));
            json_object_set_new(b, "kv_cache", said(r->kv_cache));
            json_object_set_new(b, "cached", mode_json(m, r, &r->cached, p->bw_gbps, p->ws_gbps));
            json_object_set_new(b, "uncached", mode_json(m, r, &r->uncached, p->bw_gbps, p->ws_gbps));
            gf_json_set_number(b, "cached_over_uncached",
                               r->uncached.ran ? r->uncached.total_s / r->cached.total_s : NAN, "--no-uncached");
            json_object_set_new(b, "prefill", rate_json(&r->prefill, prefill_gflops(m, r), peak, "tokens"));
            json_object_set_new(b, "batched_decode", rate_json(&r->batched, batched_gflops(m, r), peak, "rows"));
            gf_json_set_number(b, "peak_rss_bytes", r->maxrss_kb * 1024.0, NULL);
            gf_json_set_number(b, "rss_over_weights", r->maxrss_kb / 1024.0 / weight_mib(m), NULL);
            json_object_set_new(b, "rss_over_limit",
                                o->max_rss_ratio > 0 ? json_boolean(r->rss_over) : json_null()); /* null: no limit */
            json_object_set_new(b, "cache_bytes", json_integer((json_int_t)r->cache_bytes));
        }
        json_array_append_new(arr, b);
    }
    json_object_set_new(root, "backends", arr);
    json_dumpf(root, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("\n");
    json_decref(root);
}
