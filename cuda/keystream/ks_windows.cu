// ks_windows.cu - keystream ahead: asynchronous CTR keystream windows
// (include/gpuaes_gpu.h, "Keystream ahead"): the C API, the pool of windows,
// their release and the fork handler.
//
// A window owns a pinned host buffer and a device buffer of the same size
// (runtime/pinned_pair.h) and an event.  gpuaes_ks_fill() queues a job for it; the launcher
// (ks_launcher.cu) launches queued jobs together.
//
// Pool: a freed window is wiped (host now, device by a memset queued on the
// kernel stream, before any later fill) and kept for the next context;
// pooled windows idle for longer than the idle bound are freed by the idle
// release thread (lifecycle.cu).  The pinned memory of all windows counts
// against gpuaes_ks_set_limit(); pinned and device memory together against
// gpu_memory_max (memory_cap.h), with the staging slots.
//
// Release and readers: every call on a window by its owner "enters" it (a
// seq_cst store of busy = 1, then a look at g_closing), and gpuaes_ks_pin()
// keeps it entered until gpuaes_ks_unpin().  A release sets g_closing first,
// then waits (bounded) until the window is not busy before it wipes and
// frees it, and leaves a window that stays busy alone: an owner never reads
// keystream that is being wiped, or a freed buffer.  After the exit-time
// release every call fails (-1, BUSY, or nothing); after an unload release
// (no window in use) the layer opens again.
//
// Fork: in a child of a process that used CUDA nothing here makes a CUDA
// call or touches a pinned buffer (ready() answers -1, free() only forgets).
#include "keystream/ks_windows.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <new>
#include <pthread.h>
#include <vector>

#include <cuda_runtime.h>

#include "kernels/aes_key.h"
#include "runtime/cuda_guest.h"
#include "runtime/fault.h"
#include "runtime/device.h"
#include "runtime/lifecycle.h"
#include "gpuaes_counter.h"
#include "gpuaes_gpu.h"
#include "keystream/ks_state.h"
#include "runtime/layer_gate.h"
#include "runtime/memory_cap.h"
#include "runtime/pinned_pair.h"
#include "runtime/clock.h"

namespace gpuaes {
namespace ks {

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
// Each list holds a window at most once, and each has room for every window
// made (reserve_window_slot): their push_backs never allocate, so they never
// throw across the C interface.
std::vector<gpuaes_ks_window *> *g_queue;
std::atomic<bool> g_closing{false};

namespace {

std::vector<gpuaes_ks_window *> *g_pool;              // idle windows, under g_lock
std::vector<gpuaes_ks_window *> *g_all;               // every window that exists, under g_lock
size_t g_limit = size_t(256) << 20;
size_t g_pinned = 0;                                  // bytes of all windows that exist
bool g_final = false;                                 // the exit-time release ran (under g_lock)

bool usable() { return !cuda_forbidden() && !g_closing.load() && gpuaes_gpu_available(); }

// The owner's use of w (a call, or a pin): busy = 1, then the flag, both
// seq_cst, against release's store of the flag and then its load of busy:
// either release sees the window busy, or the owner sees the layer closing
// and backs off without touching a buffer.  One locked store per call.
bool enter(gpuaes_ks_window *w)
{
    w->busy.store(1, std::memory_order_seq_cst);
    if (!g_closing.load(std::memory_order_seq_cst)) return true;
    w->busy.store(0, std::memory_order_release);
    return false;
}

void leave(gpuaes_ks_window *w) { w->busy.store(0, std::memory_order_release); }

// Under g_lock: room in every list for one window more than exist (the only
// allocations of the lists; false when there is no memory).
bool reserve_window_slot()
{
    try {
        if (g_pool == nullptr) g_pool = new std::vector<gpuaes_ks_window *>();
        if (g_queue == nullptr) g_queue = new std::vector<gpuaes_ks_window *>();
        if (g_all == nullptr) g_all = new std::vector<gpuaes_ks_window *>();
        const size_t n = g_all->size() + 1;
        for (std::vector<gpuaes_ks_window *> *v : {g_all, g_pool, g_queue})
            if (v->capacity() < n) v->reserve(2 * n);
        return true;
    } catch (...) {
        return false; // what was made is kept for the next try
    }
}

// Wipes w's buffers and frees them (w is nobody's now, or the process is
// ending).  The device wipe is synchronous: this is not a hot path.  With
// `cuda` false (GPU broken) only the host side is wiped, nothing is freed.
void destroy_buffers(gpuaes_ks_window *w, bool cuda)
{
    pinned_pair_release(&w->buf, w->dirty, w->dirty, cuda, ok);
    if (cuda) {
        if (w->ev != nullptr) (void)ok(cudaEventDestroy(w->ev), "cudaEventDestroy");
        w->ev = nullptr;
    }
    w->dirty = 0;
}

// Removes w from g_all (g_lock held).
void forget_locked(gpuaes_ks_window *w)
{
    if (g_all != nullptr) g_all->erase(std::remove(g_all->begin(), g_all->end(), w), g_all->end());
    g_pinned -= w->cap;
    mem_release(2 * w->cap);
}

} // namespace
} // namespace ks
} // namespace gpuaes

