/* The filters and the case files a subcommand selects from (list, run). */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"

int gf_case_select_load(const char *cmd, const char *note, const char *regex, char **kinds, size_t n_kinds, char **tags,
                        size_t n_tags, const char *const *paths, size_t n_paths, gf_case_filter *cf, gf_case_set *set)
{
    char err[512];
    if (gf_case_filter_init(cf, gf_kinds(), regex, kinds, n_kinds, tags, n_tags, err, sizeof err) < 0) {
        gf_cli_error("%s: %s", cmd, err);
        return -1;
    }
    int ls = gf_cases_load(gf_kinds(), paths, n_paths, NULL, set);
    if (ls != GF_OK || set->n_errors) {
        for (size_t i = 0; i < set->n_errors; i++)
            fprintf(stderr, "%s\n", set->errors[i]);
        gf_cli_error("%s: %zu error%s in the case files%s", cmd, set->n_errors, set->n_errors == 1 ? "" : "s", note);
        gf_case_set_free(set);
        gf_case_filter_free(cf);
        return -1;
    }
    return 0;
}

int gf_shard_parse(const char *s, int *i_out, int *n_out)
{
    char *end;
    long i = strtol(s, &end, 10);
    if (end == s || *end != '/')
        return 0;
    const char *n_s = end + 1;
    long n = strtol(n_s, &end, 10);
    if (end == n_s || *end || n < 1 || n > 1000000 || i < 1 || i > n)
        return 0;
    *i_out = (int)i;
    *n_out = (int)n;
    return 1;
}

int gf_shard_takes(size_t *counter, int i, int n)
{
    if (n <= 0)
        return 1;
    return (int)((*counter)++ % (size_t)n) == i - 1;
}

void gf_case_none_found(char *buf, size_t cap, const gf_case_set *set, char *const *paths, size_t n_paths)
{
    size_t at = 0;
#define PUT(...) at += (size_t)snprintf(buf + at, at < cap ? cap - at : 0, __VA_ARGS__)
    PUT("no case found in ");
    if (set->n_files) /* the files read, each of which held none (a `cases: []`, only comments) */
        for (size_t i = 0; i < set->n_files && i < 3; i++)
            PUT("%s%s", i ? ", " : "", set->files[i]);
    else if (n_paths)
        for (size_t i = 0; i < n_paths && i < 3; i++)
            PUT("%s%s", i ? ", " : "", paths[i]);
    else
        PUT("the default suite");
    size_t shown = set->n_files ? set->n_files : n_paths;
    if (shown > 3)
        PUT(" and %zu more", shown - 3);
    PUT(" (%zu case file%s read)", set->n_files, set->n_files == 1 ? "" : "s");
#undef PUT
}
