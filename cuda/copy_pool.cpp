// copy_pool.cpp - parallel host memcpy (and the XOR of data against GPU
// keystream) for the staging copies (see copy_pool.h).
//
// Design: two FIFO queues of copies (CopyTask, owned by the caller), urgent
// ones first, and one lock.  A copy has nparts parts (256 KiB by default,
// GPUAES_COPY_PART); `next` is the first part
// nobody has claimed, `left` the parts not yet copied.  Workers and owners
// claim parts under the lock (one short critical section per part),
// copy them without it, and count them done.  Owners claim parts of their
// own copies only, so an owner never depends on a worker being free, several
// owners share the workers (first come, first served within a queue: FIFO is
// pipeline order; staging's copy-outs are urgent because they free a lane),
// and stopping the workers at any time is safe: they finish the part in
// hand, and the owners do the rest.
//
// Workers are plain pthreads (no std::thread objects that could terminate
// the process if destroyed unjoined), with every signal blocked, and are
// joined by copy_pool_stop(): at exit (atexit handler) or dlclose, so that
// no thread runs the module's code once it is unloaded.  The pool's own
// primitives are statically initialised pthread ones, never destroyed (no
// static destructor runs at exit).
//
// Fork: copy_pool_atfork_child(), registered with pthread_atfork at the
// first start (and also called by device.cu's handler), re-creates the lock
// and closes a pool that was started: a child of a process that used CUDA
// never runs a GPU job, and its exit-time stop must not join threads that
// exist only in the parent.
#include "copy_pool.h"
#include "gpu_settings.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <thread>

#if defined(__x86_64__)
#include <emmintrin.h> // SSE2 streaming stores: baseline on x86-64
#endif

namespace gpuaes {
namespace {

constexpr size_t kDefaultPart = size_t(256) << 10; // largest part (the unit threads claim)
// Smallest part worth handing to another thread (measured: 256 KiB parts lost
// 10-25 % on 1-4 MiB jobs against 64 KiB ones).
constexpr size_t kMinPart = size_t(64) << 10;
constexpr int kMaxParts = 1 << 14;
constexpr int kMaxThreads = 64;               // GPUAES_COPY_THREADS is capped here
constexpr int kDefaultMax = 8;                // default: min(8, cores / 2)
// Idle workers poll this long (while a GPU job is active) before they sleep;
// an owner polls as long for the workers' last parts before it sleeps.
constexpr std::chrono::microseconds kSpin(500);
// ... and this long after the last job ended: a sleeping worker takes tens of
// microseconds to wake (more in a VM), as long as a 1 MiB job's copies, and
// back-to-back jobs (one stream of large updates) are the common case.
constexpr std::chrono::microseconds kSpinAfterJob(100);

enum State : int { kNone, kRunning, kClosed };

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_work = PTHREAD_COND_INITIALIZER;   // a copy was queued, or stop
std::atomic<int> g_state{kNone};      // changed under g_lock
std::atomic<int> g_nworkers{0};       // changed under g_lock
std::atomic<unsigned> g_gen{0};       // bumped under g_lock by stop: older workers exit
std::atomic<int> g_queued{0};         // copies in the queue (changed under g_lock)
std::atomic<int> g_active{0};         // GPU jobs between enter and leave
std::atomic<size_t> g_part{kDefaultPart}; // GPUAES_COPY_PART, read at start
// Copies with unclaimed parts (g_lock): [0] normal, [1] urgent (taken first).
struct Queue {
    CopyTask *head = nullptr, *tail = nullptr;
};
Queue g_q[2];
pthread_t g_tids[kMaxThreads];                 // the workers (g_lock)

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#if defined(__x86_64__)
// Zeroes the 64 bytes at p, just read (in L1): plain stores, so that the
// staging stays in the last-level cache where the DMA engine finds it.
inline void zero64(unsigned char *p)
{
    const __m128i z = _mm_setzero_si128();
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i *>(p + 16 * k), z);
}
#endif

// memcpy with non-temporal stores: the destination (the caller's output)
// goes straight to DRAM instead of being read for ownership first and then
// evicting the pinned staging buffers from the last-level cache.  With
// `wipe` (== src), src is zeroed as it is read.
void stream_copy(unsigned char *dst, const unsigned char *src, size_t n, unsigned char *wipe)
{
#if defined(__x86_64__)
    const size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (n < head + 64) {
        std::memcpy(dst, src, n);
        if (wipe != nullptr) std::memset(wipe, 0, n);
        return;
    }
    std::memcpy(dst, src, head);
    if (wipe != nullptr) {
        std::memset(wipe, 0, head);
        wipe += head;
    }
    dst += head;
    src += head;
    n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 32));
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 48));
        if (wipe != nullptr) zero64(wipe + i);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 48), d);
    }
    _mm_sfence(); // streaming stores are weakly ordered: publish them before the part counts as done
    if (i < n) {
        std::memcpy(dst + i, src + i, n - i);
        if (wipe != nullptr) std::memset(wipe + i, 0, n - i);
    }
