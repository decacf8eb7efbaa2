/* echo_ref: a genfence protocol client in plain C (docs/protocol.md).
 *
 * A GPT-2 forward written the way genfence's ref backend is (F32 activations,
 * every dot product, LayerNorm and softmax accumulated in double), speaking
 * the protocol on stdin/stdout. It includes nothing of genfence and links
 * only libc and libm:
 *
 *     cc -O2 -std=c11 -o echo_ref echo_ref.c -lm
 *     genfence run --backend "exec:./echo_ref"
 *
 * Two uses: it shows the protocol is language-neutral and small (everything
 * a client needs is in this file), and because it does ref's arithmetic, its
 * tokens/s next to in-process ref is the protocol's per-call overhead.
 *
 * It reads model.safetensors (F32 tensors) from the directory model_load
 * names and takes the hyperparameters from the model_load request (genfence's
 * reading of config.json). GPT-2 only (a tied or untied LM head); no
 * sampler. Hello feature 8 (beside 2 and 4): the mechanism probes it runs at
 * the end of its info reply ("all,-llama": GPT-2's). Feature 16: speculate
 * (op 13), its own rejection sampler for one speculative round
 * (docs/speculative.md): its own filter and softmax, inverse-CDF draws.
 * Feature 64: logprobs (op 14), what it reports as log-probabilities for
 * plain sampler parameters, on the same filter. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the wire: u32 op | u32 len | body; reply u32 status | u32 len | body ---- */