using namespace gpuaes;
using namespace gpuaes::ks;

extern "C" void gpuaes_ks_set_limit(size_t total_bytes)
{
    pthread_mutex_lock(&g_lock);
    g_limit = total_bytes;
    pthread_mutex_unlock(&g_lock);
}

extern "C" gpuaes_ks_window *gpuaes_ks_window_new(size_t cap)
{
    if (cap == 0 || cap % 16 != 0 || !usable()) return nullptr;
    // Its CUDA calls belong to no window yet: exit waits for them through
    // the layer's gate (a thread making a window while the process exited
    // freed it after the runtime's teardown: SIGSEGV in test_ks_exit).
    LayerUse inside;
    if (!inside.ok()) return nullptr;
    pthread_mutex_lock(&g_lock);
    if (g_closing.load()) {
        pthread_mutex_unlock(&g_lock);
        return nullptr;
    }
    for (size_t i = 0; g_pool != nullptr && i < g_pool->size(); ++i) {
        gpuaes_ks_window *w = (*g_pool)[i];
        if (w->cap == cap) {
            g_pool->erase(g_pool->begin() + (long)i);
            w->pooled = false;
            pthread_mutex_unlock(&g_lock);
            return w;
        }
    }
    if (g_pinned + cap > g_limit || !mem_reserve(2 * cap)) { // pinned + device
        pthread_mutex_unlock(&g_lock);
        return nullptr;
    }
    if (!reserve_window_slot()) {
        mem_release(2 * cap);
        pthread_mutex_unlock(&g_lock);
        return nullptr;
    }
    g_pinned += cap; // reserved now, returned below on failure
    pthread_mutex_unlock(&g_lock);

    CudaGuest guest;
    gpuaes_ks_window *w = new (std::nothrow) gpuaes_ks_window();
    bool good = w != nullptr && gpu_fault() != Fault::alloc && guest.ok();
    if (good) {
        w->cap = cap;
        AllocError err;
        good = pinned_pair_alloc(&w->buf, cap, cap, false, &err);
        if (!good) {
            char why[GPUAES_ERROR_SIZE]; // no caller to tell: only a fatal error's reason keeps it
            (void)alloc_failed(err, "keystream", why, sizeof why);
        }
        // Not a memory allocation: a failure here starts no back-off.
        if (good) good = ok(cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        if (!good) w->ev = nullptr;
        if (good) mem_alloc_ok();
    }
    pthread_mutex_lock(&g_lock);
    good = good && !g_closing.load();
    if (good) {
        g_all->push_back(w); // within the capacity reserved above
    } else {
        g_pinned -= cap;
        mem_release(2 * cap);
    }
    pthread_mutex_unlock(&g_lock);
    if (!good) {
        if (w != nullptr) {
            destroy_buffers(w, guest.ok()); // nothing written yet
            delete w;
        }
        return nullptr;
    }
    return w;
}

extern "C" gpuaes_status gpuaes_ks_fill(gpuaes_ks_window *w, const gpuaes_key *key, const unsigned char ctr[16],
                                        size_t nbytes, int ctr32, char error[GPUAES_ERROR_SIZE])
{
    if (w == nullptr || key == nullptr || nbytes == 0 || nbytes % 16 != 0 || nbytes > w->cap) {
        if (error) std::snprintf(error, GPUAES_ERROR_SIZE, "keystream: invalid fill");
        return GPUAES_FAILED;
    }
    if (!usable()) return GPUAES_BUSY;
    CudaGuest guest; // for the launch below (drain); an error pending on this thread: the CPU
    if (!guest.ok() || !enter(w)) return GPUAES_BUSY;
    const int s = w->state.load(std::memory_order_acquire);
    if (s == W_QUEUED || s == W_INFLIGHT) {
        leave(w);
        if (error) std::snprintf(error, GPUAES_ERROR_SIZE, "keystream: window busy");
        return GPUAES_FAILED;
    }
    if (!reserve_inflight(nbytes)) { // the GPU is as far ahead as is useful: CPU for now
        leave(w);
        return GPUAES_BUSY;
    }
    w->counted.store(nbytes);
    KsJob &j = w->job;
    std::memcpy(j.rk, key->rk_enc, sizeof j.rk);
    gpuaes_ctr_columns(ctr, j.ctr_be);
    j.dst = reinterpret_cast<uint4 *>(w->buf.dev);
    j.nblocks = (uint32_t)(nbytes / 16);
    j.rounds = key->rounds;
    j.ctr32 = ctr32 ? 1 : 0;
    w->filled = nbytes;
    if (nbytes > w->dirty) w->dirty = nbytes; // host and device: wiped up to here when freed
    w->error[0] = '\0';
    w->copied.store(0, std::memory_order_relaxed);
    w->state.store(W_QUEUED, std::memory_order_release);
    pthread_mutex_lock(&g_lock);
    g_queue->push_back(w); // never allocates: room for every window (reserve_window_slot)
    pthread_mutex_unlock(&g_lock);
    drain();
    leave(w);
    return GPUAES_OK;
}

extern "C" int gpuaes_ks_ready(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE])
{
    if (w == nullptr || cuda_forbidden() || !enter(w)) return -1;
    const int r = poll(w, error);
    leave(w);
    return r;
}

