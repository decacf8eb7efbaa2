/* The statistical tier's calibration table (stat_calibration.h). The file:
 *
 *   provenance: {date: ..., machine: ..., versions: ..., command: ..., ...}
 *   policy:
 *     q8_0: {alpha: 0.05, beta: 0.2, theta_kld: 5.0e-4, theta_top1: 0.05}
 *   nulls:
 *     - {case: statistical.holmes-gpt, model: models/holmes-gpt, model_hash: ..., weights: q8_0, kv: f16,
 *        backends: "llamacpp:q8_0,repack=off", windows: 60, positions: 1920,
 *        kld_mean: ..., kld_sigma: ..., top1_disagree: ...}
 *
 * Every value is checked here; the cases inherit the policy per type and
 * judge against the null of their model and the backend's types. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "stat_calibration.h"

/* ---- a policy map ---- */

static const char *const k_policy_keys[] = {"alpha", "beta", "theta_kld", "theta_top1", "theta_p99", "theta_max", NULL};

static double *policy_field(gf_stat_policy *p, int i)
{
    double *f[] = {&p->alpha, &p->beta, &p->theta_kld, &p->theta_top1, &p->theta_p99, &p->theta_max};
    return f[i];
}

/* {alpha, beta, theta_kld, theta_top1, theta_p99, theta_max} at n into *p (absent fields NaN) */
static int policy_read(gf_cctx *ctx, const gf_ynode *n, gf_stat_policy *p)
{
    *p = (gf_stat_policy){NAN, NAN, NAN, NAN, NAN, NAN};
    if (!gf_y_node_is_map(ctx, n, "a policy entry"))
        return -1;
    int bad = 0;
    for (int f = 0; k_policy_keys[f]; f++) {
        double *d = policy_field(p, f);
        int r = gf_y_double(ctx, n, k_policy_keys[f], 0, d);
        if (r < 0) {
            bad = 1;
            continue;
        }
        /* alpha, beta, theta_top1, theta_p99, theta_max in (0, 1); theta_kld > 0 and finite */
        int ok = r == 0 || (f == 2 ? (*d > 0 && isfinite(*d)) : (*d > 0 && *d < 1));
        if (!ok) {
            gf_y_error(ctx, gf_y_get(ctx, n, k_policy_keys[f], 0), "'%s' must be %s", k_policy_keys[f],
                       f == 2 ? "a finite number > 0 (nats)" : "a number in (0, 1)");
            bad = 1;
        }
    }
    gf_y_check_unknown(ctx, n, "in a policy entry (known: alpha, beta, theta_kld, theta_top1, theta_p99, theta_max)");
    return bad ? -1 : 0;
}

/* {TYPE: policy} at node t into *out */
static int policy_map(gf_cctx *ctx, const gf_ynode *t, const char *what, gf_stat_policy_entry **out, size_t *n_out)
{
    *out = NULL;
    *n_out = 0;
    if (!gf_y_node_is_map(ctx, t, what))
        return -1;
    *out = calloc(t->n ? t->n : 1, sizeof **out);
    if (!*out)
        return -1;
    int bad = 0;
    for (size_t i = 0; i < t->n; i++) {
        const gf_ynode *key = t->items[2 * i], *val = t->items[2 * i + 1];
        t->used[i] = 1;
        gf_stat_policy_entry *e = &(*out)[(*n_out)++];
        e->line = key->line;
        if (!key->value || !key->value[0] || strlen(key->value) >= sizeof e->type) {
            gf_y_error(ctx, key,
                       "a %s key is a type (f32, f16, bf16, q8_0, kv_f16, kv_q8_0 ...; in a case, * for every type)",
                       what);
            bad = 1;
            continue;
        }
        snprintf(e->type, sizeof e->type, "%s", key->value);
        bad |= policy_read(ctx, val, &e->p) < 0;
    }
    return bad ? -1 : 0;
}

int gf_stat_hypothesis_parse(gf_cctx *ctx, const gf_ynode *m, gf_stat_policy_entry **out, size_t *n_out)
{
    const gf_ynode *t = gf_y_get(ctx, m, "hypothesis", GF_Y_OPTIONAL);
    *out = NULL;
    *n_out = 0;
    if (!t || (t->type == GF_YN_SCALAR && gf_yscalar_resolve(t).type == GF_YS_NULL))
        return 0;
    return policy_map(ctx, t, "'hypothesis'", out, n_out);
}

