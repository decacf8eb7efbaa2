/* The Llama family (Llama, Qwen2) on the vendor backends (openblas, onednn
 * modules, dlopen'ed from the build's backends/ folder) and on the example
 * plugin (examples/plugin/plugin.c compiled in below), against a plain
 * double-precision Llama forward written here from the ABI's description
 * (include/genfence/model_desc.h): RMSNorm, rotate-half RoPE with the angle
 * (float)pos * inv_freq, grouped-query attention (query head h reads key /
 * value head h / (H / H_kv)), SwiGLU, Qwen2's q/k/v biases.
 *
 * A small random model with GQA (H 4, H_kv 2, d_head 8, so H d_head 32 is
 * not D 40; F 48, V 64, L 2, 128 positions), checked uncached, cached one token at a time, in
 * uneven prefill chunks, and as a left-padded batch with a key mask (uncached
 * and cached), at positions up to 99; every logit within 1e-4 of the double
 * forward. The cache holds H_kv heads: cache_bytes == 2 L B H_kv max_len
 * d_head 4. The same comparison against the double forward with a fault put
 * in (wrong kv-head map, interleaved RoPE pairs, angle in double, Qwen2
 * biases dropped) must exceed the tolerance: the check can fail. */
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "genfence/backend.h"

/* the example plugin, compiled into this test under another entry name (its
 * statics are its own; nothing below reuses their names) */
#define genfence_backend_entry gf_test_example_entry
#include "../../examples/plugin/plugin.c"
#undef genfence_backend_entry

enum { V_ = 64, NP_ = 128, D_ = 40, H_ = 4, HKV_ = 2, DH_ = 8, F_ = 48, L_ = 2 }; /* H DH_ = 32 != D */
#define ATOL 1e-4

/* ---- the model ---- */

typedef struct llama {
    gf_model_desc desc;
    gf_layer_weights layers[L_];
    float inv_freq[DH_ / 2];
    float *storage;
    size_t used, cap;
    uint64_t rng;
} llama;