static int read_all(void *dst, size_t n)
{
    uint8_t *p = dst;
    while (n) {
        ssize_t r = read(0, p, n);
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static void write_all(const void *src, size_t n)
{
    const uint8_t *p = src;
    while (n) {
        ssize_t w = write(1, p, n);
        if (w <= 0)
            exit(1);
        p += w;
        n -= (size_t)w;
    }
}

static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; } /* LE host */

static void reply(uint32_t status, const void *body, uint32_t n)
{
    uint32_t hdr[2] = {status, n};
    write_all(hdr, 8);
    write_all(body, n);
}

static void reply_err(uint32_t status, const char *msg) { reply(status, msg, (uint32_t)strlen(msg)); }

enum { E_INVALID_ARG = 1, E_NOMEM = 2, E_IO = 3, E_FORMAT = 4, E_UNSUPPORTED = 5, E_CONTEXT_LIMIT = 7 };

/* ---- the model ---- */

typedef struct layer {
    const float *ln1_w, *ln1_b, *qkv_w, *qkv_b, *proj_w, *proj_b;
    const float *ln2_w, *ln2_b, *fc_w, *fc_b, *mproj_w, *mproj_b;   /* matrices [out, in] after load */
} layer;

static struct {
    int loaded;
    int32_t act, V, P, D, L, H, dh, F;
    float eps;
    uint8_t *file;                      /* model.safetensors, whole */
    const float *wte, *wpe, *lnf_w, *lnf_b;
    const float *head; /* (V, D): wte when tied, else lm_head.weight */
    layer *ly;
} M;

typedef struct cache {
    int32_t B, S, len;
    float *k, *v;                       /* (L, B, H, S, dh) */
} cache;

static cache *caches[256];              /* id = index + 1 */

/* Find tensor `name` (or "transformer." name) in the safetensors header; F32 of n floats. */
static const float *tensor(const char *name, size_t n, char *err, size_t errlen)
{
    uint64_t hlen;
    memcpy(&hlen, M.file, 8);
    char key[128];
    const char *hdr = (const char *)M.file + 8, *at = NULL;
    for (int pass = 0; pass < 2 && !at; pass++) {
        snprintf(key, sizeof key, "\"%s%s\"", pass ? "transformer." : "", name);
        at = strstr(hdr, key);
    }
    const char *dt = at ? strstr(at, "\"dtype\"") : NULL, *off = at ? strstr(at, "\"data_offsets\"") : NULL;
    unsigned long long a, b;
    if (!dt || !off || sscanf(strchr(off, '[') + 1, "%llu , %llu", &a, &b) != 2) {
        snprintf(err, errlen, "model.safetensors has no tensor %s", name);
        return NULL;
    }
    if (!strstr(dt, "\"F32\"") || strstr(dt, "\"F32\"") > off || b - a != n * 4) {
        snprintf(err, errlen, "tensor %s: not F32 of %zu values", name, n);
        return NULL;
    }
    return (const float *)(M.file + 8 + hlen + a);
}

/* y (N) = W (N, K) x + b: one dot product per output, accumulated in double,
 * exactly as ref does it (W transposed to [out, in] at load) */
static void linear(float *y, const float *x, const float *W, const float *b, int32_t K, int32_t N)
{
    for (int32_t o = 0; o < N; o++) {
        const float *w = W + (size_t)o * K;
        double s = 0.0;
        for (int32_t i = 0; i < K; i++)
            s += (double)w[i] * (double)x[i];
        y[o] = (float)(s + (b ? (double)b[o] : 0.0));
    }
}

/* GPT-2's Conv1D [in, out] -> [out, in] rows (a copy; NULL if src is) */
static const float *transpose(const float *src, int32_t in, int32_t out)
{
    float *dst = src ? malloc(sizeof(float) * (size_t)in * out) : NULL;
    for (int32_t i = 0; dst && i < in; i++)
        for (int32_t o = 0; o < out; o++)
            dst[(size_t)o * in + i] = src[(size_t)i * out + o];
    return dst;
}

static int model_load(const uint8_t *body, uint32_t len, char *err, size_t errlen)
{
    uint32_t n = get32(body + 4);
    if (8 + n + 80 > len) {
        snprintf(err, errlen, "short model_load request");
        return E_FORMAT;
    }
    char path[4096];
    snprintf(path, sizeof path, "%.*s/model.safetensors", (int)n, (const char *)body + 8);
    const uint8_t *c = body + 8 + n;    /* the 80-byte config block */
    int32_t cfg[20];
    memcpy(cfg, c, sizeof cfg);
    if (cfg[0] != 1) {
        snprintf(err, errlen, "echo_ref runs GPT-2 only (arch %d)", cfg[0]);
        return E_UNSUPPORTED;
    }
    const int tied = cfg[16];
    M.act = cfg[1], M.V = cfg[4], M.P = cfg[5], M.D = cfg[6], M.L = cfg[7], M.H = cfg[8];
    M.dh = cfg[10], M.F = cfg[11];
    memcpy(&M.eps, c + 48, 4);
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open %.400s", path);
        return E_IO;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    M.file = malloc((size_t)size + 1);
    if (!M.file || fread(M.file, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        snprintf(err, errlen, "cannot read %.400s", path);
        return E_IO;
    }
    fclose(f);
    uint64_t hlen;
    memcpy(&hlen, M.file, 8);
    M.file[8 + hlen - 1] = '\0'; /* the header's last byte is '}' or a space: make it a C string */
    const int32_t D = M.D, F = M.F;
    M.ly = calloc((size_t)M.L, sizeof *M.ly);
    int ok = (M.wte = tensor("wte.weight", (size_t)M.V * D, err, errlen)) &&
             (M.wpe = tensor("wpe.weight", (size_t)M.P * D, err, errlen)) &&
             (M.lnf_w = tensor("ln_f.weight", D, err, errlen)) && (M.lnf_b = tensor("ln_f.bias", D, err, errlen)) &&
             (M.head = tied ? M.wte : tensor("lm_head.weight", (size_t)M.V * D, err, errlen));
    for (int32_t l = 0; ok && l < M.L; l++) {
        layer *y = &M.ly[l];
        char nm[64];
#define T(field, what, count) (snprintf(nm, sizeof nm, "h.%d." what, l), (y->field = tensor(nm, count, err, errlen)))
        ok = T(ln1_w, "ln_1.weight", D) && T(ln1_b, "ln_1.bias", D) &&
             T(qkv_w, "attn.c_attn.weight", (size_t)D * 3 * D) && T(qkv_b, "attn.c_attn.bias", (size_t)3 * D) &&
             T(proj_w, "attn.c_proj.weight", (size_t)D * D) && T(proj_b, "attn.c_proj.bias", D) &&
             T(ln2_w, "ln_2.weight", D) && T(ln2_b, "ln_2.bias", D) &&
             T(fc_w, "mlp.c_fc.weight", (size_t)D * F) && T(fc_b, "mlp.c_fc.bias", F) &&
             T(mproj_w, "mlp.c_proj.weight", (size_t)F * D) && T(mproj_b, "mlp.c_proj.bias", D);
#undef T
    }
    if (!ok)
        return E_FORMAT;
    for (int32_t l = 0; l < M.L; l++) {
        layer *y = &M.ly[l];
        if (!(y->qkv_w = transpose(y->qkv_w, D, 3 * D)) || !(y->proj_w = transpose(y->proj_w, D, D)) ||
            !(y->fc_w = transpose(y->fc_w, D, F)) || !(y->mproj_w = transpose(y->mproj_w, F, D))) {
            snprintf(err, errlen, "out of memory");
            return E_NOMEM;
        }
    }
    M.loaded = 1;
    return 0;
}

static void layernorm(float *y, const float *x, const float *w, const float *b)
{
    double mean = 0, var = 0;
    for (int32_t i = 0; i < M.D; i++)
        mean += x[i];
    mean /= M.D;
    for (int32_t i = 0; i < M.D; i++)
        var += (x[i] - mean) * (x[i] - mean);
    double inv = 1.0 / sqrt(var / M.D + M.eps);
    for (int32_t i = 0; i < M.D; i++)
        y[i] = (float)((x[i] - mean) * inv * w[i] + b[i]);
}

static float gelu(float xf)
{
    double x = xf;
    if (M.act == 2)
        return (float)(0.5 * x * (1.0 + erf(x * 0.7071067811865476)));
    if (M.act == 3)
        return xf > 0 ? xf : 0;
    return (float)(0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))));
}

