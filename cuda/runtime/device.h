// device.h - the device the GPU layer uses and whether CUDA may still be
// called: what device.cu tells the rest of the layer (cuda/ internal).
// Its public side (start-up, availability, description) is gpuaes_gpu.h.
#ifndef GPUAES_DEVICE_H
#define GPUAES_DEVICE_H

#include <cuda_runtime_api.h>

namespace gpuaes {

// After a successful init: the device gpuaes uses.  Its primary context is
// made current by a CudaGuest (cuda_guest.h), never by cudaSetDevice on a
// caller's thread.  Only valid when available() is 1.
int gpu_device();

// Compute capability of the current device, 10 * major + minor (0 when
// unknown); cached per device.  Inside a CudaGuest (which clears its errors).
int current_device_cc();

// True in a child forked after this process touched CUDA, and after the
// exit-time release: no CUDA call may be made any more.
bool cuda_forbidden();

// Errors after which the CUDA context is unusable (sticky), or that we do
// not know to be harmless: the GPU must not be used again in this process.
bool error_is_fatal(cudaError_t e);

// True once mark_gpu_broken() was called: make no further CUDA call.
bool gpu_broken();

// Disables the GPU for the rest of the process; `why` is kept for
// gpuaes_gpu_description().
void mark_gpu_broken(const char *why);

} // namespace gpuaes

#endif
