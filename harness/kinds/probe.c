/* probe: one mechanism of a backend (GF_PROBE_LIST, probe.h) isolated in a
 * seeded micro-model written at run time (probe_model.c), run on the backend
 * and on ref through the same loader and the same calls, judged by the NMSE
 * of every compared logit against ref's:
 *
 *     NMSE = sum (x - r)^2 / sum r^2
 *
 * over all rows, calls and real positions (a padded row's padding positions
 * are not compared). The bound is the case's `bound:`, else the rule by the
 * backend's declared compute type (k_bound_rule): fp32 1e-7, fp16 / bf16
 * 5e-4 (llama.cpp test-backend-ops' default and its bound for lower-precision
 * matrix products); a backend whose weights are quantized is skipped (the
 * statistical tier judges those). A pass records its headroom, bound / NMSE.
 *
 * The backend says which probes it runs (gf_backend_info.probes: names or
 * "all", and "-TAG" for the cases it leaves out): an undeclared probe is
 * skipped; a declared one that the backend refuses
 * (GF_E_UNSUPPORTED at model_load or in a call) fails: it would hand the
 * shape to another path, or to none. */
#define _GNU_SOURCE /* mkdtemp */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/model.h"
#include "keys.h"
#include "probe.h"

const char *const gf_probe_names[] = {
#define GF_PROBE_NAME(name, att, mlp, what) #name,
    GF_PROBE_LIST(GF_PROBE_NAME)
#undef GF_PROBE_NAME
        NULL,
};

static const char *const k_archs[] = {"gpt2", "llama", NULL};
static const gf_arch k_arch_values[] = {GF_ARCH_GPT2, GF_ARCH_LLAMA};
static const char *const k_acts[] = {"gelu_tanh", "gelu_erf", "relu", "silu", NULL};
static const gf_activation k_act_values[] = {GF_ACT_GELU_TANH, GF_ACT_GELU_ERF, GF_ACT_RELU, GF_ACT_SILU};
static const char *const k_modes[] = {"uncached", "cached", "padded", NULL};

/* the NMSE bound by compute type when the case declares none */
static double k_bound_rule(gf_compute_dtype dt) { return dt == GF_COMPUTE_F32 ? 1e-7 : 5e-4; }

static void probe_free(void *p)
{
    gf_probe_spec *s = p;
    if (s) {
        free(s->chunks);
        free(s->pad);
        json_decref(s->rope_scaling);
    }
    free(s);
}

static void shape_name(gf_probe_spec *s)
{
    char calls[64] = "";
    size_t n = 0;
    if (s->mode == GF_PROBE_CACHED) {
        n += (size_t)snprintf(calls + n, sizeof calls - n, " cached[");
        for (size_t i = 0, r; i < s->n_chunks && n < sizeof calls - 12; i += r) { /* runs as 1x8 */
            for (r = 1; i + r < s->n_chunks && s->chunks[i + r] == s->chunks[i]; r++)
                ;
            n += (size_t)snprintf(calls + n, sizeof calls - n, r > 1 ? "%s%dx%zu" : "%s%d", i ? "," : "",
                                  (int)s->chunks[i], r);
        }
        snprintf(calls + n, sizeof calls - n, "]");
    } else if (s->mode == GF_PROBE_PADDED) {
        snprintf(calls, sizeof calls, " padded");
    }
    char rope[48] = "";
    if (s->rope_scaling) {
        const char *t = json_string_value(json_object_get(s->rope_scaling, "rope_type"));
        if (!t)
            t = json_string_value(json_object_get(s->rope_scaling, "type"));
        snprintf(rope, sizeof rope, " rope=%s", t ? t : "?");
    }
    char extra[64] = "";
    size_t x = 0;
    if (s->qk_scale != 1.0)
        x += (size_t)snprintf(extra + x, sizeof extra - x, " qk*%.3g", s->qk_scale);
    if (s->head_scale != 1.0 && x < sizeof extra)
        x += (size_t)snprintf(extra + x, sizeof extra - x, " head*%.3g", s->head_scale);
    if (s->embed_scale != 1.0 && x < sizeof extra)
        snprintf(extra + x, sizeof extra - x, " x*%.3g", s->embed_scale);
    snprintf(s->shape, sizeof s->shape, "%s %s D%lld H%lld/%lld dh%lld F%lld V%lld P%lld B%lld T%lld%s%s%s",
             k_archs[s->arch == GF_ARCH_GPT2 ? 0 : 1], k_acts[s->activation - 1], s->n_embd, s->n_head, s->n_kv_head,
             s->d_head, s->d_ff, s->vocab, s->n_positions, s->rows, s->tokens, calls, rope, extra);
}

