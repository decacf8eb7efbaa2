/* A golden_generation case's golden: where it lives, the case hash, the
 * commands that make it (golden_case.h). The kind, run and bless share them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "golden_case.h"
#include "hash.h"
#include "sys.h"

char *gf_golden_path_for(const gf_case *c, const char *dir)
{
    if (dir) {
        size_t n = strlen(dir) + strlen(c->id) + 16;
        char *p = malloc(n);
        if (p)
            snprintf(p, n, "%s/%s.safetensors", dir, c->id);
        return p;
    }
    const gf_golden_spec *s = c->spec;
    return s && s->golden ? strdup(s->golden) : NULL;
}

gf_status gf_case_hash_of(const gf_case *c, char hex[65])
{
    if (!c->tree)
        return gf_error_set(GF_E_INTERNAL, "case %s has no JSON tree", c->id);
    return gf_case_hash(c->tree, hex);
}

void gf_golden_make_hint(const gf_case *c, const char *dir, char *buf, size_t cap)
{
    char re[600], out[1100] = "";
    gf_id_regex(re, sizeof re, c->id);
    if (dir)
        snprintf(out, sizeof out, " --out-dir %s", dir);
    snprintf(
        buf, cap,
        "make it with `.venv/bin/python tools/reference/golden.py --genfence build/genfence --filter '%s'%s %s`%s, "
        "or without Python `genfence bless --backend NAME --filter '%s'%s %s`",
        re, out, c->file, dir ? "" : " (`make goldens` remakes those of cases/golden.yaml)", re, out, c->file);
}

char *gf_golden_path_resolve(const gf_cctx *ctx, const char *arg, const char *dir, const char *id)
{
    if (arg && arg[0] == '/')
        return strdup(arg);
    char *root = gf_case_root_for(ctx->root, ctx->file), rel[1024];
    if (arg)
        snprintf(rel, sizeof rel, "%s", arg);
    else
        snprintf(rel, sizeof rel, "%s/%s.safetensors", dir, id);
    char *path = root ? gf_path_join(root, rel) : NULL;
    free(root);
    return path;
}

double gf_golden_atol(const gf_golden *g, double case_atol, json_t **rule_out)
{
    const char *v = gf_golden_meta(g, "fp32_spread");
    char *end = NULL;
    double spread = v ? strtod(v, &end) : NAN;
    int ok = v && end != v && *end == '\0' && isfinite(spread) && spread >= 0;
    double atol = ok && GF_GOLDEN_SPREAD_K * spread > case_atol ? GF_GOLDEN_SPREAD_K * spread : case_atol;
    if (rule_out) {
        json_t *o = json_object();
        json_object_set_new(o, "case_atol", json_real(case_atol));
        json_object_set_new(o, "fp32_spread", ok ? json_real(spread) : json_null());
        json_object_set_new(o, "spread_k", json_real(GF_GOLDEN_SPREAD_K));
        json_object_set_new(o, "atol_fp32", json_real(atol));
        json_object_set_new(o, "rule",
                            json_string(!ok ? (v ? "the golden's fp32_spread is not a number >= 0: the case's atol"
                                                 : "no fp32_spread in the golden: the case's atol")
                                        : atol > case_atol
                                            ? "spread_k x the golden's fp32_spread (above the case's atol)"
                                            : "the case's atol (above spread_k x fp32_spread)"));
        *rule_out = o;
    }
    return atol;
}
