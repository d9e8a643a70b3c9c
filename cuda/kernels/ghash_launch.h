// ghash_launch.h - host entry point of the GHASH kernels (ghash.cu).
#ifndef GPUAES_GHASH_LAUNCH_H
#define GPUAES_GHASH_LAUNCH_H

#include <cuda_runtime_api.h>

#include "kernels/ghash.cuh"
#include "kernels/ghash_mma.cuh"

namespace gpuaes {

// Bytes of device scratch launch_ghash() needs (ghash.cuh: partials,
// matrices, a counter, powers).  Zero it once before its first launch: each
// launch leaves its counter at zero again.
constexpr size_t kGhashScratch = kGhashMaxFinal * sizeof(G128);

// Enqueues the copy of the tensor cores' matrices for H (ghash_frags) into
// `scratch` on `stream`.  f is host memory, pinned for the copy to be
// asynchronous, and must stay unchanged until the copy is done.  The kernel
// reads the matrices before it waits for the kernel before it on the stream:
// upload them before that kernel (or synchronously).
cudaError_t upload_ghash_frags(const GhashFrags *f, G128 *scratch, cudaStream_t stream);

// Enqueues GHASH (from a zero state) of the pl-shaped chunk at `data`
// (device memory, 16-byte aligned) on `stream`; the 16-byte result, as a
// G128, lands in device memory at *out.  p.pw[0 .. pl.levels) must hold
// H^(m*2^L), p.m/pad/nb the plan's values, and the scratch the matrices for
// the same H (upload_ghash_frags).  One kernel launch.  Returns its status;
// cudaErrorNotSupported below compute capability 8.0.
cudaError_t launch_ghash(const GParams &p, const GhashPlan &pl, const void *data, G128 *scratch, G128 *out,
                         cudaStream_t stream);

} // namespace gpuaes

#endif
