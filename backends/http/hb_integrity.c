/* Whole-generation integrity (TEST06-style, mlcommons/inference
 * compliance/nvidia/TEST06), on one fixed prompt: what per-step requests
 * cannot see. One greedy request of N tokens against N one-step requests
 * (the server's own decode loop against its teacher-forced answers, and each
 * step's logprobs against its own token: logprobs one position late fail
 * here), at most one EOS and nothing after it, the token count equal to the
 * steps and to usage.completion_tokens, finish_reason agreeing with what
 * happened, the streamed text equal to the final text and its first chunk a
 * prefix of it, two sampled requests with one seed giving the same tokens, and
 * n concurrent identical greedy requests (the count of distinct completions,
 * an invariance finding, not a failure). Run by info (genfence backends) and,
 * with integrity=on, by model_load. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hb.h"

#define HB_INT_N 8 /* tokens generated */
#define HB_INT_C 4 /* concurrent requests */

static gf_status complete(const hb_conf *c, const char *model, const int32_t *prompt, int32_t n, int max_tokens,
                          double temp, int seed, int stream, hb_reply *r)
{
    hb_ask a = {prompt, n, max_tokens, temp, seed, 0, stream};
    return hb_complete(c, model, &a, 0, r);
}

static gf_status completion(const hb_conf *c, const char *model, const int32_t *prompt, int32_t n, int max_tokens,
                            double temp, int seed, hb_completion *out)
{
    hb_reply r;
    memset(out, 0, sizeof *out);
    gf_status st = complete(c, model, prompt, n, max_tokens, temp, seed, 0, &r);
    if (st != GF_OK)
        return st;
    st = hb_parse_completion(r.body, r.len, out);
    hb_reply_free(&r);
    return st;
}

typedef struct conc_job {
    const hb_conf *c;
    const char *model;
    const int32_t *prompt;
    int32_t n;
    gf_status st;
    int32_t n_tok;
    int32_t tok[HB_INT_N]; /* (n_tok) */
} conc_job;

static void *conc_run(void *arg)
{
    conc_job *j = arg;
    hb_completion out;
    j->st = completion(j->c, j->model, j->prompt, j->n, HB_INT_N, 0.0, -1, &out);
    if (j->st == GF_OK) {
        j->n_tok = out.n_steps < HB_INT_N ? out.n_steps : HB_INT_N;
        for (int32_t i = 0; i < j->n_tok; i++)
            j->tok[i] = out.steps[i].id;
        hb_completion_free(&out);
    }
    return NULL;
}