#else
    std::memcpy(dst, src, n);
    if (wipe != nullptr) std::memset(wipe, 0, n);
#endif
}

// dst = src ^ ks (dst == src allowed), with non-temporal stores when
// `stream`.  The loads are unaligned, the stores aligned once dst is.
// With `wipe` (== ks), ks is zeroed as it is read.
void xor_copy(unsigned char *dst, const unsigned char *src, const unsigned char *ks, size_t n, bool stream,
              unsigned char *wipe)
{
    size_t i = 0;
#if defined(__x86_64__)
    if (stream) {
        const size_t head = std::min(n, (size_t)(-(uintptr_t)dst & 15));
        for (; i < head; ++i) dst[i] = src[i] ^ ks[i];
        if (wipe != nullptr) std::memset(wipe, 0, head);
    }
    for (; i + 64 <= n; i += 64) {
        __m128i v[4];
        for (int k = 0; k < 4; ++k)
            v[k] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16 * k)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i *>(ks + i + 16 * k)));
        if (wipe != nullptr) zero64(wipe + i);
        for (int k = 0; k < 4; ++k) {
            __m128i *d = reinterpret_cast<__m128i *>(dst + i + 16 * k);
            if (stream) _mm_stream_si128(d, v[k]);
            else _mm_storeu_si128(d, v[k]);
        }
    }
    if (stream) _mm_sfence(); // publish the streaming stores before the part counts as done
#endif
    const size_t tail = i;
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;
        std::memcpy(&a, src + i, 8);
        std::memcpy(&b, ks + i, 8);
        a ^= b;
        std::memcpy(dst + i, &a, 8);
    }
    for (; i < n; ++i) dst[i] = src[i] ^ ks[i];
    if (wipe != nullptr) std::memset(wipe + tail, 0, n - tail);
}

// Start of part k: k * part, moved down so that dst + offset is 64-byte
// aligned (no cache line of dst is written by two threads); 0 and n at the
// ends.  Monotonic because part >= 64.
size_t part_begin(const CopyTask *t, int k)
{
    if (k <= 0) return 0;
    if (k >= t->nparts) return t->n;
    size_t b = (size_t)k * t->part;
    if (b >= t->n) return t->n;
    b -= (size_t)(((uintptr_t)t->dst + b) & 63);
    return b;
}

void copy_part(const CopyTask *t, int k)
{
    const size_t b = part_begin(t, k), e = part_begin(t, k + 1);
    if (e <= b) return;
    unsigned char *const wipe = t->wipe != nullptr ? t->wipe + b : nullptr;
    if (t->ks != nullptr) {
        xor_copy(t->dst + b, t->src + b, t->ks + b, e - b, t->stream, wipe);
    } else if (t->stream) {
        stream_copy(t->dst + b, t->src + b, e - b, wipe);
    } else {
        std::memcpy(t->dst + b, t->src + b, e - b);
        if (wipe != nullptr) std::memset(wipe, 0, e - b);
    }
    if (t->wipe_also != nullptr) std::memset(t->wipe_also + b, 0, e - b);
}

