// slot_pool.h - the staging slots: one job's pinned and device buffers and
// CUDA streams, made on demand, taken and given back per job, freed when
// idle or at release (cuda/ internal).
//
// Up to kMaxSlots slots, created on demand and reused (buffers are never
// allocated per call); a slot idle for idle_release_ns() is freed by the idle
// release thread (lifecycle.cu: staging_trim).  A caller that finds none
// free, or whose new slot gpu_memory_max would not hold (memory_cap.h: also
// while an allocation that found memory full is backed off from), gets
// GPUAES_BUSY at once.  DMA only ever touches the slot's own pinned and
// device buffers.  Every buffer is wiped before it is freed.
#ifndef GPUAES_SLOT_POOL_H
#define GPUAES_SLOT_POOL_H

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/ghash.cuh"
#include "kernels/ghash_launch.h"
#include "gpuaes_gpu.h"
#include "runtime/pinned_pair.h"
#include "staging/staging_config.h"

namespace gpuaes {

constexpr int kMaxSlots = 8;
// Device GHASH scratch per lane: the partials (the chunk's result goes to
// the lane's pinned memory, at +chunk).
constexpr size_t kGhashBytes = kGhashScratch + 64;

// Pinned bytes per lane: the chunk, its GHASH (GCM) at +chunk, with
// zero-copy a second chunk at +chunk+64 for the kernel's output, and last
// the GHASH matrices (GCM) that the lane uploads.
inline size_t lane_frags_offset(const StagingConfig &c)
{
    return c.zero_copy != 0 ? 2 * c.chunk + 64 : c.chunk + 64;
}
inline size_t lane_host_bytes(const StagingConfig &c) { return lane_frags_offset(c) + sizeof(GhashFrags); }

// Device bytes per lane: din | dout | dgh.
inline size_t dmem_bytes() { return 2 * config().chunk + kGhashBytes; }
// Device memory a slot leaves free for the context's own needs (kernel
// launches, the keystream windows): a slot is not made into the last of it.
constexpr size_t kDeviceHeadroom = size_t(64) << 20;

struct Lane {
    cudaStream_t stream = nullptr;
    cudaEvent_t idle_ev = nullptr; // blocking-sync event: the caller sleeps on the lane's chunk
    // host: pinned and mapped (host_dev), lane_host_bytes(): input, then the
    // chunk's output (+ GHASH).  dev: dmem_bytes(), one allocation (one
    // memset wipes it): din | dout | dgh.
    PinnedPair buf;
    void *din = nullptr;           // device input, chunk bytes
    void *dout = nullptr;          // device output (separate: CBC/CFB read in[j-1])
    G128 *dgh = nullptr;           // device GHASH scratch, kGhashBytes
    // GCM: the H whose matrices (GhashFrags) are in dgh, uploaded on `stream`
    // (within a job: the end of the job wipes dgh).
    G128 frags_h{};
    bool frags_ok = false;
    // Written by the job now running, wiped at its end: device bytes
    // [dev_lo, dev_hi) of buf.dev, the pinned matrices, anything pinned at all.
    size_t dev_lo = 0, dev_hi = 0;
    bool frags_host = false;
    bool used = false;
};

enum class SlotState { empty, creating, idle, busy, dead };

struct Slot {
    SlotState state = SlotState::empty;
    int nlanes = 0;
    size_t reserved = 0;    // bytes of the memory cap it holds (mem_reserve), under the pool's lock
    int64_t idle_since = 0; // mono_ns() when it last became idle
    Lane lane[kMaxLanes];
};

// Device bytes [lo, hi) of l.buf.dev written by the job now running.
inline void note_device(Lane &l, size_t lo, size_t hi)
{
    if (l.dev_hi == 0 || lo < l.dev_lo) l.dev_lo = lo;
    if (hi > l.dev_hi) l.dev_hi = hi;
}

// The end of a job whose lanes are idle: what it left in the slot is wiped
// before anybody can reuse it.  Device: one memset per lane it wrote,
// queued on the lane's stream (before the lane's next work; the caller does
// not wait for it).  Pinned: the copy-outs zeroed what they read; here the
// GCM matrices, and, unless `complete` (a chunk copied in was never copied
// out: the job stopped early), all of every lane it used.  False when a wipe
// could not be queued: the slot must then be destroyed (which wipes
// synchronously); *fatal is set when the error was fatal.
bool wipe_lanes(Slot *s, bool complete, bool *fatal);

// A slot for `job`, now the caller's: an idle one, or a new one (made here,
// within the memory cap).  nullptr when none can be had: job->status is
// then GPUAES_BUSY (all taken, or over the cap), or GPUAES_FAILED with
// job->error (the allocation failed).
Slot *take_slot(gpuaes_job *job);

// The job on s is over.  idle: its lanes are idle and wiped (queued), the
// slot is reused.  Otherwise it is wiped and freed (streams in doubt), or,
// after a fatal error, its pinned memory wiped and the rest left allocated.
void give_back_slot(Slot *s, bool idle, bool fatal);

// ---- The slot pool's hooks: the release (lifecycle.cu), the fork handler
// (device.cu) ----

// Frees the slots idle for `idle` ns at `now` (true: something is still
// held that may become idle later).
bool staging_trim(int64_t now, int64_t idle);
// Releases every slot (gpu_resources_release, lifecycle.h, says what
// `final` leaves alone).
void staging_release(bool final);
// Resets the slot pool's lock in a forked child.
void staging_atfork_child();

} // namespace gpuaes

#endif