/* ---- the table ---- */

static int copy_string(gf_cctx *ctx, const gf_ynode *m, const char *key, int flags, char *dst, size_t cap)
{
    char *s = NULL;
    int r = gf_y_string(ctx, m, key, flags, &s);
    if (r > 0) {
        if (strlen(s) >= cap) {
            gf_y_error(ctx, gf_y_get(ctx, m, key, 0), "'%s' is longer than %zu bytes", key, cap - 1);
            r = -1;
        } else
            snprintf(dst, cap, "%s", s);
    }
    free(s);
    return r;
}

static int null_read(gf_cctx *ctx, const gf_ynode *n, gf_stat_null *e)
{
    memset(e, 0, sizeof *e);
    e->line = n->line;
    if (!gf_y_node_is_map(ctx, n, "a null entry"))
        return -1;
    int bad = 0;
    bad |= copy_string(ctx, n, "case", GF_Y_REQUIRED, e->case_id, sizeof e->case_id) < 0;
    bad |= copy_string(ctx, n, "model", GF_Y_REQUIRED, e->model, sizeof e->model) < 0;
    bad |= copy_string(ctx, n, "model_hash", GF_Y_REQUIRED, e->model_hash, sizeof e->model_hash) < 0;
    bad |= copy_string(ctx, n, "weights", GF_Y_REQUIRED, e->weights, sizeof e->weights) < 0;
    bad |= copy_string(ctx, n, "kv", GF_Y_REQUIRED, e->kv, sizeof e->kv) < 0;
    bad |= copy_string(ctx, n, "backends", GF_Y_REQUIRED, e->backends, sizeof e->backends) < 0;
    bad |= gf_y_int(ctx, n, "windows", GF_Y_REQUIRED, 2, 1LL << 40, &e->windows) < 0;
    bad |= gf_y_int(ctx, n, "positions", GF_Y_REQUIRED, 2, 1LL << 40, &e->positions) < 0;
    const char *const dk[] = {"kld_mean", "kld_sigma", "top1_disagree"};
    double *dv[] = {&e->kld_mean, &e->kld_sigma, &e->top1_disagree};
    for (int i = 0; i < 3; i++) {
        int r = gf_y_double(ctx, n, dk[i], GF_Y_REQUIRED, dv[i]);
        if (r < 0)
            bad = 1;
        else if (r > 0 && !(*dv[i] >= 0 && isfinite(*dv[i]) && (i < 2 || *dv[i] < 1))) {
            gf_y_error(ctx, gf_y_get(ctx, n, dk[i], 0), "'%s' must be a finite number >= 0%s", dk[i],
                       i == 2 ? " and < 1" : "");
            bad = 1;
        }
    }
    e->top1_dispersion = 1;
    int r = gf_y_double(ctx, n, "top1_dispersion", 0, &e->top1_dispersion);
    if (r < 0)
        bad = 1;
    else if (r > 0 && !(e->top1_dispersion >= 1 && isfinite(e->top1_dispersion))) {
        gf_y_error(ctx, gf_y_get(ctx, n, "top1_dispersion", 0), "'top1_dispersion' must be a finite number >= 1");
        bad = 1;
    }
    /* the tails' levels: kld_p99 and kld_max required, dp_max optional (NaN) */
    const char *const tk[] = {"kld_p99", "kld_max", "dp_max"};
    double *tv[] = {&e->kld_p99, &e->kld_max, &e->dp_max};
    for (int i = 0; i < 3; i++) {
        *tv[i] = NAN;
        int r = gf_y_double(ctx, n, tk[i], i < 2 ? GF_Y_REQUIRED : 0, tv[i]);
        if (r < 0)
            bad = 1;
        else if (r > 0 && !(*tv[i] >= 0 && isfinite(*tv[i]))) {
            gf_y_error(ctx, gf_y_get(ctx, n, tk[i], 0), "'%s' must be a finite number >= 0", tk[i]);
            bad = 1;
        }
    }
    /* what the tool writes beside them, for the reader (not used) */
    const char *const info[] = {"kld_sigma_position", "kld_sigma_windows", "top1_disagreements", NULL};
    for (int i = 0; info[i]; i++) {
        double d;
        bad |= gf_y_double(ctx, n, info[i], 0, &d) < 0;
    }
    if (!bad && strlen(e->model_hash) != 64) {
        gf_y_error(ctx, gf_y_get(ctx, n, "model_hash", 0), "'model_hash' is 64 hex digits (genfence's model hash)");
        bad = 1;
    }
    gf_y_check_unknown(ctx, n,
                       "in a null entry (known: case, model, model_hash, weights, kv, backends, windows, positions, "
                       "kld_mean, kld_sigma, top1_disagree, top1_dispersion, kld_sigma_position, kld_sigma_windows, "
                       "top1_disagreements, kld_p99, kld_max, dp_max)");
    return bad ? -1 : 0;
}

