// slot_pool.cu - the staging slots: made, taken, given back, trimmed when
// idle, released, reset in a forked child (see slot_pool.h).
#include "staging/slot_pool.h"

#include <cstdio>
#include <pthread.h>

#include <cuda_runtime.h>

#include "kernels/aes_key.h"
#include "runtime/cuda_guest.h"
#include "runtime/fault.h"
#include "runtime/device.h"
#include "runtime/lifecycle.h"
#include "runtime/memory_cap.h"
#include "runtime/pinned_pair.h"
#include "runtime/clock.h"

namespace gpuaes {
namespace {

pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER; // guards Slot::state only
Slot g_slots[kMaxSlots];

// Pinned + device bytes of one slot (what the memory cap counts).
size_t slot_bytes()
{
    return size_t(config().lanes) * (lane_host_bytes(config()) + dmem_bytes());
}

// Returns a slot now owned by the caller (busy, or creating: then *create is
// set and the caller must allocate it), or nullptr when all are taken or a
// new one would pass the memory cap.
Slot *acquire_slot(bool *create)
{
    Slot *got = nullptr;
    *create = false;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots)
        if (s.state == SlotState::idle) { s.state = SlotState::busy; got = &s; break; }
    if (got == nullptr)
        for (Slot &s : g_slots)
            if (s.state == SlotState::empty) {
                if (!mem_reserve(slot_bytes())) break; // counted there
                s.state = SlotState::creating;
                s.reserved = slot_bytes();
                got = &s;
                *create = true;
                break;
            }
    pthread_mutex_unlock(&g_pool_lock);
    return got;
}

void set_state(Slot *s, SlotState st)
{
    pthread_mutex_lock(&g_pool_lock);
    s->state = st;
    pthread_mutex_unlock(&g_pool_lock);
}

// A CUDA call of a slot's release: a fatal error disables the GPU (one
// reason for every call).
bool check_release(cudaError_t e, const char * /* call */)
{
    if (error_is_fatal(e)) mark_gpu_broken("staging: releasing a slot");
    return e == cudaSuccess;
}

// Frees a slot's resources, wiping pinned and device buffers first when
// `wipe`.  Best effort: errors are ignored (a sticky one disables the GPU).
// With `cuda` false (GPU broken) only host memory is wiped and nothing is
// freed.
void destroy_slot(Slot *s, bool wipe, bool cuda)
{
    const StagingConfig &cf = config();
    for (Lane &l : s->lane) {
        if (cuda && l.stream != nullptr) check_release(cudaStreamSynchronize(l.stream), "cudaStreamSynchronize"); // no DMA in flight
        secure_wipe(&l.frags_h, sizeof l.frags_h);
        pinned_pair_release(&l.buf, wipe ? lane_host_bytes(cf) : 0, wipe ? dmem_bytes() : 0, cuda, check_release);
        if (!cuda) continue;
        if (l.idle_ev != nullptr) check_release(cudaEventDestroy(l.idle_ev), "cudaEventDestroy");
        if (l.stream != nullptr) check_release(cudaStreamDestroy(l.stream), "cudaStreamDestroy");
        l = Lane();
    }
    s->nlanes = 0;
    // Given back even when nothing was freed (GPU broken): no slot is made again.
    pthread_mutex_lock(&g_pool_lock);
    mem_release(s->reserved);
    s->reserved = 0;
    pthread_mutex_unlock(&g_pool_lock);
}

bool create_slot(Slot *s, gpuaes_job *job)
{
    if (gpu_fault() == Fault::alloc) {
        fault_note(job->error, sizeof job->error, "alloc", "cudaMalloc");
        destroy_slot(s, false, false); // nothing allocated: gives the reservation back
        return false;
    }
    const StagingConfig &cf = config();
    // Another process may hold the device's memory.  A slot that cannot fit
    // fails here, before its pinned buffers cost milliseconds to make and
    // free (H200, 557 MiB free: each failed attempt cost the caller enough
    // that 1 MiB ECB ran 0.90x the default provider).  An error here is left
    // to the allocations below, which report it.
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess
        && free_b < size_t(cf.lanes) * dmem_bytes() + kDeviceHeadroom) {
        mem_alloc_failed(); // the back-off, as for a failed allocation
        std::snprintf(job->error, sizeof job->error,
                      "alloc: %zu MiB of device memory free, a staging slot needs %zu",
                      free_b >> 20, (size_t(cf.lanes) * dmem_bytes() + kDeviceHeadroom) >> 20);
        destroy_slot(s, false, false); // nothing allocated: gives the reservation back
        return false;
    }
    s->nlanes = cf.lanes;
    AllocError err;
    for (int k = 0; k < cf.lanes; ++k) {
        Lane &l = s->lane[k];
        if (!alloc_call(cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", &err)) { l.stream = nullptr; break; }
        if (!alloc_call(cudaEventCreateWithFlags(&l.idle_ev, cudaEventBlockingSync | cudaEventDisableTiming), "cudaEventCreateWithFlags", &err)) { l.idle_ev = nullptr; break; }
        if (!pinned_pair_alloc(&l.buf, lane_host_bytes(cf), dmem_bytes(), true, &err)) break; // mapped: zero-copy chunks
        l.din = l.buf.dev;
        l.dout = l.buf.dev + cf.chunk;
        l.dgh = reinterpret_cast<G128 *>(l.buf.dev + 2 * cf.chunk); // chunk: a power of two >= 64 KiB, aligned
        if (!alloc_call(cudaMemsetAsync(l.dgh, 0, kGhashBytes, l.stream), "cudaMemsetAsync", &err)) break; // launch_ghash's counter
    }
    if (err.error == cudaSuccess) {
        mem_alloc_ok();
        return true;
    }
    if (alloc_failed(err, "alloc", job->error, sizeof job->error)) { // fatal: the GPU is marked broken
        destroy_slot(s, false, false);
        for (Lane &l : s->lane) l = Lane(); // leaked: the context is unusable anyway
    } else {
        destroy_slot(s, false, true); // nothing secret in them yet
    }
    return false;
}

// Slots idle for at least `idle` at `now` (and, with dead_too, dead ones)
// are wiped and freed; busy ones are left to their jobs.  True while some
// slot is still held that may become idle (the idle release thread goes on).
bool release_slots(int64_t now, int64_t idle, bool dead_too)
{
    if (cuda_forbidden()) return false; // forked child: the slots belong to the parent's CUDA
    Slot *mine[kMaxSlots];
    bool held = false;
    int n = 0;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots) {
        if ((s.state == SlotState::idle && now - s.idle_since >= idle) || (dead_too && s.state == SlotState::dead)) {
            mine[n++] = &s;
            s.state = SlotState::creating; // in transition: not handed out meanwhile
        } else if (s.state == SlotState::idle || s.state == SlotState::busy || s.state == SlotState::creating) {
            held = true; // becomes idle later
        }
    }
    pthread_mutex_unlock(&g_pool_lock);
    if (n == 0) return held;

    CudaGuest guest(true);
    const bool cuda = !gpu_broken() && guest.ok();
    for (int i = 0; i < n; ++i) {
        destroy_slot(mine[i], true, cuda);
        if (!cuda) for (Lane &l : mine[i]->lane) l = Lane(); // wiped, left allocated
        set_state(mine[i], SlotState::empty);
    }
    return held;
}

} // namespace

