// aes_kernels.cuh - host-side entry points of the AES kernels (aes_kernels.cu).
#ifndef GPUAES_AES_KERNELS_CUH
#define GPUAES_AES_KERNELS_CUH

#include <cstdint>
#include <cuda_runtime_api.h>

#include "kernels/aes_block.cuh"

namespace gpuaes {

// Per-device launch configuration (block size, persistent grid size) for
// every kernel; call once, with the device current, before launch_kernel().
cudaError_t kernels_init(int sm_count);

// Enqueues one kernel on `stream`: nblocks 16-byte blocks from din to dout
// (distinct device buffers).  mode is a KMode, rounds 10/12/14.  CTR modes
// with din == nullptr write the keystream itself (the input taken as zero).
// Returns the launch's own status (cudaLaunchKernelEx): nothing is read from,
// or left for, the thread's last error.
cudaError_t launch_kernel(int mode, int rounds, const KParams &p, const void *din, void *dout,
                          uint32_t nblocks, cudaStream_t stream);

} // namespace gpuaes

#endif