void queue_push(CopyTask *t) // g_lock held
{
    Queue &q = g_q[t->urgent ? 1 : 0];
    t->prev = q.tail;
    t->succ = nullptr;
    if (q.tail != nullptr) q.tail->succ = t; else q.head = t;
    q.tail = t;
    g_queued.store(g_queued.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void queue_unlink(CopyTask *t) // g_lock held
{
    Queue &q = g_q[t->urgent ? 1 : 0];
    if (t->prev != nullptr) t->prev->succ = t->succ; else q.head = t->succ;
    if (t->succ != nullptr) t->succ->prev = t->prev; else q.tail = t->prev;
    t->prev = t->succ = nullptr;
    g_queued.store(g_queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

CopyTask *queue_first() // g_lock held
{
    return g_q[1].head != nullptr ? g_q[1].head : g_q[0].head;
}

// Claims the next part of a queued t (g_lock held, t->next < t->nparts); a
// copy whose last part is claimed leaves the queue.
int claim(CopyTask *t)
{
    const int k = t->next++;
    if (t->next == t->nparts) queue_unlink(t);
    return k;
}

// A worker copied a part (g_lock held, so that the owner's check-then-wait
// in copy_wait() cannot miss the signal).  t may be gone once the lock is
// released, if that was its last part.
void worker_part_done(CopyTask *t)
{
    if (t->left.fetch_sub(1, std::memory_order_acq_rel) == 1) pthread_cond_signal(&t->done);
}

// Polls (lock not held) until a copy is queued (true) or, with none, until
// this worker has been idle since `idle_since` for kSpin (kSpinAfterJob
// once no GPU job is active) or its generation ended (false).
bool spin_for_work(unsigned gen, std::chrono::steady_clock::time_point idle_since)
{
    for (unsigned i = 1;; ++i) {
        if (g_queued.load(std::memory_order_acquire) > 0) return true;
        if (g_gen.load(std::memory_order_relaxed) != gen) return false;
        cpu_relax();
        if ((i & 63) == 0) {
            const auto t = std::chrono::steady_clock::now();
            if (t - idle_since >= (g_active.load(std::memory_order_relaxed) > 0 ? kSpin : kSpinAfterJob))
                return false;
        }
    }
}

// The spin budget runs from the last part this worker copied (or its last
// wake-up), not once per idle spell: a worker that saw work queued but lost
// every part to others keeps polling instead of going to sleep, which would
// make the next copy pay a futex wake-up (~20-40 us here, measured: the
// copies of a 256 KiB chunk took 22 us on the pool against 6 on one thread).
void *worker_main(void *arg)
{
    const unsigned gen = (unsigned)(uintptr_t)arg;
    auto idle_since = std::chrono::steady_clock::now();
    pthread_mutex_lock(&g_lock);
    for (;;) {
        if (g_gen.load(std::memory_order_relaxed) != gen) break;
        CopyTask *t = queue_first();
        if (t == nullptr) {
            pthread_mutex_unlock(&g_lock);
            const bool work = spin_for_work(gen, idle_since);
            pthread_mutex_lock(&g_lock);
            if (work || g_gen.load(std::memory_order_relaxed) != gen || queue_first() != nullptr) continue;
            pthread_cond_wait(&g_work, &g_lock); // re-checked at the loop's top
            idle_since = std::chrono::steady_clock::now();
            continue;
        }
        const int k = claim(t);
        pthread_mutex_unlock(&g_lock);
        copy_part(t, k); // t lives: its owner waits for this part
        idle_since = std::chrono::steady_clock::now();
        pthread_mutex_lock(&g_lock);
        worker_part_done(t);
    }
    pthread_mutex_unlock(&g_lock);
    return nullptr;
}

// Threads that copy, the caller included: GPUAES_COPY_THREADS, else
// min(8, usable cores / 2); at least 1.
int configured_threads()
{
    const int set = gpu_settings().copy_threads; // 1..64 (the provider checked), 0: the default
    if (set > 0) return std::min(set, kMaxThreads);
    unsigned hw = std::thread::hardware_concurrency();
    cpu_set_t set_cpus;
    CPU_ZERO(&set_cpus);
    if (sched_getaffinity(0, sizeof set_cpus, &set_cpus) == 0) { // taskset / cpuset limits
        const int c = CPU_COUNT(&set_cpus);
        if (c > 0 && (hw == 0 || (unsigned)c < hw)) hw = (unsigned)c;
    }
    const int def = std::min(kDefaultMax, (int)(hw / 2));
    return def < 1 ? 1 : def;
}

// g_lock held, g_state == kNone.  Starts up to configured_threads() - 1
// workers; as many as could be created are used (0: owners copy alone).
void start_locked()
{
    const int want = configured_threads() - 1;
    g_part.store(gpu_settings().copy_part & ~size_t(63), std::memory_order_relaxed);
    const unsigned gen = g_gen.load(std::memory_order_relaxed);
    int n = 0;
    if (want > 0) {
        // Workers inherit the creator's signal mask: block everything, so
        // that no process signal is ever delivered to them.
        sigset_t all, old;
        sigfillset(&all);
        const bool masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
        for (; n < want; ++n) {
            if (pthread_create(&g_tids[n], nullptr, worker_main, (void *)(uintptr_t)gen) != 0) break;
#if defined(__GLIBC__)
            (void)pthread_setname_np(g_tids[n], "gpuaes-copy");
#endif
        }
        if (masked) pthread_sigmask(SIG_SETMASK, &old, nullptr);
    }
    g_nworkers.store(n, std::memory_order_relaxed);
    g_state.store(kRunning, std::memory_order_release);
}

pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

void atfork_child() { copy_pool_atfork_child(); }
void register_atfork() { (void)pthread_atfork(nullptr, nullptr, atfork_child); }

} // namespace

void copy_pool_enter()
{
    g_active.fetch_add(1, std::memory_order_relaxed);
    if (g_state.load(std::memory_order_acquire) != kNone) return;
    // Our own child handler, registered before the first worker exists (and
    // outside g_lock): the pool does not rely on its users' fork handling.
    // Running it twice (device.cu's handler calls it too) is harmless.
    pthread_once(&g_atfork_once, register_atfork);
    pthread_mutex_lock(&g_lock);
    if (g_state.load(std::memory_order_relaxed) == kNone) start_locked();
    pthread_mutex_unlock(&g_lock);
}

void copy_pool_leave()
{
    g_active.fetch_sub(1, std::memory_order_relaxed);
}

void copy_start(CopyTask *t, void *dst, const void *src, size_t n, unsigned flags, void *wipe_also)
{
    copy_start_xor(t, dst, src, nullptr, n, flags, wipe_also);
}

void copy_start_xor(CopyTask *t, void *dst, const void *src, const void *ks, size_t n, unsigned flags,
                    void *wipe_also)
{
    t->dst = static_cast<unsigned char *>(dst);
    t->src = static_cast<const unsigned char *>(src);
    t->ks = static_cast<const unsigned char *>(ks);
    // The staging operand belongs to the caller's job: writable.
    t->wipe = (flags & kCopyWipe) == 0 ? nullptr
              : const_cast<unsigned char *>(ks != nullptr ? t->ks : t->src);
    t->wipe_also = static_cast<unsigned char *>(wipe_also);
    t->n = n;
    t->stream = (flags & kCopyStream) != 0;
    t->urgent = (flags & kCopyUrgent) != 0;
    t->next = 0;
    t->queued = false;
    t->prev = t->succ = nullptr;
    if (n == 0) { // nothing to copy: finished
        t->nparts = 0;
        t->left.store(0, std::memory_order_relaxed);
        return;
    }
    // Parts: one per thread where that makes them at least kMinPart (a small
    // copy is latency-bound: every thread takes a share), at most g_part.
    const size_t threads = (size_t)g_nworkers.load(std::memory_order_relaxed) + 1;
    size_t part = (n / threads + 63) & ~size_t(63);
    part = std::max(kMinPart, std::min(part, g_part.load(std::memory_order_relaxed)));
    const size_t parts = (n + part - 1) / part;
    t->nparts = (int)std::min<size_t>(parts == 0 ? 1 : parts, (size_t)kMaxParts);
    t->part = ((n + (size_t)t->nparts - 1) / (size_t)t->nparts + 63) & ~size_t(63);
    if (t->part == 0) t->part = 64;
    t->left.store(t->nparts, std::memory_order_relaxed);
    if (t->nparts < 2 || g_state.load(std::memory_order_acquire) != kRunning ||
        g_nworkers.load(std::memory_order_relaxed) == 0)
        return; // the owner copies it all
    pthread_cond_init(&t->done, nullptr);
    pthread_mutex_lock(&g_lock);
    const int workers = g_nworkers.load(std::memory_order_relaxed);
    if (workers == 0) { // stopped meanwhile
        pthread_mutex_unlock(&g_lock);
        pthread_cond_destroy(&t->done);
        return;
    }
    t->queued = true;
    queue_push(t);
    // The owner takes parts too; wake as many workers as there are others.
    const int wake = std::min(t->nparts - 1, workers);
    if (wake >= workers) pthread_cond_broadcast(&g_work);
    else for (int i = 0; i < wake; ++i) pthread_cond_signal(&g_work);
    pthread_mutex_unlock(&g_lock);
}

bool copy_help(CopyTask *t)
{
    int k;
    if (!t->queued) {
        if (t->next >= t->nparts) return false;
        k = t->next++;
    } else {
        pthread_mutex_lock(&g_lock);
        if (t->next >= t->nparts) {
            pthread_mutex_unlock(&g_lock);
            return false;
        }
        k = claim(t);
        pthread_mutex_unlock(&g_lock);
    }
    copy_part(t, k);
    // Only the owner waits, and not now: no signal needed.
    t->left.fetch_sub(1, std::memory_order_acq_rel);
    return true;
}

void copy_wait(CopyTask *t)
{
    while (copy_help(t)) {
    }
    if (!t->queued) return; // all parts were ours
    if (t->left.load(std::memory_order_acquire) != 0) {
        // The rest is being copied by workers: poll a little, then sleep.
        const auto until = std::chrono::steady_clock::now() + kSpin;
        for (unsigned i = 1; t->left.load(std::memory_order_acquire) != 0; ++i) {
            cpu_relax();
            if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) break;
        }
    }
    pthread_mutex_lock(&g_lock); // also: the last worker has left worker_part_done()
    while (t->left.load(std::memory_order_acquire) != 0) pthread_cond_wait(&t->done, &g_lock);
    pthread_mutex_unlock(&g_lock);
    pthread_cond_destroy(&t->done);
    t->queued = false;
}

void parallel_memcpy(void *dst, const void *src, size_t n)
{
    CopyTask t;
    copy_start(&t, dst, src, n, 0);
    copy_wait(&t);
}

void copy_pool_stop(bool final)
{
    if (g_state.load(std::memory_order_acquire) == kClosed) return;
    pthread_t tids[kMaxThreads];
    pthread_mutex_lock(&g_lock);
    const int n = g_nworkers.load(std::memory_order_relaxed);
    std::copy(g_tids, g_tids + n, tids);
    g_nworkers.store(0, std::memory_order_relaxed);
    g_gen.store(g_gen.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (final) g_state.store(kClosed, std::memory_order_release);
    else if (g_state.load(std::memory_order_relaxed) == kRunning) g_state.store(kNone, std::memory_order_release);
    pthread_cond_broadcast(&g_work);
    pthread_mutex_unlock(&g_lock);
    // Each finishes the part in hand (< 1 ms) and exits.  Queued copies keep
    // their unclaimed parts: their owners copy them.
    for (int i = 0; i < n; ++i) (void)pthread_join(tids[i], nullptr);
}

void copy_pool_atfork_child()
{
    // The child has only the forking thread: no worker, no other owner.  A
    // parent thread may have held g_lock at fork() time.
    pthread_mutex_init(&g_lock, nullptr);
    pthread_cond_init(&g_work, nullptr);
    g_q[0] = g_q[1] = Queue();
    g_queued.store(0);
    g_active.store(0);
    g_nworkers.store(0);
    // A parent that had started the pool had used CUDA: its child never runs
    // a GPU job.  Close the pool anyway (plain memcpy, no thread, no join).
    if (g_state.load() != kNone) g_state.store(kClosed);
}

int copy_pool_workers() { return g_nworkers.load(std::memory_order_relaxed); }

} // namespace gpuaes