static double urand(llama *m) /* splitmix64 -> [-1, 1) */
{
    uint64_t z = (m->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0;
}

static const float *take(llama *m, size_t n, double centre, double spread)
{
    cr_assert_leq(m->used + n, m->cap);
    float *p = m->storage + m->used;
    for (size_t i = 0; i < n; i++)
        p[i] = (float)(centre + spread * urand(m));
    m->used += n;
    return p;
}

/* qwen2: q/k/v biases, tied head, theta 1e6 with a linear factor 2 folded in */
static void llama_make(llama *m, int qwen2, uint64_t seed)
{
    memset(m, 0, sizeof *m);
    m->rng = seed;
    m->cap = (size_t)V_ * D_ * 2 + D_ +
             L_ * ((size_t)2 * D_ + 4 * (size_t)H_ * DH_ * D_ + 3 * (size_t)F_ * D_ + (size_t)(H_ + 2 * HKV_) * DH_);
    m->storage = malloc(m->cap * sizeof(float));
    cr_assert(m->storage);
    const size_t Q = (size_t)H_ * DH_, KV = (size_t)HKV_ * DH_;
    gf_model_weights *w = &m->desc.weights;
    w->wte = take(m, (size_t)V_ * D_, 0, 1.0);
    for (int l = 0; l < L_; l++) {
        gf_layer_weights *y = &m->layers[l];
        y->attn_norm_w = take(m, D_, 1.0, 0.2);
        y->wq = take(m, Q * D_, 0, 0.35);
        y->wk = take(m, KV * D_, 0, 0.35);
        y->wv = take(m, KV * D_, 0, 0.35);
        y->wo = take(m, (size_t)D_ * Q, 0, 0.3);
        y->mlp_norm_w = take(m, D_, 1.0, 0.2);
        y->w_gate = take(m, (size_t)F_ * D_, 0, 0.35);
        y->w_up = take(m, (size_t)F_ * D_, 0, 0.35);
        y->w_down = take(m, (size_t)D_ * F_, 0, 0.25);
        if (qwen2) {
            y->bq = take(m, Q, 0, 0.5);
            y->bk = take(m, KV, 0, 0.5);
            y->bv = take(m, KV, 0, 0.5);
        }
    }
    w->layers = m->layers;
    w->lnf_w = take(m, D_, 1.0, 0.2);
    w->lm_head = qwen2 ? w->wte : take(m, (size_t)V_ * D_, 0, 0.5);
    const double theta = qwen2 ? 1e6 : 1e4, factor = qwen2 ? 2.0 : 1.0;
    for (int i = 0; i < DH_ / 2; i++) /* HF: 1 / theta^(2i / d) in float32 */
        m->inv_freq[i] = (float)(1.0f / powf((float)theta, (float)(2 * i) / (float)DH_)) / (float)factor;
    w->rope_inv_freq = m->inv_freq;
    m->desc.struct_size = sizeof m->desc;
    m->desc.name = qwen2 ? "tiny-qwen2" : "tiny-llama";
    m->desc.config = (gf_model_config){.arch = GF_ARCH_LLAMA,
                                       .activation = GF_ACT_SILU,
                                       .norm = GF_NORM_RMSNORM,
                                       .pos = GF_POS_ROPE,
                                       .vocab_size = V_,
                                       .n_positions = NP_,
                                       .n_embd = D_,
                                       .n_layer = L_,
                                       .n_head = H_,
                                       .n_kv_head = HKV_,
                                       .d_head = DH_,
                                       .d_ff = F_,
                                       .norm_eps = 1e-5f,
                                       .rope_theta = (float)theta,
                                       .bos_id = -1,
                                       .eos_id = -1,
                                       .tied_head = qwen2,
                                       .qkv_bias = qwen2,
                                       .rope_scaling = qwen2 ? GF_ROPE_SCALING_LINEAR : GF_ROPE_SCALING_NONE,
                                       .rope_factor = qwen2 ? 2.0f : 0.0f};
}

/* ---- the double-precision forward (one unpadded sequence) ---- */

typedef enum fault { FAULT_NONE, FAULT_KV_MAP, FAULT_ROPE_PAIRS, FAULT_ANGLE_DOUBLE, FAULT_NO_BIAS } fault;

static void dlinear(double *y, const double *x, const float *W, const float *b, int N, int K)
{
    for (int o = 0; o < N; o++) {
        double s = b ? b[o] : 0.0;
        for (int k = 0; k < K; k++)
            s += (double)W[(size_t)o * K + k] * x[k];
        y[o] = s;
    }
}

static void drms(double *y, const double *x, const float *w)
{
    double ss = 0;
    for (int i = 0; i < D_; i++)
        ss += x[i] * x[i];
    double inv = 1.0 / sqrt(ss / D_ + 1e-5f);
    for (int i = 0; i < D_; i++)
        y[i] = w[i] * (x[i] * inv);
}

static void drope(double *x, int pos, const float *inv, fault f)
{
    const int half = DH_ / 2;
    for (int i = 0; i < half; i++) {
        double ang = f == FAULT_ANGLE_DOUBLE ? (double)pos * inv[i] : (double)((float)pos * inv[i]);
        double c = cos(ang), s = sin(ang);
        int a = f == FAULT_ROPE_PAIRS ? 2 * i : i, b = f == FAULT_ROPE_PAIRS ? 2 * i + 1 : i + half;
        double x1 = x[a], x2 = x[b];
        x[a] = x1 * c - x2 * s;
        x[b] = x2 * c + x1 * s;
    }
}

/* logits (T, V) of tokens (T) at positions 0 .. T-1 */
static void ref_forward(const llama *m, const int32_t *tok, int T, double *logits, fault f)
{
    const gf_model_weights *w = &m->desc.weights;
    const int Q = H_ * DH_, KV = HKV_ * DH_, rep = H_ / HKV_;
    double *x = calloc((size_t)T * D_, sizeof *x), *q = calloc((size_t)T * Q, sizeof *q);
    double *k = calloc((size_t)T * KV, sizeof *k), *v = calloc((size_t)T * KV, sizeof *v);
    double *att = calloc((size_t)T * Q, sizeof *att), *p = calloc((size_t)T, sizeof *p);
    double h[D_], o[D_], g[F_], u[F_];
    cr_assert(x && q && k && v && att && p);
    for (int t = 0; t < T; t++)
        for (int d = 0; d < D_; d++)
            x[t * D_ + d] = w->wte[(size_t)tok[t] * D_ + d];
    for (int l = 0; l < L_; l++) {
        const gf_layer_weights *y = &w->layers[l];
        const int bias = m->desc.config.qkv_bias && f != FAULT_NO_BIAS;
        for (int t = 0; t < T; t++) {
            drms(h, x + t * D_, y->attn_norm_w);
            dlinear(q + t * Q, h, y->wq, bias ? y->bq : NULL, Q, D_);
            dlinear(k + t * KV, h, y->wk, bias ? y->bk : NULL, KV, D_);
            dlinear(v + t * KV, h, y->wv, bias ? y->bv : NULL, KV, D_);
            for (int hh = 0; hh < H_; hh++)
                drope(q + t * Q + hh * DH_, t, w->rope_inv_freq, f);
            for (int hh = 0; hh < HKV_; hh++)
                drope(k + t * KV + hh * DH_, t, w->rope_inv_freq, f);
        }
        for (int t = 0; t < T; t++)
            for (int hh = 0; hh < H_; hh++) {
                const int kvh = f == FAULT_KV_MAP ? hh % HKV_ : hh / rep;
                double mx = -INFINITY, sum = 0;
                for (int j = 0; j <= t; j++) {
                    double s = 0;
                    for (int d = 0; d < DH_; d++)
                        s += q[t * Q + hh * DH_ + d] * k[j * KV + kvh * DH_ + d];
                    p[j] = s / sqrt((double)DH_);
                    mx = p[j] > mx ? p[j] : mx;
                }
                for (int j = 0; j <= t; j++)
                    sum += (p[j] = exp(p[j] - mx));
                for (int d = 0; d < DH_; d++) {
                    double a = 0;
                    for (int j = 0; j <= t; j++)
                        a += p[j] * v[j * KV + kvh * DH_ + d];
                    att[t * Q + hh * DH_ + d] = a / sum;
                }
            }
        for (int t = 0; t < T; t++) {
            double a[H_ * DH_];
            for (int i = 0; i < Q; i++)
                a[i] = att[t * Q + i];
            /* W_o is (D, Q) [out, in] */
            for (int dd = 0; dd < D_; dd++) {
                double s = 0;
                for (int i = 0; i < Q; i++)
                    s += (double)y->wo[(size_t)dd * Q + i] * a[i];
                o[dd] = s;
            }
            for (int d = 0; d < D_; d++)
                x[t * D_ + d] += o[d];
            drms(h, x + t * D_, y->mlp_norm_w);
            dlinear(g, h, y->w_gate, NULL, F_, D_);
            dlinear(u, h, y->w_up, NULL, F_, D_);
            for (int i = 0; i < F_; i++)
                g[i] = g[i] / (1.0 + exp(-g[i])) * u[i];
            dlinear(o, g, y->w_down, NULL, D_, F_);
            for (int d = 0; d < D_; d++)
                x[t * D_ + d] += o[d];
        }
    }
    for (int t = 0; t < T; t++) {
        drms(h, x + t * D_, w->lnf_w);
        dlinear(logits + (size_t)t * V_, h, w->lm_head, NULL, V_, D_);
    }
    free(x);
    free(q);
    free(k);
    free(v);
    free(att);
    free(p);
}

/* ---- the backends ---- */

typedef struct be {
    const char *name;
    const gf_backend_ops *ops;
    void *dl;
} be;

/* openblas / onednn from the build's module folder, "example" compiled in;
 * 0 (and a skip) when the module is not built or not available here */
static int be_open(be *b, const char *name)
{
    memset(b, 0, sizeof *b);
    b->name = name;
    if (!strcmp(name, "example")) {
        b->ops = gf_test_example_entry();
        return 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/backends/libgenfence_backend_%s.so", GF_TEST_BINARY_DIR, name);
    if (access(path, F_OK) != 0) {
        cr_skip_test("%s not built in this configuration (%s)", name, path);
        return 0;
    }
    b->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    cr_assert(b->dl, "dlopen %s: %s", path, dlerror());
    gf_backend_entry_fn entry = (gf_backend_entry_fn)dlsym(b->dl, GF_BACKEND_ENTRY_SYMBOL);
    cr_assert(entry);
    b->ops = entry();
    cr_assert_eq(b->ops->abi_version, GF_BACKEND_ABI_VERSION);
    char why[512];
    if (b->ops->probe(why, sizeof why) != GF_OK) {
        cr_skip_test("%s unavailable here: %s", name, why);
        return 0;
    }
    return 1;
}

static const char *be_err(const be *b, void *model)
{
    const char *e = b->ops->last_error ? b->ops->last_error(model) : NULL;
    return e ? e : "";
}

static void *be_load(const be *b, const llama *m, int threads)
{
    gf_backend_options o = {.struct_size = sizeof o, .threads = threads, .config = NULL};
    void *h = NULL;
    gf_status st = b->ops->model_load(&m->desc, &o, &h);
    cr_assert_eq(st, GF_OK, "%s model_load: %s", b->name, be_err(b, NULL));
    return h;
}

static double maxdiff(const float *got, const double *want, size_t n)
{
    double d = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)got[i] - want[i]);
        if (!(e <= d)) /* NaN counts as infinitely wrong */
            d = isnan(e) ? INFINITY : e;
    }
    return d;
}

