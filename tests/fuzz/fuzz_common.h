/* Shared by the fuzz targets (tests/fuzz/README.md): the engine's loaders take
 * paths, so each input is written to a file in a per-process scratch
 * directory first. Built two ways: with -fsanitize=fuzzer (libFuzzer's main)
 * and as a plain replay executable (replay_main.c). */
#ifndef GF_FUZZ_COMMON_H
#define GF_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The scratch directory (created on first use, removed at exit). */
const char *gf_fuzz_dir(void);
/* "<dir>/name", in a static buffer per call site's slot (0..3). */
const char *gf_fuzz_path(int slot, const char *name);
/* Write data to path (truncating); aborts on an I/O error (not the input's fault). */
void gf_fuzz_write(const char *path, const void *data, size_t size);
/* A property of a well-formed input did not hold: print and abort (a crash to libFuzzer). */
#define GF_FUZZ_ASSERT(cond, ...)                                                              \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "fuzz property failed at %s:%d: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fputc('\n', stderr);                                                               \
            abort();                                                                           \
        }                                                                                      \
    } while (0)

#endif
