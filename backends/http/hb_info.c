/* The http backend's info slot: what the server supports, probed, not
 * assumed (genfence backends --backend http:URL). Five small requests: the
 * model list, a one-step completion with top-k logprobs (are they named by
 * id, how many come back), the same with echo (prompt logprobs), streamed,
 * and two sampled requests with the same seed (same tokens?). Cached per
 * config in this process. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdint.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

typedef struct info_entry {
    char config[1024];
    char library[1024];
    char detail[2048];
} info_entry;

static gf_status ask(const hb_conf *c, const char *model, int echo, int stream, double temp, int seed, int max_tokens,
                     hb_reply *r)
{
    static const int32_t prompt[3] = {1, 2, 3};
    hb_ask a = {prompt, 3, max_tokens, temp, seed, echo, stream};
    return hb_complete(c, model, &a, 1, r);
}

/* "HTTP 400: message" or the transport error, into buf. */
static void why_not(gf_status st, const hb_reply *r, char *buf, size_t n)
{
    if (st != GF_OK) {
        snprintf(buf, n, "%s", gf_error_msg());
        return;
    }
    char msg[200];
    hb_error_text(r->body, r->len, msg, sizeof msg);
    snprintf(buf, n, "HTTP %ld: %s", r->status, msg);
}

static size_t put(char *d, size_t at, size_t cap, const char *fmt, const char *a, const char *b)
{
    if (at < cap)
        at += (size_t)snprintf(d + at, cap - at, fmt, a, b);
    return at < cap ? at : cap;
}