/* The contract (docs/protocol.md, forward): new keys at [len, len + T), query t
 * sees keys j <= len + t that the mask allows, and always its own. */
/* tr (forward_trace, op 12): NULL, or (4 L + 2, B, T, D) floats that get the
 * hidden state at every trace point (docs/backends.md, "The trace slot") */
#define TRACE_AT(pt, i) (tr + ((size_t)(pt) * B * T + (size_t)(i)) * D)
static void forward(cache *c, int32_t B, int32_t T, const int32_t *tok, const int32_t *pos,
                    const uint8_t *mask, int last, float *out, float *tr)
{
    const int32_t D = M.D, H = M.H, dh = M.dh, F = M.F, S = c->S, start = c->len, Tk = start + T;
    float *x = malloc(sizeof(float) * D), *h = malloc(sizeof(float) * 3 * D), *t = malloc(sizeof(float) * F);
    float *X = malloc(sizeof(float) * (size_t)B * T * D), *A = malloc(sizeof(float) * (size_t)B * T * D);
    float *Q = malloc(sizeof(float) * (size_t)B * T * D);
    double *p = malloc(sizeof(double) * (size_t)Tk);
    for (int32_t i = 0; i < B * T; i++)
        for (int32_t d = 0; d < D; d++)
            X[(size_t)i * D + d] = M.wte[(size_t)tok[i] * D + d] + M.wpe[(size_t)pos[i] * D + d];
    if (tr)
        memcpy(tr, X, sizeof(float) * (size_t)B * T * D); /* point 0: the embedding */
    for (int32_t l = 0; l < M.L; l++) {
        const layer *y = &M.ly[l];
        float *K = c->k + (size_t)l * B * H * S * dh, *Vv = c->v + (size_t)l * B * H * S * dh;
        for (int32_t i = 0; i < B * T; i++) { /* q to Q, k and v into the cache */
            int32_t b = i / T, tt = i % T;
            layernorm(x, X + (size_t)i * D, y->ln1_w, y->ln1_b);
            linear(h, x, y->qkv_w, y->qkv_b, D, 3 * D);
            memcpy(Q + (size_t)i * D, h, sizeof(float) * D);
            for (int32_t hh = 0; hh < H; hh++) {
                size_t off = (((size_t)b * H + hh) * S + start + tt) * dh;
                memcpy(K + off, h + D + hh * dh, sizeof(float) * dh);
                memcpy(Vv + off, h + 2 * D + hh * dh, sizeof(float) * dh);
            }
        }
        for (int32_t i = 0; i < B * T; i++) {
            int32_t b = i / T, q = start + i % T;
            for (int32_t hh = 0; hh < H; hh++) {
                const float *qv = Q + (size_t)i * D + hh * dh;
                const float *Kh = K + ((size_t)b * H + hh) * S * dh, *Vh = Vv + ((size_t)b * H + hh) * S * dh;
                double mx = -INFINITY, sum = 0;
                for (int32_t j = 0; j <= q; j++) {
                    double s = -INFINITY;
                    if (j == q || !mask || mask[(size_t)b * Tk + j]) {
                        s = 0;
                        for (int32_t d = 0; d < dh; d++)
                            s += (double)qv[d] * Kh[(size_t)j * dh + d];
                        s /= sqrt((double)dh);
                    }
                    p[j] = s;
                    mx = s > mx ? s : mx;
                }
                for (int32_t j = 0; j <= q; j++)
                    sum += p[j] = p[j] == -INFINITY ? 0 : exp(p[j] - mx);
                for (int32_t d = 0; d < dh; d++) {
                    double acc = 0;
                    for (int32_t j = 0; j <= q; j++)
                        acc += p[j] * Vh[(size_t)j * dh + d];
                    A[(size_t)i * D + hh * dh + d] = (float)(acc / sum);
                }
            }
        }
        for (int32_t i = 0; i < B * T; i++) { /* x += proj(att); x += mlp(LN2(x)) */
            float *xi = X + (size_t)i * D;
            linear(x, A + (size_t)i * D, y->proj_w, y->proj_b, D, D);
            if (tr)
                memcpy(TRACE_AT(1 + 4 * l, i), x, sizeof(float) * D);
            for (int32_t d = 0; d < D; d++)
                xi[d] += x[d];
            if (tr)
                memcpy(TRACE_AT(2 + 4 * l, i), xi, sizeof(float) * D);
            layernorm(x, xi, y->ln2_w, y->ln2_b);
            linear(t, x, y->fc_w, y->fc_b, D, F);
            for (int32_t f = 0; f < F; f++)
                t[f] = gelu(t[f]);
            linear(x, t, y->mproj_w, y->mproj_b, F, D);
            if (tr)
                memcpy(TRACE_AT(3 + 4 * l, i), x, sizeof(float) * D);
            for (int32_t d = 0; d < D; d++)
                xi[d] += x[d];
            if (tr)
                memcpy(TRACE_AT(4 + 4 * l, i), xi, sizeof(float) * D);
        }
    }
    c->len = Tk;
    for (int32_t i = 0, row = 0; i < B * T; i++) { /* logits = LN_f(x) head^T (head: wte when tied) */
        if (tr) /* the final norm at every position */
            layernorm(TRACE_AT(4 * M.L + 1, i), X + (size_t)i * D, M.lnf_w, M.lnf_b);
        if (last && i % T != T - 1)
            continue;
        layernorm(x, X + (size_t)i * D, M.lnf_w, M.lnf_b);
        for (int32_t v = 0; v < M.V; v++) {
            double s = 0;
            for (int32_t d = 0; d < D; d++)
                s += (double)x[d] * M.head[(size_t)v * D + d];
            out[(size_t)row * M.V + v] = (float)s;
        }
        row++;
    }
    free(x); free(h); free(t); free(X); free(A); free(Q); free(p);
}

