/* eos: rows stop at the end-of-sequence token, each at its own step.
 * The end token is a case's eos_id, or (eos_from_decode: N) the token row 0
 * emits at step N of the same generation run without an end token: a token
 * this model and these prompts are known to produce, whatever the weights
 * (a template case on a user's model cannot name a token the model emits). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "genfence/engine.h"
#include "keys.h"
#include "slot.h"

typedef struct eos_spec {
    gf_prompt_spec *prompts;
    size_t n_prompts;
    long long max_new, eos_id, require_eos;
    long long from_step; /* eos_from_decode: row 0's token at this step, or -1 */
    gf_sampler_params p;
    gf_stop_expect *expect; /* per row, optional */
    size_t n_expect;
} eos_spec;

static void eos_free(void *p)
{
    eos_spec *s = p;
    if (s) {
        gf_prompts_free(s->prompts, s->n_prompts);
        free(s->expect);
    }
    free(s);
}

static int parse_eos(gf_cctx *ctx, const gf_ynode *m, gf_case *c)
{
    eos_spec *s = calloc(1, sizeof *s);
    if (!s)
        return -1;
    c->spec = s;
    s->max_new = 32;
    s->require_eos = 1;
    s->p = gf_sampler_greedy();
    int bad = gf_y_prompts(ctx, m, "prompts", GF_Y_REQUIRED, &s->prompts, &s->n_prompts) < 0;
    bad |= gf_y_int(ctx, m, "max_new_tokens", 0, 1, 1 << 20, &s->max_new) < 0;
    s->from_step = -1;
    const int has_id = gf_y_int(ctx, m, "eos_id", 0, 0, 2147483647LL, &s->eos_id);
    const int has_from = gf_y_int(ctx, m, "eos_from_decode", 0, 0, 1 << 20, &s->from_step);
    bad |= has_id < 0 || has_from < 0;
    if (has_id >= 0 && has_from >= 0 && (has_id > 0) == (has_from > 0)) {
        const gf_ynode *at = has_from > 0 ? gf_y_get(ctx, m, "eos_from_decode", 0) : m;
        gf_y_error(ctx, at ? at : m,
                   "an eos case names its end token one way: 'eos_id' (a token id) or 'eos_from_decode' (row "
                   "0's token at that step of a decode without one)%s",
                   has_id > 0 ? ", not both" : "; it has neither");
        bad = 1;
    }
    bad |= gf_y_int(ctx, m, "require_eos", 0, 0, 1 << 20, &s->require_eos) < 0;
    bad |= gf_y_sampler(ctx, m, &s->p) < 0;
    if (!bad && has_from > 0 && s->from_step >= s->max_new) {
        const gf_ynode *at = gf_y_get(ctx, m, "eos_from_decode", 0);
        gf_y_error(ctx, at ? at : m, "'eos_from_decode' %lld is past the run's last step (max_new_tokens %lld)",
                   s->from_step, s->max_new);
        bad = 1;
    }
    const gf_ynode *ex = gf_y_get(ctx, m, "expect", 0);
    if (ex && gf_y_node_is_seq(ctx, ex, "'expect'")) {
        if (!bad && ex->n != s->n_prompts) {
            gf_y_error(ctx, ex, "'expect' has %zu rows; there are %zu prompts", ex->n, s->n_prompts);
            bad = 1;
        }
        s->expect = calloc(ex->n ? ex->n : 1, sizeof *s->expect);
        s->n_expect = ex->n;
        for (size_t i = 0; s->expect && i < ex->n; i++) {
            const gf_ynode *it = ex->items[i];
            if (!gf_y_node_is_map(ctx, it, "an 'expect' row")) {
                bad = 1;
                continue;
            }
            int rc = gf_y_enum(ctx, it, "stop_reason", 0, gf_stop_words, &s->expect[i].stop);
            bad |= rc < 0;
            s->expect[i].has_stop = rc > 0;
            rc = gf_y_int(ctx, it, "total_tokens", 0, 1, 1 << 24, &s->expect[i].total);
            bad |= rc < 0;
            s->expect[i].has_total = rc > 0;
            gf_y_check_unknown(ctx, it, "in an 'expect' row (known: stop_reason, total_tokens)");
        }
    } else if (ex) {
        bad = 1;
    }
    return bad ? -1 : 0;
}