static void table_free(gf_stat_table *t)
{
    if (t) {
        free(t->path);
        json_decref(t->provenance);
        free(t->policy);
        free(t->null);
    }
    free(t);
}

static gf_stat_table *table_read(gf_cctx *ctx, const char *path)
{
    gf_ynode *root = gf_yaml_read_file(ctx, path);
    if (!root)
        return NULL;
    gf_stat_table *t = calloc(1, sizeof *t);
    int bad = !t || !gf_y_node_is_map(ctx, root, "a calibration table");
    if (!bad) {
        t->path = strdup(path);
        t->provenance = json_object();
        const gf_ynode *p = gf_y_get(ctx, root, "provenance", GF_Y_REQUIRED);
        if (p && gf_y_node_is_map(ctx, p, "'provenance'")) {
            const char *const need[] = {"date", "machine", "versions", "command", NULL};
            for (int i = 0; need[i]; i++)
                if (!gf_y_get(ctx, p, need[i], 0))
                    gf_y_error(ctx, p, "'provenance' needs '%s'", need[i]), bad = 1;
            for (size_t i = 0; i < p->n; i++) {
                const gf_ynode *k = p->items[2 * i], *v = p->items[2 * i + 1];
                p->used[i] = 1;
                char *s = NULL;
                if (gf_y_node_string(ctx, v, "a provenance value", &s) < 0)
                    bad = 1;
                else
                    json_object_set_new(t->provenance, k->value ? k->value : "", json_string(s));
                free(s);
            }
        } else
            bad = 1;
        const gf_ynode *pol = gf_y_get(ctx, root, "policy", GF_Y_REQUIRED);
        if (!pol || policy_map(ctx, pol, "'policy'", &t->policy, &t->n_policy) < 0)
            bad = 1;
        for (size_t i = 0; !bad && i < t->n_policy; i++)
            for (int f = 0; k_policy_keys[f]; f++)
                if (isnan(*policy_field(&t->policy[i].p, f))) {
                    gf_y_error(ctx, pol->items[2 * i + 1], "the policy of %s needs '%s'", t->policy[i].type,
                               k_policy_keys[f]);
                    bad = 1;
                }
        const gf_ynode *nl = gf_y_get(ctx, root, "nulls", GF_Y_REQUIRED);
        if (nl && gf_y_node_is_seq(ctx, nl, "'nulls'")) {
            t->null = calloc(nl->n ? nl->n : 1, sizeof *t->null);
            bad |= !t->null;
            for (size_t i = 0; t->null && i < nl->n; i++)
                bad |= null_read(ctx, nl->items[i], &t->null[t->n_null++]) < 0;
            for (size_t i = 0; !bad && i < t->n_null; i++)
                for (size_t j = 0; j < i; j++)
                    if (!strcmp(t->null[i].case_id, t->null[j].case_id) &&
                        !strcmp(t->null[i].model_hash, t->null[j].model_hash) &&
                        !strcmp(t->null[i].weights, t->null[j].weights) && !strcmp(t->null[i].kv, t->null[j].kv)) {
                        gf_y_error(ctx, nl->items[i], "a second null for %s, weights %s, kv %s (the first at line %d)",
                                   t->null[i].case_id, t->null[i].weights, t->null[i].kv, t->null[j].line);
                        bad = 1;
                    }
        } else
            bad = 1;
        gf_y_check_unknown(ctx, root, "in a calibration table (known: provenance, policy, nulls)");
    }
    gf_ynode_free(root);
    if (bad || ctx->n_errors) {
        table_free(t);
        return NULL;
    }
    return t;
}