static int parse_probe(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    gf_probe_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    int mech = 0, arch = 1, act = -1, mode = GF_PROBE_UNCACHED;
    int bad = gf_y_enum(ctx, m, "probe", GF_Y_REQUIRED, gf_probe_names, &mech) < 0;
    bad |= gf_y_enum(ctx, m, "arch", 0, k_archs, &arch) < 0;
    s->n_embd = 64, s->n_head = 4, s->n_kv_head = 0, s->d_head = 0, s->d_ff = 0, s->vocab = 96, s->n_positions = 64;
    s->n_layer = 1, s->tokens = 8, s->rows = 1, s->seed = 28;
    s->norm_eps = -1, s->rope_theta = 10000.0, s->embed_scale = 1.0, s->qk_scale = 1.0, s->head_scale = 1.0;
    s->gain_spread = -1;
    bad |= gf_y_int(ctx, m, "n_embd", 0, 2, 8192, &s->n_embd) < 0;
    bad |= gf_y_int(ctx, m, "n_head", 0, 1, 256, &s->n_head) < 0;
    bad |= gf_y_int(ctx, m, "n_kv_head", 0, 1, 256, &s->n_kv_head) < 0;
    bad |= gf_y_int(ctx, m, "d_head", 0, 2, 1024, &s->d_head) < 0;
    bad |= gf_y_int(ctx, m, "d_ff", 0, 1, 65536, &s->d_ff) < 0;
    bad |= gf_y_int(ctx, m, "vocab", 0, 2, 1 << 20, &s->vocab) < 0;
    bad |= gf_y_int(ctx, m, "n_positions", 0, 1, 1 << 16, &s->n_positions) < 0;
    bad |= gf_y_int(ctx, m, "n_layer", 0, 1, 8, &s->n_layer) < 0;
    bad |= gf_y_enum(ctx, m, "activation", 0, k_acts, &act) < 0;
    bad |= gf_y_double(ctx, m, "norm_eps", 0, &s->norm_eps) < 0;
    bad |= gf_y_double(ctx, m, "rope_theta", 0, &s->rope_theta) < 0;
    const gf_ynode *rs = gf_y_get(ctx, m, "rope_scaling", 0);
    bad |= gf_y_double(ctx, m, "embed_scale", 0, &s->embed_scale) < 0;
    bad |= gf_y_double(ctx, m, "qk_scale", 0, &s->qk_scale) < 0;
    bad |= gf_y_double(ctx, m, "head_scale", 0, &s->head_scale) < 0;
    bad |= gf_y_double(ctx, m, "gain_spread", 0, &s->gain_spread) < 0;
    bad |= gf_y_int(ctx, m, "tokens", 0, 1, 1 << 16, &s->tokens) < 0;
    bad |= gf_y_int(ctx, m, "rows", 0, 1, 64, &s->rows) < 0;
    bad |= gf_y_int(ctx, m, "seed", 0, 0, 0x7fffffffffffffffLL, &s->seed) < 0;
    bad |= gf_y_enum(ctx, m, "mode", 0, k_modes, &mode) < 0;
    int rc_chunks = gf_y_ints(ctx, m, "chunks", 0, 1, 1 << 16, 1, &s->chunks, &s->n_chunks);
    int rc_pad = gf_y_ints(ctx, m, "pad", 0, 0, 1 << 16, 1, &s->pad, &s->n_pad);
    bad |= rc_chunks < 0 || rc_pad < 0;
    int rc_bound = gf_y_double(ctx, m, "bound", 0, &s->bound);
    bad |= rc_bound < 0;
    if (bad)
        return -1;
    s->mech = mech;
    s->arch = k_arch_values[arch];
    s->mode = mode;
    const int gpt2 = s->arch == GF_ARCH_GPT2;
    s->activation = act >= 0 ? k_act_values[act] : gpt2 ? GF_ACT_GELU_TANH : GF_ACT_SILU;
    if (!s->n_kv_head)
        s->n_kv_head = s->n_head;
    if (!s->d_head)
        s->d_head = s->n_embd / s->n_head;
    if (!s->d_ff)
        s->d_ff = 2 * s->n_embd;
    if (s->norm_eps < 0)
        s->norm_eps = gpt2 ? 1e-5 : 1e-6;
    if (s->gain_spread < 0)
        s->gain_spread = s->mech == GF_PROBE_norm ? 0.5 : 0.0;
    if (rs) {
        if (!gf_y_node_is_map(ctx, rs, "rope_scaling"))
            return -1;
        s->rope_scaling = gf_ynode_to_json(rs);
    }
#define REFUSE(cond, node, ...)             \
    if (cond) {                             \
        gf_y_error(ctx, node, __VA_ARGS__); \
        return -1;                          \
    }
    REFUSE(gpt2 && s->activation == GF_ACT_SILU, m, "probe: GPT-2 takes gelu_tanh, gelu_erf or relu, not silu");
    REFUSE(!gpt2 && s->activation != GF_ACT_SILU, m, "probe: the Llama family takes silu (SwiGLU) only");
    REFUSE(gpt2 && (s->n_kv_head != s->n_head || s->d_head * s->n_head != s->n_embd), m,
           "probe: GPT-2 has n_kv_head = n_head and d_head = n_embd / n_head");
    REFUSE(gpt2 && rs, rs, "probe: rope_scaling needs arch llama (rotary positions)");
    REFUSE(s->n_head % s->n_kv_head, m, "probe: n_head %lld is not a multiple of n_kv_head %lld", s->n_head,
           s->n_kv_head);
    REFUSE(!gpt2 && s->d_head % 2, m, "probe: d_head %lld is odd (rotary positions rotate pairs)", s->d_head);
    REFUSE(s->tokens > s->n_positions, m, "probe: tokens %lld past n_positions %lld", s->tokens, s->n_positions);
    REFUSE(rc_bound > 0 && !(s->bound > 0 && isfinite(s->bound)), gf_y_get(ctx, m, "bound", 0),
           "probe: bound must be a finite NMSE > 0 (leave it out for the rule by compute type)");
    REFUSE(s->mode != GF_PROBE_CACHED && rc_chunks > 0, m, "probe: 'chunks' needs mode: cached");
    REFUSE(s->mode != GF_PROBE_PADDED && rc_pad > 0, m, "probe: 'pad' needs mode: padded");
    if (s->mode == GF_PROBE_CACHED) {
        if (!s->chunks) { /* default: a prefill of half, then one at a time */
            int32_t first = (int32_t)(s->tokens > 1 ? s->tokens / 2 : 1);
            s->n_chunks = (size_t)(1 + s->tokens - first);
            s->chunks = malloc(s->n_chunks * sizeof *s->chunks);
            if (!s->chunks)
                return -1;
            s->chunks[0] = first;
            for (size_t i = 1; i < s->n_chunks; i++)
                s->chunks[i] = 1;
        }
        long long tot = 0;
        for (size_t i = 0; i < s->n_chunks; i++)
            tot += s->chunks[i];
        REFUSE(tot != s->tokens, gf_y_get(ctx, m, "chunks", 0), "probe: 'chunks' add up to %lld; 'tokens' is %lld", tot,
               s->tokens);
    }
    if (s->mode == GF_PROBE_PADDED) {
        if (!s->pad) { /* default: row b padded by b tokens */
            s->n_pad = (size_t)s->rows;
            s->pad = calloc(s->n_pad, sizeof *s->pad);
            if (!s->pad)
                return -1;
            for (size_t b = 0; b < s->n_pad; b++)
                s->pad[b] = (int32_t)(b < (size_t)s->tokens ? b : 0);
        }
        REFUSE(s->n_pad != (size_t)s->rows, gf_y_get(ctx, m, "pad", 0), "probe: 'pad' has %zu entries; 'rows' is %lld",
               s->n_pad, s->rows);
        for (size_t b = 0; b < s->n_pad; b++)
            REFUSE(s->pad[b] >= s->tokens, gf_y_get(ctx, m, "pad", 0), "probe: row %zu is all padding", b);
    }
#undef REFUSE
    shape_name(s);
    return 0;
}

