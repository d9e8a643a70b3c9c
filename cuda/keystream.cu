// keystream.cu - keystream ahead: asynchronous CTR keystream windows
// (include/gpuaes_gpu.h, "Keystream ahead").
//
// A window owns a pinned host buffer, a device buffer of the same size and
// an event.  gpuaes_ks_fill() queues a job (key schedule, first counter,
// length, destination); queued jobs of all windows are launched together by
// whichever thread gets the submit lock (flat combining): it takes up to
// kMaxJobs queued jobs, launches ONE kernel for all of them on the kernel
// stream (the jobs travel in the kernel's parameters: no job upload), and on
// the copy stream, after that kernel, one D2H copy and one event per job.
// Jobs queued while it was launching are taken in its next round, so fills
// from many contexts coalesce into few launches whatever their timing.  The
// thread that queued a job never waits for the launch of somebody else's.
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
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <vector>

#include <cuda_runtime.h>

#include "aes_block.cuh"
#include "aes_key.h"
#include "aes_tables.cuh"
#include "cuda_guest.h"
#include "gpu_state.h"
#include "gpuaes_counter.h"
#include "gpuaes_gpu.h"
#include "memory_cap.h"
#include "pdl.cuh"

namespace gpuaes {
namespace {

constexpr int kMaxJobs = 32;     // jobs per launch (the batch is a kernel parameter, < 32 KiB)
// Keystream queued or in flight, all windows together, at most: about 0.6 ms
// of D2H at ~55 GB/s.  A fill beyond it is refused (GPUAES_BUSY: the caller
// works on the CPU), so that when many streams want more than PCIe carries,
// the wait for a window (and so the keystream a stream skips while it waits)
// stays short instead of growing with the number of streams.
constexpr size_t kInflightCap = GPUAES_KS_INFLIGHT_MAX; // the provider caps keystream_max_window at it
constexpr int kThreads = 256;

struct KsJob {
    uint32_t rk[60];
    uint32_t ctr_be[4];
    uint4 *dst;
    uint32_t nblocks;
    int rounds;
    int ctr32;
};

struct KsBatch {
    KsJob job[kMaxJobs];
};
static_assert(sizeof(KsBatch) < 32000, "kernel parameter limit");

template <int NR>
__device__ __forceinline__ void ks_run(const KsJob &J, const SharedTab &T)
{
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < J.nblocks; j += stride) {
        uint32_t s0, s1, s2, s3;
        if (J.ctr32) gpuaes_ctr32_cols(J.ctr_be, j, &s0, &s1, &s2, &s3);
        else         gpuaes_ctr128_cols(J.ctr_be, j, &s0, &s1, &s2, &s3);
        encrypt_cols<NR>(s0, s1, s2, s3, J.rk, T);
        J.dst[j] = make_uint4(bswap32(s0), bswap32(s1), bswap32(s2), bswap32(s3));
    }
}

// blockIdx.y: the job.  The replicated Te0 of aes_tables.cuh (constant
// stride: the compiler folds it).
__global__ void __launch_bounds__(kThreads) ks_kernel(const __grid_constant__ KsBatch b)
{
    __shared__ uint32_t smem[kTableWords];
    fill_replicated(smem, c_te0<>.v, 256);
    __syncthreads();
    const SharedTab T{reinterpret_cast<const char *>(smem + (threadIdx.x & (kLanes - 1))), nullptr, kEntryBytes};
    const KsJob &J = b.job[blockIdx.y];
    switch (J.rounds) {
    case 10: ks_run<10>(J, T); break;
    case 12: ks_run<12>(J, T); break;
    default: ks_run<14>(J, T); break;
    }
}

enum WState : int { W_IDLE, W_QUEUED, W_INFLIGHT, W_READY, W_FAILED };

} // namespace
} // namespace gpuaes

struct gpuaes_ks_window {
    unsigned char *host = nullptr; // pinned, cap bytes
    void *dev = nullptr;           // device, cap bytes
    cudaEvent_t ev = nullptr;
    size_t cap = 0;
    std::atomic<int> state{gpuaes::W_IDLE};
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
    char error[160] = "";
    bool pooled = false;           // under g_lock
    int64_t pooled_at = 0;         // mono_ns() when pooled (idle release)
    // 1 while the owner is in a call on the window or has it pinned; only
    // the owner writes it (release reads it): see enter().
    std::atomic<int> busy{0};
};