static cache *new_cache(int32_t B, int32_t S)
{
    cache *c = calloc(1, sizeof *c);
    size_t n = (size_t)M.L * B * M.H * S * M.dh;
    if (!c || !(c->k = calloc(n, sizeof(float))) || !(c->v = calloc(n, sizeof(float)))) {
        if (c) free(c->k);
        free(c);
        return NULL;
    }
    c->B = B, c->S = S;
    return c;
}

static void free_cache(cache *c)
{
    if (c) { free(c->k); free(c->v); free(c); }
}

/* ---- speculate (13): one round of the rejection sampler (docs/speculative.md) ---- */

typedef struct zi { double z; int32_t i; } zi;

static int desc_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

static int desc_zi(const void *a, const void *b) /* z descending, then index ascending */
{
    const zi *x = a, *y = b;
    return x->z > y->z ? -1 : x->z < y->z ? 1 : (x->i > y->i) - (x->i < y->i);
}

typedef struct sparams { double T, top_p; int32_t use_k, k, use_p; } sparams;

/* w (V): the target's distribution of one row: temperature -> top-k (keep z >=
 * the k-th largest, ties kept) -> top-p (drop a token once the mass before it,
 * in descending order, reached p) -> softmax in double; temperature 0 one-hot
 * at the argmax (lowest index on ties). Scratch: tmp (V), pr (V). */
static void filter_z(const float *lg, int32_t V, const sparams *sp, double *w, double *tmp, zi *pr);

static void spec_probs(const float *lg, int32_t V, const sparams *sp, double *w, double *tmp, zi *pr)
{
    if (sp->T == 0.0) {
        int32_t best = 0;
        for (int32_t i = 1; i < V; i++)
            if (lg[i] > lg[best])
                best = i;
        for (int32_t i = 0; i < V; i++)
            w[i] = i == best;
        return;
    }
    filter_z(lg, V, sp, w, tmp, pr);
    double top = -INFINITY, total = 0;
    for (int32_t i = 0; i < V; i++)
        top = w[i] > top ? w[i] : top;
    for (int32_t i = 0; i < V; i++)
        total += w[i] = w[i] == -INFINITY ? 0 : exp(w[i] - top);
    for (int32_t i = 0; i < V; i++)
        w[i] = total > 0 ? w[i] / total : 0;
}

