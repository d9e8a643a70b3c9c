// ks_state.h - what the keystream windows (ks_windows.cu) and their
// launcher (ks_launcher.cu) share: the window, its states, the locks, the
// queue and the CUDA streams (cuda/ internal).
//
// Lock order: g_submit, then g_lock.
#ifndef GPUAES_KS_STATE_H
#define GPUAES_KS_STATE_H

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <pthread.h>
#include <vector>

#include <cuda_runtime_api.h>

#include "kernels/ks_kernel.h"
#include "runtime/pinned_pair.h"

namespace gpuaes {
namespace ks {
enum WState : int { W_IDLE, W_QUEUED, W_INFLIGHT, W_READY, W_FAILED };
} // namespace ks
} // namespace gpuaes

struct gpuaes_ks_window {
    gpuaes::PinnedPair buf;        // pinned host and device, cap bytes each
    cudaEvent_t ev = nullptr;
    size_t cap = 0;
    std::atomic<int> state{gpuaes::ks::W_IDLE};
    size_t filled = 0;             // bytes of the last fill
    size_t dirty = 0;              // bytes of host that fills wrote since the last wipe
    gpuaes::KsJob job;             // valid while queued
    std::atomic<size_t> counted{0}; // bytes of this fill in g_inflight
    // Set by a host function that the copy stream runs after the fill's D2H:
    // polling it costs an atomic load, where cudaEventQuery takes the
    // driver's context lock (with 16 threads polling, that lock was the
    // bottleneck).  Reset by the next fill, which only ever follows a fill
    // whose host function has run (ready() or quiesce() saw it).
    std::atomic<int> copied{0};
    unsigned polls = 0;            // ready() calls: every 256th also asks the driver (errors)
    char error[GPUAES_ERROR_SIZE] = "";
    bool pooled = false;           // under g_lock
    int64_t pooled_at = 0;         // mono_ns() when pooled (idle release)
    // 1 while the owner is in a call on the window or has it pinned; only
    // the owner writes it (release reads it): see enter().
    std::atomic<int> busy{0};
};

namespace gpuaes {
namespace ks {

// ---- ks_windows.cu ----
extern pthread_mutex_t g_lock;                     // queue, pool, registry, counters
extern std::vector<gpuaes_ks_window *> *g_queue;   // fills not launched yet, under g_lock
// A release is running (or the exit-time one ran): no window may be entered.
extern std::atomic<bool> g_closing;

// ---- ks_launcher.cu ----
extern pthread_mutex_t g_submit;                   // the streams, one launcher at a time
extern cudaStream_t g_kstream, g_cstream;          // kernel (and device wipes), copies
extern cudaEvent_t g_kdone[2];                     // kernel i done (copy stream waits)
extern std::atomic<bool> g_streams;                // the above exist (made under g_submit)
extern std::atomic<unsigned long long> g_launches, g_jobs;

// Takes n bytes of the in-flight budget, or nothing (false: over the cap).
bool reserve_inflight(size_t n);
// The fill of w is over (complete, failed or abandoned): no longer in flight.
void uncount(gpuaes_ks_window *w);
// A CUDA call of the cleanup paths: a sticky error disables the GPU.
bool ok(cudaError_t e, const char *what);
// Flat combining: launches everything queued unless another thread is at it.
void drain();
// The poll of ready() and pin() (w entered): 1 ready, 0 not yet, -1 failed.
int poll(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE]);
// Waits until w has nothing in flight (its event, or the launch that holds it).
void quiesce(gpuaes_ks_window *w);
// Waits until no window of `all` is busy or `bound` passed.
void wait_not_busy(const std::vector<gpuaes_ks_window *> &all, std::chrono::milliseconds bound);

} // namespace ks
} // namespace gpuaes

#endif
