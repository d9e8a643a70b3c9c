// ks_kernel.cu - the keystream kernel and its launch (see ks_kernel.h).
#include "kernels/ks_kernel.h"

#include <cuda_runtime.h>

#include "kernels/aes_block.cuh"
#include "kernels/aes_tables.cuh"
#include "gpuaes_counter.h"
#include "kernels/pdl.cuh"

namespace gpuaes {
namespace {

template <int NR>
__device__ __forceinline__ void ks_run(const KsJob &J, const SharedTab &T)
{
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < J.nblocks; j += stride) {
        uint32_t s0, s1, s2, s3;
        if (J.ctr32) gpuaes_ctr32_cols(J.ctr_be, j, &s0, &s1, &s2, &s3);
        else         gpuaes_ctr128_cols(J.ctr_be, j, &s0, &s1, &s2, &s3);
        encrypt_cols<NR>(s0, s1, s2, s3, J.rk, T);
        J.dst[j] = make_uint4(bswap32(s0), bswap32(s1), bswap32(s2), bswap32(s3));
    }
}

// blockIdx.y: the job.  The replicated Te0 of aes_tables.cuh (constant
// stride: the compiler folds it).
__global__ void __launch_bounds__(kKsThreads) ks_kernel(const __grid_constant__ KsBatch b)
{
    __shared__ uint32_t smem[kTableWords];
    fill_replicated(smem, c_te0<>.v, 256);
    __syncthreads();
    const SharedTab T{reinterpret_cast<const char *>(smem + (threadIdx.x & (kLanes - 1))), nullptr, kEntryBytes};
    const KsJob &J = b.job[blockIdx.y];
    switch (J.rounds) {
    case 10: ks_run<10>(J, T); break;
    case 12: ks_run<12>(J, T); break;
    default: ks_run<14>(J, T); break;
    }
}

} // namespace

cudaError_t ks_occupancy(int *per_sm)
{
    return cudaOccupancyMaxActiveBlocksPerMultiprocessor(per_sm, ks_kernel, kKsThreads, 0);
}

cudaError_t ks_launch(const KsBatch &b, int njobs, uint32_t gx, cudaStream_t stream)
{
    return launch_pdl(ks_kernel, dim3(gx, (unsigned)njobs), dim3(kKsThreads), 0, stream, false, b);
}

} // namespace gpuaes
