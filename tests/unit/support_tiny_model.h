/* A small random GPT-2 built in memory for engine tests (no files needed). */
#ifndef GF_TEST_SUPPORT_TINY_MODEL_H
#define GF_TEST_SUPPORT_TINY_MODEL_H

#include "genfence/engine.h"

typedef struct tiny_model {
    gf_model_desc desc;
    gf_layer_weights *layers;
    float *storage;
} tiny_model;

/* V, n_positions, D, L, H; weights N(0, scale) from Philox with `seed`. */
void tiny_model_make(tiny_model *m, int V, int n_positions, int D, int L, int H, uint64_t seed);
void tiny_model_free(tiny_model *m);

/* An engine on the ref backend over a fresh tiny model (V 64, 128 positions, D 16, L 2, H 2). */
gf_engine *tiny_engine(tiny_model *m);

#endif
