// ghash.cu - GHASH kernels (the math and the scheme: ghash.cuh).
//
// ghash_partial_kernel: thread t Horner over its m blocks, then the tree
// over the CUDA block's threads in shared memory -> one partial per block.
// ghash_final_kernel: one CUDA block, the tree over the partials -> S.
// Both are enqueued on the caller's stream, so they are ordered after the
// kernel that produced the ciphertext and before the D2H of the result.
#include <cuda_runtime.h>

#include "ghash.cuh"
#include "ghash_launch.h"

namespace gpuaes {
namespace {

__global__ void __launch_bounds__(kGhashThreads)
ghash_partial_kernel(const __grid_constant__ GParams p, const uint32_t *__restrict__ raw, G128 *__restrict__ partials)
{
    __shared__ G128 s[kGhashThreads];
    const uint32_t tid = threadIdx.x;
    const uint64_t t = (uint64_t)blockIdx.x * blockDim.x + tid;
    s[tid] = ghash_thread(p, raw, t);
    __syncthreads();
    // Level L: pairs of neighbours, each half m*2^L blocks long.
    int L = 0;
    for (uint32_t stride = 1; stride < blockDim.x; stride <<= 1, ++L) {
        if ((tid & (2 * stride - 1)) == 0) s[tid] = ghash_combine(s[tid], p.pw[L], s[tid + stride]);
        __syncthreads();
    }
    if (tid == 0) partials[blockIdx.x] = s[0];
}

__global__ void __launch_bounds__(kGhashMaxFinal)
ghash_final_kernel(const __grid_constant__ GParams p, const G128 *__restrict__ partials, int level0,
                   G128 *__restrict__ out)
{
    __shared__ G128 s[kGhashMaxFinal];
    const uint32_t tid = threadIdx.x;
    s[tid] = partials[tid];
    __syncthreads();
    int L = level0;
    for (uint32_t stride = 1; stride < blockDim.x; stride <<= 1, ++L) {
        if ((tid & (2 * stride - 1)) == 0) s[tid] = ghash_combine(s[tid], p.pw[L], s[tid + stride]);
        __syncthreads();
    }
    if (tid == 0) *out = s[0];
}

} // namespace

cudaError_t launch_ghash(const GParams &p, const GhashPlan &pl, const void *data, G128 *scratch, G128 *out,
                         cudaStream_t stream)
{
    if (pl.threads != kGhashThreads || pl.blocks == 0 || pl.blocks > kGhashMaxFinal ||
        (pl.blocks & (pl.blocks - 1)) != 0)
        return cudaErrorInvalidValue;
    (void)cudaGetLastError();
    ghash_partial_kernel<<<pl.blocks, pl.threads, 0, stream>>>(p, static_cast<const uint32_t *>(data), scratch);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    ghash_final_kernel<<<1, pl.blocks, 0, stream>>>(p, scratch, pl.block_levels, out);
    return cudaGetLastError();
}

} // namespace gpuaes
