// ks_launcher.cu - the keystream launcher (include/gpuaes_gpu.h, "Keystream
// ahead"): fills queued by any thread are launched together, and their
// owners wait for them here.
//
// gpuaes_ks_fill() (ks_windows.cu) queues a job (key schedule, first
// counter, length, destination); queued jobs of all windows are launched
// together by whichever thread gets the submit lock (flat combining): it
// takes up to kMaxJobs queued jobs, launches ONE kernel for all of them on
// the kernel stream (the jobs travel in the kernel's parameters: no job
// upload), and on the copy stream, after that kernel, one D2H copy and one
// event per job.  Jobs queued while it was launching are taken in its next
// round, so fills from many contexts coalesce into few launches whatever
// their timing.  The thread that queued a job never waits for the launch of
// somebody else's.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sched.h>

#include <cuda_runtime.h>

#include "kernels/aes_key.h"
#include "runtime/cuda_guest.h"
#include "runtime/fault.h"
#include "runtime/device.h"
#include "gpuaes_gpu.h"
#include "keystream/ks_state.h"
#include "runtime/capped_count.h"
#include "runtime/clock.h"
#include "runtime/poll_wait.h"

namespace gpuaes {
namespace ks {

pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER;
cudaStream_t g_kstream, g_cstream;
cudaEvent_t g_kdone[2];
std::atomic<bool> g_streams{false};
std::atomic<unsigned long long> g_launches{0}, g_jobs{0};

namespace {

// Keystream queued or in flight, all windows together, at most: about 0.6 ms
// of D2H at ~55 GB/s.  A fill beyond it is refused (GPUAES_BUSY: the caller
// works on the CPU), so that when many contexts want more than PCIe
// carries, the wait for a window (and so the keystream a context skips while
// it waits) stays short instead of growing with the number of contexts.
constexpr size_t kInflightCap = GPUAES_KS_INFLIGHT_MAX; // the provider caps keystream_max_window at it

int g_kdone_next = 0;
int g_grid_max = 0;                                   // resident blocks of the kernel, device-wide
CappedCount g_inflight;                               // bytes queued or in flight (kInflightCap)

// Host function after a fill's D2H (runs on a CUDA thread; no CUDA calls).
void CUDART_CB on_copied(void *p)
{
    static_cast<gpuaes_ks_window *>(p)->copied.store(1, std::memory_order_release);
}

void set_err(char *err, const char *what, cudaError_t e)
{
    if (err != nullptr) std::snprintf(err, GPUAES_ERROR_SIZE, "keystream: %s: %s", what, cudaGetErrorString(e));
    if (error_is_fatal(e)) {
        char why[GPUAES_ERROR_SIZE];
        std::snprintf(why, sizeof why, "keystream: %s: %s", what, cudaGetErrorString(e));
        mark_gpu_broken(why);
    }
}

// Under g_submit.
bool ensure_streams(char *err)
{
    if (g_streams.load()) return true;
    cudaError_t e;
    if ((e = cudaStreamCreateWithFlags(&g_kstream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&g_cstream, cudaStreamNonBlocking)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&g_kdone[0], cudaEventDisableTiming)) != cudaSuccess ||
        (e = cudaEventCreateWithFlags(&g_kdone[1], cudaEventDisableTiming)) != cudaSuccess) {
        set_err(err, "stream setup", e);
        return false;
    }
    int per_sm = 0, dev = gpu_device(), sms = 0;
    if ((e = ks_occupancy(&per_sm)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) {
        set_err(err, "occupancy", e);
        return false;
    }
    g_grid_max = per_sm * sms > 0 ? per_sm * sms : 132;
    g_streams.store(true);
    return true;
}

void fail_window(gpuaes_ks_window *w, const char *what, cudaError_t e)
{
    set_err(w->error, what, e);
    uncount(w);
    w->state.store(W_FAILED, std::memory_order_release);
}

// Launches up to kMaxJobs queued jobs; under g_submit.  Returns false when
// the queue was empty.
bool launch_round()
{
    gpuaes_ks_window *w[kMaxJobs];
    int n = 0;
    pthread_mutex_lock(&g_lock);
    if (g_queue != nullptr) {
        n = (int)(g_queue->size() < (size_t)kMaxJobs ? g_queue->size() : (size_t)kMaxJobs);
        for (int i = 0; i < n; ++i) w[i] = (*g_queue)[i];
        g_queue->erase(g_queue->begin(), g_queue->begin() + n);
    }
    pthread_mutex_unlock(&g_lock);
    if (n == 0) return false;

    char err[GPUAES_ERROR_SIZE];
    CudaGuest guest; // held to the end of the round: every call below is on this thread
    // A release that began after these were queued: no launch may write a
    // device buffer it is about to free (it waits for g_submit).
    if (g_closing.load() || !guest.ok() || !ensure_streams(err)) {
        for (int i = 0; i < n; ++i) {
            std::snprintf(w[i]->error, sizeof w[i]->error, "keystream: %s",
                          guest.ok() ? "no stream" : "CUDA not usable on this thread now");
            secure_wipe(&w[i]->job, sizeof w[i]->job);
            uncount(w[i]);
            w[i]->state.store(W_FAILED, std::memory_order_release);
        }
        return true;
    }
    static KsBatch b; // under g_submit; copied into the launch
    uint32_t most = 0;
    for (int i = 0; i < n; ++i) {
        b.job[i] = w[i]->job;
        if (w[i]->job.nblocks > most) most = w[i]->job.nblocks;
    }
    uint32_t gx = (most + kKsThreads - 1) / kKsThreads;
    uint32_t cap = (uint32_t)(g_grid_max / n > 0 ? g_grid_max / n : 1);
    if (gx > cap) gx = cap;
    cudaEvent_t kd = g_kdone[g_kdone_next];
    g_kdone_next ^= 1;
    cudaError_t e = cudaSuccess;
    const bool injected = gpu_fault() == Fault::launch;
    if (!injected) e = ks_launch(b, n, gx, g_kstream);
    secure_wipe(&b, sizeof b);
    if (e == cudaSuccess) e = cudaEventRecord(kd, g_kstream);
    if (e == cudaSuccess) e = cudaStreamWaitEvent(g_cstream, kd, 0);
    g_launches.fetch_add(1, std::memory_order_relaxed);
    g_jobs.fetch_add((unsigned long long)n, std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
        secure_wipe(&w[i]->job, sizeof w[i]->job);
        if (injected || gpu_fault() == Fault::copyout) {
            std::snprintf(w[i]->error, sizeof w[i]->error, "keystream: %s: injected fault (GPUAES_FAULT)",
                          injected ? "launch" : "copyout");
            uncount(w[i]);
            w[i]->state.store(W_FAILED, std::memory_order_release);
            continue;
        }
        if (e != cudaSuccess) { fail_window(w[i], "launch", e); continue; }
        cudaError_t c = cudaMemcpyAsync(w[i]->buf.host, w[i]->buf.dev, w[i]->filled, cudaMemcpyDeviceToHost, g_cstream);
        if (c == cudaSuccess) c = cudaEventRecord(w[i]->ev, g_cstream);
        if (c == cudaSuccess) c = cudaLaunchHostFunc(g_cstream, on_copied, w[i]);
        if (c != cudaSuccess) {
            // Whatever was enqueued must be over before the window is used again.
            const cudaError_t s = cudaStreamSynchronize(g_cstream);
            if (s != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", s);
            fail_window(w[i], "copyout", c);
            continue;
        }
        w[i]->state.store(W_INFLIGHT, std::memory_order_release);
    }
    return true;
}

// Launches everything queued, asleep on g_submit while another thread
// launches (instead of yielding in a loop until it is done): for a caller
// whose own job must be launched before it can go on.
void drain_wait()
{
    pthread_mutex_lock(&g_submit);
    while (launch_round()) {
    }
    pthread_mutex_unlock(&g_submit);
}

// Waiting for a fill: poll, then nap (poll_wait.h), checking the event now
// and then for a failed stream.
constexpr int64_t kCopiedBoundNs = int64_t(2) * 1000 * 1000 * 1000; // 2 s, then synchronize the stream

// Waits for w's host function (its fill's D2H is over).  False when the
// event reports a failure, the driver cannot be asked, or it took longer
// than kCopiedBoundNs: the caller synchronizes the stream then.  Unlike a
// stream synchronization (which, under the runtime's default scheduling,
// spins the core, and waits for every window's copies on the shared copy
// stream), this sleeps and waits for w alone.
bool wait_copied(gpuaes_ks_window *w)
{
    const int64_t t0 = mono_ns();
    for (unsigned i = 1; !w->copied.load(std::memory_order_acquire); ++i) {
        cpu_relax();
        if ((i & 63) != 0 || mono_ns() - t0 < kPollBeforeNapNs) continue;
        CudaGuest guest(true);
        auto d = kNapMin;
        while (!w->copied.load(std::memory_order_acquire)) {
            if (!guest.ok() || mono_ns() - t0 > kCopiedBoundNs) return false;
            const cudaError_t e = cudaEventQuery(w->ev);
            if (e != cudaSuccess && e != cudaErrorNotReady) return false; // the host function may never run
            nap(d);
        }
        return true;
    }
    return true;
}

} // namespace

// Takes n bytes of the in-flight budget, or nothing (false: over kInflightCap).
// A refused fill must leave the count as it was: when one gave back bytes
// it had never taken, the count wrapped below zero under contention and every
// later fill in the process was refused.
bool reserve_inflight(size_t n) { return g_inflight.reserve(n, kInflightCap); }

// The fill of w is over (complete, failed or abandoned): no longer in flight.
void uncount(gpuaes_ks_window *w) { g_inflight.release(w->counted.exchange(0)); }

// A CUDA call of the cleanup paths: a sticky error disables the GPU.
bool ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return true;
    if (error_is_fatal(e)) {
        char why[GPUAES_ERROR_SIZE];
        std::snprintf(why, sizeof why, "keystream: %s: %s", what, cudaGetErrorString(e));
        mark_gpu_broken(why);
    }
    return false;
}

// Whoever holds g_submit launches everything queued.
void drain()
{
    for (;;) {
        if (pthread_mutex_trylock(&g_submit) != 0) return; // the holder will see our job
        while (launch_round()) {
        }
        pthread_mutex_unlock(&g_submit);
        pthread_mutex_lock(&g_lock);
        const bool more = g_queue != nullptr && !g_queue->empty();
        pthread_mutex_unlock(&g_lock);
        if (!more) return;
    }
}

// Waits until w has nothing in flight (its event, or the launch that holds it).
void quiesce(gpuaes_ks_window *w)
{
    for (;;) {
        int s = w->state.load(std::memory_order_acquire);
        if (s == W_QUEUED) { drain_wait(); continue; }
        // Its host function must have run, so that it can never mark a later
        // fill of this window as copied: wait for it, or (a failure) for the
        // stream.  A guard that cannot run means the driver is gone, and its
        // copies with it.
        if (s == W_INFLIGHT && !w->copied.load(std::memory_order_acquire) && !wait_copied(w)) {
            CudaGuest guest(true);
            const cudaError_t e = guest.ok() ? cudaStreamSynchronize(g_cstream) : cudaSuccess;
            if (e != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", e);
        }
        uncount(w);
        return;
    }
}

// The poll of ready() and pin() (w entered).
int poll(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE])
{
    int s = w->state.load(std::memory_order_acquire);
    if (s == W_READY) return 1;
    if (s == W_QUEUED) {
        drain(); // nobody launched it yet: do it
        s = w->state.load(std::memory_order_acquire);
    }
    if (s == W_INFLIGHT) {
        if (gpu_fault() == Fault::sync) {
            CudaGuest guest;
            if (!guest.ok()) return 0; // later
            // Its host function has run: no late "copied".
            const cudaError_t es = cudaStreamSynchronize(g_cstream);
            if (es != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", es);
            std::snprintf(w->error, sizeof w->error, "keystream: sync: injected fault (GPUAES_FAULT=sync)");
            uncount(w);
            w->state.store(W_FAILED, std::memory_order_release);
            s = W_FAILED;
        } else {
            if (w->copied.load(std::memory_order_acquire)) {
                uncount(w);
                w->state.store(W_READY, std::memory_order_release);
                return 1;
            }
            if ((++w->polls & 255) != 0) return 0;
            // Now and then ask the driver, so that a failed stream is noticed.
            // (cudaErrorNotReady may be recorded as the thread's last error:
            // the guard clears it.)
            CudaGuest guest;
            if (!guest.ok()) return 0;
            const cudaError_t e = cudaEventQuery(w->ev);
            if (e == cudaSuccess || e == cudaErrorNotReady) return 0; // the host function comes next
            const cudaError_t es = cudaStreamSynchronize(g_cstream);
            if (es != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", es);
            fail_window(w, "cudaEventQuery", e);
            s = W_FAILED;
        }
    }
    if (s == W_FAILED) {
        if (error) std::snprintf(error, GPUAES_ERROR_SIZE, "%s", w->error);
        return -1;
    }
    return 0; // queued (another thread is launching it)
}

// Waits until no window of `all` is busy or the deadline passed: polls
// kPollBeforeNap, then naps (an owner in a call is done in microseconds; one that
// stays busy must not cost a core for the whole bound).
void wait_not_busy(const std::vector<gpuaes_ks_window *> &all, std::chrono::milliseconds bound)
{
    const int64_t t0 = mono_ns(), until = t0 + std::chrono::nanoseconds(bound).count();
    auto d = kNapMin;
    for (gpuaes_ks_window *w : all)
        while (w->busy.load()) {
            const int64_t now = mono_ns();
            if (now >= until) return;
            if (now - t0 < kPollBeforeNapNs) sched_yield();
            else nap(d);
        }
}

} // namespace ks
} // namespace gpuaes