/* ---- the run ---- */

static uint64_t mix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Does the backend's declaration take this probe case? The declaration is
 * a comma list: "all" or probe names take, "-TAG" leaves out the cases
 * tagged TAG (or the probe named TAG), whatever else takes them
 * (llamacpp: "all,-gelu_erf,-relu"). *why names the item that left it out. */
static int declared(const char *list, const gf_case *c, const char *name, char *why, size_t cap)
{
    int take = 0;
    why[0] = 0;
    if (!list)
        return 0;
    for (const char *p = list; *p;) {
        while (*p == ',' || *p == ' ')
            p++;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ')
            e++;
        char item[64];
        snprintf(item, sizeof item, "%.*s", (int)(e - p < 63 ? e - p : 63), p);
        const gf_probe_spec *ps = c->spec;
        const char *arch = ps ? k_archs[ps->arch == GF_ARCH_GPT2 ? 0 : 1] : "";
        if (item[0] == '-') { /* a probe, a case tag, or an architecture (-llama: a GPT-2-only engine) */
            if (!strcmp(item + 1, name) || gf_case_has_tag(c, item + 1) || !strcmp(item + 1, arch)) {
                snprintf(why, cap, "%s", item);
                return 0;
            }
        } else if (item[0] && (!strcmp(item, "all") || !strcmp(item, name))) {
            take = 1;
        }
        p = e;
    }
    return take;
}

