/* genfence forward: the logits of every position, to a safetensors file;
 * with --against, judged position by position against another backend's by
 * the margin gate (verdict/compare.h). */
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "compare.h"
#include "genfence/safetensors.h"
#include "genfence/version.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence forward --model DIR (--prompt TEXT | --tokens 1,2,3) --out FILE.safetensors\n"
               "                        [--backend NAME|PATH] [--threads N]\n"
               "       genfence forward --model DIR (--prompt TEXT | --tokens 1,2,3) --against NAME|PATH\n"
               "                        [--backend NAME|PATH] [--threads N] [--atol X] [--out FILE]\n"
               "\n"
               "Runs one uncached forward pass and writes F32 `logits` (T, V) of every position and\n"
               "I64 `tokens` (T), with the backend and genfence version in __metadata__.\n"
               "\n"
               "  --against REF  run the same forward on REF too and judge --backend against it with\n"
               "                 the margin gate, teacher-forced, at every position: max |delta| <= atol\n"
               "                 and each position's argmax equal to REF's, a mismatch excused only\n"
               "                 where REF's top-1 minus top-2 is below the gate (the default gate, the\n"
               "                 tested backend's declared dtype; docs/harness.md). Prints one line;\n"
               "                 --out is then optional (the tested backend's logits)\n");
    fprintf(f,
            "  --atol X       max |delta| allowed with --against (default %g, scaled by the dtype\n"
            "                 as a case's atol is)\n",
            GF_ATOL_DEFAULT);
    fprintf(f, "\n"
               "exit status: 0 written (--against: the gate passed), 2 bad input (model files, flags),\n"
               "1 backend failure (--against: the gate failed)\n");
}