/* w (V): the row's filtered z, -inf where dropped (T > 0) */
static void filter_z(const float *lg, int32_t V, const sparams *sp, double *w, double *tmp, zi *pr)
{
    for (int32_t i = 0; i < V; i++)
        w[i] = (double)lg[i] / sp->T;
    if (sp->use_k && sp->k < V) {
        memcpy(tmp, w, sizeof(double) * (size_t)V);
        qsort(tmp, (size_t)V, sizeof *tmp, desc_d);
        for (int32_t i = 0; i < V; i++)
            if (w[i] < tmp[sp->k - 1])
                w[i] = -INFINITY;
    }
    if (sp->use_p) {
        int32_t n = 0;
        for (int32_t i = 0; i < V; i++)
            if (w[i] != -INFINITY)
                pr[n].z = w[i], pr[n++].i = i;
        qsort(pr, (size_t)n, sizeof *pr, desc_zi);
        double total = 0, before = 0;
        for (int32_t j = 0; j < n; j++)
            total += exp(pr[j].z - pr[0].z);
        for (int32_t j = 0; j < n; j++) {
            if (j > 0 && before >= sp->top_p)
                w[pr[j].i] = -INFINITY;
            before += exp(pr[j].z - pr[0].z) / total;
        }
    }
}

/* the inverse CDF of u over weights w in index order: the smallest j with
 * w_j > 0 whose running sum exceeds u * total (the last such j if none does) */
static int32_t spec_draw(const double *w, int32_t V, double u)
{
    double total = 0, run = 0;
    int32_t last = -1;
    for (int32_t j = 0; j < V; j++)
        total += w[j] > 0 ? w[j] : 0;
    for (int32_t j = 0; j < V; j++) {
        if (!(w[j] > 0))
            continue;
        run += w[j];
        last = j;
        if (run > u * total)
            return j;
    }
    return last;
}

static double getf64(const uint8_t *p) { double v; memcpy(&v, p, 8); return v; }

/* body: i32 K, V, rule, has_draft_probs, f64 temperature, i32 use_top_k, top_k, use_top_p, u32 pad,
 * f64 top_p, u64 seed, f32 target[(K+1) V], i32 draft[K], f64 q[K V] (if has_draft_probs),
 * f64 u_accept[K], f64 u_draw[K+1]. Writes out = {accepted, next}; 0 or an error status with err. */
static int speculate(const uint8_t *b, uint32_t len, int32_t out[2], char *err, size_t errlen)
{
    enum { SEED = 0, HF = 1, LLAMACPP = 2, VLLM = 3 };
    if (len < 56) { snprintf(err, errlen, "speculate: a %u-byte request", len); return E_INVALID_ARG; }
    int32_t K = (int32_t)get32(b), V = (int32_t)get32(b + 4), rule = (int32_t)get32(b + 8), hq = (int32_t)get32(b + 12);
    sparams sp = {getf64(b + 16), getf64(b + 40), (int32_t)get32(b + 24), (int32_t)get32(b + 28), (int32_t)get32(b + 32)};
    if (K < 1 || V < 1 || (uint32_t)K > len || (uint32_t)V > len || rule < SEED || rule > VLLM) {
        snprintf(err, errlen, "speculate: K %d, V %d, rule %d", K, V, rule);
        return E_INVALID_ARG;
    }
    const uint64_t KV = (uint64_t)K * V, need = 56 + 4 * (KV + V) + 4 * (uint64_t)K + (hq ? 8 * KV : 0) + 8 * (2 * (uint64_t)K + 1);
    if (need != len) {
        snprintf(err, errlen, "speculate: a %u-byte request; K %d and V %d need %llu", len, K, V, (unsigned long long)need);
        return E_INVALID_ARG;
    }
    const float *tg = (const float *)(b + 56);                    /* (K + 1, V), 4-aligned */
    const int32_t *draft = (const int32_t *)(b + 56 + 4 * (KV + V)); /* (K) */
    const uint8_t *qb = (const uint8_t *)(draft + K), *ua = qb + (hq ? 8 * KV : 0), *ud = ua + 8 * (size_t)K;
    for (int32_t i = 0; i < K; i++)
        if (draft[i] < 0 || draft[i] >= V) {
            snprintf(err, errlen, "speculate: draft[%d] = %d outside [0, %d)", i, draft[i], V);
            return E_INVALID_ARG;
        }
    double *w = malloc(sizeof(double) * (size_t)V), *q = malloc(sizeof(double) * (size_t)V);
    double *tmp = malloc(sizeof(double) * (size_t)V);
    zi *pr = malloc(sizeof(zi) * (size_t)V);
    if (!w || !q || !tmp || !pr) {
        free(w); free(q); free(tmp); free(pr);
        snprintf(err, errlen, "speculate: out of memory for V %d", V);
        return E_NOMEM;
    }
    int32_t i = 0, next = -1;
    for (; i < K && next < 0; i++) {
        const int32_t x = draft[i];
        spec_probs(tg + (size_t)i * V, V, &sp, w, tmp, pr);
        if (rule == LLAMACPP) { /* the target's own draw, accepted while it is the draft token */
            int32_t y = spec_draw(w, V, getf64(ud + 8 * (size_t)i));
            if (y != x)
                next = y;
            continue;
        }
        for (int32_t j = 0; j < V; j++)
            q[j] = hq ? getf64(qb + 8 * ((size_t)i * V + j)) : j == x;
        int take = q[x] > 0 ? getf64(ua + 8 * (size_t)i) * q[x] <= w[x] : rule != VLLM && w[x] > 0;
        if (take)
            continue;
        double mass = 0; /* the residual max(0, p - q), or p when it has no mass */
        for (int32_t j = 0; j < V; j++)
            mass += tmp[j] = w[j] > q[j] ? w[j] - q[j] : 0;
        next = spec_draw(mass > 0 ? tmp : w, V, getf64(ud + 8 * (size_t)i));
    }
    int32_t acc = next < 0 ? K : i - 1; /* the loop stepped past the rejected position */
    if (next < 0) { /* all K accepted: the bonus token from row K */
        spec_probs(tg + (size_t)K * V, V, &sp, w, tmp, pr);
        next = spec_draw(w, V, getf64(ud + 8 * (size_t)K));
    }
    free(w); free(q); free(tmp); free(pr);
    if (next < 0) { snprintf(err, errlen, "speculate: no token has mass"); return E_INVALID_ARG; }
    out[0] = acc, out[1] = next;
    return 0;
}

