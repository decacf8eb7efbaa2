/* The invariance a backend declares (gf_backend_info.invariance, backend.h):
 * the axes of the `invariance` kind and the levels a backend may promise on
 * each (invariance_decl.c; docs/cases.md "invariance", docs/backends.md). */
#ifndef GENFENCE_HARNESS_KIT_INVARIANCE_DECL_H
#define GENFENCE_HARNESS_KIT_INVARIANCE_DECL_H

#include <stddef.h>
#include <stdint.h>

/* The axes, in documentation order: name, what varies against the reference
 * call. */
/* clang-format off */
#define GF_INV_AXIS_LIST(X)                                                                         \
    X(batch,    "batch size B: the probe row alone vs inside batches of B rows")                    \
    X(position, "the probe row's position inside a batch of fixed size")                            \
    X(mixed,    "co-resident rows of other lengths (left padding) vs rows of the probe's length")   \
    X(threads,  "the backend's thread count (1, 2, the machine's cores)")                           \
    X(split,    "the prefill in one shot vs in chunks, then decode")                                \
    X(repeat,   "the same call repeated in one process, and in other processes")                    \
    X(prefix,   "a shared prefix's logits vs what follows in another row, and a reused cache")
/* The levels, weakest first: the word a declaration uses, and the verdict a
 * measurement at that level reads as. */
#define GF_INV_LEVEL_LIST(X)                                              \
    X(NONE,    "none",    "not invariant")                                \
    X(GATED,   "gated",   "within gate")                                  \
    X(BITWISE, "bitwise", "bitwise")
/* clang-format on */

typedef enum gf_inv_axis {
#define GF_INV_AXIS_ENUM(name, what) GF_INV_##name,
    GF_INV_AXIS_LIST(GF_INV_AXIS_ENUM)
#undef GF_INV_AXIS_ENUM
        GF_INV_N_AXES
} gf_inv_axis;

typedef enum gf_inv_level {
#define GF_INV_LEVEL_ENUM(id, word, measured) GF_INV_LEVEL_##id,
    GF_INV_LEVEL_LIST(GF_INV_LEVEL_ENUM)
#undef GF_INV_LEVEL_ENUM
        GF_INV_N_LEVELS
} gf_inv_level;

const char *gf_inv_axis_name(gf_inv_axis a);      /* "batch" */
const char *gf_inv_axis_what(gf_inv_axis a);      /* one line */
int gf_inv_axis_find(const char *name);           /* the axis, or -1 */
const char *gf_inv_level_word(gf_inv_level l);    /* the declaration's word: "bitwise", "gated", "none" */
const char *gf_inv_level_verdict(gf_inv_level l); /* the measurement's: "bitwise", "within gate", "not invariant" */

/* A declaration read into one level per axis. */
typedef struct gf_inv_decl {
    gf_inv_level level[GF_INV_N_AXES];
    int said[GF_INV_N_AXES]; /* 1: the text named the axis (or all); 0: the default, gated */
} gf_inv_decl;

/* Read text ("all=bitwise,threads=gated"; NULL or "": nothing said, every
 * axis gated) into *d. 0 ok; -1 with a message naming the entry in err. */
int gf_inv_decl_parse(const char *text, gf_inv_decl *d, char *err, size_t err_len);

/* What the backend behind session ss declares (its info at this thread
 * count): *d, and the declaration's text into text ("" when none said). 0,
 * or -1 with why in err (the text cannot be read). */
struct gf_session;
int gf_inv_declared(struct gf_session *ss, int32_t threads, gf_inv_decl *d, char *text, size_t cap, char *err,
                    size_t err_len);

#endif
