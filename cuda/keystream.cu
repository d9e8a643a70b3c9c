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
// Pool: windows are never freed during the process; a freed window is wiped
// and kept for the next context.  The pinned memory of all windows counts
// against gpuaes_ks_set_limit().
//
// Fork: in a child of a process that used CUDA nothing here makes a CUDA
// call or touches a pinned buffer (ready() answers -1, free() only forgets).
#include <atomic>
#include <cstdio>
#include <cstring>
#include <new>
#include <pthread.h>
#include <sched.h>
#include <vector>

#include <cuda_runtime.h>

#include "aes_block.cuh"
#include "aes_key.h"
#include "aes_tables.cuh"
#include "cuda_guest.h"
#include "gpu_state.h"
#include "gpuaes_gpu.h"
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
constexpr int kLanes = 32;
constexpr uint32_t kTableWords = 256 * kLanes;

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

__constant__ const tables::Words256 c_ks_te0 = tables::kTe0;

struct KsTab {
    const char *t;
    template <int K>
    __device__ __forceinline__ uint32_t w(uint32_t s) const
    {
        const uint32_t x = K == 3 ? s >> 24 : __byte_perm(s, 0, 0x4440 | K);
        return *reinterpret_cast<const uint32_t *>(t + x * (kLanes * 4));
    }
    template <int K>
    __device__ __forceinline__ uint32_t ib(uint32_t) const { return 0; }
};

template <int NR>
__device__ __forceinline__ void ks_run(const KsJob &J, const KsTab &T)
{
    const uint32_t stride = gridDim.x * blockDim.x;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < J.nblocks; j += stride) {
        uint32_t s0, s1, s2, s3;
        if (J.ctr32) {
            s0 = J.ctr_be[0]; s1 = J.ctr_be[1]; s2 = J.ctr_be[2]; s3 = J.ctr_be[3] + j;
        } else {
            s3 = J.ctr_be[3] + j;
            uint32_t c = s3 < j;
            s2 = J.ctr_be[2] + c; c = s2 < c;
            s1 = J.ctr_be[1] + c; c = s1 < c;
            s0 = J.ctr_be[0] + c;
        }
        encrypt_cols<NR>(s0, s1, s2, s3, J.rk, T);
        J.dst[j] = make_uint4(bswap32(s0), bswap32(s1), bswap32(s2), bswap32(s3));
    }
}