extern "C" int gpuaes_ks_pin(gpuaes_ks_window *w, const unsigned char **data, char error[GPUAES_ERROR_SIZE])
{
    *data = nullptr;
    if (w == nullptr || cuda_forbidden() || !enter(w)) return -1;
    const int r = poll(w, error);
    if (r == 1) *data = w->buf.host; // entered until gpuaes_ks_unpin()
    else leave(w);
    return r;
}

extern "C" void gpuaes_ks_unpin(gpuaes_ks_window *w)
{
    if (w != nullptr) leave(w);
}

extern "C" void gpuaes_ks_window_free(gpuaes_ks_window *w)
{
    if (w == nullptr) return;
    if (cuda_forbidden()) return; // the parent's; never touched in a child
    if (!enter(w)) return;        // a release wipes and frees it
    quiesce(w);
    // Only what fills wrote: a context that got a window but no fill (the
    // in-flight budget was spent) must not pay for wiping all of it.
    secure_wipe(w->buf.host, w->dirty);
    // The device copy: a memset on the kernel stream, ahead of every later
    // fill's kernel (the last D2H that read it is over: quiesce).  No
    // stream: no kernel ever ran, nothing to wipe.
    bool clean = w->dirty == 0 || !g_streams.load();
    if (!clean) {
        CudaGuest guest(true);
        clean = guest.ok() && ok(cudaMemsetAsync(w->buf.dev, 0, w->dirty, g_kstream), "cudaMemsetAsync");
    }
    if (clean) w->dirty = 0;
    w->state.store(W_IDLE, std::memory_order_release);
    w->filled = 0;
    leave(w); // before it is pooled: the next owner enters it
    pthread_mutex_lock(&g_lock);
    const bool closing = g_closing.load();
    if (clean && !closing) {
        g_pool->push_back(w); // never allocates: room for every window (reserve_window_slot)
        w->pooled = true;
        w->pooled_at = mono_ns();
    }
    if (!clean && !closing) forget_locked(w);
    pthread_mutex_unlock(&g_lock);
    if (clean) {
        if (!closing) idle_release_kick(); // pooled: freed once idle for long
    } else if (!closing) {
        CudaGuest guest(true);
        destroy_buffers(w, !gpu_broken() && guest.ok()); // synchronous wipe, then freed
        delete w;
    }
}

extern "C" void gpuaes_ks_stats(unsigned long long *launches, unsigned long long *jobs)
{
    if (launches) *launches = g_launches.load();
    if (jobs) *jobs = g_jobs.load();
}

extern "C" void gpuaes_ks_windows(size_t *windows, size_t *pooled)
{
    pthread_mutex_lock(&g_lock);
    if (windows) *windows = g_all != nullptr ? g_all->size() : 0;
    if (pooled) *pooled = g_pool != nullptr ? g_pool->size() : 0;
    pthread_mutex_unlock(&g_lock);
}

