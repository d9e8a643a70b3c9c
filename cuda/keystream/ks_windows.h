// ks_windows.h - the keystream windows' (ks_windows.cu) hooks for the rest
// of the GPU layer: their share of the idle release and of the release
// (lifecycle.cu), the exit-time check (device.cu) and the fork handler
// (device.cu) (cuda/ internal).  The windows' API is gpuaes_gpu.h ("Keystream
// ahead"); what they share with their launcher, ks_state.h.
#ifndef GPUAES_KS_WINDOWS_H
#define GPUAES_KS_WINDOWS_H

#include <cstdint>

namespace gpuaes {

// Frees the pooled windows idle for `idle` ns at `now` (true: something is
// still held that may become idle later).
bool keystream_trim(int64_t now, int64_t idle);
// Releases every window and the keystream layer's CUDA streams
// (gpu_resources_release, lifecycle.h, says what `final` leaves alone).
void keystream_release(bool final);
// A window's owner is still in a call on it or has it pinned (after the
// final release: one it left alone).
bool keystream_in_use();

// Re-creates the keystream layer's locks in a forked child.
void keystream_atfork_child();

} // namespace gpuaes

#endif