// blockIdx.y: the job.  Same bank-conflict-free replicated Te0 as aes_kernels.cu.
__global__ void __launch_bounds__(kThreads) ks_kernel(const __grid_constant__ KsBatch b)
{
    __shared__ uint32_t smem[kTableWords];
    for (uint32_t i = threadIdx.x; i < kTableWords; i += blockDim.x)
        smem[i] = c_ks_te0.v[i / kLanes];
    __syncthreads();
    const KsTab T{reinterpret_cast<const char *>(smem + (threadIdx.x & (kLanes - 1)))};
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
    bool pooled = false;
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
std::vector<gpuaes_ks_window *> *g_all;               // every window made, under g_lock
size_t g_limit = size_t(256) << 20;
size_t g_pinned = 0;                                  // bytes of all windows made
cudaStream_t g_kstream, g_cstream;                    // kernel, copies (made once)
cudaEvent_t g_kdone[2];                               // kernel i done (copy stream waits)
int g_kdone_next = 0;
bool g_streams = false;
std::atomic<bool> g_released{false};
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

bool usable() { return !cuda_forbidden() && !g_released.load() && gpuaes_gpu_available(); }

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
    if (g_streams) return true;
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
    g_streams = true;
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
    if (!guest.ok() || !ensure_streams(err)) {
        for (int i = 0; i < n; ++i) {
            std::snprintf(w[i]->error, sizeof w[i]->error, "keystream: %s",
                          guest.ok() ? "no stream" : "CUDA not usable on this thread now");
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

void ctr_words(const unsigned char c[16], uint32_t w[4])
{
    for (int i = 0; i < 4; ++i)
        w[i] = ((uint32_t)c[4 * i] << 24) | ((uint32_t)c[4 * i + 1] << 16) | ((uint32_t)c[4 * i + 2] << 8) | c[4 * i + 3];
}

// Waits until w has nothing in flight (its event, or the launch that holds it).
void quiesce(gpuaes_ks_window *w)
{
    for (;;) {
        int s = w->state.load(std::memory_order_acquire);
        if (s == W_QUEUED) { drain(); sched_yield(); continue; }
        // The stream, not the event: its host function must have run too, so
        // that it can never mark a later fill of this window as copied.  A
        // guard that cannot run means the driver is gone, and its copies with it.
        if (s == W_INFLIGHT && !w->copied.load(std::memory_order_acquire)) {
            CudaGuest guest(true);
            const cudaError_t e = guest.ok() ? cudaStreamSynchronize(g_cstream) : cudaSuccess;
            if (e != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", e);
        }
        uncount(w);
        return;
    }
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
    for (size_t i = 0; g_pool != nullptr && i < g_pool->size(); ++i) {
        gpuaes_ks_window *w = (*g_pool)[i];
        if (w->cap == cap) {
            g_pool->erase(g_pool->begin() + (long)i);
            w->pooled = false;
            pthread_mutex_unlock(&g_lock);
            return w;
        }
    }
    if (g_pinned + cap > g_limit || !reserve_window_slot()) {
        pthread_mutex_unlock(&g_lock);
        return nullptr;
    }
    g_pinned += cap; // reserved now, returned below on failure
    pthread_mutex_unlock(&g_lock);

    CudaGuest guest;
    gpuaes_ks_window *w = new (std::nothrow) gpuaes_ks_window();
    bool ok = w != nullptr && gpu_fault() != Fault::alloc && guest.ok();
    if (ok) {
        w->cap = cap;
        ok = cudaHostAlloc((void **)&w->host, cap, cudaHostAllocDefault) == cudaSuccess;
        if (!ok) w->host = nullptr;
        if (ok) ok = cudaMalloc(&w->dev, cap) == cudaSuccess;
        if (!ok) w->dev = nullptr;
        if (ok) ok = cudaEventCreateWithFlags(&w->ev, cudaEventDisableTiming) == cudaSuccess;
        if (!ok) w->ev = nullptr;
    }
    if (!ok) {
        if (w != nullptr) {
            // Best effort: freeing what was just allocated fails only with a broken context.
            if (w->host) (void)cudaFreeHost(w->host);
            if (w->dev) (void)cudaFree(w->dev);
            delete w;
        }
        pthread_mutex_lock(&g_lock);
        g_pinned -= cap;
        pthread_mutex_unlock(&g_lock);
        return nullptr;
    }
    pthread_mutex_lock(&g_lock);
    g_all->push_back(w); // within the capacity reserved above
    pthread_mutex_unlock(&g_lock);
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
    if (!guest.ok()) return GPUAES_BUSY;
    const int s = w->state.load(std::memory_order_acquire);
    if (s == W_QUEUED || s == W_INFLIGHT) {
        if (error) std::snprintf(error, 160, "keystream: window busy");
        return GPUAES_FAILED;
    }
    if (!reserve_inflight(nbytes)) return GPUAES_BUSY; // the GPU is as far ahead as is useful: CPU for now
    w->counted.store(nbytes);
    KsJob &j = w->job;
    std::memcpy(j.rk, key->rk_enc, sizeof j.rk);
    ctr_words(ctr, j.ctr_be);
    j.dst = static_cast<uint4 *>(w->dev);
    j.nblocks = (uint32_t)(nbytes / 16);
    j.rounds = key->rounds;
    j.ctr32 = ctr32 ? 1 : 0;
    w->filled = nbytes;
    if (nbytes > w->dirty) w->dirty = nbytes;
    w->error[0] = '\0';
    w->copied.store(0, std::memory_order_relaxed);
    w->state.store(W_QUEUED, std::memory_order_release);
    pthread_mutex_lock(&g_lock);
    g_queue->push_back(w); // never allocates: room for every window (reserve_window_slot)
    pthread_mutex_unlock(&g_lock);
    drain();
    return GPUAES_OK;
}

extern "C" int gpuaes_ks_ready(gpuaes_ks_window *w, char error[160])
{
    if (w == nullptr || cuda_forbidden() || g_released.load(std::memory_order_relaxed)) return -1;
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
            const cudaError_t e = cudaStreamSynchronize(g_cstream);
            if (e != cudaSuccess) set_err(nullptr, "cudaStreamSynchronize", e);
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

extern "C" const unsigned char *gpuaes_ks_data(const gpuaes_ks_window *w) { return w->host; }

extern "C" void gpuaes_ks_window_free(gpuaes_ks_window *w)
{
    if (w == nullptr) return;
    if (cuda_forbidden()) return; // the parent's; never touched in a child
    if (g_released.load()) return; // wiped and freed at exit
    quiesce(w);
    // Only what fills wrote: a stream that got a window but no fill (the
    // in-flight budget was spent) must not pay for wiping all of it.
    secure_wipe(w->host, w->dirty);
    w->dirty = 0;
    // The device copy stays until the next fill overwrites it: device
    // memory is not reachable from the host, and it is wiped at release.
    w->state.store(W_IDLE, std::memory_order_release);
    w->filled = 0;
    pthread_mutex_lock(&g_lock);
    w->pooled = true;
    g_pool->push_back(w); // never allocates: room for every window (reserve_window_slot)
    pthread_mutex_unlock(&g_lock);
}

extern "C" void gpuaes_ks_stats(unsigned long long *launches, unsigned long long *jobs)
{
    if (launches) *launches = g_launches.load();
    if (jobs) *jobs = g_jobs.load();
}

namespace gpuaes {
// Exit: wipe every window's buffers (host and device) and free them.
void keystream_release()
{
    if (cuda_forbidden() || g_released.exchange(true)) return;
    pthread_mutex_lock(&g_submit);
    pthread_mutex_lock(&g_lock);
    CudaGuest guest(true);
    const bool cuda = !gpu_broken() && guest.ok();
    if (cuda && g_streams) {
        (void)cudaStreamSynchronize(g_kstream);
        (void)cudaStreamSynchronize(g_cstream);
    }
    if (g_all != nullptr) {
        for (gpuaes_ks_window *w : *g_all) {
            secure_wipe(w->host, w->cap);
            if (!cuda) continue;
            (void)cudaMemset(w->dev, 0, w->cap);
            (void)cudaFree(w->dev);
            (void)cudaFreeHost(w->host);
            (void)cudaEventDestroy(w->ev);
        }
    }
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_unlock(&g_submit);
}

void keystream_atfork_child()
{
    pthread_mutex_init(&g_lock, nullptr);
    pthread_mutex_init(&g_submit, nullptr);
}
} // namespace gpuaes
