// ghash_launch.h - host entry point of the GHASH kernels (ghash.cu).
#ifndef GPUAES_GHASH_LAUNCH_H
#define GPUAES_GHASH_LAUNCH_H

#include <cuda_runtime_api.h>

#include "ghash.cuh"

namespace gpuaes {

// Bytes of device scratch launch_ghash() needs (one partial per CUDA block).
constexpr size_t kGhashScratch = kGhashMaxFinal * sizeof(G128);

// Enqueues GHASH (from a zero state) of the pl-shaped chunk at `data`
// (device memory, 16-byte aligned) on `stream`; the 16-byte result, as a
// G128, lands in device memory at *out.  p.pw[0 .. pl.levels) must hold
// H^(m*2^L), p.m/pad/nb the plan's values.  Returns the launch status.
cudaError_t launch_ghash(const GParams &p, const GhashPlan &pl, const void *data, G128 *scratch, G128 *out,
                         cudaStream_t stream);

} // namespace gpuaes

#endif