/* Every call of the probe on one session: logits (B, T, V) of all positions,
 * in order (cached: the chunks' logits side by side). */
static gf_status run_calls(const gf_probe_spec *s, gf_session *ss, const int32_t *tok, float *out, const char **what)
{
    const int32_t B = (int32_t)s->rows, T = (int32_t)s->tokens, V = (int32_t)s->vocab;
    gf_engine *e = ss->engine;
    gf_status st = GF_OK;
    int32_t *pos = malloc((size_t)B * T * sizeof *pos);     /* (B, T) */
    int32_t *ctok = malloc((size_t)B * T * sizeof *ctok);   /* (B, chunk) */
    uint8_t *mask = malloc((size_t)B * T * sizeof *mask);   /* (B, T) */
    float *part = malloc((size_t)B * T * V * sizeof *part); /* (B, chunk, V) */
    if (!pos || !ctok || !mask || !part) {
        st = gf_error_set(GF_E_NOMEM, "probe: out of memory");
        goto done;
    }
    if (s->mode != GF_PROBE_CACHED) {
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < T; t++) {
                int32_t pad = s->mode == GF_PROBE_PADDED ? s->pad[b] : 0;
                mask[(size_t)b * T + t] = t >= pad;
                pos[(size_t)b * T + t] = t >= pad ? t - pad : 0;
            }
        gf_batch in = {.B = B,
                       .T = T,
                       .tokens = tok,
                       .position_ids = pos,
                       .key_mask = s->mode == GF_PROBE_PADDED ? mask : NULL,
                       .logits_mode = GF_LOGITS_ALL};
        *what = s->mode == GF_PROBE_PADDED ? "padded forward" : "uncached forward";
        st = gf_engine_forward(e, NULL, &in, out);
        goto done;
    }
    void *cache = NULL;
    *what = "cache_create";
    if ((st = gf_engine_cache_create(e, B, (int32_t)s->n_positions, &cache)) != GF_OK)
        goto done;
    int32_t start = 0;
    for (size_t ci = 0; ci < s->n_chunks && st == GF_OK; ci++) {
        const int32_t n = s->chunks[ci];
        for (int32_t b = 0; b < B; b++)
            for (int32_t t = 0; t < n; t++) {
                ctok[(size_t)b * n + t] = tok[(size_t)b * T + start + t];
                pos[(size_t)b * n + t] = start + t;
            }
        gf_batch in = {.B = B, .T = n, .tokens = ctok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
        *what = "cached forward";
        st = gf_engine_forward(e, cache, &in, part);
        for (int32_t b = 0; st == GF_OK && b < B; b++)
            memcpy(out + ((size_t)b * T + start) * V, part + (size_t)b * n * V, (size_t)n * V * sizeof *out);
        start += n;
    }
    gf_engine_cache_free(e, cache);
done:
    free(pos);
    free(ctok);
    free(mask);
    free(part);
    return st;
}

