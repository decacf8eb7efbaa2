/* Recording a golden (genfence bless): each prompt of a golden_generation
 * case alone on a backend, free-running, cached decode, its logits and
 * margins per step and the provenance in the metadata (bless.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "bless.h"
#include "genfence/engine.h"
#include "genfence/version.h"
#include "hash.h"
#include "sys.h"

typedef struct record_capture {
    float *logits;   /* (N, V) */
    double *margins; /* (N) */
    int32_t V, N;
} record_capture;

static gf_status record_step(void *user, const gf_step_info *info)
{
    record_capture *c = user;
    if (info->step < c->N) {
        memcpy(c->logits + (size_t)info->step * c->V, info->logits, (size_t)c->V * sizeof(float));
        c->margins[info->step] = info->results[0].margin;
    }
    return GF_OK;
}

gf_status gf_golden_record(const gf_case *c, const char *backend, int32_t threads, const char *path,
                           gf_golden_recorded *out)
{
    memset(out, 0, sizeof *out);
    const gf_golden_spec *s = c->spec;
    const int32_t B = (int32_t)s->n_prompts, N = (int32_t)s->max_new;
    gf_session ses;
    gf_status st = gf_session_open(&ses, c->model, backend, threads, 0);
    if (st != GF_OK)
        return gf_error_prefix(st, "model '%s' on backend %s", c->model_arg, backend);
    const int32_t V = gf_engine_config(ses.engine)->vocab_size;
    gf_golden_row *rows = calloc((size_t)B, sizeof *rows);
    double min_margin = INFINITY;
    char case_hex[65], model_hex[65];
    if (!rows) {
        st = gf_error_set(GF_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = gf_case_hash_of(c, case_hex)) != GF_OK || (st = gf_model_hash(c->model, model_hex)) != GF_OK)
        goto done;
    for (int32_t b = 0; b < B; b++) {
        int32_t *prompt = NULL, P = 0;
        st = gf_prompt_tokens(&ses, &s->prompts[b], &prompt, &P);
        if (st != GF_OK)
            goto done;
        record_capture cap = {.V = V, .N = N};
        cap.logits = malloc((size_t)N * V * sizeof *cap.logits);
        cap.margins = malloc((size_t)N * sizeof *cap.margins);
        gf_generation *gen = NULL;
        uint64_t seq = (uint64_t)b;
        gf_generate_params gp = gf_generate_defaults();
        gp.max_new_tokens = N;
        gp.sampler = s->sampler;
        gp.eos_id = -1;
        gp.use_cache = 1;
        gp.seq_ids = &seq;
        gp.on_step = record_step;
        gp.user = &cap;
        st = cap.logits && cap.margins ? gf_generate(ses.engine, 1, (const int32_t *const *)&prompt, &P, &gp, &gen)
                                       : gf_error_set(GF_E_NOMEM, "out of memory");
        if (st == GF_OK && gen->steps != N)
            st = gf_error_set(GF_E_CONTEXT_LIMIT,
                              "prompt %d: %d of %d steps (%s): the prompt plus max_new_tokens - 1 "
                              "must fit the model's positions",
                              b, gen->steps, N, gf_stop_reason_str(gen->stop[0]));
        if (st != GF_OK) {
            gf_error_prefix(st, "generate");
            free(cap.logits);
            free(cap.margins);
            free(prompt);
            gf_generation_free(gen);
            goto done;
        }
        rows[b].n_tokens = gen->n_tokens[0];
        rows[b].steps = N;
        rows[b].tokens = malloc((size_t)gen->n_tokens[0] * sizeof(int32_t));
        if (rows[b].tokens)
            memcpy(rows[b].tokens, gen->tokens[0], (size_t)gen->n_tokens[0] * sizeof(int32_t));
        rows[b].logits = cap.logits;
        rows[b].margins = cap.margins;
        for (int32_t t = 0; t < N; t++)
            if (cap.margins[t] < min_margin)
                min_margin = cap.margins[t];
        free(prompt);
        gf_generation_free(gen);
        if (!rows[b].tokens) {
            st = gf_error_set(GF_E_NOMEM, "out of memory");
            goto done;
        }
    }
    /* provenance */
    const gf_backend_ops *ops = gf_engine_ops(ses.engine);
    gf_backend_options bo = gf_registry_options(&ses.backend, threads);
    gf_backend_info info;
    char backend_detail[512] = "", dtype[16] = "fp32";
    if (gf_backend_describe(ops, &bo, &info) == GF_OK) {
        snprintf(backend_detail, sizeof backend_detail, "%s%s%s", info.library ? info.library : "",
                 info.detail && info.detail[0] ? "; " : "", info.detail ? info.detail : "");
        snprintf(dtype, sizeof dtype, "%s", gf_dtype_str(info.dtype ? info.dtype : GF_COMPUTE_F32));
    }
    struct utsname u;
    char machine[1024], cpu[256], created[32], seed[32], genver[128];
    if (!gf_cpu_model(cpu, sizeof cpu))
        snprintf(cpu, sizeof cpu, "unknown CPU");
    if (uname(&u) == 0)
        snprintf(machine, sizeof machine, "%s %s %s; %s", u.sysname, u.release, u.machine, cpu);
    else
        snprintf(machine, sizeof machine, "%s", cpu);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(created, sizeof created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)s->sampler.seed);
    snprintf(genver, sizeof genver, "genfence %s", GENFENCE_VERSION);
    char *sampler = gf_golden_sampler_json(&s->sampler);
    const char *keys[] = {"generator",      "generator_version", "genfence_commit", "backend", "backend_requested",
                          "backend_detail", "backend_dtype",     "machine",         "model",   "model_hash",
                          "case_id",        "case_hash",         "created",         "sampler", "seed",
                          "decoding"};
    const char *vals[] = {"genfence-bless",
                          genver,
                          GENFENCE_COMMIT,
                          ops->name,
                          backend,
                          backend_detail,
                          dtype,
                          machine,
                          c->model_arg,
                          model_hex,
                          c->id,
                          case_hex,
                          created,
                          sampler ? sampler : "{}",
                          seed,
                          "each prompt alone, free-running, cached decode"};
    st = gf_golden_write(path, rows, B, V, keys, vals, sizeof keys / sizeof keys[0]);
    free(sampler);
    if (st == GF_OK) {
        out->rows = B;
        out->steps = N;
        out->min_margin = min_margin;
        snprintf(out->backend, sizeof out->backend, "%s", ops->name);
    }
done:
    for (int32_t b = 0; rows && b < B; b++) {
        free(rows[b].tokens);
        free(rows[b].logits);
        free(rows[b].margins);
    }
    free(rows);
    gf_session_close(&ses);
    return st;
}
