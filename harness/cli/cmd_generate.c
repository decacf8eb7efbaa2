/* genfence generate: sample a continuation; --verify checks the cache against
 * recomputation; --batch-prompts checks a left-padded batch against single runs. */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_cache.h"
#include "cli.h"
#include "commands.h"
#include "gen_sampler.h"
#include "genfence/stop.h"
#include "keys.h"
#include "sys.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence generate --model DIR (--prompt TEXT | --tokens IDS | --batch-prompts \"A|B|C\")\n"
               "                         [options]\n"
               "\n"
               "Samples a continuation with the seed's defaults: 64 new tokens, temperature 0.8,\n"
               "top-k 40, top-p 0.95, seed 1337, stop at the model's eos_token_id.\n"
               "\n"
               "  --model DIR            Hugging Face gpt2 / llama / qwen2 directory (config.json,\n"
               "                         model.safetensors or its shards, tokenizer.json)\n"
               "  --prompt TEXT          prompt text (encoded with the model's tokenizer)\n"
               "  --tokens 1,2,3         prompt token ids instead of text\n"
               "  --max-new-tokens N     new tokens to generate (default 64)\n"
               "  --temperature T        0 = greedy (default 0.8)\n"
               "  --top-k K|none         (default 40)\n"
               "  --top-p P|none         (default 0.95)\n"
               "  --seed S               Philox key of the sampler (default 1337)\n"
               "  --eos-id N | --no-eos  stop token (default: the config's eos_token_id)\n"
               "  --no-cache             recompute every step (crops to the last n_positions tokens)\n"
               "  --on-limit stop|raise|slide  cached generation at a full cache: stop with\n"
               "                         stop_reason context_limit (default), fail with exit status 2,\n"
               "                         or slide by recompute (re-prefill the last n_positions\n"
               "                         tokens every step: the uncached loop's tokens)\n"
               "  --stream               print the continuation as it is generated (UTF-8 safe)\n"
               "  --json                 print one JSON object\n"
               "  --verify               greedy cached decode of --max-new-tokens steps, teacher-forced\n"
               "                         against the uncached forward at every step; exit 1 unless\n");
    fprintf(f,
            "                         max |delta| <= %g and every argmax agrees (a mismatch is\n"
            "                         excused only where the margin is below %g)\n",
            GF_ATOL_DEFAULT, GF_GATE_ABS);
    fprintf(f, "  --batch-prompts A|B|C  greedy left-padded batch of the prompts, cached and uncached,\n"
               "                         against each prompt alone; exit 1 on an unexcused mismatch\n"
               "\n"
               "Sampler profiles and filters (docs/sampler.md; the rules of the case keys):\n");
    gf_gen_sampler_help(f);
    fprintf(f, "  --stop STRING          stop the text exactly before STRING (repeatable; the first\n"
               "                         in the text wins; UTF-8 safe, in --stream and the final\n"
               "                         text alike; stop_reason stop_string; tokens: up to the one\n"
               "                         that completed it)\n"
               "  The engine's sampler draws every token of generate (--json: sampler.ran); a\n"
               "  backend's sample / sample_ex slot is exercised by the cases (genfence run).\n"
               "  An invalid combination exits 2 naming the flags it comes from.\n"
               "\n"
               "  --backend NAME|PATH    backend (default ref)\n"
               "  --threads N            backend threads (default 1)\n"
               "  -h, --help             this help\n"
               "\n"
               "exit status: 0 ok, 1 a check failed (or the context limit was raised), 2 bad input\n");
}

typedef struct gen_opts {
    const char *model, *prompt, *tokens, *batch, *backend;
    gf_generate_params gp;
    int eos_set, no_eos, stream, json, verify, threads;
    gf_gen_sampler gs;
} gen_opts;

typedef struct stream_ctx {
    const gf_tokenizer *tok;
    gf_utf8_stream u8;
    int print;              /* write the continuation to stdout */
    gf_stop_strings *stops; /* NULL: none */
    size_t max_stop;        /* longest stop string */
    int stopped;            /* a stop string completed at token n_kept - 1 */
    int32_t *kept;          /* (cap) the tokens sampled so far */
    int32_t n_kept, cap;
} stream_ctx;

