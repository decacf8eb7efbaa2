/* genfence generate's sampler-profile flags (harness/cli/gen_sampler.c):
 * --profile, --chain, --min-p, --typical-p, the penalties, --penalty-last-n,
 * --min-tokens-to-keep, --logit-bias, --min-new-tokens, --stop-token-ids and
 * --stop, read into a gf_sampler_ext with the case keys' rules
 * (harness/kit/keys.c, docs/sampler.md) and validated by
 * gf_sampler_validate, the error naming the flags it comes from. */
#ifndef GENFENCE_HARNESS_GEN_SAMPLER_H
#define GENFENCE_HARNESS_GEN_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <getopt.h>

#include "genfence/sampler.h"
#include "genfence/sampler_fields.h"

/* Option codes (getopt_long's val): GS_CODE(GF_SFI_X) for field X of the
 * field table (genfence/sampler_fields.h) that has a flag, GS_STOP for
 * --stop (generate's, not the sampler's). GS_TEMPERATURE .. GS_SEED are
 * cmd_generate's own (generate's defaults), marked with
 * gf_gen_sampler_mark so an invalid sampler can name them too. */
#define GS_CODE(field) (512 + (int)(field))
enum {
    GS_TEMPERATURE = GS_CODE(GF_SFI_TEMPERATURE),
    GS_TOP_K = GS_CODE(GF_SFI_TOP_K),
    GS_TOP_P = GS_CODE(GF_SFI_TOP_P),
    GS_SEED = GS_CODE(GF_SFI_SEED),
    GS_FIRST_EXT = GS_CODE(GF_SFI_PROFILE),
    GS_STOP = GS_CODE(GF_SF_COUNT),
    GS_END
};

typedef struct gf_gen_sampler {
    gf_sampler_ext e;         /* the extension (params.ext once any GS_FIRST_EXT.. flag is given) */
    void *owned[GF_SF_COUNT]; /* the lists' storage (logit bias, ids) by field */
    const char **stops;       /* (n_stops) borrowed from argv */
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

/* The getopt_long entries of every flag (the table's, then --stop) into
 * out (cap entries at least GF_GEN_SAMPLER_MAX_OPTS); returns how many. */
#define GF_GEN_SAMPLER_MAX_OPTS (GF_SF_COUNT + 1)
size_t gf_gen_sampler_longopts(struct option *out, size_t cap);

/* The --help lines of the extension's flags, in table order. */
void gf_gen_sampler_help(FILE *f);

#endif
