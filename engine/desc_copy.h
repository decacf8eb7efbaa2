/* Internal to engine/: the model description model_load is given, as a
 * private copy that is poisoned once model_load returns (issue 32 item 2).
 *
 * The ABI lets a backend read desc and its weights only during model_load
 * (docs/architecture.md, "Lifetimes"): it copies or converts what it needs.
 * One that keeps pointers instead computes the same numbers as long as the
 * caller keeps the description alive and unchanged, which genfence always
 * did. With poisoning on (the default; gf_engine_desc_poison), the engine
 * hands model_load a copy in one anonymous mapping
 *
 *   | desc | layers (L) | layer_window (L) | name | tensor | tensor | ... |
 *
 * (each part 64-byte aligned, the tensors in the order of the desc guard's
 * list, a tied lm_head once, as wte), and after model_load returns drops its
 * pages and makes it PROT_NONE: a later read through a kept pointer faults,
 * and the runner names the copy (harness/run/pool.c). The range stays
 * reserved until gf_engine_destroy, so nothing else is placed there. */
#ifndef GENFENCE_ENGINE_DESC_COPY_H
#define GENFENCE_ENGINE_DESC_COPY_H

#include <stddef.h>

#include "genfence/model_desc.h"
#include "genfence/status.h"

typedef struct gf_desc_copy {
    unsigned char *map;  /* the whole mapping (NULL: none) */
    size_t len;          /* its bytes, whole pages */
    gf_model_desc *desc; /* the copy, at the start of map */
} gf_desc_copy;

/* Copy d, its layers, layer_window, name and every tensor into c (one
 * mapping; pointers that were equal stay equal). GF_E_NOMEM when it cannot
 * be mapped (c cleared). */
gf_status gf_desc_copy_make(gf_desc_copy *c, const gf_model_desc *d);

/* After model_load returned: every page dropped and PROT_NONE. */
void gf_desc_copy_poison(gf_desc_copy *c);

/* Unmap (NULL-safe; c is zeroed). */
void gf_desc_copy_release(gf_desc_copy *c);

#endif
