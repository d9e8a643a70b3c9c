// gpu_state.h - process-wide GPU state shared by device.cu and staging.cu
// (cuda/ internal).
#ifndef GPUAES_GPU_STATE_H
#define GPUAES_GPU_STATE_H

#include <cuda_runtime_api.h>

namespace gpuaes {

// GPUAES_FAULT: which stage fails on purpose (tests of the CPU fallback).
enum class Fault { none, alloc, copyin, launch, copyout, sync };

// After a successful init: the device gpuaes uses.  Its primary context is
// made current by a CudaGuest (cuda_guest.h), never by cudaSetDevice on a
// caller's thread.  Only valid when available() is 1.
int gpu_device();

// Compute capability of the current device, 10 * major + minor (0 when
// unknown); cached per device.  Inside a CudaGuest (which clears its errors).
int current_device_cc();

// The fault injected for this process (read once at init).
Fault gpu_fault();

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

// staging.cu: reset the slot pool's lock in a forked child.
void staging_atfork_child();

// keystream.cu: wipe and free every keystream window (exit), and re-create
// its locks in a forked child.
void keystream_release();
void keystream_atfork_child();

} // namespace gpuaes

#endif