namespace gpuaes {
namespace {

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;   // queue, pool, registry, counters
pthread_mutex_t g_submit = PTHREAD_MUTEX_INITIALIZER; // the streams, one launcher at a time
// Each list holds a window at most once, and each has room for every window
// made (reserve_window_slot): their push_backs never allocate, so they never
// throw across the C interface.
std::vector<gpuaes_ks_window *> *g_queue;             // under g_lock
std::vector<gpuaes_ks_window *> *g_pool;              // idle windows, under g_lock
std::vector<gpuaes_ks_window *> *g_all;               // every window that exists, under g_lock
size_t g_limit = size_t(256) << 20;
size_t g_pinned = 0;                                  // bytes of all windows that exist
cudaStream_t g_kstream, g_cstream;                    // kernel (and device wipes), copies
cudaEvent_t g_kdone[2];                               // kernel i done (copy stream waits)
int g_kdone_next = 0;
std::atomic<bool> g_streams{false};                   // the above exist (made under g_submit)
// A release is running (or the exit-time one ran): no window may be entered.
std::atomic<bool> g_closing{false};
bool g_final = false;                                 // the exit-time release ran (under g_lock)
std::atomic<unsigned long long> g_launches{0}, g_jobs{0};
int g_grid_max = 0;                                   // resident blocks of the kernel, device-wide
std::atomic<size_t> g_inflight{0};                    // bytes queued or in flight (kInflightCap)

// Host function after a fill's D2H (runs on a CUDA thread; no CUDA calls).
void CUDART_CB on_copied(void *p)
{
    static_cast<gpuaes_ks_window *>(p)->copied.store(1, std::memory_order_release);
}

// Takes n bytes of the in-flight budget, or nothing (false: over kInflightCap).
// A refused fill must leave the count as it was: when one gave back bytes
// it had never taken, the count wrapped below zero under contention and every
// later fill in the process was refused.
bool reserve_inflight(size_t n)
{
    size_t cur = g_inflight.load(std::memory_order_relaxed);
    do {
        if (cur + n > kInflightCap) return false;
    } while (!g_inflight.compare_exchange_weak(cur, cur + n, std::memory_order_relaxed));
    return true;
}

// The fill of w is over (complete, failed or abandoned): no longer in flight.
void uncount(gpuaes_ks_window *w) { g_inflight.fetch_sub(w->counted.exchange(0)); }

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

// A CUDA call of the cleanup paths: a sticky error disables the GPU.
bool ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return true;
    if (error_is_fatal(e)) {
        char why[160];
        std::snprintf(why, sizeof why, "keystream: %s: %s", what, cudaGetErrorString(e));
        mark_gpu_broken(why);
    }
    return false;
}

void set_err(char *err, const char *what, cudaError_t e)
{
    if (err != nullptr) std::snprintf(err, 160, "keystream: %s: %s", what, cudaGetErrorString(e));
    if (error_is_fatal(e)) {
        char why[160];
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
    if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, ks_kernel, kThreads, 0)) != cudaSuccess ||
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

    char err[160];
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
    uint32_t gx = (most + kThreads - 1) / kThreads;
    uint32_t cap = (uint32_t)(g_grid_max / n > 0 ? g_grid_max / n : 1);
    if (gx > cap) gx = cap;
    cudaEvent_t kd = g_kdone[g_kdone_next];
    g_kdone_next ^= 1;
    cudaError_t e = cudaSuccess;
    const bool injected = gpu_fault() == Fault::launch;
    if (!injected) e = launch_pdl(ks_kernel, dim3(gx, (unsigned)n), dim3(kThreads), 0, g_kstream, false, b);
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
        cudaError_t c = cudaMemcpyAsync(w[i]->host, w[i]->dev, w[i]->filled, cudaMemcpyDeviceToHost, g_cstream);
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

// Flat combining: whoever holds g_submit launches everything queued.
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

// Waiting for a fill: poll this long (about a thread wake-up), then sleep
// in naps from kNapMin doubling to kNapMax (a fill's D2H is at most ~0.6 ms:
// kInflightCap), checking the event now and then for a failed stream.
constexpr std::chrono::microseconds kSpin(20), kNapMin(20), kNapMax(1000);
constexpr std::chrono::seconds kCopiedBound(2); // then synchronize the stream

void nap(std::chrono::microseconds &d)
{
    struct timespec ts = {0, (long)std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()};
    nanosleep(&ts, nullptr);
    d = std::min(d * 2, std::chrono::microseconds(kNapMax));
}

// Waits for w's host function (its fill's D2H is over).  False when the
// event reports a failure, the driver cannot be asked, or it took longer
// than kCopiedBound: the caller synchronizes the stream then.  Unlike a
// stream synchronization (which, under the runtime's default scheduling,
// spins the core, and waits for every window's copies on the shared copy
// stream), this sleeps and waits for w alone.
bool wait_copied(gpuaes_ks_window *w)
{
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned i = 1; !w->copied.load(std::memory_order_acquire); ++i) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
        if ((i & 63) != 0 || std::chrono::steady_clock::now() - t0 < kSpin) continue;
        CudaGuest guest(true);
        auto d = kNapMin;
        while (!w->copied.load(std::memory_order_acquire)) {
            if (!guest.ok() || std::chrono::steady_clock::now() - t0 > kCopiedBound) return false;
            const cudaError_t e = cudaEventQuery(w->ev);
            if (e != cudaSuccess && e != cudaErrorNotReady) return false; // the host function may never run
            nap(d);
        }
        return true;
    }
    return true;
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

