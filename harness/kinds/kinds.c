/* The table of case kinds, built from GF_KIND_LIST. */
#include "kinds.h"

#include <stddef.h>

static const gf_kind_def *const k_kinds[] = {
#define GF_KIND_ENTRY(name) &gf_kind_##name,
    GF_KIND_LIST(GF_KIND_ENTRY)
#undef GF_KIND_ENTRY
        NULL,
};

const gf_kind_def *const *gf_kinds(void) { return k_kinds; }

const gf_kind_def *gf_kind_find(const char *name) { return gf_kind_lookup(k_kinds, name); }
