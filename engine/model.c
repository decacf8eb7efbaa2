/* Hugging Face model directory (config.json + model.safetensors, or the
 * shards of model.safetensors.index.json) -> gf_model. GPT-2 (tensor names
 * with or without "transformer.") and the Llama family (names with or without
 * "model."; qwen2 adds q/k/v biases).
 *
 * Weights stay mapped (issue 27 item 3): an F32 tensor whose data is 4-byte
 * aligned in the file is handed out as a view into the safetensors mapping,
 * no copy, so its pages count once in the process's RSS (as file pages,
 * shared with the page cache); every other weight (F16, BF16, F64, an F32 one
 * at an odd offset) is converted to F32 once, into one 64-byte-aligned
 * allocation (each tensor on a 64-byte boundary), and the pages of its source
 * are dropped from the mapping after the conversion (madvise DONTNEED: they
 * are not read again). The mapping stays open until gf_model_free, and the
 * desc says so (gf_model_desc.weights_persist): a backend may keep pointers
 * into the weights until its model_free instead of copying them. */
#include "genfence/model.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "genfence/safetensors.h"
#include "model_internal.h"

struct gf_model {
    char *dir;
    gf_st_set *set; /* the safetensors mapping the views point into; open until gf_model_free */
    float *arena;   /* the converted weights (not F32, or F32 unaligned in the file) */
    size_t n_views, view_bytes;
    float *rope_inv_freq;  /* (d_head / 2), rotary only */
    int32_t *layer_window; /* (L) per-layer sliding window (0 = full); NULL when none */
    gf_layer_weights *layers;
    gf_model_desc desc;
    size_t n_params;
};

#define GF_ALIGN_FLOATS 16 /* 64 bytes */

/* One weight to load: its GPT-2 name, expected shape and destination. */
typedef struct wspec {
    char name[96];
    int32_t ndim;
    int64_t shape[2];
    const char *why; /* how the expected shape follows from the config */
    const float **dst;
    const gf_st_tensor *t;
    const gf_safetensors *shard; /* the file t lives in */
    size_t slot;                 /* offset in floats into the arena */
    int view;                    /* 1: handed out from the mapping (F32, 4-byte aligned) */
} wspec;

static int file_exists(const char *dir, const char *file)
{
    char *p = gf_path_join(dir, file);
    struct stat sb;
    int ok = p && stat(p, &sb) == 0;
    free(p);
    return ok;
}

