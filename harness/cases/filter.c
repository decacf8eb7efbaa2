/* Selecting cases: --filter (regex on the id), --kind, --tag. */
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case.h"

int gf_case_filter_init(gf_case_filter *f, const gf_kind_def *const *known, const char *regex, char **kinds,
                        size_t n_kinds, char **tags, size_t n_tags, char *err, size_t err_len)
{
    memset(f, 0, sizeof *f);
    for (size_t i = 0; i < n_kinds; i++)
        if (!gf_kind_lookup(known, kinds[i])) {
            snprintf(err, err_len, "unknown kind '%s' (genfence list --kinds shows them)", kinds[i]);
            return -1;
        }
    f->kinds = kinds;
    f->n_kinds = n_kinds;
    f->tags = tags;
    f->n_tags = n_tags;
    if (regex) {
        regex_t *re = malloc(sizeof *re);
        if (!re) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        int rc = regcomp(re, regex, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char msg[256];
            regerror(rc, re, msg, sizeof msg);
            snprintf(err, err_len, "bad --filter regex '%s': %s", regex, msg);
            free(re);
            return -1;
        }
        f->regex = re;
    }
    return 0;
}

int gf_case_filter_match(const gf_case_filter *f, const gf_case *c)
{
    if (f->regex && regexec((const regex_t *)f->regex, c->id, 0, NULL, 0) != 0)
        return 0;
    if (f->n_kinds) {
        int hit = 0;
        for (size_t i = 0; i < f->n_kinds; i++)
            hit |= !strcmp(f->kinds[i], c->kind->name);
        if (!hit)
            return 0;
    }
    int positives = 0, hit = 0;
    for (size_t i = 0; i < f->n_tags; i++) {
        const char *t = f->tags[i];
        if (t[0] == '!') {
            if (gf_case_has_tag(c, t + 1))
                return 0;
        } else {
            positives++;
            hit |= gf_case_has_tag(c, t);
        }
    }
    return positives == 0 || hit;
}

void gf_case_filter_free(gf_case_filter *f)
{
    if (f->regex) {
        regfree((regex_t *)f->regex);
        free(f->regex);
    }
    memset(f, 0, sizeof *f);
}