/* eos_from_decode: the same rows and sampler without an end token, up to
 * step from_step; row 0's token there is the end token (-1: a failed check) */
static int32_t decoded_eos(gf_krun *k, const eos_spec *s, int32_t B, int32_t **prompts, const int32_t *lens)
{
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->from_step + 1;
    gp.sampler = s->p;
    gp.eos_id = -1;
    gf_generation *g = NULL;
    gf_status st = gf_generate(k->session->engine, B, (const int32_t *const *)prompts, lens, &gp, &g);
    if (st != GF_OK) {
        gf_k_status(k, st, "generate (the decode that picks the end token)");
        return -1;
    }
    const int32_t P = g->prompt_len[0], until = g->n_until_stop[0];
    int32_t tok = -1;
    if (until - P > s->from_step)
        tok = g->tokens[0][P + s->from_step];
    else
        gf_k_check(k, 0, "the decode that picks the end token",
                   "row 0 stopped by %s after %d new tokens, before step %lld", gf_stop_reason_str(g->stop[0]),
                   until - P, s->from_step);
    gf_generation_free(g);
    return tok;
}

static void run_eos(const gf_case *c, gf_krun *k)
{
    const eos_spec *s = c->spec;
    gf_engine *e = k->session->engine;
    const int32_t B = (int32_t)s->n_prompts;
    int32_t eos = (int32_t)s->eos_id;
    int32_t **prompts = NULL, *lens = NULL;
    gf_generation *g = NULL;
    if (!gf_k_encode_prompts(k, s->prompts, B, &prompts, &lens))
        goto done;
    gf_k_metric_json(k, "prompt_tokens", gf_json_ints(lens, (size_t)B));
    gf_k_metric_json(k, "sampler_params", gf_sampler_json(&s->p));
    if (s->p.temperature > 0)
        gf_k_seed(k, "sampler", s->p.seed);
    if (s->from_step >= 0 && (eos = decoded_eos(k, s, B, prompts, lens)) < 0)
        goto done;
    gf_k_metric_int(k, "eos_id", eos);
    gf_generate_params gp = gf_generate_defaults();
    gp.max_new_tokens = (int32_t)s->max_new;
    gp.sampler = s->p;
    gp.eos_id = eos;
    gf_k_slot_steps slot_steps = {.k = k, .gp = &gp}; /* a backend's sample slot samples every step too */
    if (gf_k_slot_attach(k)) {
        gp.on_step = gf_k_slot_on_step;
        gp.user = &slot_steps;
    }
    gf_k_note_sampler(k);
    gf_status st = gf_generate(e, B, (const int32_t *const *)prompts, lens, &gp, &g);
    gf_k_slot_finish(k);
    if (st != GF_OK) {
        gf_k_status(k, st, "generate");
        goto done;
    }
    int eos_rows = 0, all_eos = 1;
    int32_t longest = 0;
    json_t *rows = json_array();
    for (int32_t b = 0; b < B; b++) {
        const int32_t P = g->prompt_len[b], until = g->n_until_stop[b], nt = g->n_tokens[b];
        const int32_t *t = g->tokens[b];
        int32_t first_eos = -1;
        for (int32_t i = P; i < nt; i++)
            if (t[i] == eos) {
                first_eos = i;
                break;
            }
        char name[96];
        snprintf(name, sizeof name, "row %d stop", b);
        if (g->stop[b] == GF_STOP_EOS) {
            eos_rows++;
            gf_k_check(k, first_eos >= 0 && until == first_eos + 1, name,
                       "stop_reason eos: the stop is at token %d, the first eos_id at %d", until - 1, first_eos);
            int only = 1;
            for (int32_t i = until; i < nt; i++)
                only &= t[i] == eos;
            snprintf(name, sizeof name, "row %d emits only eos_id once finished", b);
            gf_k_check(k, only, name, "%s",
                       only ? "every later token is eos_id" : "a finished row emitted another token");
        } else {
            all_eos = 0;
            gf_k_check(k, first_eos < 0 && until == nt, name, "stop_reason %s, %d tokens, eos_id first at %d",
                       gf_stop_reason_str(g->stop[b]), until, first_eos);
        }
        if (until - P > longest)
            longest = until - P;
        if (b < (int32_t)s->n_expect) {
            const gf_stop_expect *x = &s->expect[b];
            if (x->has_stop) {
                snprintf(name, sizeof name, "row %d stop_reason", b);
                gf_k_check(k, g->stop[b] == gf_stop_values[x->stop], name, "got %s, expected %s",
                           gf_stop_reason_str(g->stop[b]), gf_stop_words[x->stop]);
            }
            if (x->has_total) {
                snprintf(name, sizeof name, "row %d total_tokens", b);
                gf_k_check(k, until == x->total, name, "got %d, expected %lld", until, x->total);
            }
        }
        json_array_append_new(rows, json_pack("{s:s, s:i, s:i, s:o}", "stop_reason", gf_stop_reason_str(g->stop[b]),
                                              "total_tokens", until, "new_tokens", until - P, "tokens",
                                              gf_json_ints(t + P, (size_t)(nt - P))));
    }
    gf_k_metric_json(k, "rows", rows);
    gf_k_metric_int(k, "steps", g->steps);
    gf_k_metric_int(k, "eos_rows", eos_rows);
    int32_t want_steps = all_eos ? longest : (int32_t)s->max_new;
    gf_k_check(k, g->steps == want_steps, "loop ends when every row has finished", "%d steps, expected %d", g->steps,
               want_steps);
    /* short of the required rows: name the first that did not finish, where
     * it stopped and what it produced instead */
    char unfinished[600] = "";
    for (int32_t b = 0; eos_rows < s->require_eos && b < B; b++)
        if (g->stop[b] != GF_STOP_EOS) {
            const int32_t P = g->prompt_len[b], until = g->n_until_stop[b];
            char ids[400];
            gf_k_ids_str(ids, sizeof ids, g->tokens[b] + P, (size_t)(until - P));
            snprintf(unfinished, sizeof unfinished,
                     "; row %d stopped by %s at step %d, no eos_id %d in its %d new "
                     "tokens %s",
                     b, gf_stop_reason_str(g->stop[b]), until - P - 1, eos, until - P, ids);
            break;
        }
    if (s->from_step >= 0) { /* the same run as the decode up to row 0's end token: it must stop there */
        const int32_t P = g->prompt_len[0], until = g->n_until_stop[0];
        gf_k_check(k, g->stop[0] == GF_STOP_EOS && until - P - 1 <= s->from_step,
                   "row 0 finishes by its decoded end token",
                   "row 0 stopped by %s at step %d; the decode without an end token emitted %d at step %lld",
                   gf_stop_reason_str(g->stop[0]), until - P - 1, eos, s->from_step);
    }
    gf_k_check(k, eos_rows >= s->require_eos, "rows finished by eos_id", "%d of %d rows (required %lld)%s", eos_rows, B,
               s->require_eos, unfinished);
done:
    gf_generation_free(g);
    gf_k_free_tokens(prompts, B);
    free(lens);
}

const gf_kind_def gf_kind_eos = {
    .name = "eos",
    .summary = "eos_id ends a row, which then emits only eos_id; the loop ends when every row has",
    .needs = GF_KIND_NEEDS_MODEL,
    .reaches = GF_KIND_REACHES_MODEL,
    .parse = parse_eos,
    .free_spec = eos_free,
    .run = run_eos,
};