static const char *shape_str(char *buf, size_t cap, int32_t ndim, const int64_t *shape)
{
    size_t len = (size_t)snprintf(buf, cap, "[");
    for (int32_t i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%" PRId64, i ? ", " : "", shape[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

/* Find NAME or PREFIX NAME (the base model's prefix: "transformer." for
 * GPT-2, "model." for Llama); both present is ambiguous. */
static gf_status find_tensor(const gf_st_set *set, const char *prefix, const char *name, const gf_st_tensor **out,
                             const gf_safetensors **shard)
{
    char pref[160];
    snprintf(pref, sizeof pref, "%s%s", prefix, name);
    const gf_safetensors *sa = NULL, *sb = NULL;
    const gf_st_tensor *a = gf_st_set_find(set, name, &sa), *b = gf_st_set_find(set, pref, &sb);
    if (a && b)
        return gf_error_set(GF_E_FORMAT, "%s: both '%s' and '%s' are present; which one is meant?", gf_st_set_path(set),
                            name, pref);
    *out = a ? a : b;
    if (shard)
        *shard = a ? sa : sb;
    return GF_OK;
}

static void add_w(wspec *ws, size_t *k, const char *name, int32_t ndim, int64_t d0, int64_t d1, const char *why,
                  const float **dst)
{
    wspec *e = &ws[(*k)++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->ndim = ndim;
    e->shape[0] = d0;
    e->shape[1] = d1;
    e->why = why;
    e->dst = dst;
}

static int is_float_dtype(gf_dtype dt)
{
    return dt == GF_DT_F32 || dt == GF_DT_F16 || dt == GF_DT_BF16 || dt == GF_DT_F64;
}

/* A weight must be finite: NaN or Inf (also from an F16/BF16 inf, or an F64
 * beyond float range) is an error naming the tensor, the element and where it
 * is in the file, instead of logits that are NaN on every backend. */
static gf_status check_finite(const gf_safetensors *shard, const gf_st_tensor *t, const float *v)
{
    size_t n = (size_t)gf_st_tensor_numel(t);
    for (size_t i = 0; i < n; i++) {
        if (isfinite(v[i]))
            continue;
        char idx[96] = "";
        if (t->ndim == 2 && t->shape[1] > 0)
            snprintf(idx, sizeof idx, " [%" PRId64 ", %" PRId64 "]", (int64_t)i / t->shape[1],
                     (int64_t)i % t->shape[1]);
        else if (t->ndim == 1)
            snprintf(idx, sizeof idx, " [%zu]", i);
        return gf_error_set(GF_E_FORMAT,
                            "%s: tensor '%s' element %zu%s is %s (file offset %" PRIu64 "); weights must be finite",
                            gf_safetensors_path(shard), t->name, i, idx,
                            isnan(v[i]) ? "NaN"
                            : v[i] > 0  ? "+Inf"
                                        : "-Inf",
                            t->offset + (uint64_t)i * gf_dtype_size(t->dtype));
    }
    return GF_OK;
}

/* A tensor "<prefix><layers>K.*" with K >= n_layer means the config and the
 * weights disagree on the depth. */
static gf_status check_extra_layers(const gf_st_set *set, const char *cfg_path, const char *prefix, const char *layers,
                                    int32_t n_layer)
{
    size_t np = strlen(prefix), nl = strlen(layers);
    for (size_t i = 0; i < gf_st_set_count(set); i++) {
        const gf_safetensors *shard = NULL;
        const char *nm = gf_st_set_at(set, i, &shard)->name;
        const char *p = nm;
        if (!strncmp(p, prefix, np))
            p += np;
        if (strncmp(p, layers, nl) != 0)
            continue;
        p += nl;
        if (*p < '0' || *p > '9')
            continue;
        char *end;
        errno = 0;
        unsigned long long k = strtoull(p, &end, 10);
        if (*end != '.')
            continue;
        if (errno == ERANGE || k >= (unsigned long long)n_layer)
            return gf_error_set(GF_E_FORMAT,
                                "%s: tensor '%.200s' belongs to layer %llu but %s says "
                                "%s = %d (layers 0 .. %d); config and weights disagree",
                                gf_safetensors_path(shard), nm, k, cfg_path,
                                strcmp(layers, "h.") ? "num_hidden_layers" : "n_layer", (int)n_layer, (int)n_layer - 1);
    }
    return GF_OK;
}

/* GPT-2's weights: names relative to "transformer.". */
static void gpt2_specs(wspec *ws, size_t *k, const gf_model_config *c, gf_model_weights *w, gf_layer_weights *layers)
{
    const int64_t V = c->vocab_size, P = c->n_positions, D = c->n_embd, F = c->d_ff;
    char nm[96];
    add_w(ws, k, "wte.weight", 2, V, D, "(vocab_size, n_embd)", &w->wte);
    add_w(ws, k, "wpe.weight", 2, P, D, "(n_positions, n_embd)", &w->wpe);
    for (int32_t l = 0; l < c->n_layer; l++) {
        gf_layer_weights *lw = &layers[l];
#define LNAME(suffix) (snprintf(nm, sizeof nm, "h.%d.%s", (int)l, suffix), nm)
        add_w(ws, k, LNAME("ln_1.weight"), 1, D, 0, "(n_embd)", &lw->ln1_w);
        add_w(ws, k, LNAME("ln_1.bias"), 1, D, 0, "(n_embd)", &lw->ln1_b);
        add_w(ws, k, LNAME("attn.c_attn.weight"), 2, D, 3 * D, "(n_embd, 3*n_embd)", &lw->attn_qkv_w);
        add_w(ws, k, LNAME("attn.c_attn.bias"), 1, 3 * D, 0, "(3*n_embd)", &lw->attn_qkv_b);
        add_w(ws, k, LNAME("attn.c_proj.weight"), 2, D, D, "(n_embd, n_embd)", &lw->attn_proj_w);
        add_w(ws, k, LNAME("attn.c_proj.bias"), 1, D, 0, "(n_embd)", &lw->attn_proj_b);
        add_w(ws, k, LNAME("ln_2.weight"), 1, D, 0, "(n_embd)", &lw->ln2_w);
        add_w(ws, k, LNAME("ln_2.bias"), 1, D, 0, "(n_embd)", &lw->ln2_b);
        add_w(ws, k, LNAME("mlp.c_fc.weight"), 2, D, F, "(n_embd, n_inner)", &lw->mlp_fc_w);
        add_w(ws, k, LNAME("mlp.c_fc.bias"), 1, F, 0, "(n_inner)", &lw->mlp_fc_b);
        add_w(ws, k, LNAME("mlp.c_proj.weight"), 2, F, D, "(n_inner, n_embd)", &lw->mlp_proj_w);
        add_w(ws, k, LNAME("mlp.c_proj.bias"), 1, D, 0, "(n_embd)", &lw->mlp_proj_b);
#undef LNAME
    }
    add_w(ws, k, "ln_f.weight", 1, D, 0, "(n_embd)", &w->lnf_w);
    add_w(ws, k, "ln_f.bias", 1, D, 0, "(n_embd)", &w->lnf_b);
}

/* Llama / Qwen2 weights (nn.Linear [out, in]): names relative to "model.". */
static void llama_specs(wspec *ws, size_t *k, const gf_model_config *c, gf_model_weights *w, gf_layer_weights *layers)
{
    const int64_t V = c->vocab_size, D = c->n_embd, F = c->d_ff;
    const int64_t Q = (int64_t)c->n_head * c->d_head, KV = (int64_t)c->n_kv_head * c->d_head;
    char nm[96];
    add_w(ws, k, "embed_tokens.weight", 2, V, D, "(vocab_size, hidden_size)", &w->wte);
    for (int32_t l = 0; l < c->n_layer; l++) {
        gf_layer_weights *lw = &layers[l];
#define LNAME(suffix) (snprintf(nm, sizeof nm, "layers.%d.%s", (int)l, suffix), nm)
        add_w(ws, k, LNAME("input_layernorm.weight"), 1, D, 0, "(hidden_size)", &lw->attn_norm_w);
        add_w(ws, k, LNAME("self_attn.q_proj.weight"), 2, Q, D, "(num_attention_heads*head_dim, hidden_size)", &lw->wq);
        add_w(ws, k, LNAME("self_attn.k_proj.weight"), 2, KV, D, "(num_key_value_heads*head_dim, hidden_size)",
              &lw->wk);
        add_w(ws, k, LNAME("self_attn.v_proj.weight"), 2, KV, D, "(num_key_value_heads*head_dim, hidden_size)",
              &lw->wv);
        if (c->qkv_bias) {
            add_w(ws, k, LNAME("self_attn.q_proj.bias"), 1, Q, 0, "(num_attention_heads*head_dim)", &lw->bq);
            add_w(ws, k, LNAME("self_attn.k_proj.bias"), 1, KV, 0, "(num_key_value_heads*head_dim)", &lw->bk);
            add_w(ws, k, LNAME("self_attn.v_proj.bias"), 1, KV, 0, "(num_key_value_heads*head_dim)", &lw->bv);
        }
        add_w(ws, k, LNAME("self_attn.o_proj.weight"), 2, D, Q, "(hidden_size, num_attention_heads*head_dim)", &lw->wo);
        add_w(ws, k, LNAME("post_attention_layernorm.weight"), 1, D, 0, "(hidden_size)", &lw->mlp_norm_w);
        add_w(ws, k, LNAME("mlp.gate_proj.weight"), 2, F, D, "(intermediate_size, hidden_size)", &lw->w_gate);
        add_w(ws, k, LNAME("mlp.up_proj.weight"), 2, F, D, "(intermediate_size, hidden_size)", &lw->w_up);
        add_w(ws, k, LNAME("mlp.down_proj.weight"), 2, D, F, "(hidden_size, intermediate_size)", &lw->w_down);
#undef LNAME
    }
    add_w(ws, k, "norm.weight", 1, D, 0, "(hidden_size)", &w->lnf_w);
}

void gf_model_free(gf_model *m)
{
    if (!m)
        return;
    free(m->arena);
    gf_st_set_close(m->set);
    free(m->rope_inv_freq);
    free(m->layer_window);
    free(m->layers);
    free(m->dir);
    free(m);
}

const gf_model_desc *gf_model_desc_get(const gf_model *m) { return m ? &m->desc : NULL; }
const char *gf_model_dir(const gf_model *m) { return m ? m->dir : NULL; }
size_t gf_model_param_count(const gf_model *m) { return m ? m->n_params : 0; }

gf_status gf_config_sliding_window(const char *config_json_path, int32_t *window_out)
{
    *window_out = 0;
    gf_model_config cfg;
    gf_rope_params rope;
    gf_status s = gf_config_load_ex(config_json_path, &cfg, &rope);
    if (s == GF_OK && rope.sliding_window > 0 && rope.sliding_window < cfg.n_positions)
        *window_out = rope.sliding_window; /* as gf_model_load gives it to the layers */
    return s;
}

size_t gf_model_view_bytes(const gf_model *m, size_t *n_views)
{
    if (n_views)
        *n_views = m ? m->n_views : 0;
    return m ? m->view_bytes : 0;
}

gf_status gf_model_load(const char *dir, gf_model **model_out)
{
    if (!dir || !model_out)
        return gf_error_set(GF_E_INVALID_ARG, "gf_model_load: NULL argument");
    *model_out = NULL;

    gf_status s = GF_OK;
    gf_model *m = calloc(1, sizeof *m);
    char *cfg_path = gf_path_join(dir, "config.json");
    gf_st_set *set = NULL;
    wspec *ws = NULL;
    if (!m || !cfg_path || !(m->dir = strdup(dir))) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
        goto fail;
    }

    struct stat sb;
    if (stat(dir, &sb) != 0) {
        s = gf_error_set(GF_E_IO, "%s: cannot open model directory: %s", dir, strerror(errno));
        goto fail;
    }
    if (!S_ISDIR(sb.st_mode)) {
        s = gf_error_set(GF_E_IO,
                         "%s: not a directory (expected a model directory with "
                         "config.json and model.safetensors)",
                         dir);
        goto fail;
    }

    gf_model_config cfg;
    gf_rope_params rope;
    if ((s = gf_config_load_ex(cfg_path, &cfg, &rope)) != GF_OK)
        goto fail;
    const int llama = cfg.arch == GF_ARCH_LLAMA;
    const char *prefix = llama ? "model." : "transformer.";

    if ((s = gf_st_set_open(dir, &set)) != GF_OK) {
        if (s == GF_E_IO && !file_exists(dir, "model.safetensors") &&
            !file_exists(dir, "model.safetensors.index.json") && file_exists(dir, "pytorch_model.bin")) {
            char prev[1024];
            snprintf(prev, sizeof prev, "%s", gf_error_msg());
            s = gf_error_set(GF_E_UNSUPPORTED,
                             "%s (the directory holds pytorch_model.bin; genfence reads "
                             "only safetensors: save with save_pretrained(..., "
                             "safe_serialization=True))",
                             prev);
        }
        goto fail;
    }
    const char *st_path = gf_st_set_path(set);

    const int64_t V = cfg.vocab_size, D = cfg.n_embd;
    const int32_t L = cfg.n_layer;
    if ((s = check_extra_layers(set, cfg_path, prefix, llama ? "layers." : "h.", L)) != GF_OK)
        goto fail;

    /* Every layer needs its own tensors (GPT-2 12, Llama 9; Qwen2's biases are
     * left to the per-tensor check, which names the missing one): a config
     * claiming more layers than the file can hold is refused before anything
     * per layer is allocated (n_layer 1e6 cost 1.8 GB and 7 s before). */
    const size_t per_layer = llama ? 9 : 12;
    if ((size_t)L > gf_st_set_count(set) / per_layer) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: %s = %d needs at least %zu layer tensors, but %s holds %zu tensors in all; "
                         "config and weights disagree",
                         cfg_path, llama ? "num_hidden_layers" : "n_layer", (int)L, (size_t)L * per_layer, st_path,
                         gf_st_set_count(set));
        goto fail;
    }
    m->layers = calloc((size_t)L, sizeof *m->layers);
    size_t n_ws = 2 + 12 * (size_t)L + 2 + 1;
    ws = calloc(n_ws, sizeof *ws);
    if (!m->layers || !ws) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    gf_model_weights *w = &m->desc.weights;
    size_t k = 0;
    if (llama)
        llama_specs(ws, &k, &cfg, w, m->layers);
    else
        gpt2_specs(ws, &k, &cfg, w, m->layers);

    /* lm_head.weight is never prefixed (the *ForCausalLM keeps it outside the
     * base model), but accept both spellings. GPT-2: used when present, else
     * tied. Llama: with tie_word_embeddings transformers ties it to the
     * embedding whatever the file holds, so it is ignored; without, required. */
    const gf_st_tensor *head = NULL;
    if ((s = find_tensor(set, prefix, "lm_head.weight", &head, NULL)) != GF_OK)
        goto fail;
    if (llama && cfg.tied_head)
        head = NULL;
    if (head)
        add_w(ws, &k, "lm_head.weight", 2, V, D, llama ? "(vocab_size, hidden_size)" : "(vocab_size, n_embd)",
              &w->lm_head);
    else if (!cfg.tied_head) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: tensor 'lm_head.weight' missing and %s sets tie_word_embeddings "
                         "to false, so the output projection cannot be taken from %s",
                         st_path, cfg_path, llama ? "model.embed_tokens.weight" : "wte.weight");
        goto fail;
    }

    /* Find, type-check and shape-check everything before allocating. */
    size_t total = 0, n_params = 0;
    for (size_t i = 0; i < k; i++) {
        wspec *e = &ws[i];
        if ((s = find_tensor(set, prefix, e->name, &e->t, &e->shard)) != GF_OK)
            goto fail;
        if (!e->t) {
            const gf_st_tensor *first = gf_st_set_at(set, 0, NULL);
            char layer_note[160] = "";
            if (!strncmp(e->name, llama ? "layers." : "h.", llama ? 7 : 2))
                snprintf(layer_note, sizeof layer_note, "; %s has %s = %d", cfg_path,
                         llama ? "num_hidden_layers" : "n_layer", (int)L);
            s = gf_error_set(GF_E_FORMAT,
                             "%s: tensor '%s' missing (also looked for '%s%s')%s; "
                             "the checkpoint has %zu tensors%s%.200s%s",
                             st_path, e->name, prefix, e->name, layer_note, gf_st_set_count(set),
                             first ? ", the first is '" : "", first ? first->name : "", first ? "'" : "");
            goto fail;
        }
        char got[160], want[64];
        int same = e->t->ndim == e->ndim;
        for (int32_t d = 0; same && d < e->ndim; d++)
            same = e->t->shape[d] == e->shape[d];
        if (!same) {
            s = gf_error_set(GF_E_FORMAT,
                             "%s: tensor '%s': shape %s, expected %s = %s from %s "
                             "(file offset %" PRIu64 ")",
                             gf_safetensors_path(e->shard), e->t->name,
                             shape_str(got, sizeof got, e->t->ndim, e->t->shape), e->why,
                             shape_str(want, sizeof want, e->ndim, e->shape), cfg_path, e->t->offset);
            goto fail;
        }
        if (!is_float_dtype(e->t->dtype)) {
            s = gf_error_set(GF_E_FORMAT, "%s: tensor '%s' has dtype %s; weights must be F32, F16, BF16 or F64",
                             gf_safetensors_path(e->shard), e->t->name, gf_dtype_name(e->t->dtype));
            goto fail;
        }
        size_t numel = (size_t)gf_st_tensor_numel(e->t);
        e->view = e->t->dtype == GF_DT_F32 && e->t->data && (uintptr_t)e->t->data % sizeof(float) == 0;
        size_t padded = e->view ? 0 : (numel + GF_ALIGN_FLOATS - 1) / GF_ALIGN_FLOATS * GF_ALIGN_FLOATS;
        e->slot = total;
        if (__builtin_add_overflow(total, padded, &total) || __builtin_add_overflow(n_params, numel, &n_params)) {
            s = gf_error_set(GF_E_NOMEM, "%s: model too large", st_path);
            goto fail;
        }
    }
    size_t bytes;
    if (total && (__builtin_mul_overflow(total, sizeof(float), &bytes) || !(m->arena = aligned_alloc(64, bytes)))) {
        s = gf_error_set(GF_E_NOMEM, "%s: cannot allocate %zu floats for the weights", st_path, total);
        goto fail;
    }
    for (size_t i = 0; i < k; i++) {
        const float *src;
        if (ws[i].view) {
            src = ws[i].t->data;
            m->n_views++;
            m->view_bytes += ws[i].t->nbytes;
        } else {
            float *dst = m->arena + ws[i].slot;
            if ((s = gf_st_tensor_to_f32(ws[i].shard, ws[i].t, dst)) != GF_OK)
                goto fail;
            gf_st_tensor_drop_pages(ws[i].t); /* converted: its source is not read again */
            src = dst;
        }
        if ((s = check_finite(ws[i].shard, ws[i].t, src)) != GF_OK)
            goto fail;
        *ws[i].dst = src;
    }
    if (!head)
        w->lm_head = w->wte;
    w->layers = m->layers;
    if (cfg.pos == GF_POS_ROPE) {
        if (!(m->rope_inv_freq = malloc((size_t)(cfg.d_head / 2) * sizeof(float)))) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        gf_rope_inv_freq(&cfg, &rope, m->rope_inv_freq);
        w->rope_inv_freq = m->rope_inv_freq;
    }
    m->desc.rope_attn_factor = 1.0f;
    if (rope.type == GF_ROPE_SCALING_YARN || rope.type == GF_ROPE_SCALING_LONGROPE) {
        m->desc.rope_attn_factor = (float)rope.attn_factor; /* torch rounds the Python float to float32 */
        m->desc.needs |= GF_MODEL_NEEDS_ROPE_ATTN_FACTOR;
    }
    /* a window of at least n_positions keys never hides one: no need to ask for it */
    if (rope.sliding_window > 0 && rope.sliding_window < cfg.n_positions) {
        if (!(m->layer_window = malloc((size_t)cfg.n_layer * sizeof *m->layer_window))) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        for (int32_t l = 0; l < cfg.n_layer; l++)
            m->layer_window[l] = rope.sliding_window;
        m->desc.layer_window = m->layer_window;
        m->desc.needs |= GF_MODEL_NEEDS_SLIDING_WINDOW;
    }

    cfg.tied_head = head ? 0 : 1;
    m->desc.struct_size = (uint32_t)sizeof m->desc;
    m->desc.config = cfg;
    m->desc.name = m->dir;
    m->desc.weights_persist = 1; /* views and arena live until gf_model_free */
    m->n_params = n_params;
    m->set = set; /* the views point into it */

    free(ws);
    free(cfg_path);
    *model_out = m;
    return GF_OK;
fail:
    gf_st_set_close(set);
    free(ws);
    free(cfg_path);
    gf_model_free(m);
    return s;
}