static cache *find(const uint8_t *body)
{
    uint32_t id = get32(body);
    return id >= 1 && id <= 256 ? caches[id - 1] : NULL;
}

/* ---- logprobs (14): what it reports as log-probabilities (docs/sampler.md, "Logprobs") ----
 * body: i32 B, V, mode, u32 pad, f64 temperature, i32 use_top_k, top_k, use_top_p, u32 pad, f64 top_p
 * (48 bytes), f32 logits[B V]; reply f64 values[B V]. Modes: 0 raw (log-softmax of the logits), 1 raw_logits, 2 scaled
 * (log-softmax of logits / T), 3 processed (log-softmax of the filtered z, -inf where dropped), 4 processed_logits
 * (that z). Plain parameters only: temperature -> top-k -> top-p. */
static void log_softmax(double *x, int32_t V)
{
    double m = -INFINITY, sum = 0;
    for (int32_t i = 0; i < V; i++)
        m = x[i] > m ? x[i] : m;
    if (m == -INFINITY)
        return;
    for (int32_t i = 0; i < V; i++)
        sum += x[i] == -INFINITY ? 0 : exp(x[i] - m);
    for (int32_t i = 0; i < V; i++)
        x[i] -= x[i] == -INFINITY ? 0 : m + log(sum);
}

static int logprobs(const uint8_t *b, uint32_t len, double **out, size_t *n_out, char *err, size_t errlen)
{
    if (len < 48) { snprintf(err, errlen, "logprobs: a %u-byte request", len); return E_INVALID_ARG; }
    int32_t B = (int32_t)get32(b), V = (int32_t)get32(b + 4), mode = (int32_t)get32(b + 8);
    sparams sp = {getf64(b + 16), getf64(b + 40), (int32_t)get32(b + 24), (int32_t)get32(b + 28), (int32_t)get32(b + 32)};
    if (B < 1 || V < 1 || mode < 0 || mode > 4 || (uint64_t)len != 48 + 4ull * B * V) {
        snprintf(err, errlen, "logprobs: B %d, V %d, mode %d in a %u-byte request", B, V, mode, len);
        return E_INVALID_ARG;
    }
    if (mode >= 2 && !(sp.T > 0)) {
        snprintf(err, errlen, "logprobs: mode %d of a greedy row (temperature %g)", mode, sp.T);
        return E_INVALID_ARG;
    }
    double *o = malloc(sizeof(double) * (size_t)B * V), *tmp = malloc(sizeof(double) * (size_t)V);
    zi *pr = malloc(sizeof(zi) * (size_t)V);
    float *row = malloc(sizeof(float) * (size_t)V);
    if (!o || !tmp || !pr || !row) {
        free(o), free(tmp), free(pr), free(row);
        snprintf(err, errlen, "logprobs: out of memory for V %d", V);
        return E_INVALID_ARG;
    }
    for (int32_t r = 0; r < B; r++) {
        double *w = o + (size_t)r * V;
        memcpy(row, b + 48 + 4 * (size_t)r * V, sizeof(float) * (size_t)V);
        if (mode <= 2)
            for (int32_t i = 0; i < V; i++)
                w[i] = mode == 2 ? (double)row[i] / sp.T : (double)row[i];
        else
            filter_z(row, V, &sp, w, tmp, pr);
        if (mode == 0 || mode == 2 || mode == 3)
            log_softmax(w, V);
    }
    free(tmp), free(pr), free(row);
    *out = o;
    *n_out = (size_t)B * V;
    return 0;
}