/* Is every comma-separated item of `ran` one of `declared`'s? The first
 * that is not into bad. */
static int paths_within(const char *ran, const char *declared, char *bad, size_t cap)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", ran);
    char *save = NULL;
    for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
        while (*it == ' ')
            it++;
        size_t n = strlen(it);
        int found = 0;
        for (const char *d = declared; *d && !found;) {
            while (*d == ' ' || *d == ',')
                d++;
            size_t m = strcspn(d, ",");
            while (m > 0 && d[m - 1] == ' ')
                m--;
            found = m == n && !strncmp(d, it, n);
            d += strcspn(d, ",");
        }
        if (!found) {
            snprintf(bad, cap, "%s", it);
            return 0;
        }
    }
    return 1;
}

/* The kernel paths the probe's calls ran on the backend (the optional
 * model_paths slot) against its declared info.cpu_path: metrics
 * "kernel_paths", and a failed check "declared path ran" where a call ran
 * a path the backend does not declare. */
static void paths_check(gf_krun *k, gf_session *test, const char *mech, const char *shape, const char *declared)
{
    char ran[512];
    gf_status st = gf_engine_model_paths(test->engine, ran, sizeof ran);
    if (st == GF_E_UNSUPPORTED) {
        gf_k_metric_json(k, "kernel_paths", json_string("not said (the backend has no model_paths slot)"));
        return;
    }
    if (st != GF_OK) {
        gf_k_check(k, 0, "declared path ran", "probe %s [%s]: %s", mech, shape, gf_error_msg());
        return;
    }
    gf_k_metric_json(k, "kernel_paths", json_string(ran));
    if (!declared[0]) {
        gf_k_metric_json(k, "kernel_paths_check",
                         json_string("not judged: the backend declares no cpu_path to judge them by"));
        return;
    }
    char bad[256] = "";
    int ok = paths_within(ran, declared, bad, sizeof bad);
    gf_k_check(k, ok, "declared path ran",
               ok ? "probe %s [%s]: the calls ran %s, as declared (cpu_path %s)%s"
                  : "probe %s [%s]: the calls ran path '%s', which the backend does not declare (cpu_path %s): a "
                    "silent fallback, so the NMSE judged that path, not the declared kernel",
               mech, shape, ok ? ran : bad, declared, "");
}