namespace gpuaes {

bool keystream_trim(int64_t now, int64_t idle)
{
    if (cuda_forbidden()) return false;
    bool synced = false, cuda = false;
    CudaGuest guest(true); // the idle release thread's own: makes gpuaes's context current
    for (;;) {
        gpuaes_ks_window *old = nullptr;
        bool more = false;
        pthread_mutex_lock(&g_lock);
        if (g_pool != nullptr && !g_closing.load()) {
            for (size_t i = 0; i < g_pool->size(); ++i)
                if (now - (*g_pool)[i]->pooled_at >= idle) {
                    old = (*g_pool)[i];
                    g_pool->erase(g_pool->begin() + (long)i);
                    forget_locked(old);
                    break;
                }
            more = !g_pool->empty();
        }
        pthread_mutex_unlock(&g_lock);
        if (old == nullptr) return more;
        if (!synced) {
            cuda = !gpu_broken() && guest.ok();
            // The device wipes queued when these were pooled are done.
            if (cuda && g_streams.load()) cuda = ok(cudaStreamSynchronize(g_kstream), "cudaStreamSynchronize");
            synced = true;
        }
        destroy_buffers(old, cuda);
        if (cuda) delete old; // else leaked, wiped: the context is unusable anyway
    }
}

void keystream_release(bool final)
{
    if (cuda_forbidden()) return;
    g_closing.store(true); // seq_cst: see enter()
    pthread_mutex_lock(&g_lock);
    const bool any = g_all != nullptr && !g_all->empty();
    std::vector<gpuaes_ks_window *> all;
    try {
        if (any) all = *g_all;
    } catch (...) {
    }
    pthread_mutex_unlock(&g_lock);
    // An owner in a call or an XOR finishes it (well under a millisecond);
    // one that stays busy (exit() from a signal handler on its thread, say)
    // keeps its window, unwiped and allocated: never wiped under a reader.
    wait_not_busy(all, std::chrono::milliseconds(200));

    pthread_mutex_lock(&g_submit); // no launch in progress, none after (g_closing)
    pthread_mutex_lock(&g_lock);
    CudaGuest guest(true);
    const bool cuda = (any || g_streams.load()) && !gpu_broken() && guest.ok();
    if (cuda && g_streams.load()) {
        (void)ok(cudaStreamSynchronize(g_kstream), "cudaStreamSynchronize");
        (void)ok(cudaStreamSynchronize(g_cstream), "cudaStreamSynchronize");
    }
    if (g_queue != nullptr) { // queued, never launched: failed, their round keys wiped
        for (gpuaes_ks_window *w : *g_queue) {
            secure_wipe(&w->job, sizeof w->job);
            uncount(w);
            w->state.store(W_FAILED, std::memory_order_release);
        }
        g_queue->clear();
    }
    bool busy_left = false;
    if (g_all != nullptr) {
        size_t kept = 0;
        for (size_t i = 0; i < g_all->size(); ++i) {
            gpuaes_ks_window *w = (*g_all)[i];
            // Unload: only pooled windows (none is in use: the contract).
            if (w->busy.load() || (!final && !w->pooled)) {
                busy_left |= w->busy.load() != 0;
                (*g_all)[kept++] = w;
                continue;
            }
            uncount(w);
            destroy_buffers(w, cuda);
            g_pinned -= w->cap;
            mem_release(2 * w->cap);
            if (w->pooled) {
                delete w;
            } else { // its owner's later calls fail: the layer stays closed
                std::snprintf(w->error, sizeof w->error, "keystream: released at exit");
                w->state.store(W_FAILED, std::memory_order_release);
            }
        }
        g_all->resize(kept);
        g_pool->clear();
    }
    if (cuda && g_streams.load() && !busy_left && (g_all == nullptr || g_all->empty())) {
        (void)ok(cudaStreamDestroy(g_kstream), "cudaStreamDestroy");
        (void)ok(cudaStreamDestroy(g_cstream), "cudaStreamDestroy");
        (void)ok(cudaEventDestroy(g_kdone[0]), "cudaEventDestroy");
        (void)ok(cudaEventDestroy(g_kdone[1]), "cudaEventDestroy");
        g_streams.store(false);
    }
    if (final) g_final = true;
    else if (!g_final) g_closing.store(false); // unload: usable again
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_submit);
}

void keystream_atfork_child()
{
    pthread_mutex_init(&g_lock, nullptr);
    pthread_mutex_init(&g_submit, nullptr);
}
} // namespace gpuaes

bool gpuaes::keystream_in_use()
{
    if (cuda_forbidden()) return false;
    pthread_mutex_lock(&g_lock);
    bool busy = false;
    if (g_all != nullptr)
        for (const gpuaes_ks_window *w : *g_all) busy |= w->busy.load() != 0;
    pthread_mutex_unlock(&g_lock);
    return busy;
}