/* text (len) through the stop strings (if any) to stdout when printing */
static gf_status emit(stream_ctx *c, const char *text, size_t len)
{
    if (!c->stops) {
        if (c->print)
            fwrite(text, 1, len, stdout);
        return GF_OK;
    }
    char *out = malloc(len + c->max_stop + 8);
    if (!out)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    size_t w = gf_stop_strings_feed(c->stops, text, len, out, len + c->max_stop + 8, &c->stopped);
    if (c->print)
        fwrite(out, 1, w, stdout);
    free(out);
    return GF_OK;
}

static gf_status stream_step(void *user, const gf_step_info *info)
{
    stream_ctx *c = user;
    if (info->finished_before[0])
        return GF_OK;
    if (c->n_kept < c->cap)
        c->kept[c->n_kept++] = info->tokens[0];
    size_t len;
    const uint8_t *bytes = c->tok ? gf_tokenizer_token_bytes(c->tok, info->tokens[0], &len) : NULL;
    if (!bytes)
        return GF_OK;
    char buf[3 * (64 + 8) + 1];
    gf_status st = GF_OK;
    for (size_t off = 0; off < len && st == GF_OK && !c->stopped; off += 64) {
        size_t n = len - off < 64 ? len - off : 64;
        size_t w = gf_utf8_stream_feed(&c->u8, bytes + off, n, buf, sizeof buf);
        st = emit(c, buf, w);
    }
    if (c->print)
        fflush(stdout);
    if (st == GF_OK && c->stopped) /* ends the generation; run_generate reads kept */
        st = gf_error_set(GF_E_INTERNAL, "stop string");
    return st;
}

/* ids' text cut before the first stop string (decode, then the matcher over it whole) */
static void print_text_stopped(const gf_tokenizer *tok, const gf_gen_sampler *gs, size_t max_stop, const int32_t *ids,
                               size_t n, int json)
{
    char *text = NULL, *out = NULL;
    size_t len = 0, w = 0;
    gf_stop_strings *ss = NULL;
    if (!tok || gf_tokenizer_decode(tok, ids, n, &text, &len) != GF_OK ||
        gf_stop_strings_create(gs->stops, gs->n_stops, &ss) != GF_OK || !(out = malloc(len + 2 * max_stop + 8))) {
        fputs(json ? "null" : "", stdout);
    } else {
        int stopped = 0;
        w = gf_stop_strings_feed(ss, text, len, out, len + max_stop + 8, &stopped);
        if (!stopped)
            w += gf_stop_strings_finish(ss, out + w, max_stop + 8);
        if (json)
            gf_json_write_string(stdout, out, w);
        else
            fwrite(out, 1, w, stdout);
    }
    gf_stop_strings_destroy(ss);
    free(out);
    free(text);
}

static void print_text(const gf_tokenizer *tok, const int32_t *ids, size_t n, int json)
{
    char *text = NULL;
    size_t len = 0;
    if (tok && gf_tokenizer_decode(tok, ids, n, &text, &len) == GF_OK) {
        if (json)
            gf_json_write_string(stdout, text, len);
        else
            fwrite(text, 1, len, stdout);
    } else if (json) {
        fputs("null", stdout);
    }
    free(text);
}

static void print_ids(const int32_t *ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", ids[i]);
    putchar(']');
}

