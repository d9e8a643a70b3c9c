// gpu_state.h - process-wide GPU state shared by device.cu and the rest of
// the GPU layer (cuda/ internal).
#ifndef GPUAES_GPU_STATE_H
#define GPUAES_GPU_STATE_H

#include <cstdint>

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

// slot_pool.cu: reset the slot pool's lock in a forked child.
void staging_atfork_child();

// ks_windows.cu: re-create the keystream layer's locks in a forked child.
void keystream_atfork_child();

// ---- Lifecycle of the GPU layer's resources (lifecycle.cu) ----
//
// Releases everything the GPU layer holds: the idle release thread (joined),
// the copy workers (joined), staging slots and keystream windows (wiped,
// host and device, then freed), the keystream layer's CUDA streams.
//  final = false (provider unload, gpuaes_gpu_release()): the caller
//    guarantees that no job runs and no keystream window is in use (every
//    cipher context freed).  Afterwards the layer is usable again: the next
//    job or window makes what it needs.
//  final = true (exit, dlclose: device.cu's atexit handler, after it made
//    gpuaes_gpu_available() answer 0): other threads may still be in a job
//    or hold a keystream window.  A running job keeps its slot (its own
//    end wipes it); a window whose owner is in a call on it or has it
//    pinned is waited for (up to 200 ms) and otherwise left alone, never
//    wiped under a reader.  Every later keystream call fails cleanly; the
//    layer never opens again.
// Idempotent; nothing in a forked child of a CUDA user.
void gpu_resources_release(bool final);

// Slots and pooled windows idle for idle_release_ns() (gpu_settings.h) are
// wiped and freed by the idle release thread (started on demand, joined by
// the release above, never running in a forked child).

// Something became idle (a slot was made, a window pooled): the idle release
// thread runs (started if need be) until nothing idle is left.  Cheap when
// it already runs.
void idle_release_kick();
void idle_release_atfork_child();

// The parts: free what has been idle for `idle` ns at `now` (true: something
// is still held that may become idle later), and release everything.
bool staging_trim(int64_t now, int64_t idle);
void staging_release(bool final);
bool keystream_trim(int64_t now, int64_t idle);
void keystream_release(bool final);
// A window's owner is still in a call on it or has it pinned (after the
// final release: one it left alone).
bool keystream_in_use();

} // namespace gpuaes

#endif
