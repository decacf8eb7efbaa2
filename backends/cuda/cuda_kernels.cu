// The CUDA backend's kernels: each wraps one body of cuda_body.h (shared with
// the host twin the unit test runs) in a __global__ function; this file only
// chooses the launch shape. Called from C through cuda_kernels.h.
#include <cuda_runtime.h>

#include "cuda_body.h"
#include "cuda_kernels.h"

namespace {

constexpr int kElementThreads = 256;
constexpr int kNormThreads = 256;
constexpr int kAttnThreads = 128;
constexpr int kSampleThreads = 1024;

#define GFC_ELEMENT_KERNEL(name, Args, body)                                   \
    __global__ void __launch_bounds__(kElementThreads) name(size_t n, Args a) \
    {                                                                          \
        size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;              \
        if (i < n)                                                             \
            body(i, &a);                                                       \
    }

GFC_ELEMENT_KERNEL(k_embed, gfc_embed_args, gfc_embed_body)
GFC_ELEMENT_KERNEL(k_bias_act, gfc_bias_act_args, gfc_bias_act_body)
GFC_ELEMENT_KERNEL(k_residual, gfc_residual_args, gfc_residual_body)
GFC_ELEMENT_KERNEL(k_swiglu, gfc_swiglu_args, gfc_swiglu_body)
GFC_ELEMENT_KERNEL(k_rope, gfc_rope_args, gfc_rope_body)
GFC_ELEMENT_KERNEL(k_kv_write, gfc_kv_args, gfc_kv_write_body)
GFC_ELEMENT_KERNEL(k_to_half, gfc_half_args, gfc_to_half_body)

__global__ void __launch_bounds__(kNormThreads) k_norm(gfc_norm_args a)
{
    __shared__ float red[GFC_NORM_SMEM];
    gfc_norm_body((int32_t)blockIdx.x, (int)threadIdx.x, (int)blockDim.x, &a, red);
}

__global__ void __launch_bounds__(kAttnThreads) k_attention(gfc_attn_args a)
{
    extern __shared__ float smem[];
    gfc_attention_body((int32_t)blockIdx.x, (int)threadIdx.x, (int)blockDim.x, &a, smem);
}

// 1024 threads: the bounds keep the double-heavy body within 64 registers
__global__ void __launch_bounds__(kSampleThreads) k_sample(gfc_sample_args a)
{
    __shared__ gfc_sample_shared sh;
    gfc_sample_body((int32_t)blockIdx.x, (int)threadIdx.x, (int)blockDim.x, &a, &sh);
}

template <typename Args>
cudaError_t element(void (*kernel)(size_t, Args), cudaStream_t s, size_t n, const void *args)
{
    if (n == 0)
        return cudaSuccess;
    size_t blocks = (n + kElementThreads - 1) / kElementThreads;
    if (blocks > 0x7fffffffu)
        return cudaErrorInvalidConfiguration;
    kernel<<<(unsigned)blocks, kElementThreads, 0, s>>>(n, *static_cast<const Args *>(args));
    return cudaGetLastError();
}

} // namespace

extern "C" cudaError_t gfc_cuda_attention_setup(size_t smem_bytes)
{
    return cudaFuncSetAttribute(k_attention, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem_bytes);
}

extern "C" cudaError_t gfc_cuda_check_image(void)
{
    cudaFuncAttributes attr;
    return cudaFuncGetAttributes(&attr, k_norm);
}

extern "C" cudaError_t gfc_cuda_launch(cudaStream_t s, gfc_kind kind, size_t n, const void *args)
{
    if (n > 0x7fffffffu && (kind == GFC_K_NORM || kind == GFC_K_ATTENTION || kind == GFC_K_SAMPLE))
        return cudaErrorInvalidConfiguration;
    switch (kind) {
    case GFC_K_EMBED: return element(k_embed, s, n, args);
    case GFC_K_BIAS_ACT: return element(k_bias_act, s, n, args);
    case GFC_K_RESIDUAL: return element(k_residual, s, n, args);
    case GFC_K_SWIGLU: return element(k_swiglu, s, n, args);
    case GFC_K_ROPE: return element(k_rope, s, n, args);
    case GFC_K_KV_WRITE: return element(k_kv_write, s, n, args);
    case GFC_K_TO_HALF: return element(k_to_half, s, n, args);
    case GFC_K_NORM:
        if (n)
            k_norm<<<(unsigned)n, kNormThreads, 0, s>>>(*static_cast<const gfc_norm_args *>(args));
        return cudaGetLastError();
    case GFC_K_ATTENTION: {
        const gfc_attn_args *a = static_cast<const gfc_attn_args *>(args);
        size_t smem = GFC_ATTN_SMEM(a->dh, a->start + a->T) * sizeof(float);
        if (n)
            k_attention<<<(unsigned)n, kAttnThreads, smem, s>>>(*a);
        return cudaGetLastError();
    }
    case GFC_K_SAMPLE:
        if (n)
            k_sample<<<(unsigned)n, kSampleThreads, 0, s>>>(*static_cast<const gfc_sample_args *>(args));
        return cudaGetLastError();
    case GFC_K_COUNT: break;
    }
    return cudaErrorInvalidValue;
}
