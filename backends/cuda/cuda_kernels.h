/* C entry points of cuda_kernels.cu. */
#ifndef GENFENCE_CUDA_KERNELS_H
#define GENFENCE_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>

#include "cuda_body.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Queue kernel `kind` on stream s over n elements / blocks (cuda_body.h);
 * returns the launch error (cudaGetLastError), not the kernel's. */
cudaError_t gfc_cuda_launch(cudaStream_t s, gfc_kind kind, size_t n, const void *args);

/* Let the attention kernel use smem_bytes of dynamic shared memory. */
cudaError_t gfc_cuda_attention_setup(size_t smem_bytes);

/* cudaSuccess when this build has code (SASS or PTX) the current device runs. */
cudaError_t gfc_cuda_check_image(void);

#ifdef __cplusplus
}
#endif
#endif