/* errors of the table's own context into the case's */
static void move_errors(gf_cctx *to, gf_cctx *from)
{
    for (size_t i = 0; i < from->n_errors; i++) {
        if (to->n_errors == to->cap) {
            size_t cap = to->cap ? 2 * to->cap : 8;
            char **e = realloc(to->errors, cap * sizeof *e);
            if (!e)
                break;
            to->errors = e;
            to->cap = cap;
        }
        to->errors[to->n_errors++] = from->errors[i];
        from->errors[i] = NULL;
    }
    gf_y_strings_free(from->errors, from->n_errors);
    from->errors = NULL;
    from->n_errors = from->cap = 0;
}

/* One process reads a table once: the loaded ones (or a refusal, reported
 * at the first case that asked) by path, kept to the end. */
enum { GF_STAT_TABLES = 16 };
static struct {
    char *path;
    gf_stat_table *t;
} g_tables[GF_STAT_TABLES];

const gf_stat_table *gf_stat_table_load(gf_cctx *ctx, const char *path, int required)
{
    size_t i = 0;
    for (; i < GF_STAT_TABLES && g_tables[i].path; i++)
        if (!strcmp(g_tables[i].path, path)) {
            if (!g_tables[i].t && required)
                gf_y_error(ctx, NULL, "the calibration table %s was refused (its errors above)", path);
            return g_tables[i].t;
        }
    struct stat sb;
    if (stat(path, &sb) != 0 && errno == ENOENT && !required)
        return NULL;
    gf_cctx tctx = {0};
    gf_stat_table *t = table_read(&tctx, path);
    move_errors(ctx, &tctx);
    if (i < GF_STAT_TABLES) {
        g_tables[i].path = strdup(path);
        g_tables[i].t = t;
    } else
        table_free(t), t = NULL;
    return t;
}

int gf_stat_policy_for(const gf_stat_table *t, const gf_stat_policy_entry *c, size_t n_c, const char *type,
                       gf_stat_policy *out, int *from_case)
{
    *out = (gf_stat_policy){NAN, NAN, NAN, NAN, NAN, NAN};
    *from_case = 0;
    for (size_t i = 0; t && i < t->n_policy; i++)
        if (!strcmp(t->policy[i].type, type))
            *out = t->policy[i].p;
    /* the case's "*" (every type) first, its entry for the type over it */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < n_c; i++)
            if (!strcmp(c[i].type, pass ? type : "*")) {
                for (int f = 0; k_policy_keys[f]; f++)
                    if (!isnan(*policy_field((gf_stat_policy *)&c[i].p, f)))
                        *policy_field(out, f) = *policy_field((gf_stat_policy *)&c[i].p, f);
                *from_case = c[i].line;
            }
    for (int f = 0; k_policy_keys[f]; f++)
        if (isnan(*policy_field(out, f)))
            return 0;
    return 1;
}

const char *gf_stat_policy_key(const char *weights, const char *kv, char *buf, size_t cap)
{
    if (strcmp(weights, "f32"))
        snprintf(buf, cap, "%s", weights);
    else if (strcmp(kv, "f32")) {
        snprintf(buf, cap, "kv_%s", kv);
        for (char *p = buf; *p; p++)
            if (*p == ',' || *p == '=')
                *p = '_';
    } else
        snprintf(buf, cap, "f32");
    return buf;
}

const gf_stat_null *gf_stat_null_for(const gf_stat_table *t, const char *case_id, const char *model_hash,
                                     const char *weights, const char *kv)
{
    for (size_t i = 0; t && i < t->n_null; i++)
        if (!strcmp(t->null[i].case_id, case_id) && !strcmp(t->null[i].model_hash, model_hash) &&
            !strcmp(t->null[i].weights, weights) && !strcmp(t->null[i].kv, kv))
            return &t->null[i];
    return NULL;
}

int gf_stat_table_has(const gf_stat_table *t, const char *case_id, const char *weights, const char *kv)
{
    for (size_t i = 0; t && case_id && i < t->n_null; i++)
        if (!strcmp(t->null[i].case_id, case_id) && !strcmp(t->null[i].weights, weights) && !strcmp(t->null[i].kv, kv))
            return 1;
    return 0;
}
