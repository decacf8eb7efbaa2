/* Fuzz target: a case file (YAML -> node tree -> schema -> cases) and the case
 * hash of every case it yields. Properties: loading is deterministic (the
 * same text gives the same cases and hashes twice), every error names the
 * file, and a loaded case always has an id, a kind and a hash. */
#include <string.h>

#include "case.h"
#include "fuzz_common.h"
#include "hash.h"
#include "kinds.h"

#ifndef GF_FUZZ_SOURCE_DIR
#define GF_FUZZ_SOURCE_DIR "."
#endif

static void load(const uint8_t *data, size_t size, gf_case_set *set, char (*hex)[65], size_t max)
{
    gf_cases_load_text(gf_kinds(), (const char *)data, size, "fuzz.yaml", GF_FUZZ_SOURCE_DIR, set);
    for (size_t i = 0; i < set->n_errors; i++)
        GF_FUZZ_ASSERT(!strncmp(set->errors[i], "fuzz.yaml:", 10), "error without the file: %s", set->errors[i]);
    for (size_t i = 0; i < set->n && i < max; i++) {
        const gf_case *c = &set->cases[i];
        GF_FUZZ_ASSERT(c->id && c->kind && c->tree, "case %zu incomplete", i);
        GF_FUZZ_ASSERT(gf_case_hash(c->tree, hex[i]) == GF_OK, "case %s has no hash", c->id);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { MAX = 64 };
    static char h1[MAX][65], h2[MAX][65];
    gf_case_set a, b;
    load(data, size, &a, h1, MAX);
    load(data, size, &b, h2, MAX);
    GF_FUZZ_ASSERT(a.n == b.n && a.n_errors == b.n_errors, "two loads differ: %zu/%zu cases", a.n, b.n);
    for (size_t i = 0; i < a.n && i < MAX; i++) {
        GF_FUZZ_ASSERT(!strcmp(a.cases[i].id, b.cases[i].id), "ids differ");
        GF_FUZZ_ASSERT(!strcmp(h1[i], h2[i]), "hash of %s differs between loads", a.cases[i].id);
    }
    gf_case_set_free(&a);
    gf_case_set_free(&b);
    return 0;
}