enum { TSEQ = 100, NB = 3 };
static const int k_pad[NB] = {0, 5, 17};

static void tokens_for(int32_t *tok, int n, int row)
{
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((13 * i + 7 * row * row + 5 * row + 3 + (i * i) % 11) % V_);
}

/* One backend on one family: the worst |delta| over every check. */
static double check_family(const char *name, int qwen2)
{
    be b;
    if (!be_open(&b, name))
        return 0;
    llama m;
    llama_make(&m, qwen2, qwen2 ? 0x51ull : 0x11ull);
    const gf_backend_ops *op = b.ops;
    void *h = be_load(&b, &m, 2);
    double worst = 0, d;
    int32_t tok[TSEQ], pos[TSEQ];
    tokens_for(tok, TSEQ, 0);
    for (int i = 0; i < TSEQ; i++)
        pos[i] = i;
    double *want = malloc(sizeof(double) * TSEQ * V_);
    float *got = malloc(sizeof(float) * NB * TSEQ * V_);
    cr_assert(want && got);
    ref_forward(&m, tok, TSEQ, want, FAULT_NONE);

    /* 1. uncached, every position */
    gf_batch in = {.B = 1, .T = TSEQ, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(op->forward(h, NULL, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
    d = maxdiff(got, want, (size_t)TSEQ * V_);
    cr_expect_leq(d, ATOL, "%s %s uncached: max |delta| %.3e", name, m.desc.name, d);
    worst = fmax(worst, d);

    /* 2. cached: a 20-token prefill, then one token at a time (GF_LOGITS_LAST) */
    void *c = NULL;
    cr_assert_eq(op->cache_create(h, 1, TSEQ, &c), GF_OK, "%s: %s", name, be_err(&b, h));
    cr_expect_eq(op->cache_bytes(c), (size_t)2 * L_ * 1 * HKV_ * TSEQ * DH_ * sizeof(float));
    in = (gf_batch){.B = 1, .T = 20, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(op->forward(h, c, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
    d = maxdiff(got, want, (size_t)20 * V_);
    for (int t = 20; t < TSEQ; t++) {
        in = (gf_batch){.B = 1, .T = 1, .tokens = tok + t, .position_ids = pos + t, .logits_mode = GF_LOGITS_LAST};
        cr_assert_eq(op->forward(h, c, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
        d = fmax(d, maxdiff(got, want + (size_t)t * V_, V_));
    }
    cr_expect_eq(op->cache_length(c), TSEQ);
    cr_expect_leq(d, ATOL, "%s %s cached decode: max |delta| %.3e", name, m.desc.name, d);
    worst = fmax(worst, d);

    /* 3. uneven prefill chunks after a reset, all logits and last only */
    static const int chunks[] = {7, 13, 1, 29, 50};
    cr_assert_eq(op->cache_reset(c), GF_OK);
    d = 0;
    for (int i = 0, t0 = 0; i < 5; t0 += chunks[i], i++) {
        const gf_logits_mode mode = i % 2 ? GF_LOGITS_LAST : GF_LOGITS_ALL;
        in = (gf_batch){.B = 1, .T = chunks[i], .tokens = tok + t0, .position_ids = pos + t0, .logits_mode = mode};
        cr_assert_eq(op->forward(h, c, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
        if (mode == GF_LOGITS_ALL)
            d = fmax(d, maxdiff(got, want + (size_t)t0 * V_, (size_t)chunks[i] * V_));
        else
            d = fmax(d, maxdiff(got, want + (size_t)(t0 + chunks[i] - 1) * V_, V_));
    }
    cr_expect_eq(op->cache_length(c), TSEQ);
    cr_expect_leq(d, ATOL, "%s %s chunked prefill: max |delta| %.3e", name, m.desc.name, d);
    worst = fmax(worst, d);
    op->cache_free(c);

    /* 4. a left-padded batch with a key mask: row r has k_pad[r] pads (token
     * 0, position 0, masked) then TSEQ - k_pad[r] real tokens at 0, 1, ...;
     * its real positions must equal that row alone */
    int32_t btok[NB * TSEQ], bpos[NB * TSEQ];
    uint8_t mask[NB * TSEQ];
    double *rwant[NB];
    for (int r = 0; r < NB; r++) {
        const int P = k_pad[r], n = TSEQ - P;
        tokens_for(btok + r * TSEQ + P, n, r);
        rwant[r] = malloc(sizeof(double) * n * V_);
        cr_assert(rwant[r]);
        ref_forward(&m, btok + r * TSEQ + P, n, rwant[r], FAULT_NONE);
        for (int i = 0; i < TSEQ; i++) {
            if (i < P)
                btok[r * TSEQ + i] = 0;
            bpos[r * TSEQ + i] = i < P ? 0 : i - P;
            mask[r * TSEQ + i] = i >= P;
        }
    }
    in = (gf_batch){
        .B = NB, .T = TSEQ, .tokens = btok, .position_ids = bpos, .key_mask = mask, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(op->forward(h, NULL, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
    d = 0;
    for (int r = 0; r < NB; r++)
        d = fmax(d, maxdiff(got + ((size_t)r * TSEQ + k_pad[r]) * V_, rwant[r], (size_t)(TSEQ - k_pad[r]) * V_));
    cr_expect_leq(d, ATOL, "%s %s padded batch uncached: max |delta| %.3e", name, m.desc.name, d);
    worst = fmax(worst, d);

    /* ... and cached: 60 columns of prefill, then one column at a time; the
     * key mask grows with the cache (B, length + T) */
    cr_assert_eq(op->cache_create(h, NB, TSEQ, &c), GF_OK, "%s: %s", name, be_err(&b, h));
    cr_expect_eq(op->cache_bytes(c), (size_t)2 * L_ * NB * HKV_ * TSEQ * DH_ * sizeof(float));
    int32_t ct[NB * 60], cp[NB * 60];
    uint8_t cm[NB * TSEQ];
    for (int r = 0; r < NB; r++)
        for (int i = 0; i < 60; i++) {
            ct[r * 60 + i] = btok[r * TSEQ + i];
            cp[r * 60 + i] = bpos[r * TSEQ + i];
            cm[r * 60 + i] = mask[r * TSEQ + i];
        }
    in = (gf_batch){.B = NB, .T = 60, .tokens = ct, .position_ids = cp, .key_mask = cm, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(op->forward(h, c, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
    d = 0;
    for (int r = 0; r < NB; r++)
        d = fmax(d, maxdiff(got + ((size_t)r * 60 + k_pad[r]) * V_, rwant[r], (size_t)(60 - k_pad[r]) * V_));
    for (int t = 60; t < TSEQ; t++) {
        int32_t st_[NB], sp[NB];
        for (int r = 0; r < NB; r++) {
            st_[r] = btok[r * TSEQ + t];
            sp[r] = bpos[r * TSEQ + t];
            for (int j = 0; j <= t; j++)
                cm[r * (t + 1) + j] = mask[r * TSEQ + j];
        }
        in = (gf_batch){
            .B = NB, .T = 1, .tokens = st_, .position_ids = sp, .key_mask = cm, .logits_mode = GF_LOGITS_LAST};
        cr_assert_eq(op->forward(h, c, &in, got), GF_OK, "%s: %s", name, be_err(&b, h));
        for (int r = 0; r < NB; r++)
            d = fmax(d, maxdiff(got + (size_t)r * V_, rwant[r] + (size_t)(t - k_pad[r]) * V_, V_));
    }
    cr_expect_leq(d, ATOL, "%s %s padded batch cached: max |delta| %.3e", name, m.desc.name, d);
    worst = fmax(worst, d);
    op->cache_free(c);

    /* the check can fail: the same comparison against a faulty forward */
    static const fault faults[] = {FAULT_KV_MAP, FAULT_ROPE_PAIRS, FAULT_ANGLE_DOUBLE, FAULT_NO_BIAS};
    static const char *fault_names[] = {"kv-head map h % H_kv", "interleaved rope pairs", "angle in double",
                                        "no q/k/v bias"};
    in = (gf_batch){.B = 1, .T = TSEQ, .tokens = tok, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    cr_assert_eq(op->forward(h, NULL, &in, got), GF_OK);
    for (int i = 0; i < 4; i++) {
        if (faults[i] == FAULT_NO_BIAS && !qwen2)
            continue;
        ref_forward(&m, tok, TSEQ, want, faults[i]);
        double fd = maxdiff(got, want, (size_t)TSEQ * V_);
        fprintf(stderr, "  %-8s %-10s vs a forward with %-24s: max |delta| %.3e\n", name, m.desc.name, fault_names[i],
                fd);
        /* the angle rounded to float (HF's float32 path) vs in double moves
         * these logits by less than the tolerance: reported, not asserted */
        if (faults[i] != FAULT_ANGLE_DOUBLE)
            cr_expect_gt(fd, 100 * ATOL, "%s %s: a fault (%s) went unseen (%.3e)", name, m.desc.name, fault_names[i],
                         fd);
    }
    fprintf(stderr, "  %-8s %-10s worst max |delta| vs the double forward %.3e (atol %g)\n", name, m.desc.name, worst,
            ATOL);

    for (int r = 0; r < NB; r++)
        free(rwant[r]);
    free(want);
    free(got);
    op->model_free(h);
    free(m.storage);
    return worst;
}

Test(llama_vendor, openblas_llama) { check_family("openblas", 0); }
Test(llama_vendor, openblas_qwen2) { check_family("openblas", 1); }
Test(llama_vendor, onednn_llama) { check_family("onednn", 0); }
Test(llama_vendor, onednn_qwen2) { check_family("onednn", 1); }
Test(llama_vendor, example_llama) { check_family("example", 0); }
Test(llama_vendor, example_qwen2) { check_family("example", 1); }

/* Shapes a GQA backend cannot run are refused at model_load, not run wrong. */
static void check_refusals(const char *name)
{
    be b;
    if (!be_open(&b, name))
        return;
    llama m;
    llama_make(&m, 0, 3);
    gf_backend_options o = {.struct_size = sizeof o, .threads = 1};
    void *h = (void *)1;
    m.desc.config.n_kv_head = 3; /* 4 % 3 != 0 */
    cr_expect_neq(b.ops->model_load(&m.desc, &o, &h), GF_OK, "%s accepted H 4, H_kv 3", name);
    cr_expect_null(h);
    m.desc.config.n_kv_head = HKV_;
    m.desc.weights.rope_inv_freq = NULL;
    h = (void *)1;
    cr_expect_neq(b.ops->model_load(&m.desc, &o, &h), GF_OK, "%s accepted a rotary model without inv_freq", name);
    cr_expect_null(h);
    free(m.storage);
}

Test(llama_vendor, refusals_openblas) { check_refusals("openblas"); }
Test(llama_vendor, refusals_onednn) { check_refusals("onednn"); }
Test(llama_vendor, refusals_example) { check_refusals("example"); }