bool wipe_lanes(Slot *s, bool complete, bool *fatal)
{
    const StagingConfig &cf = config();
    bool good = true;
    for (int k = 0; k < s->nlanes; ++k) {
        Lane &l = s->lane[k];
        if (!complete && l.used) secure_wipe(l.buf.host, lane_host_bytes(cf));
        else if (l.frags_host) secure_wipe(l.buf.host + lane_frags_offset(cf), sizeof(GhashFrags));
        l.frags_host = false;
        l.used = false;
        if (l.dev_hi == 0) continue;
        const cudaError_t e = cudaMemsetAsync(l.buf.dev + l.dev_lo, 0, l.dev_hi - l.dev_lo, l.stream);
        if (e != cudaSuccess) {
            if (error_is_fatal(e)) {
                *fatal = true;
                mark_gpu_broken("staging: wipe: cudaMemsetAsync");
            }
            good = false;
            continue; // left for destroy_slot()
        }
        if (l.dev_hi > 2 * cf.chunk) l.frags_ok = false; // the matrices went with the scratch
        l.dev_lo = l.dev_hi = 0;
    }
    return good;
}

Slot *take_slot(gpuaes_job *job)
{
    bool create = false;
    Slot *slot = acquire_slot(&create);
    if (slot == nullptr) {
        job->status = GPUAES_BUSY;
        return nullptr;
    }
    if (create && !create_slot(slot, job)) {
        set_state(slot, SlotState::empty);
        job->status = GPUAES_FAILED;
        return nullptr;
    }
    if (create) idle_release_kick(); // freed again once idle for long
    return slot;
}

void give_back_slot(Slot *slot, bool idle, bool fatal)
{
    if (idle) {
        slot->idle_since = mono_ns();
        set_state(slot, SlotState::idle);
    } else if (fatal) {
        // The context is unusable (no DMA runs any more): pinned memory is
        // wiped now, the rest stays allocated.
        destroy_slot(slot, true, false);
        set_state(slot, SlotState::dead);
    } else {
        destroy_slot(slot, true, true); // streams in doubt: re-create later
        set_state(slot, SlotState::empty);
    }
}

bool staging_trim(int64_t now, int64_t idle) { return release_slots(now, idle, false); }

// A running job (only at exit) keeps its slot: its own end wipes it.
void staging_release(bool) { (void)release_slots(INT64_MAX, 0, true); }

void staging_atfork_child()
{
    // A parent thread may have held the lock at fork() time.  The slots
    // themselves are never touched again when the parent used CUDA.
    pthread_mutex_init(&g_pool_lock, nullptr);
}

} // namespace gpuaes
