/* Internal to engine/: appending to the call log (genfence/engine.h,
 * gf_call_log); engine.c calls these around the slots it wraps. */
#ifndef GENFENCE_CALL_LOG_H
#define GENFENCE_CALL_LOG_H

#include "genfence/engine.h"

void gf_call_log_cache_create(gf_call_log *log, const void *cache, int32_t batch, int32_t max_len);
void gf_call_log_cache_op(gf_call_log *log, gf_call_op op, const void *cache); /* reset or free */
void gf_call_log_forward(gf_call_log *log, const void *cache, int32_t cache_length, const gf_batch *in);

#endif
