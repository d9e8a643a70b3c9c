// ks_kernel.h - the keystream kernel (ks_kernel.cu): one launch makes the
// CTR keystream of up to kMaxJobs fills, each job its own key, counter and
// destination; the jobs travel in the kernel's parameters (cuda/ internal).
#ifndef GPUAES_KS_KERNEL_H
#define GPUAES_KS_KERNEL_H

#include <cstdint>

#include <cuda_runtime_api.h>

namespace gpuaes {

constexpr int kMaxJobs = 32;     // jobs per launch (the batch is a kernel parameter, < 32 KiB)
constexpr int kKsThreads = 256;  // threads per block

struct KsJob {
    uint32_t rk[60];
    uint32_t ctr_be[4];
    uint4 *dst;
    uint32_t nblocks;
    int rounds;
    int ctr32;
};

struct KsBatch {
    KsJob job[kMaxJobs];
};
static_assert(sizeof(KsBatch) < 32000, "kernel parameter limit");

// Resident blocks of the kernel per multiprocessor (current device).
cudaError_t ks_occupancy(int *per_sm);

// Enqueues the kernel for b.job[0 .. njobs) on `stream`: grid (gx, njobs),
// kKsThreads threads per block.  Returns the launch's status.
cudaError_t ks_launch(const KsBatch &b, int njobs, uint32_t gx, cudaStream_t stream);

} // namespace gpuaes

#endif