gf_status hb_integrity(const hb_conf *c, const char *model, int32_t V, int32_t eos, char *summary, size_t len)
{
    summary[0] = '\0';
    int32_t prompt[5 + HB_INT_N];
    for (int32_t i = 0; i < 5; i++)
        prompt[i] = (i + 1) % V;
    /* 1. N one-step greedy requests */
    int32_t one[HB_INT_N], n_one = 0;
    gf_status st = GF_OK;
    for (int32_t i = 0; i < HB_INT_N && st == GF_OK; i++) {
        hb_completion s;
        st = completion(c, model, prompt, 5 + i, 1, 0.0, -1, &s);
        if (st == GF_OK && s.n_steps != 1)
            st = gf_error_set(GF_E_BACKEND, "http: integrity: a max_tokens=1 request gave %d steps", s.n_steps);
        if (st == GF_OK) {
            one[n_one++] = prompt[5 + i] = s.steps[0].id;
            if (s.steps[0].id == eos)
                i = HB_INT_N;
        }
        hb_completion_free(&s);
    }
    if (st != GF_OK)
        return gf_error_prefix(st, "http: integrity: one-step requests");
    /* 2. one request of N tokens */
    hb_completion g;
    st = completion(c, model, prompt, 5, HB_INT_N, 0.0, -1, &g);
    if (st != GF_OK)
        return gf_error_prefix(st, "http: integrity: a request of %d tokens", HB_INT_N);
    int32_t n_eos = 0, first_eos = -1;
    for (int32_t i = 0; i < g.n_steps; i++) {
        const hb_step *s = &g.steps[i];
        if (s->id == eos && eos >= 0 && n_eos++ == 0)
            first_eos = i;
        int listed = 0;
        for (int32_t t = 0; t < s->n_top; t++)
            listed |= s->top_id[t] == s->id;
        if (st == GF_OK && s->n_top > 0 && (s->top_lp[0] > s->logprob + 1e-5 || (!listed && s->n_top >= c->k)))
            st = gf_error_set(GF_E_BACKEND,
                              "http: integrity: step %d of a greedy request of %d: token %d (logprob "
                              "%.6g) is not the top-1 of its own logprobs (token %d, %.6g): logprobs "
                              "out of step with the tokens",
                              i, HB_INT_N, s->id, s->logprob, s->top_id[0], s->top_lp[0]);
    }
    if (st == GF_OK && n_eos > 1)
        st = gf_error_set(GF_E_BACKEND, "http: integrity: %d EOS tokens in one completion", n_eos);
    if (st == GF_OK && first_eos >= 0 && first_eos != g.n_steps - 1)
        st = gf_error_set(GF_E_BACKEND, "http: integrity: %d tokens after EOS (at step %d)", g.n_steps - 1 - first_eos,
                          first_eos);
    if (st == GF_OK && g.usage_completion >= 0 && g.usage_completion != g.n_steps)
        st = gf_error_set(GF_E_BACKEND, "http: integrity: usage.completion_tokens %lld for %d logprobs steps",
                          (long long)g.usage_completion, g.n_steps);
    if (st == GF_OK && g.usage_prompt >= 0 && g.usage_prompt != 5)
        st = gf_error_set(GF_E_BACKEND, "http: integrity: usage.prompt_tokens %lld for a prompt of 5",
                          (long long)g.usage_prompt);
    if (st == GF_OK && g.finish[0]) {
        const char *want = first_eos >= 0          ? "stop"
                           : g.n_steps == HB_INT_N ? "length"
                           : eos < 0               ? "stop" /* EOS unknown (info): an early stop is one */
                                                   : NULL;
        if (!want || strcmp(g.finish, want))
            st = gf_error_set(GF_E_BACKEND, "http: integrity: finish_reason '%s' after %d of max_tokens %d%s", g.finish,
                              g.n_steps, HB_INT_N, first_eos >= 0 ? ", ending at EOS" : " without EOS");
    }
    if (st == GF_OK && g.n_steps != n_one)
        st = gf_error_set(GF_E_BACKEND,
                          "http: integrity: a greedy request of %d gave %d tokens, %d one-step "
                          "requests gave %d",
                          HB_INT_N, g.n_steps, HB_INT_N, n_one);
    for (int32_t i = 0; st == GF_OK && i < n_one; i++)
        if (g.steps[i].id != one[i])
            st = gf_error_set(GF_E_BACKEND,
                              "http: integrity: at step %d the greedy request of %d chose token %d, "
                              "the one-step request token %d",
                              i, HB_INT_N, g.steps[i].id, one[i]);
    /* 3. streamed */
    if (st == GF_OK) {
        hb_reply r;
        hb_completion sc;
        st = complete(c, model, prompt, 5, HB_INT_N, 0.0, -1, 1, &r);
        if (st == GF_OK) {
            st = hb_parse_stream(r.body, r.len, &sc);
            hb_reply_free(&r);
            if (st == GF_OK && (sc.text_len != g.text_len || memcmp(sc.text, g.text, g.text_len)))
                st = gf_error_set(GF_E_BACKEND,
                                  "http: integrity: the streamed text of %d tokens (%zu bytes) differs "
                                  "from the final text (%zu bytes)",
                                  HB_INT_N, sc.text_len, g.text_len);
            hb_completion_free(&sc);
        }
        if (st != GF_OK)
            gf_error_prefix(st, "http: integrity: stream");
    }
    /* 4. seed */
    int32_t seeded[2][HB_INT_N], n_seeded[2] = {0, 0};
    for (int k = 0; st == GF_OK && k < 2; k++) {
        hb_completion s;
        st = completion(c, model, prompt, 5, HB_INT_N, 1.0, 4321, &s);
        for (int32_t i = 0; st == GF_OK && i < s.n_steps && i < HB_INT_N; i++)
            seeded[k][n_seeded[k]++] = s.steps[i].id;
        hb_completion_free(&s);
    }
    if (st == GF_OK &&
        (n_seeded[0] != n_seeded[1] || memcmp(seeded[0], seeded[1], (size_t)n_seeded[0] * sizeof seeded[0][0])))
        st = gf_error_set(GF_E_BACKEND, "http: integrity: seed ignored: two requests with seed 4321 at temperature "
                                        "1 gave different tokens");
    /* 5. concurrent identical greedy requests */
    int distinct = 0;
    if (st == GF_OK) {
        conc_job jobs[HB_INT_C];
        pthread_t th[HB_INT_C];
        int started[HB_INT_C] = {0};
        for (int i = 0; i < HB_INT_C; i++) {
            jobs[i] = (conc_job){.c = c, .model = model, .prompt = prompt, .n = 5};
            started[i] = pthread_create(&th[i], NULL, conc_run, &jobs[i]) == 0;
            if (!started[i])
                conc_run(&jobs[i]);
        }
        for (int i = 0; i < HB_INT_C; i++)
            if (started[i])
                pthread_join(th[i], NULL);
        for (int i = 0; i < HB_INT_C && st == GF_OK; i++) {
            if (jobs[i].st != GF_OK) {
                st = gf_error_set(GF_E_BACKEND, "http: integrity: concurrent request %d of %d failed", i + 1, HB_INT_C);
                break;
            }
            int seen = 0;
            for (int j = 0; j < i && !seen; j++)
                seen = jobs[j].n_tok == jobs[i].n_tok &&
                       !memcmp(jobs[j].tok, jobs[i].tok, (size_t)jobs[i].n_tok * sizeof jobs[i].tok[0]);
            distinct += !seen;
        }
    }
    if (st == GF_OK)
        snprintf(summary, len,
                 "integrity: ok (%d greedy tokens in one request == %d one-step requests, each step "
                 "its own top-1, <= 1 EOS, usage and finish_reason agree, stream == final text, seed "
                 "repeats; %d concurrent identical requests: %d distinct completion%s)",
                 g.n_steps, n_one, HB_INT_C, distinct, distinct == 1 ? "" : "s");
    hb_completion_free(&g);
    return st;
}