// Wipes w's buffers and frees them (w is nobody's now, or the process is
// ending).  The device wipe is synchronous: this is not a hot path.  With
// `cuda` false (GPU broken) only the host side is wiped, nothing is freed.
void destroy_buffers(gpuaes_ks_window *w, bool cuda)
{
    secure_wipe(w->host, w->dirty);
    if (cuda) {
        if (w->dev != nullptr && w->dirty != 0) (void)ok(cudaMemset(w->dev, 0, w->dirty), "cudaMemset");
        if (w->dev != nullptr) (void)ok(cudaFree(w->dev), "cudaFree");
        if (w->host != nullptr) (void)ok(cudaFreeHost(w->host), "cudaFreeHost");
        if (w->ev != nullptr) (void)ok(cudaEventDestroy(w->ev), "cudaEventDestroy");
        w->host = nullptr;
        w->dev = nullptr;
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

// The poll of ready() and pin() (w entered).
int poll(gpuaes_ks_window *w, char error[160])
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
        if (error) std::snprintf(error, 160, "%s", w->error);
        return -1;
    }
    return 0; // queued (another thread is launching it)
}

} // namespace
} // namespace gpuaes

using namespace gpuaes;

extern "C" void gpuaes_ks_set_limit(size_t total_bytes)
{
    pthread_mutex_lock(&g_lock);
    g_limit = total_bytes;
    pthread_mutex_unlock(&g_lock);
}

extern "C" gpuaes_ks_window *gpuaes_ks_window_new(size_t cap)
{
    if (cap == 0 || cap % 16 != 0 || !usable()) return nullptr;
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
        bool oom = false; // memory full: back off (memory_cap.h), no retry per stream
        auto alloc = [&oom](cudaError_t e, const char *what) {
            oom |= e == cudaErrorMemoryAllocation;
            return ok(e, what);
        };
        w->cap = cap;
        good = alloc(cudaHostAlloc((void **)&w->host, cap, cudaHostAllocDefault), "cudaHostAlloc");
        if (!good) w->host = nullptr;
        if (good) good = alloc(cudaMalloc(&w->dev, cap), "cudaMalloc");
        if (!good) w->dev = nullptr;
        if (good) good = ok(cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming), "cudaEventCreateWithFlags");
        if (!good) w->ev = nullptr;
        if (oom) mem_alloc_failed();
        else if (good) mem_alloc_ok();
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
                                        size_t nbytes, int ctr32, char error[160])
{
    if (w == nullptr || key == nullptr || nbytes == 0 || nbytes % 16 != 0 || nbytes > w->cap) {
        if (error) std::snprintf(error, 160, "keystream: invalid fill");
        return GPUAES_FAILED;
    }
    if (!usable()) return GPUAES_BUSY;
    CudaGuest guest; // for the launch below (drain); an error pending on this thread: the CPU
    if (!guest.ok() || !enter(w)) return GPUAES_BUSY;
    const int s = w->state.load(std::memory_order_acquire);
    if (s == W_QUEUED || s == W_INFLIGHT) {
        leave(w);
        if (error) std::snprintf(error, 160, "keystream: window busy");
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
    j.dst = static_cast<uint4 *>(w->dev);
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

extern "C" int gpuaes_ks_ready(gpuaes_ks_window *w, char error[160])
{
    if (w == nullptr || cuda_forbidden() || !enter(w)) return -1;
    const int r = poll(w, error);
    leave(w);
    return r;
}

extern "C" int gpuaes_ks_pin(gpuaes_ks_window *w, const unsigned char **data, char error[160])
{
    *data = nullptr;
    if (w == nullptr || cuda_forbidden() || !enter(w)) return -1;
    const int r = poll(w, error);
    if (r == 1) *data = w->host; // entered until gpuaes_ks_unpin()
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
    // Only what fills wrote: a stream that got a window but no fill (the
    // in-flight budget was spent) must not pay for wiping all of it.
    secure_wipe(w->host, w->dirty);
    // The device copy: a memset on the kernel stream, ahead of every later
    // fill's kernel (the last D2H that read it is over: quiesce).  No
    // stream: no kernel ever ran, nothing to wipe.
    bool clean = w->dirty == 0 || !g_streams.load();
    if (!clean) {
        CudaGuest guest(true);
        clean = guest.ok() && ok(cudaMemsetAsync(w->dev, 0, w->dirty, g_kstream), "cudaMemsetAsync");
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

// Waits until no window of `all` is busy or the deadline passed: polls
// kSpin, then naps (an owner in a call is done in microseconds; one that
// stays busy must not cost a core for the whole bound).
void wait_not_busy(const std::vector<gpuaes_ks_window *> &all, std::chrono::milliseconds bound)
{
    const auto t0 = std::chrono::steady_clock::now(), until = t0 + bound;
    auto d = kNapMin;
    for (gpuaes_ks_window *w : all)
        while (w->busy.load()) {
            const auto now = std::chrono::steady_clock::now();
            if (now >= until) return;
            if (now - t0 < kSpin) sched_yield();
            else nap(d);
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
    if (g_queue != nullptr) { // queued, never launched: failed
        for (gpuaes_ks_window *w : *g_queue) {
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
