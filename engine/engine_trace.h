/* Internal to engine/: the call trace's writers (engine.c; genfence/engine.h
 * documents gf_call_trace). Every wrapper that calls a backend slot brackets
 * the call with these. slot: a string literal. */
#ifndef GENFENCE_ENGINE_TRACE_H
#define GENFENCE_ENGINE_TRACE_H

#include <stdint.h>

/* Returns the slot's 1-based call index in this process. */
long long gf_trace_enter(const char *slot, int32_t B, int32_t T, int32_t cache_length);
void gf_trace_leave(void);

#endif
