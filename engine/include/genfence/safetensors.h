/* safetensors reader (memory-mapped, validated before use) and writer.
 *
 * gf_safetensors_open checks everything before trusting the file: the 8-byte
 * header length lies within the file, the header is valid JSON (an object),
 * every dtype is known, every shape is a list of non-negative integers,
 * data_offsets are [begin, end] inside the data section, dtype size x shape
 * product == end - begin, and no two tensors overlap. Each violation is a
 * GF_E_FORMAT with a message naming the file, the tensor and the offset. */
#ifndef GENFENCE_SAFETENSORS_H
#define GENFENCE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "genfence/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum gf_dtype {
    GF_DT_BOOL = 1,
    GF_DT_U8,
    GF_DT_I8,
    GF_DT_I16,
    GF_DT_U16,
    GF_DT_I32,
    GF_DT_U32,
    GF_DT_I64,
    GF_DT_U64,
    GF_DT_F16,
    GF_DT_BF16,
    GF_DT_F32,
    GF_DT_F64,
} gf_dtype;

#define GF_ST_MAX_DIMS 8

typedef struct gf_st_tensor {
    const char *name;
    gf_dtype dtype;
    int32_t ndim;
    int64_t shape[GF_ST_MAX_DIMS];
    const void *data; /* into the mapping; may be unaligned for the dtype */
    size_t nbytes;
    uint64_t offset; /* absolute byte offset of data in the file */
} gf_st_tensor;

typedef struct gf_safetensors gf_safetensors;

const char *gf_dtype_name(gf_dtype dt); /* "F32", ... */
size_t gf_dtype_size(gf_dtype dt);      /* bytes per element; 0 if unknown */

gf_status gf_safetensors_open(const char *path, gf_safetensors **st_out);
void gf_safetensors_close(gf_safetensors *st); /* NULL-safe */
const char *gf_safetensors_path(const gf_safetensors *st);
size_t gf_safetensors_count(const gf_safetensors *st);
const gf_st_tensor *gf_safetensors_at(const gf_safetensors *st, size_t i);
/* NULL if absent */
const gf_st_tensor *gf_safetensors_find(const gf_safetensors *st, const char *name);
/* __metadata__ value (string) for key, NULL if absent */
const char *gf_safetensors_meta(const gf_safetensors *st, const char *key);
size_t gf_safetensors_meta_count(const gf_safetensors *st);
void gf_safetensors_meta_at(const gf_safetensors *st, size_t i, const char **key, const char **value);

/* Copy a tensor to F32 (F32, F16, BF16, F64 accepted) into dst (numel floats). */
gf_status gf_st_tensor_to_f32(const gf_safetensors *st, const gf_st_tensor *t, float *dst);
int64_t gf_st_tensor_numel(const gf_st_tensor *t);
/* Drop the pages wholly inside t's data from the process (madvise DONTNEED on
 * the private mapping: read again, they come back from the file, any write
 * to them undone). For a
 * tensor converted into memory of its own, whose source is not read again. */
void gf_st_tensor_drop_pages(const gf_st_tensor *t);

/* Writer: tensors in the order given, metadata as string pairs. Written to a
 * temporary file and renamed into place (atomic). */
typedef struct gf_st_write_tensor {
    const char *name;
    gf_dtype dtype;
    int32_t ndim;
    int64_t shape[GF_ST_MAX_DIMS];
    const void *data; /* numel x dtype size bytes, little-endian */
} gf_st_write_tensor;

gf_status gf_safetensors_write(const char *path, const gf_st_write_tensor *tensors, size_t n,
                               const char *const *meta_keys, const char *const *meta_values, size_t n_meta);

/* A model's tensors, from DIR/model.safetensors or from the shards that
 * DIR/model.safetensors.index.json maps (engine/safetensors_index.c). Each
 * tensor comes with the shard it lives in (for gf_st_tensor_to_f32 and for
 * messages). gf_st_set_path is the single file or the index. */
typedef struct gf_st_set gf_st_set;
gf_status gf_st_set_open(const char *dir, gf_st_set **set_out);
void gf_st_set_close(gf_st_set *set); /* NULL-safe */
const char *gf_st_set_path(const gf_st_set *set);
size_t gf_st_set_count(const gf_st_set *set); /* over all shards */
size_t gf_st_set_shard_count(const gf_st_set *set);
const gf_st_tensor *gf_st_set_at(const gf_st_set *set, size_t i, const gf_safetensors **shard_out);
const gf_st_tensor *gf_st_set_find(const gf_st_set *set, const char *name,
                                   const gf_safetensors **shard_out); /* NULL if absent */

#ifdef __cplusplus
}
#endif
#endif