int main(void)
{
    uint8_t hdr[8];
    static char err[512];
    while (read_all(hdr, 8) == 0) {
        uint32_t op = get32(hdr), len = get32(hdr + 4);
        uint8_t *body = malloc(len + 16);
        if (!body || read_all(body, len) != 0)
            return 1;
        cache *c;
        switch (op) {
        case 1: { /* hello: magic, version 1, features (2: forward_trace, 4: info declares invariance, 8: and probes,
                   * 16: speculate, 32: the trace's keys and values, 64: logprobs), name, description */
            const char name[] = "echo_ref", desc[] = "plain C GPT-2, double accumulation";
            uint8_t out[12 + 4 + sizeof name + 4 + sizeof desc];
            uint32_t w[4] = {0x50434647u, 1, 2 | 4 | 8 | 16 | 32 | 64, (uint32_t)strlen(name)}, dl = (uint32_t)strlen(desc);
            memcpy(out, w, 16);
            memcpy(out + 16, name, strlen(name));
            memcpy(out + 16 + strlen(name), &dl, 4);
            memcpy(out + 20 + strlen(name), desc, dl);
            reply(0, out, (uint32_t)(20 + strlen(name) + dl));
            break;
        }
        case 2: reply(0, NULL, 0); break; /* probe: runs anywhere */
        case 3: { /* info: f32, 1 thread, library, detail, invariance (hello feature 4): measured
                   * bitwise on every axis (cases/invariance.yaml): one thread, every sum in one order;
                   * then (feature 8) the mechanism probes it runs: GPT-2's */
            const char lib[] = "echo_ref (C, libm)", inv[] = "all=bitwise", probes[] = "all,-llama";
            uint8_t out[12 + sizeof lib + 4 + 4 + sizeof inv + 4 + sizeof probes];
            uint32_t w[3] = {1, 1, (uint32_t)strlen(lib)}, z = 0, il = (uint32_t)strlen(inv);
            uint32_t pl = (uint32_t)strlen(probes);
            memcpy(out, w, 12);
            memcpy(out + 12, lib, strlen(lib));
            memcpy(out + 12 + strlen(lib), &z, 4);
            memcpy(out + 16 + strlen(lib), &il, 4);
            memcpy(out + 20 + strlen(lib), inv, il);
            memcpy(out + 20 + strlen(lib) + il, &pl, 4);
            memcpy(out + 24 + strlen(lib) + il, probes, pl);
            reply(0, out, (uint32_t)(24 + strlen(lib) + il + pl));
            break;
        }
        case 4: { /* model_load */
            int st = M.loaded ? (snprintf(err, sizeof err, "a model is already loaded"), E_INVALID_ARG)
                              : model_load(body, len, err, sizeof err);
            int32_t out[2] = {M.V, M.P};
            if (st) reply_err((uint32_t)st, err); else reply(0, out, 8);
            break;
        }
        case 5: { /* cache_create (batch, max_len) -> id */
            int32_t B = (int32_t)get32(body), S = (int32_t)get32(body + 4);
            uint32_t id = 0;
            while (id < 256 && caches[id])
                id++;
            if (B < 1 || S < 1 || S > M.P) { reply_err(E_INVALID_ARG, "bad cache shape"); break; }
            if (id == 256 || !(caches[id] = new_cache(B, S))) { reply_err(E_NOMEM, "no cache slot"); break; }
            id++;
            reply(0, &id, 4);
            break;
        }
        case 6: case 7: case 8: case 9: /* cache reset, free, length, bytes */
            if (!(c = find(body))) { reply_err(E_INVALID_ARG, "no such cache"); break; }
            if (op == 6) { c->len = 0; reply(0, NULL, 0); }
            if (op == 7) { free_cache(c); caches[get32(body) - 1] = NULL; reply(0, NULL, 0); }
            if (op == 8) reply(0, &c->len, 4);
            if (op == 9) { uint64_t n = 2ull * M.L * c->B * M.H * c->S * M.dh * 4; reply(0, &n, 8); }
            break;
        case 10:
        case 12: { /* forward; forward_trace: the trace after the logits */
            int32_t f[6];
            memcpy(f, body, 24);
            int32_t B = f[1], T = f[2], Tk = f[3], last = f[4], has_mask = f[5];
            cache tmp = {0}, *use = f[0] ? find(body) : NULL;
            if (f[0] && !use) { reply_err(E_INVALID_ARG, "no such cache"); break; }
            if (use && use->B != B) { reply_err(E_INVALID_ARG, "batch differs from the cache's"); break; }
            if (use && use->len + T > use->S) { reply_err(E_CONTEXT_LIMIT, "the cache is full"); break; }
            if (!use && T > M.P) { reply_err(E_CONTEXT_LIMIT, "more positions than n_positions"); break; }
            if (Tk != (use ? use->len : 0) + T) { reply_err(E_INVALID_ARG, "key mask length"); break; }
            const int32_t *tok = (const int32_t *)(body + 24), *pos = tok + (size_t)B * T;
            for (int32_t i = 0; i < B * T; i++)
                if (tok[i] < 0 || tok[i] >= M.V || pos[i] < 0 || pos[i] >= M.P) {
                    reply_err(E_INVALID_ARG, "token or position out of range");
                    goto next;
                }
            if (!use) {
                cache *t = new_cache(B, T);
                if (!t) { reply_err(E_NOMEM, "out of memory"); break; }
                tmp = *t;
                free(t);
            }
            int32_t rows = last ? B : B * T, P = 4 * M.L + 2;
            size_t nl = 12 + (size_t)rows * M.V * 4, nt = op == 12 ? 8 + (size_t)P + (size_t)P * B * T * M.D * 4 : 0;
            /* then i32 L, i32 KVd, i32 Tk, u8 kv_given[L], f32 kv[L, 2, B, Tk, KVd] (KVd = H dh = D) */
            size_t nk = op == 12 ? 12 + (size_t)M.L + 4 * 2 * (size_t)M.L * B * Tk * M.D : 0;
            uint8_t *out = malloc(nl + nt + nk + 4); /* logits, then i32 P, i32 D, u8 given[P], f32 (P, B, T, D) */
            float *tr = op == 12 ? malloc(sizeof(float) * (size_t)P * B * T * M.D) : NULL;
            forward(use ? use : &tmp, B, T, tok, pos, has_mask ? (const uint8_t *)(pos + (size_t)B * T) : NULL,
                    last, (float *)(out + 12), tr);
            int32_t head[3] = {rows, M.V, use ? use->len : -1};
            memcpy(out, head, 12);
            if (op == 12) {
                int32_t pd[2] = {P, M.D};
                memcpy(out + nl, pd, 8);
                memset(out + nl + 8, 1, (size_t)P);
                memcpy(out + nl + 8 + P, tr, (size_t)P * B * T * M.D * 4);
                free(tr);
                /* every block's keys and values as attention read them: the cache, (B, H, S, dh) per layer */
                const cache *kc = use ? use : &tmp;
                uint8_t *k = out + nl + nt;
                int32_t kd[3] = {M.L, M.D, Tk};
                memcpy(k, kd, 12);
                memset(k + 12, 1, (size_t)M.L);
                float *kv = (float *)(k + 12 + M.L); /* (L, 2, B, Tk, D): memcpy'd per row, alignment aside */
                for (int32_t l = 0; l < M.L; l++)
                    for (int32_t w2 = 0; w2 < 2; w2++)
                        for (int32_t b = 0; b < B; b++)
                            for (int32_t j = 0; j < Tk; j++)
                                for (int32_t hh = 0; hh < M.H; hh++) {
                                    const float *src = (w2 ? kc->v : kc->k) +
                                                       ((((size_t)l * B + b) * M.H + hh) * kc->S + j) * M.dh;
                                    memcpy((uint8_t *)kv + 4 * (((((size_t)l * 2 + w2) * B + b) * Tk + j) * M.D +
                                                                (size_t)hh * M.dh),
                                           src, sizeof(float) * M.dh);
                                }
            }
            reply(0, out, (uint32_t)(nl + nt + nk));
            free(out);
            free(tmp.k);
            free(tmp.v);
            break;
        }
        case 14: { /* logprobs: f64 values (B, V) */
            double *v = NULL;
            size_t n = 0;
            int st = logprobs(body, len, &v, &n, err, sizeof err);
            if (st) reply_err((uint32_t)st, err); else reply(0, v, (uint32_t)(8 * n));
            free(v);
            break;
        }
        case 13: { /* speculate: accepted, next */
            int32_t out[2];
            int st = speculate(body, len, out, err, sizeof err);
            if (st) reply_err((uint32_t)st, err); else reply(0, out, 8);
            break;
        }
        default: reply_err(E_UNSUPPORTED, "echo_ref does not implement this request");
        }
    next:
        free(body);
    }
    return 0;
}