static void run_probe(const gf_case *c, gf_krun *k)
{
    const gf_probe_spec *s = c->spec;
    const char *mech = gf_probe_names[s->mech];
    const int32_t B = (int32_t)s->rows, T = (int32_t)s->tokens, V = (int32_t)s->vocab;
    const size_t nl = (size_t)B * T * V;
    char dir[4096] = "";
    gf_session ref = {0}, test = {0};
    int ref_open = 0, test_open = 0;
    int32_t *tok = malloc((size_t)B * T * sizeof *tok);                 /* (B, T) */
    float *lr = malloc(nl * sizeof *lr), *lt = malloc(nl * sizeof *lt); /* (B, T, V) ref, backend */
    gf_k_metric_json(k, "probe", json_string(mech));
    gf_k_metric_json(k, "shape", json_string(s->shape));
    gf_k_seed(k, "weights", (uint64_t)s->seed);
    if (!tok || !lr || !lt) {
        gf_k_fail(k, "out of memory");
        goto done;
    }
    /* 1. what the backend declares (read before its model load, which may refuse) */
    char probes[512] = "", weights[64] = "", cpu_path[256] = "";
    int has_decl = 0;
    gf_compute_dtype dtype = k->dtype;
    uint32_t features = 0; /* the GF_MODEL_NEEDS_* bits the backend implements */
    {
        gf_backend_handle h;
        if (gf_registry_open(k->backend, &h) == GF_OK) {
            gf_backend_options bo = gf_registry_options(&h, k->threads);
            gf_backend_info bi;
            gf_backend_describe(h.ops, &bo, &bi);
            if (bi.struct_size > offsetof(gf_backend_info, probes) && bi.probes) {
                has_decl = 1;
                snprintf(probes, sizeof probes, "%s", bi.probes);
            }
            if (bi.struct_size > offsetof(gf_backend_info, weights) && bi.weights)
                snprintf(weights, sizeof weights, "%s", bi.weights);
            dtype = bi.dtype;
            if (bi.struct_size > offsetof(gf_backend_info, cpu_path) && bi.cpu_path)
                snprintf(cpu_path, sizeof cpu_path, "%s", bi.cpu_path);
            if (bi.struct_size > offsetof(gf_backend_info, model_features))
                features = bi.model_features;
            gf_registry_close(&h);
        }
    }
    char left_out[64];
    const int is_declared = declared(has_decl ? probes : NULL, c, mech, left_out, sizeof left_out);
    gf_k_metric_json(k, "declared", has_decl ? json_string(probes) : json_null());
    if (!is_declared) {
        gf_k_skip(k, "backend '%s' does not declare probe '%s'%s%s (info.probes: %s)", k->backend_name, mech,
                  left_out[0] ? " for this case: it leaves out " : "", left_out, has_decl ? probes : "not said");
        goto done;
    }
    if (weights[0] && strcmp(weights, "f32") && strcmp(weights, "f16") && strcmp(weights, "bf16")) {
        gf_k_skip(k,
                  "weights %s: the probes judge fp32 / fp16 / bf16 computation; quantized weights are the "
                  "statistical tier's",
                  weights);
        goto done;
    }
    const double bound = s->bound > 0 ? s->bound : k_bound_rule(dtype);
    gf_k_metric(k, "bound", bound);
    gf_k_metric_json(k, "bound_from", json_string(s->bound > 0 ? "case" : "rule"));
    /* 2. the micro-model, written where this child alone sees it */
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/genfence-probe-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        dir[0] = 0;
        gf_k_error(k, "probe: cannot make a temporary directory under %s", tmp && tmp[0] ? tmp : "/tmp");
        goto done;
    }
    gf_status st = gf_probe_model_write(s, dir);
    if (st != GF_OK) {
        gf_k_error(k, "probe: writing the micro-model: %s", gf_error_msg());
        goto done;
    }
    for (int32_t i = 0; i < B * T; i++)
        tok[i] = (int32_t)(mix((uint64_t)s->seed * 1000003u + (uint64_t)i) % (uint64_t)V);
    gf_k_seed(k, "tokens", (uint64_t)s->seed);
    /* 3. ref, then the backend, on the same directory and calls */
    const char *what = "model_load";
    if ((st = gf_session_open(&ref, dir, "ref", k->threads, GF_SESSION_TOK_NONE)) == GF_OK) {
        ref_open = 1;
        st = run_calls(s, &ref, tok, lr, &what);
    }
    if (st != GF_OK) {
        gf_k_error(k, "probe: ref cannot run the micro-model (%s): %s", what, gf_error_msg());
        goto done;
    }
    /* a model feature the backend says it lacks (yarn's attention factor, say) is its
     * declared inability, not a refused probe */
    const uint32_t needs = gf_model_desc_get(ref.model)->needs;
    if (needs & ~features) {
        gf_k_skip(k,
                  "probe %s [%s]: the micro-model needs model features 0x%x that backend '%s' does not implement "
                  "(info.model_features 0x%x)",
                  mech, s->shape, (unsigned)needs, k->backend_name, (unsigned)features);
        goto done;
    }
    what = "model_load";
    if ((st = gf_session_open(&test, dir, k->backend, k->threads, GF_SESSION_TOK_NONE)) == GF_OK) {
        test_open = 1;
        st = run_calls(s, &test, tok, lt, &what);
    }
    if (st == GF_E_UNSUPPORTED) {
        gf_k_check(k, 0, "declared probe runs",
                   "probe %s [%s]: declared (info.probes: %s) but the backend refused it "
                   "at %s: %s",
                   mech, s->shape, probes, what, gf_error_msg());
        goto done;
    }
    if (st == GF_E_UNAVAILABLE) {
        gf_k_skip(k, "probe %s [%s]: %s", mech, s->shape, gf_error_msg());
        goto done;
    }
    if (st != GF_OK) { /* bad input is ours (the case's shape): error; anything else the backend's: fail */
        if (st == GF_E_INVALID_ARG || st == GF_E_FORMAT || st == GF_E_IO)
            gf_k_error(k, "probe %s [%s]: %s: %s", mech, s->shape, what, gf_error_msg());
        else
            gf_k_check(k, 0, "backend runs the probe", "probe %s [%s]: %s: %s", mech, s->shape, what, gf_error_msg());
        goto done;
    }
    /* the path the calls ran (model_paths): a path the backend does not
     * declare (info.cpu_path) is a silent fallback */
    paths_check(k, &test, mech, s->shape, cpu_path);
    /* 4. NMSE over the real positions; the worst position by squared error */
    double num = 0, den = 0, worst = -1;
    int32_t wb = 0, wt = 0;
    for (int32_t b = 0; b < B; b++)
        for (int32_t t = s->mode == GF_PROBE_PADDED ? s->pad[b] : 0; t < T; t++) {
            double pn = 0;
            for (int32_t v = 0; v < V; v++) {
                size_t i = ((size_t)b * T + t) * V + v;
                double d = (double)lt[i] - lr[i];
                pn += d * d;
                den += (double)lr[i] * lr[i];
            }
            num += pn;
            if (!(pn <= worst)) {
                worst = pn;
                wb = b;
                wt = t;
            }
        }
    const double nmse = den > 0 ? num / den : num;
    gf_k_metric(k, "nmse", isfinite(nmse) ? nmse : 1e300);
    gf_k_metric_json(k, "nmse_finite", json_boolean(isfinite(nmse)));
    gf_k_metric_int(k, "worst_row", wb);
    gf_k_metric_int(k, "worst_position", wt);
    if (nmse <= bound)
        gf_k_metric_json(k, "headroom", nmse > 0 ? json_real(bound / nmse) : json_null()); /* null: exact */
    gf_k_check(k, nmse <= bound, "NMSE against ref",
               "probe %s [%s]: NMSE %.3g %s bound %.3g (worst at row %d, position %d)", mech, s->shape, nmse,
               nmse <= bound ? "<=" : ">", bound, (int)wb, (int)wt);
done:
    if (test_open)
        gf_session_close(&test);
    if (ref_open)
        gf_session_close(&ref);
    if (dir[0])
        gf_model_write_remove(dir);
    free(tok);
    free(lr);
    free(lt);
}

const gf_kind_def gf_kind_probe = {
    .name = "probe",
    .summary = "one mechanism (embedding, attention, rope, norm, mlp, head) in a seeded micro-model: NMSE against ref",
    .needs = GF_KIND_NEEDS_NOTHING,
    .reaches = GF_KIND_REACHES_MODEL,
    .opens_sessions = 1,
    .parse = parse_probe,
    .free_spec = probe_free,
    .run = run_probe,
};
