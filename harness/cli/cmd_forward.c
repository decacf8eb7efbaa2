/* genfence forward: the logits of every position, to a safetensors file. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "commands.h"
#include "genfence/safetensors.h"
#include "genfence/version.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: genfence forward --model DIR (--prompt TEXT | --tokens 1,2,3) --out FILE.safetensors\n"
               "                        [--backend NAME|PATH] [--threads N]\n"
               "\n"
               "Runs one uncached forward pass and writes F32 `logits` (T, V) of every position and\n"
               "I64 `tokens` (T), with the backend and genfence version in __metadata__.\n"
               "\n"
               "exit status: 0 written, 2 bad input (model files, flags), 1 backend failure\n");
}

int gf_cmd_forward(int argc, char **argv)
{
    enum { O_TOKENS = 256, O_OUT, O_BACKEND, O_THREADS };
    static const struct option longopts[] = {{"model", required_argument, 0, 'm'},
                                             {"prompt", required_argument, 0, 'p'},
                                             {"tokens", required_argument, 0, O_TOKENS},
                                             {"out", required_argument, 0, O_OUT},
                                             {"backend", required_argument, 0, O_BACKEND},
                                             {"threads", required_argument, 0, O_THREADS},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    const char *model = NULL, *prompt = NULL, *tokens = NULL, *out = NULL, *backend = "ref";
    long threads = 1;
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
        case 'h': usage(stdout); return GF_EXIT_OK;
        default:
            gf_cli_error("forward: unknown or incomplete option '%s'", argv[optind - 1]);
            usage(stderr);
            return GF_EXIT_USAGE;
        }
    }
    if (optind < argc || !model || !out || !!prompt + !!tokens != 1) {
        gf_cli_error("forward: need --model, --out and exactly one of --prompt, --tokens");
        usage(stderr);
        return GF_EXIT_USAGE;
    }
    gf_session s;
    gf_status st = gf_session_open(&s, model, backend, (int32_t)threads,
                                  prompt ? GF_SESSION_TOK_REQUIRED : GF_SESSION_TOK_NONE);
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
    int32_t *pos = malloc(T * sizeof *pos);
    if (!logits || !ids64 || !pos) {
        free(pos);
        gf_cli_error("forward: out of memory");
        rc = GF_EXIT_FAIL;
        goto done;
    }
    for (size_t i = 0; i < T; i++) {
        pos[i] = (int32_t)i;
        ids64[i] = ids[i];
    }
    gf_batch in = {.B = 1, .T = (int32_t)T, .tokens = ids, .position_ids = pos, .logits_mode = GF_LOGITS_ALL};
    st = gf_engine_forward(s.engine, NULL, &in, logits);
    free(pos);
    if (st != GF_OK) {
        gf_cli_error("%s", gf_error_msg());
        rc = GF_EXIT_FAIL;
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
