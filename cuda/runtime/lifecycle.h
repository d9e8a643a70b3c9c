// lifecycle.h - giving the GPU layer's resources back (lifecycle.cu): the
// release at provider unload and at exit, and the idle release thread
// (cuda/ internal).  The parts it calls declare their own hooks:
// staging/slot_pool.h (staging_trim, staging_release) and
// keystream/ks_windows.h (keystream_trim, keystream_release,
// keystream_in_use).
#ifndef GPUAES_LIFECYCLE_H
#define GPUAES_LIFECYCLE_H

namespace gpuaes {

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
// In a forked child (device.cu's fork handler): the thread's lock re-made;
// the parent's thread is not there, and the child never starts one.
void idle_release_atfork_child();

} // namespace gpuaes

#endif