/* The uncached forward of ids (T) on s: logits (T, V). */
static gf_status forward_all(gf_session *s, const int32_t *ids, size_t T, float *logits)
{
    int32_t *pos = malloc(T * sizeof *pos);
    if (!pos)
        return gf_error_set(GF_E_NOMEM, "forward: out of memory");
    for (size_t i = 0; i < T; i++)
        pos[i] = (int32_t)i;
    gf_batch in = {.B = 1, .T = (int32_t)T, .tokens = ids, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    gf_status st = gf_engine_forward(s->engine, NULL, &in, logits);
    free(pos);
    return st;
}

/* --against: the same forward on the reference, every position through the
 * gate; prints the verdict line. Returns the exit status. */
static int judge_against(gf_session *s, const char *model, const char *against, int32_t threads, double atol,
                         const int32_t *ids, size_t T, const float *test)
{
    gf_session r;
    gf_status st = gf_session_open(&r, model, against, threads, 0);
    if (st != GF_OK) {
        gf_cli_error("forward --against: %s", gf_error_msg());
        return GF_EXIT_USAGE;
    }
    const int32_t V = gf_engine_config(s->engine)->vocab_size;
    int rc = GF_EXIT_OK;
    float *ref = malloc(T * (size_t)V * sizeof *ref);
    if (!ref || gf_engine_config(r.engine)->vocab_size != V) {
        gf_cli_error(ref ? "forward --against: the two backends disagree on the vocabulary size"
                         : "forward: out of memory");
        rc = GF_EXIT_FAIL;
        goto done;
    }
    if ((st = forward_all(&r, ids, T, ref)) != GF_OK) {
        gf_cli_error("forward --against %s: %s", against, gf_error_msg());
        rc = GF_EXIT_FAIL;
        goto done;
    }
    gf_backend_info info;
    gf_backend_options bo = gf_registry_options(&s->backend, threads);
    gf_backend_describe(gf_engine_ops(s->engine), &bo, &info);
    const gf_gate g = gf_gate_default();
    gf_cmp cmp;
    gf_cmp_init(&cmp, &g, info.dtype, GF_CMP_TEACHER_FORCED, atol);
    for (size_t t = 0; t < T; t++)
        gf_cmp_logits(&cmp, (int32_t)t, ref + t * (size_t)V, test + t * (size_t)V, V);
    char why[768];
    gf_verdict v = gf_cmp_verdict(&cmp, why, sizeof why);
    printf("%s %s against %s: %zu positions: %s; max |delta| %.3g at position %d (atol %.3g), min %s margin %.4g "
           "at position %d (gate %.3g), %d near ties\n",
           gf_verdict_passed(v) ? "ok  " : "FAIL", gf_engine_ops(s->engine)->name, gf_engine_ops(r.engine)->name, T,
           why, cmp.max_delta, cmp.max_delta_step, cmp.atol, gf_engine_ops(r.engine)->name, cmp.min_margin,
           cmp.min_margin_step, cmp.min_margin_threshold, cmp.near_ties);
    rc = gf_verdict_passed(v) ? GF_EXIT_OK : GF_EXIT_FAIL;
done:
    free(ref);
    gf_session_close(&r);
    return rc;
}

int gf_cmd_forward(int argc, char **argv)
{
    enum { O_TOKENS = 256, O_OUT, O_BACKEND, O_THREADS, O_AGAINST, O_ATOL };
    static const struct option longopts[] = {{"model", required_argument, 0, 'm'},
                                             {"prompt", required_argument, 0, 'p'},
                                             {"tokens", required_argument, 0, O_TOKENS},
                                             {"out", required_argument, 0, O_OUT},
                                             {"backend", required_argument, 0, O_BACKEND},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"against", required_argument, 0, O_AGAINST},
                                             {"atol", required_argument, 0, O_ATOL},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *model = NULL, *prompt = NULL, *tokens = NULL, *out = NULL, *backend = "ref", *against = NULL;
    long threads = 1;
    double atol = GF_ATOL_DEFAULT;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "m:p:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case O_TOKENS: tokens = optarg; break;
        case O_OUT: out = optarg; break;
        case O_BACKEND: backend = optarg; break;
        case O_THREADS:
            if (!gf_parse_int(optarg, 1, 4096, &threads)) {
                gf_cli_error("forward: bad value '%s' for --threads", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case O_AGAINST: against = optarg; break;
        case O_ATOL:
            if (!gf_parse_double(optarg, &atol) || !(atol >= 0)) {
                gf_cli_error("forward: bad value '%s' for --atol (a number >= 0)", optarg);
                return GF_EXIT_USAGE;
            }
            break;
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("forward: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    if (optind < argc || !model || (!out && !against) || !!prompt + !!tokens != 1) {
        gf_cli_error("forward: need --model, --out (or --against) and exactly one of --prompt, --tokens");
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    gf_session s;
    gf_status st =
        gf_session_open(&s, model, backend, (int32_t)threads, prompt ? GF_SESSION_TOK_REQUIRED : GF_SESSION_TOK_NONE);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        return GF_EXIT_USAGE;
    }
    int rc = GF_EXIT_OK;
    int32_t *ids = NULL;
    int64_t *ids64 = NULL;
    float *logits = NULL;
    size_t T = 0;
    st = gf_session_tokens(&s, prompt, tokens, &ids, &T);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_USAGE;
        goto done;
    }
    const gf_model_config *cfg = gf_engine_config(s.engine);
    if ((int64_t)T > cfg->n_positions) {
        gf_cli_error("forward: %zu tokens exceed the model's %d positions", T, cfg->n_positions);
        rc = GF_EXIT_USAGE;
        goto done;
    }
    for (size_t i = 0; i < T; i++)
        if (ids[i] >= cfg->vocab_size) {
            gf_cli_error("forward: token %d at index %zu is outside the vocabulary (%d)", ids[i], i, cfg->vocab_size);
            rc = GF_EXIT_USAGE;
            goto done;
        }
    const int32_t V = cfg->vocab_size;
    logits = malloc(T * (size_t)V * sizeof *logits);
    ids64 = malloc(T * sizeof *ids64);
    if (!logits || !ids64) {
        gf_cli_error("forward: out of memory");
        rc = GF_EXIT_FAIL;
        goto done;
    }
    for (size_t i = 0; i < T; i++)
        ids64[i] = ids[i];
    st = forward_all(&s, ids, T, logits);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_FAIL;
        goto done;
    }
    if (against) {
        rc = judge_against(&s, model, against, (int32_t)threads, atol, ids, T, logits);
        if (rc == GF_EXIT_USAGE || !out) /* a failed gate still writes --out */
            goto done;
    }
    gf_st_write_tensor tensors[2] = {
        {.name = "logits", .dtype = GF_DT_F32, .ndim = 2, .shape = {(int64_t)T, V}, .data = logits},
        {.name = "tokens", .dtype = GF_DT_I64, .ndim = 1, .shape = {(int64_t)T}, .data = ids64},
    };
    const char *keys[] = {"generator", "backend", "model"};
    const char *vals[] = {"genfence " GENFENCE_VERSION " (" GENFENCE_COMMIT ")", gf_engine_ops(s.engine)->name, model};
    st = gf_safetensors_write(out, tensors, 2, keys, vals, 3);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_USAGE;
    }
done:
    free(ids);
    free(ids64);
    free(logits);
    gf_session_close(&s);
    return rc;
}
