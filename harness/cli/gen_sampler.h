/* genfence generate's sampler-profile flags (harness/cli/gen_sampler.c):
 * --profile, --chain, --min-p, --typical-p, the penalties, --penalty-last-n,
 * --min-tokens-to-keep, --logit-bias, --min-new-tokens, --stop-token-ids and
 * --stop, read into a gf_sampler_ext with the case keys' rules
 * (harness/krun/keys.c, docs/sampler.md) and validated by
 * gf_sampler_validate, the error naming the flags it comes from. */
#ifndef GENFENCE_HARNESS_GEN_SAMPLER_H
#define GENFENCE_HARNESS_GEN_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/sampler.h"

/* Option codes (getopt_long's val) of the flags; GS_TEMPERATURE .. GS_SEED
 * are cmd_generate's own, marked with gf_gen_sampler_mark so an invalid
 * sampler can name them too. */
enum {
    GS_TEMPERATURE = 512,
    GS_TOP_K,
    GS_TOP_P,
    GS_SEED,
    GS_PROFILE,
    GS_CHAIN,
    GS_MIN_P,
    GS_TYPICAL_P,
    GS_REPETITION,
    GS_FREQUENCY,
    GS_PRESENCE,
    GS_LAST_N,
    GS_MIN_KEEP,
    GS_BIAS,
    GS_MIN_NEW,
    GS_STOP_IDS,
    GS_STOP,
    GS_END
};
#define GS_FIRST_EXT GS_PROFILE

typedef struct gf_gen_sampler {
    gf_sampler_ext e;    /* the extension (params.ext once any GS_FIRST_EXT.. flag is given) */
    gf_logit_bias *bias; /* (n_bias) owned */
    int32_t *stop_ids;   /* (n_stop_ids) owned */
    const char **stops;  /* (n_stops) borrowed from argv */
    size_t n_stops;
    int any_ext; /* a flag of the extension was given */
    unsigned char set[GS_END - GS_TEMPERATURE];
} gf_gen_sampler;

void gf_gen_sampler_init(gf_gen_sampler *gs);
void gf_gen_sampler_clear(gf_gen_sampler *gs); /* NULL-safe */

/* Flag `code` given (for the error's attribution). */
void gf_gen_sampler_mark(gf_gen_sampler *gs, int code);

/* One extension flag (code >= GS_FIRST_EXT) with its value: 0 ok, -1 bad
 * value (printed, naming the flag: exit 2). */
int gf_gen_sampler_option(gf_gen_sampler *gs, int code, const char *arg);

/* Point p->ext at gs->e when an extension flag was given, then
 * gf_sampler_validate(p); on error prints "generate: invalid sampler (FLAGS):
 * MSG" where FLAGS are the given flags whose default would change the
 * outcome, and returns -1. defaults: the params before any flag. */
int gf_gen_sampler_check(gf_gen_sampler *gs, gf_sampler_params *p, const gf_sampler_params *defaults);

/* With the model known: logit-bias / stop ids inside [0, V), and
 * --min-new-tokens having a token to ban (eos_id >= 0 or stop ids), as the
 * case loader demands 'eos_id' for 'min_new_tokens'. 0 ok, -1 printed. */
int gf_gen_sampler_check_model(const gf_gen_sampler *gs, int32_t V, int32_t eos_id);

/* The flag's name ("--min-p") of a code. */
const char *gf_gen_sampler_flag(int code);

#endif