static gf_status probe_server(const hb_conf *c, info_entry *e)
{
    char model[128] = "", why[320], buf[400];
    hb_reply r;
    gf_status st = hb_request(c, "/v1/models", NULL, &r);
    if (st != GF_OK || r.status != 200) {
        why_not(st, &r, why, sizeof why);
        hb_reply_free(&r);
        return gf_error_set(GF_E_UNAVAILABLE, "http: the server at %s does not answer GET /v1/models (%s)", c->url,
                            why);
    }
    json_t *root = json_loadb(r.body, r.len, 0, NULL);
    json_t *m0 = json_array_get(json_object_get(root, "data"), 0);
    json_t *id = json_object_get(m0, "id"), *owner = json_object_get(m0, "owned_by");
    snprintf(model, sizeof model, "%s", c->model[0] ? c->model : json_is_string(id) ? json_string_value(id) : "");
    snprintf(e->library, sizeof e->library, "server %s, model '%s'%s%s, %s; %s", c->url, model,
             json_is_string(owner) ? " owned by " : "", json_is_string(owner) ? json_string_value(owner) : "",
             c->chat ? "api=chat (POST /v1/chat/completions, the prompt's text from /detokenize)"
                     : "api=completions (POST /v1/completions, prompts as token ids)",
             hb_net_version());
    json_decref(root);
    hb_reply_free(&r);
    size_t at = 0, cap = sizeof e->detail;
    /* 1. top-k logprobs by id */
    hb_completion comp = {0};
    st = ask(c, model, 0, 0, 0.0, -1, 1, &r);
    gf_status transport = st;
    if (st == GF_OK && r.status == 200)
        st = hb_parse_completion(r.body, r.len, &comp);
    if (st == GF_OK && r.status == 200 && comp.n_steps >= 1) {
        snprintf(buf, sizeof buf, "%d of k=%d asked", comp.steps[0].n_top, c->k);
        at = put(e->detail, at, cap, "top-k logprobs by id: yes (%s)%s", buf, "");
        if (comp.steps[0].n_top < 2)
            at = put(e->detail, at, cap, " [under 2: no margin]%s%s", "", "");
    } else {
        why_not(st, &r, why, sizeof why);
        at = put(e->detail, at, cap, "top-k logprobs by id: NO (%s)%s",
                 st == GF_OK && r.status == 200 ? "no steps" : why, "");
    }
    hb_completion_free(&comp);
    hb_reply_free(&r);
    if (transport != GF_OK) { /* a transport failure (a timeout): the other probes would repeat it */
        put(e->detail, at, cap, "; the other probes skipped after that%s%s", "", "");
        return GF_OK;
    }
    /* 2. prompt logprobs through echo */
    st = ask(c, model, 1, 0, 0.0, -1, 1, &r);
    if (st == GF_OK && r.status == 200 && hb_parse_completion(r.body, r.len, &comp) == GF_OK && comp.n_steps >= 3)
        at = put(e->detail, at, cap, "; prompt logprobs (echo): yes%s%s", "", "");
    else {
        why_not(st, &r, why, sizeof why);
        at = put(e->detail, at, cap, "; prompt logprobs (echo): no (%s)%s",
                 st == GF_OK && r.status == 200 ? "no prompt steps" : why, "");
    }
    hb_completion_free(&comp);
    hb_reply_free(&r);
    /* 3. streaming */
    st = ask(c, model, 0, 1, 0.0, -1, 1, &r);
    gf_status sst = st == GF_OK && r.status == 200 ? hb_parse_stream(r.body, r.len, &comp) : GF_E_BACKEND;
    if (sst == GF_OK)
        at = put(e->detail, at, cap, "; streaming: yes%s%s", "", "");
    else {
        if (st == GF_OK && r.status == 200)
            snprintf(why, sizeof why, "%s", gf_error_msg());
        else
            why_not(st, &r, why, sizeof why);
        at = put(e->detail, at, cap, "; streaming: no (%s)%s", why, "");
    }
    hb_completion_free(&comp);
    hb_reply_free(&r);
    /* 4. seed: two sampled requests, same seed */
    int32_t got[2][8];
    int32_t n[2] = {-1, -1};
    for (int i = 0; i < 2; i++) {
        st = ask(c, model, 0, 0, 1.0, 1234, 8, &r);
        if (st == GF_OK && r.status == 200 && hb_parse_completion(r.body, r.len, &comp) == GF_OK) {
            n[i] = comp.n_steps < 8 ? comp.n_steps : 8;
            for (int32_t s = 0; s < n[i]; s++)
                got[i][s] = comp.steps[s].id;
        }
        hb_completion_free(&comp);
        hb_reply_free(&r);
    }
    if (n[0] < 0 || n[1] < 0)
        at = put(e->detail, at, cap, "; seed: not probed (a sampled request failed)%s%s", "", "");
    else if (n[0] == n[1] && !memcmp(got[0], got[1], (size_t)n[0] * sizeof got[0][0]))
        at =
            put(e->detail, at, cap, "; seed: honoured (seed 1234 twice at temperature 1: the same tokens)%s%s", "", "");
    else
        at =
            put(e->detail, at, cap, "; seed: IGNORED (seed 1234 twice at temperature 1: different tokens)%s%s", "", "");
    /* 5. which logprobs the server reports (docs/sampler.md "Logprobs"): one
     * step at temperature 0 and at 0.5 (seeded), its top-k values by id;
     * equal: raw (vLLM's raw_logprobs, llama-server's n_probs), else after
     * temperature (vLLM's processed_logprobs). genfence's forward asks at
     * temperature 0, where the two agree; the finding is for the user. */
    hb_completion lp[2] = {{0}};
    int ok_lp = 1;
    for (int i = 0; i < 2 && ok_lp; i++) {
        st = ask(c, model, 0, 0, i ? 0.5 : 0.0, 1234, 1, &r);
        ok_lp =
            st == GF_OK && r.status == 200 && hb_parse_completion(r.body, r.len, &lp[i]) == GF_OK && lp[i].n_steps >= 1;
        hb_reply_free(&r);
    }
    if (!ok_lp) {
        at = put(e->detail, at, cap, "; logprobs mode: not probed (a request failed)%s%s", "", "");
    } else {
        const hb_step *a = &lp[0].steps[0], *b = &lp[1].steps[0];
        double worst = 0;
        int32_t worst_id = -1, common = 0;
        double va = 0, vb = 0;
        for (int32_t x = 0; x < a->n_top; x++)
            for (int32_t y = 0; y < b->n_top; y++)
                if (a->top_id[x] == b->top_id[y]) {
                    common++;
                    double d = fabs(a->top_lp[x] - b->top_lp[y]);
                    if (d > worst || worst_id < 0)
                        worst = d, worst_id = a->top_id[x], va = a->top_lp[x], vb = b->top_lp[y];
                }
        if (!common)
            snprintf(buf, sizeof buf, "; logprobs mode: not probed (no id in both top-k lists)");
        else if (worst <= 1e-4)
            snprintf(buf, sizeof buf,
                     "; logprobs mode: raw (the top-k logprobs equal at temperature 0 and 0.5, %d ids, max |d| %.2g)",
                     common, worst);
        else
            snprintf(buf, sizeof buf,
                     "; logprobs mode: PROCESSED (after temperature: token %d %.6g at temperature 0, %.6g at 0.5; "
                     "genfence's forward asks at temperature 0, where raw and processed agree)",
                     worst_id, va, vb);
        at = put(e->detail, at, cap, "%s%s", buf, "");
    }
    hb_completion_free(&lp[0]);
    hb_completion_free(&lp[1]);
    /* 6. whole-generation integrity (integrity=on: 16 more requests) */
    char summary[512];
    if (!c->integrity)
        at = put(e->detail, at, cap, "; integrity: not probed (integrity=on)%s%s", "", "");
    else if (hb_integrity(c, model, INT32_MAX, -1, summary, sizeof summary) == GF_OK)
        at = put(e->detail, at, cap, "; %s%s", summary, "");
    else
        at = put(e->detail, at, cap, "; integrity: FAIL: %s%s", gf_error_msg(), "");
    put(e->detail, at, cap,
        "; full logits: absent (top-k log-probabilities at their ids, the remainder spread evenly)%s%s", "", "");
    return GF_OK;
}

gf_status hb_info(const gf_backend_options *opts, gf_backend_info *info_out)
{
    static info_entry cache[4];
    static size_t n_cache;
    const char *config = opts ? opts->config : NULL;
    gf_error_clear();
    gf_backend_info mine = {.struct_size = sizeof mine, .dtype = GF_COMPUTE_F32, .threads = 1};
    if (!config) {
        mine.library = hb_net_version();
        mine.detail = "no server named (--backend http:URL)";
        return gf_backend_info_put(info_out, &mine);
    }
    for (size_t i = 0; i < n_cache; i++)
        if (!strcmp(cache[i].config, config)) {
            mine.library = cache[i].library;
            mine.detail = cache[i].detail;
            mine.weights = "served"; /* GF_WEIGHTS_SERVED (harness/cases/case.h): the plan and the kinds read it */
            return gf_backend_info_put(info_out, &mine);
        }
    hb_conf c;
    gf_status st = hb_conf_parse(config, &c);
    if (st != GF_OK)
        return st;
    info_entry *e = &cache[n_cache < 4 ? n_cache : 3];
    memset(e, 0, sizeof *e);
    st = probe_server(&c, e);
    if (st != GF_OK)
        return st;
    snprintf(e->config, sizeof e->config, "%s", config);
    if (n_cache < 4)
        n_cache++;
    mine.library = e->library;
    mine.detail = e->detail;
    mine.weights = "served";
    return gf_backend_info_put(info_out, &mine);
}