/* --verify */
static int run_verify(gf_session *s, const int32_t *prompt, size_t n, const gen_opts *o)
{
    gf_verify_result r;
    gf_status st = gf_verify_cache(s->engine, prompt, (int32_t)n, o->gp.max_new_tokens, NULL, 0, NULL, &r);
    if (st != GF_OK) {
        gf_cli_error("verify: %s", gf_error_unprefixed(gf_error_msg(), "verify"));
        return gf_verdict_exit(gf_verdict_of_status(st), 0);
    }
    /* the one gate (verdict/compare.h), as the cache_equals_recompute kind uses it */
    const gf_gate g = gf_gate_default();
    const double atol = GF_ATOL_DEFAULT, gate = g.abs;
    gf_backend_info info;
    gf_backend_options bo = gf_registry_options(&s->backend, o->threads);
    gf_backend_describe(gf_engine_ops(s->engine), &bo, &info);
    gf_cmp cmp;
    gf_cmp_init(&cmp, &g, info.dtype, GF_CMP_TEACHER_FORCED, atol);
    gf_cmp_verify(&cmp, &r);
    gf_verdict v = gf_cmp_verdict(&cmp, NULL, 0);
    int excused = !r.tokens_equal && cmp.first_unexcused < 0;
    int ok = gf_verdict_passed(v);
    if (o->json) {
        double safety = r.max_abs_delta > 0 ? r.min_margin / r.max_abs_delta : INFINITY;
        printf("{\"verify\": {\"steps\": %d, \"max_abs_logit_diff\": ", r.steps);
        gf_json_write_number(stdout, r.max_abs_delta);
        printf(", \"max_diff_step\": %d, \"tokens_equal\": %s, \"min_margin\": ", r.max_delta_step,
               r.tokens_equal ? "true" : "false");
        gf_json_write_number(stdout, r.min_margin);
        printf(", \"min_margin_step\": %d, \"first_divergence\": %d, \"divergence_margin\": ", r.min_margin_step,
               r.first_divergence);
        gf_json_write_number(stdout, r.first_divergence >= 0 ? r.divergence_margin : NAN);
        printf(", \"safety_factor\": ");
        gf_json_write_number(stdout, safety);
        if (!isfinite(safety))
            printf(", \"safety_factor_null_reason\": \"the two sides agree exactly (max |delta| 0)\"");
        printf(", \"atol\": %g, \"gate\": %g, \"passed\": %s, \"per16_max_diff\": [", atol, gate,
               ok ? "true" : "false");
        for (int32_t i = 0; i < r.steps; i += 16) {
            double m = 0;
            for (int32_t j = i; j < i + 16 && j < r.steps; j++)
                m = r.step_max_delta[j] > m ? r.step_max_delta[j] : m;
            if (i)
                printf(", ");
            gf_json_write_number(stdout, m);
        }
        printf("], \"tokens\": ");
        print_ids(r.tokens, (size_t)r.steps);
        printf(", \"completion\": ");
        print_text(s->tok, r.tokens, (size_t)r.steps, 1);
        printf("}}\n");
    } else {
        printf("verify: %d greedy steps, cached vs recomputed (backend %s)\n", r.steps, gf_engine_ops(s->engine)->name);
        printf("  max |delta logit|  %.3e at step %d (atol %.0e)\n", r.max_abs_delta, r.max_delta_step, atol);
        printf("  tokens_equal       %s\n", r.tokens_equal ? "true" : "false");
        if (!r.tokens_equal)
            printf("  first divergence   step %d, margin %.3e (%s: gate %.0e)\n", r.first_divergence,
                   r.divergence_margin, excused ? "excused near tie" : "NOT excused", gate);
        printf("  smallest margin    %.4f at step %d\n", r.min_margin, r.min_margin_step);
        if (r.max_abs_delta > 0)
            printf("  safety factor      %.0f (smallest margin / max delta)\n", r.min_margin / r.max_abs_delta);
        else
            printf("  safety factor      unbounded: cached and recomputed logits are bit-identical\n");
        printf("  per-16-step max    ");
        for (int32_t i = 0; i < r.steps; i += 16) {
            double m = 0;
            for (int32_t j = i; j < i + 16 && j < r.steps; j++)
                m = r.step_max_delta[j] > m ? r.step_max_delta[j] : m;
            printf("%s%.2e", i ? " " : "", m);
        }
        printf("\n  %s\n", ok ? "PASS" : "FAIL");
    }
    gf_verify_result_clear(&r);
    return ok ? GF_EXIT_OK : GF_EXIT_FAIL;
}

