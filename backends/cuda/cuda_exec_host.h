/* The host twin of the CUDA executor (cuda_exec_host.c); for the unit test. */
#ifndef GENFENCE_CUDA_EXEC_HOST_H
#define GENFENCE_CUDA_EXEC_HOST_H

#include "cuda_forward.h"

typedef struct gfc_host_exec {
    gfc_exec base;         /* first: a gfc_exec * points here */
    int allocs, live;      /* allocations made, still held */
    int fail_alloc_after;  /* refuse allocation number N (>= 0), -1 never */
    int gemms;             /* GEMM calls */
    int runs[GFC_K_COUNT]; /* launches per kernel */
} gfc_host_exec;

void gfc_host_exec_init(gfc_host_exec *h, gfc_mode mode);

#endif
