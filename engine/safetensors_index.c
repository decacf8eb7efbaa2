/* A model's weights as one set of tensors: DIR/model.safetensors, or the
 * shards a Hugging Face model.safetensors.index.json names:
 *
 *   {"metadata": {"total_size": N},                       (optional, not checked)
 *    "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors", ...}}
 *
 * Every shard is opened (and validated) by gf_safetensors_open. The index and
 * the shards must agree exactly: each mapped tensor is in the shard it names,
 * and each tensor of a shard is mapped to that shard; anything else is a
 * GF_E_FORMAT naming the index, the tensor and the shard. */
#define _XOPEN_SOURCE 700
#include "genfence/safetensors.h"
#include "genfence/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct gf_st_set {
    char *path;              /* model.safetensors or model.safetensors.index.json */
    gf_safetensors **shards; /* (n_shards) */
    size_t n_shards;
    size_t n_tensors; /* over all shards */
};

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

void gf_st_set_close(gf_st_set *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n_shards; i++)
        gf_safetensors_close(set->shards[i]);
    free(set->shards);
    free(set->path);
    free(set);
}

const char *gf_st_set_path(const gf_st_set *set) { return set ? set->path : NULL; }
size_t gf_st_set_count(const gf_st_set *set) { return set ? set->n_tensors : 0; }
size_t gf_st_set_shard_count(const gf_st_set *set) { return set ? set->n_shards : 0; }

const gf_st_tensor *gf_st_set_at(const gf_st_set *set, size_t i, const gf_safetensors **shard_out)
{
    for (size_t s = 0; set && s < set->n_shards; s++) {
        size_t n = gf_safetensors_count(set->shards[s]);
        if (i < n) {
            if (shard_out)
                *shard_out = set->shards[s];
            return gf_safetensors_at(set->shards[s], i);
        }
        i -= n;
    }
    return NULL;
}

const gf_st_tensor *gf_st_set_find(const gf_st_set *set, const char *name, const gf_safetensors **shard_out)
{
    /* the index guarantees a name is in at most one shard */
    for (size_t s = 0; set && s < set->n_shards; s++) {
        const gf_st_tensor *t = gf_safetensors_find(set->shards[s], name);
        if (t) {
            if (shard_out)
                *shard_out = set->shards[s];
            return t;
        }
    }
    return NULL;
}

/* A shard name is a plain file name in the model directory. */
static int plain_name(const char *f) { return f[0] && f[0] != '.' && !strchr(f, '/') && !strchr(f, '\\'); }

static gf_status open_index(const char *dir, gf_st_set *set)
{
    json_error_t err;
    json_t *root = json_load_file(set->path, JSON_REJECT_DUPLICATES, &err);
    gf_status s = GF_OK;
    const char **names = NULL; /* (n_shards) file names, borrowed from root */
    char *shard_path = NULL;
    if (!root)
        return gf_error_set(exists(set->path) ? GF_E_FORMAT : GF_E_IO, "%s: %s at line %d, column %d", set->path,
                            exists(set->path) ? "invalid JSON" : "cannot read", err.line, err.column);
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(root) || !json_is_object(map) || json_object_size(map) == 0) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: expected an object with a non-empty 'weight_map' object "
                         "(tensor name -> shard file)",
                         set->path);
        goto out;
    }
    size_t cap = json_object_size(map);
    names = calloc(cap, sizeof *names);
    set->shards = calloc(cap, sizeof *set->shards);
    if (!names || !set->shards) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", set->path);
        goto out;
    }
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v)
    {
        if (!json_is_string(v) || !plain_name(json_string_value(v))) {
            s = gf_error_set(GF_E_FORMAT,
                             "%s: weight_map entry '%.200s' must name a shard file in the model "
                             "directory (a plain file name), got %s%.200s%s",
                             set->path, key, json_is_string(v) ? "'" : "a non-string",
                             json_is_string(v) ? json_string_value(v) : "", json_is_string(v) ? "'" : "");
            goto out;
        }
        const char *f = json_string_value(v);
        size_t k = 0;
        while (k < set->n_shards && strcmp(names[k], f) != 0)
            k++;
        if (k == set->n_shards) {
            free(shard_path);
            if (!(shard_path = gf_path_join(dir, f))) {
                s = gf_error_set(GF_E_NOMEM, "%s: out of memory", set->path);
                goto out;
            }
            if ((s = gf_safetensors_open(shard_path, &set->shards[k])) != GF_OK) {
                s = gf_error_prefix(s, "%s names shard '%s' (for tensor '%.200s')", set->path, f, key);
                goto out;
            }
            names[k] = f;
            set->n_shards++;
        }
        if (!gf_safetensors_find(set->shards[k], key)) {
            s = gf_error_set(GF_E_FORMAT,
                             "%s: tensor '%.200s' is mapped to shard '%s', which does "
                             "not contain it",
                             set->path, key, f);
            goto out;
        }
    }
    for (size_t k = 0; k < set->n_shards; k++)
        for (size_t i = 0; i < gf_safetensors_count(set->shards[k]); i++) {
            const char *tn = gf_safetensors_at(set->shards[k], i)->name;
            json_t *m = json_object_get(map, tn);
            if (!m || strcmp(json_string_value(m), names[k]) != 0) {
                s = gf_error_set(GF_E_FORMAT,
                                 "%s: shard '%s' holds tensor '%.200s', which the "
                                 "weight_map %s%s%s",
                                 set->path, names[k], tn, m ? "maps to shard '" : "does not list",
                                 m ? json_string_value(m) : "", m ? "'" : "");
                goto out;
            }
            set->n_tensors++;
        }
out:
    free(shard_path);
    free(names);
    json_decref(root);
    return s;
}

gf_status gf_st_set_open(const char *dir, gf_st_set **set_out)
{
    if (!dir || !set_out)
        return gf_error_set(GF_E_INVALID_ARG, "gf_st_set_open: NULL argument");
    *set_out = NULL;
    gf_st_set *set = calloc(1, sizeof *set);
    char *single = gf_path_join(dir, "model.safetensors");
    char *index = gf_path_join(dir, "model.safetensors.index.json");
    gf_status s = GF_OK;
    if (!set || !single || !index) {
        s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
        goto fail;
    }
    if (exists(single) && exists(index)) {
        s = gf_error_set(GF_E_FORMAT,
                         "%s: both model.safetensors and model.safetensors.index.json "
                         "are present; which one is meant?",
                         dir);
        goto fail;
    }
    if (exists(index)) {
        set->path = index;
        index = NULL;
        if ((s = open_index(dir, set)) != GF_OK)
            goto fail;
    } else {
        set->path = single;
        single = NULL;
        if (!(set->shards = calloc(1, sizeof *set->shards))) {
            s = gf_error_set(GF_E_NOMEM, "%s: out of memory", dir);
            goto fail;
        }
        if ((s = gf_safetensors_open(set->path, &set->shards[0])) != GF_OK)
            goto fail;
        set->n_shards = 1;
        set->n_tensors = gf_safetensors_count(set->shards[0]);
    }
    free(single);
    free(index);
    *set_out = set;
    return GF_OK;
fail:
    free(single);
    free(index);
    gf_st_set_close(set);
    return s;
}