/* Split "A|B|C" and encode each. */
static gf_status encode_batch(const gf_session *s, const char *spec, int32_t ***prompts, int32_t **lens, int32_t *B)
{
    char *copy = strdup(spec);
    if (!copy)
        return gf_error_set(GF_E_NOMEM, "out of memory");
    int32_t n = 1;
    for (const char *p = spec; *p; p++)
        n += *p == '|';
    *prompts = calloc((size_t)n, sizeof **prompts);
    *lens = calloc((size_t)n, sizeof **lens);
    *B = n;
    gf_status st = *prompts && *lens ? GF_OK : gf_error_set(GF_E_NOMEM, "out of memory");
    char *part = copy;
    for (int32_t i = 0; st == GF_OK && i < n; i++) {
        char *bar = strchr(part, '|');
        if (bar)
            *bar = '\0';
        size_t len = 0;
        st = gf_session_tokens(s, part, NULL, &(*prompts)[i], &len);
        if (st != GF_OK)
            gf_error_prefix(st, "batch prompt %d ('%s')", i, part);
        (*lens)[i] = (int32_t)len;
        part = bar ? bar + 1 : part + strlen(part);
    }
    free(copy);
    return st;
}

/* --batch-prompts: greedy batch vs single, cached and uncached */
static int run_batch(gf_session *s, const gen_opts *o)
{
    int32_t **prompts = NULL, *lens = NULL, B = 0;
    int rc = GF_EXIT_OK;
    gf_status st = encode_batch(s, o->batch, &prompts, &lens, &B);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_USAGE;
        goto done;
    }
    gf_generate_params gp = o->gp;
    gp.sampler = gf_sampler_greedy();
    gp.eos_id = -1;
    gp.on_step = NULL;
    /* the one gate; free-running rows have no reference top-1 here, so its
     * absolute floor decides (verdict/compare.h) */
    const gf_gate g = gf_gate_default();
    const double gate = gf_gate_threshold(&g, NAN, GF_COMPUTE_F32);
    if (o->json)
        printf("{\"batch_consistent\": {\"modes\": [");
    for (int mode = 0; mode < 2; mode++) {
        gp.use_cache = mode == 0;
        gf_generation *batch = NULL;
        st = gf_generate(s->engine, B, (const int32_t *const *)prompts, lens, &gp, &batch);
        if (st != GF_OK) { /* bad input (an over-long prompt) is 2, as for a single prompt */
            gf_cli_error("batch: %s", gf_error_msg());
            rc = gf_verdict_exit(gf_verdict_of_status(st), 0);
            goto done;
        }
        if (o->json)
            printf("%s{\"mode\": \"%s\", \"rows\": [", mode ? ", " : "", mode ? "uncached" : "cached");
        else
            printf("%s batch of %d prompts, %d greedy tokens:\n", mode ? "uncached" : "cached", B, gp.max_new_tokens);
        for (int32_t b = 0; b < B; b++) {
            gf_generation *single = NULL;
            uint64_t id = (uint64_t)b;
            gf_generate_params sp = gp;
            sp.seq_ids = &id;
            st = gf_generate(s->engine, 1, (const int32_t *const *)&prompts[b], &lens[b], &sp, &single);
            if (st != GF_OK) {
                gf_cli_error("single run %d: %s", b, gf_error_msg());
                gf_generation_free(batch);
                rc = GF_EXIT_FAIL;
                goto done;
            }
            int32_t div = -1;
            for (int32_t t = 0; t < single->steps && t < batch->steps; t++)
                if (single->tokens[0][lens[b] + t] != batch->tokens[b][lens[b] + t]) {
                    div = t;
                    break;
                }
            double margin = div >= 0 ? single->margins[div] : NAN;
            int ok = div < 0 || margin < gate;
            if (!ok)
                rc = GF_EXIT_FAIL;
            if (o->json) {
                printf("%s{\"prompt_tokens\": %d, \"tokens_equal\": %s, \"first_divergence\": %d, \"margin\": ",
                       b ? ", " : "", lens[b], div < 0 ? "true" : "false", div);
                gf_json_write_number(stdout, margin);
                printf(", \"passed\": %s}", ok ? "true" : "false");
            } else
                printf("  row %d (%d prompt tokens): %s\n", b, lens[b],
                       div < 0 ? "tokens equal"
                       : ok    ? "diverged at a near tie (excused)"
                               : "MISMATCH");
            if (div >= 0 && !o->json)
                printf("    first divergence at step %d, single-run margin %.3e (gate %.0e)\n", div, margin, gate);
            gf_generation_free(single);
        }
        if (o->json)
            printf("]}");
        gf_generation_free(batch);
    }
    if (o->json)
        printf("], \"passed\": %s}}\n", rc == GF_EXIT_OK ? "true" : "false");
    else
        printf("%s\n", rc == GF_EXIT_OK ? "PASS" : "FAIL");
done:
    for (int32_t b = 0; prompts && b < B; b++)
        free(prompts[b]);
    free(prompts);
    free(lens);
    return rc;
}

/* "eos" / "length" / "context_limit" from the engine; "stop_token_id" when
 * the row ended on one of --stop-token-ids that is not the eos id */
static const char *stop_reason(const gf_generation *g, const gf_generate_params *gp, int32_t last)
{
    if (g->stop[0] == GF_STOP_EOS && last != gp->eos_id && gf_sampler_is_stop(&gp->sampler, last))
        return "stop_token_id";
    return gf_stop_reason_str(g->stop[0]);
}

/* the sampler that ran, as the case records write it, plus what generate adds */
/* 1 when the backend has a sample_ex slot declaring profile pr */
static int backend_has_ex(const gf_session *s, int pr)
{
    const gf_backend_ops *ops = gf_engine_ops(s->engine);
    return (gf_backend_sample_profiles(ops) & GF_PROFILE_BIT(pr)) != 0; /* the engine's wrapper */
}

static void print_sampler_json(const gf_session *s, const gen_opts *o, const gf_generate_params *gp)
{
    const int pr = gf_sampler_params_profile(&gp->sampler);
    const int has_ex = backend_has_ex(s, pr);
    json_t *j = gf_sampler_json(&gp->sampler);
    if (!json_object_get(j, "profile"))
        json_object_set_new(j, "profile", json_string(gf_sampler_profile_name(pr)));
    json_object_set_new(j, "eos_id", gp->eos_id >= 0 ? json_integer(gp->eos_id) : json_null());
    json_t *stops = json_array();
    for (size_t i = 0; i < o->gs.n_stops; i++)
        json_array_append_new(stops, json_string(o->gs.stops[i]));
    json_object_set_new(j, "stop", stops);
    json_object_set_new(j, "ran", json_string("engine"));
    json_object_set_new(j, "backend_sample_ex", json_boolean(has_ex));
    char *txt = json_dumps(j, 0);
    fputs(txt ? txt : "null", stdout);
    free(txt);
    json_decref(j);
}

static int run_generate(gf_session *s, const int32_t *prompt, size_t n, const gen_opts *o)
{
    gf_generate_params gp = o->gp;
    stream_ctx sc = {.tok = s->tok, .print = o->stream && s->tok && !o->json};
    gf_utf8_stream_init(&sc.u8);
    int rc = GF_EXIT_OK;
    gf_generation *g = NULL;
    if (o->gs.n_stops) {
        for (size_t i = 0; i < o->gs.n_stops; i++)
            sc.max_stop = strlen(o->gs.stops[i]) > sc.max_stop ? strlen(o->gs.stops[i]) : sc.max_stop;
        sc.cap = gp.max_new_tokens;
        sc.kept = malloc(((size_t)sc.cap + 1) * sizeof *sc.kept);
        if (!sc.kept || gf_stop_strings_create(o->gs.stops, o->gs.n_stops, &sc.stops) != GF_OK) {
            gf_cli_error("generate: --stop: %s", sc.kept ? gf_error_msg() : "out of memory");
            rc = GF_EXIT_USAGE;
            goto done;
        }
    }
    if (sc.print)
        print_text(s->tok, prompt, n, 0);
    if (sc.print || sc.stops) {
        fflush(stdout);
        gp.on_step = stream_step;
        gp.user = &sc;
    }
    int32_t len = (int32_t)n;
    double t0 = gf_now_s();
    gf_status st = gf_generate(s->engine, 1, &prompt, &len, &gp, &g);
    double dt = gf_now_s() - t0;
    if (st != GF_OK && !sc.stopped) {
        gf_cli_error("%s", gf_error_msg());
        /* one mapping (gf_verdict_of_status): a context limit hit, --on-limit
         * raise's included, is a request the model cannot take: exit 2, as
         * --verify and run give it */
        rc = gf_verdict_exit(gf_verdict_of_status(st), 0);
        goto done;
    }
    /* a stop string ended it: the tokens through the one that completed it */
    const int32_t *new_ids = sc.stopped ? sc.kept : g->tokens[0] + len;
    const int32_t n_new = sc.stopped ? sc.n_kept : g->n_until_stop[0] - len;
    const char *why = sc.stopped ? "stop_string" : stop_reason(g, &gp, n_new > 0 ? new_ids[n_new - 1] : -1);
    if (o->json) {
        printf("{\"prompt\": ");
        print_text(s->tok, prompt, n, 1);
        printf(", \"prompt_tokens\": ");
        print_ids(prompt, n);
        printf(", \"completion\": ");
        if (o->gs.n_stops)
            print_text_stopped(s->tok, &o->gs, sc.max_stop, new_ids, (size_t)n_new, 1);
        else
            print_text(s->tok, new_ids, (size_t)n_new, 1);
        printf(", \"tokens\": ");
        print_ids(new_ids, (size_t)n_new);
        printf(", \"stop_reason\": \"%s\", \"total_tokens\": %d, \"new_tokens\": %d, \"sampler\": ", why, len + n_new,
               n_new);
        print_sampler_json(s, o, &gp);
        printf(", \"backend\": \"%s\", \"cached\": %s, \"seconds\": %.6f, \"verify\": null, "
               "\"batch_consistent\": null, \"kv_cache\": ",
               gf_engine_ops(s->engine)->name, gp.use_cache ? "true" : "false", dt);
        json_t *kv = gp.use_cache && g
                         ? gf_kv_cache_json(gf_engine_config(s->engine), 1, g->cache_len, g->cache_bytes)
                         : json_null(); /* uncached: no cache; a stop string cut the generation before its record */
        char *kvs = json_dumps(kv, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s}\n", kvs ? kvs : "null");
        free(kvs);
        json_decref(kv);
    } else if (o->stream) {
        if (!sc.stopped) {
            char tail[16];
            size_t w = gf_utf8_stream_finish(&sc.u8, tail, sizeof tail);
            emit(&sc, tail, w);
            if (sc.stops && !sc.stopped) {
                char *rest = malloc(sc.max_stop + 8);
                if (rest) {
                    w = gf_stop_strings_finish(sc.stops, rest, sc.max_stop + 8);
                    fwrite(rest, 1, w, stdout);
                }
                free(rest);
            }
        }
        putchar('\n');
    } else if (o->gs.n_stops) {
        print_text(s->tok, prompt, n, 0);
        print_text_stopped(s->tok, &o->gs, sc.max_stop, new_ids, (size_t)n_new, 0);
        putchar('\n');
    } else {
        print_text(s->tok, g->tokens[0], (size_t)g->n_until_stop[0], 0);
        putchar('\n');
    }
    if (!o->json) {
        const int pr = gf_sampler_params_profile(&gp.sampler);
        fprintf(stderr,
                "[%d new tokens, stop_reason %s, %.1f ms, %.0f tokens/s, backend %s, %s, sampler engine (%s)]\n", n_new,
                why, dt * 1e3, n_new / (dt > 0 ? dt : 1e-9), gf_engine_ops(s->engine)->name,
                gp.use_cache ? "cached" : "uncached", gf_sampler_profile_name(pr));
        if (backend_has_ex(s, pr))
            fprintf(stderr,
                    "[the engine's %s sampler drew these tokens; backend %s's sample_ex declares %s and is "
                    "checked against it by the cases (genfence run), not here]\n",
                    gf_sampler_profile_name(pr), gf_engine_ops(s->engine)->name, gf_sampler_profile_name(pr));
    }
    const gf_model_config *mc = gf_engine_config(s->engine);
    if (!o->json && gp.use_cache && g) /* the KV cache holds the key/value heads only */
        fprintf(
            stderr, "[kv cache (L %d, B 1, H_kv %d, max_len %d, d_head %d) k and v: %zu bytes (%.1f KiB); H = %d]\n",
            mc->n_layer, mc->n_kv_head, g->cache_len, mc->d_head, g->cache_bytes, g->cache_bytes / 1024.0, mc->n_head);
done:
    gf_generation_free(g);
    gf_stop_strings_destroy(sc.stops);
    free(sc.kept);
    return rc;
}

int gf_cmd_generate(int argc, char **argv)
{
    enum {
        O_TOKENS = 256,
        O_MAXNEW,
        O_EOS,
        O_NOEOS,
        O_NOCACHE,
        O_LIMIT,
        O_STREAM,
        O_JSON,
        O_VERIFY,
        O_BATCH,
        O_BACKEND,
        O_THREADS
    };
    static const struct option own_head[] = {{"model", required_argument, 0, 'm'},
                                             {"prompt", required_argument, 0, 'p'},
                                             {"tokens", required_argument, 0, O_TOKENS},
                                             {"max-new-tokens", required_argument, 0, O_MAXNEW}};
    static const struct option own_tail[] = {{"eos-id", required_argument, 0, O_EOS},
                                             {"no-eos", no_argument, 0, O_NOEOS},
                                             {"no-cache", no_argument, 0, O_NOCACHE},
                                             {"on-limit", required_argument, 0, O_LIMIT},
                                             {"stream", no_argument, 0, O_STREAM},
                                             {"json", no_argument, 0, O_JSON},
                                             {"verify", no_argument, 0, O_VERIFY},
                                             {"batch-prompts", required_argument, 0, O_BATCH},
                                             {"backend", required_argument, 0, O_BACKEND},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    /* generate's own, then the sampler's flags (the field table's, gen_sampler.h), then the rest */
    struct option
        longopts[sizeof own_head / sizeof own_head[0] + GF_GEN_SAMPLER_MAX_OPTS + sizeof own_tail / sizeof own_tail[0]];
    size_t nopt = sizeof own_head / sizeof own_head[0];
    memcpy(longopts, own_head, sizeof own_head);
    nopt += gf_gen_sampler_longopts(longopts + nopt, GF_GEN_SAMPLER_MAX_OPTS);
    memcpy(longopts + nopt, own_tail, sizeof own_tail);
    gen_opts o = {.backend = "ref", .threads = 1};
    o.gp = gf_generate_defaults();
    o.gp.sampler.temperature = 0.8;
    o.gp.sampler.use_top_k = 1;
    o.gp.sampler.top_k = 40;
    o.gp.sampler.use_top_p = 1;
    o.gp.sampler.top_p = 0.95;
    o.gp.sampler.seed = 1337;
    const gf_sampler_params defaults = o.gp.sampler;
    gf_gen_sampler_init(&o.gs);
    int rc = GF_EXIT_USAGE;
    long v;
    double d;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:p:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': o.model = optarg; break;
        case 'p': o.prompt = optarg; break;
        case O_TOKENS: o.tokens = optarg; break;
        case O_MAXNEW:
            if (!gf_parse_int(optarg, 0, 1000000, &v))
                goto bad_value;
            o.gp.max_new_tokens = (int32_t)v;
            break;
        case GS_TEMPERATURE:
            if (!gf_parse_double(optarg, &d))
                goto bad_value;
            o.gp.sampler.temperature = d;
            gf_gen_sampler_mark(&o.gs, c);
            break;
        case GS_TOP_K:
            gf_gen_sampler_mark(&o.gs, c);
            if (!strcmp(optarg, "none")) {
                o.gp.sampler.use_top_k = 0;
                break;
            }
            if (!gf_parse_int(optarg, -2147483647L, 2147483647L, &v))
                goto bad_value;
            o.gp.sampler.top_k = (int32_t)v;
            break;
        case GS_TOP_P:
            gf_gen_sampler_mark(&o.gs, c);
            if (!strcmp(optarg, "none")) {
                o.gp.sampler.use_top_p = 0;
                break;
            }
            if (!gf_parse_double(optarg, &d))
                goto bad_value;
            o.gp.sampler.top_p = d;
            break;
        case GS_SEED:
            gf_gen_sampler_mark(&o.gs, c);
            if (!gf_parse_int(optarg, 0, 0x7fffffffffffffffL, &v))
                goto bad_value;
            o.gp.sampler.seed = (uint64_t)v;
            break;
        case O_EOS:
            if (!gf_parse_int(optarg, 0, 2147483647L, &v))
                goto bad_value;
            o.gp.eos_id = (int32_t)v;
            o.eos_set = 1;
            break;
        case O_NOEOS: o.no_eos = 1; break;
        case O_NOCACHE: o.gp.use_cache = 0; break;
        case O_LIMIT:
            if (!strcmp(optarg, "raise"))
                o.gp.raise_on_context_limit = 1;
            else if (!strcmp(optarg, "slide"))
                o.gp.slide_on_limit = 1;
            else if (strcmp(optarg, "stop"))
                goto bad_value;
            break;
        case O_STREAM: o.stream = 1; break;
        case O_JSON: o.json = 1; break;
        case O_VERIFY: o.verify = 1; break;
        case O_BATCH: o.batch = optarg; break;
        case O_BACKEND: o.backend = optarg; break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &v))
                goto bad_value;
            o.threads = (int)v;
            break;
        case 'h':
            usage(stdout);
            rc = GF_EXIT_OK;
            goto out;
        default:
            if (c >= GS_FIRST_EXT && c < GS_END) {
                if (gf_gen_sampler_option(&o.gs, c, optarg) < 0)
                    goto out;
                break;
            }
            gf_cli_error("generate: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            goto out;
        }
        continue;
    bad_value:
        gf_cli_error("generate: bad value '%s' for %s", optarg, argv[optind - 1]);
        goto out;
    }
    if (optind < argc) {
        gf_cli_error("generate: unexpected argument '%s'", argv[optind]);
        goto out;
    }
    int sources = !!o.prompt + !!o.tokens + !!o.batch;
    if (!o.model || sources != 1) {
        gf_cli_error("generate: need --model and exactly one of --prompt, --tokens, --batch-prompts");
        usage(stderr);
        goto out;
    }
    if (o.eos_set && o.no_eos) {
        gf_cli_error("generate: --eos-id and --no-eos contradict each other");
        goto out;
    }
    if ((o.gs.any_ext || o.gs.n_stops) && (o.verify || o.batch)) {
        gf_cli_error("generate: the sampler-profile flags (--profile ... --stop) apply to a plain generation; "
                     "--verify and --batch-prompts decode greedily under the seed sampler");
        goto out;
    }
    if (gf_gen_sampler_check(&o.gs, &o.gp.sampler, &defaults) < 0)
        goto out;
    gf_session s;
    /* ids only (--tokens): the text is printed when tokenizer.json loads */
    gf_status st =
        gf_session_open(&s, o.model, o.backend, o.threads,
                        o.prompt || o.batch || o.gs.n_stops ? GF_SESSION_TOK_REQUIRED : GF_SESSION_TOK_IF_USABLE);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        goto out;
    }
    if (s.tok_error[0])
        fprintf(stderr, "genfence: note: the text is not printed: %s\n", s.tok_error);
    if (!o.eos_set)
        o.gp.eos_id = o.no_eos ? -1 : gf_engine_config(s.engine)->eos_id;
    if (gf_gen_sampler_check_model(&o.gs, gf_engine_config(s.engine)->vocab_size, o.gp.eos_id) < 0) {
        rc = GF_EXIT_USAGE;
    } else if (o.batch) {
        rc = run_batch(&s, &o);
    } else {
        int32_t *prompt = NULL;
        size_t n = 0;
        st = gf_session_tokens(&s, o.prompt, o.tokens, &prompt, &n);
        if (st != GF_OK) {
            gf_cli_error("%s", gf_error_msg());
            rc = GF_EXIT_USAGE;
        } else {
            rc = o.verify ? run_verify(&s, prompt, n, &o) : run_generate(&s, prompt, n, &o);
        }
        free(prompt);
    }
    gf_session_close(&s);
out:
    gf_gen_sampler_clear(&o.gs);
    return rc;
}
