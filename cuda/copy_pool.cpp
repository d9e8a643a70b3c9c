// copy_pool.cpp - parallel host memcpy for the staging copies (see
// copy_pool.h).
//
// Design: one queue of tasks (one task per parallel_memcpy call, living on
// the caller's stack) and one lock.  A task has nparts parts; `next` is the
// first part nobody has claimed, `left` the parts not yet copied.  Workers
// and the caller claim parts under the lock (one short critical section per
// part of >= 512 KiB: no contention worth speaking of), copy them without
// it, and count them done under it.  The caller claims parts of its own
// task until none is left, then waits only for parts that workers are
// copying.  (Rather than one caller at a time owning the pool: then a second
// concurrent job would copy alone however idle the workers.)  So several
// callers can share the workers (first come, first served), a caller never
// depends on a worker being free, and stopping the workers at any time is
// safe: they finish the part in hand, and the callers do the rest.
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

namespace gpuaes {
namespace {

constexpr size_t kMinPart = size_t(512) << 10; // smallest part handed to a thread
constexpr int kMaxThreads = 64;                 // GPUAES_COPY_THREADS is capped here
constexpr int kDefaultMax = 8;                  // default: min(8, cores / 2)
// Idle workers poll this long (while a GPU job is active) before they sleep;
// the caller polls as long for the last parts before it sleeps.
constexpr std::chrono::microseconds kSpin(500);

struct Task {
    unsigned char *dst;
    const unsigned char *src;
    size_t n;
    size_t part;                 // nominal part length (multiple of 64)
    int nparts;
    int next = 0;                // first unclaimed part (guarded by g_lock)
    std::atomic<int> left{0};    // parts not yet copied (written under g_lock)
    Task *prev = nullptr, *succ = nullptr; // queue links while next < nparts
    pthread_cond_t done;         // signalled when left drops to 0
};

enum State : int { kNone, kRunning, kClosed };

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_work = PTHREAD_COND_INITIALIZER;   // a task was queued, or stop
std::atomic<int> g_state{kNone};      // changed under g_lock
std::atomic<int> g_nworkers{0};       // changed under g_lock
std::atomic<unsigned> g_gen{0};       // bumped under g_lock by stop: older workers exit
std::atomic<int> g_queued{0};         // tasks in the queue (changed under g_lock)
std::atomic<int> g_active{0};         // GPU jobs between enter and leave
Task *g_head = nullptr, *g_tail = nullptr; // tasks with unclaimed parts (g_lock)
pthread_t g_tids[kMaxThreads];             // the workers (g_lock)

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Start of part k: k * part, moved down so that dst + offset is 64-byte
// aligned (no cache line of dst is written by two threads); 0 and n at the
// ends.  Monotonic because part >= 64.
size_t part_begin(const Task *t, int k)
{
    if (k <= 0) return 0;
    if (k >= t->nparts) return t->n;
    size_t b = (size_t)k * t->part;
    if (b >= t->n) return t->n;
    b -= (size_t)(((uintptr_t)t->dst + b) & 63);
    return b;
}

void copy_part(const Task *t, int k)
{
    const size_t b = part_begin(t, k), e = part_begin(t, k + 1);
    if (e > b) std::memcpy(t->dst + b, t->src + b, e - b);
}

void queue_push(Task *t) // g_lock held
{
    t->prev = g_tail;
    t->succ = nullptr;
    if (g_tail != nullptr) g_tail->succ = t; else g_head = t;
    g_tail = t;
    g_queued.store(g_queued.load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

void queue_unlink(Task *t) // g_lock held
{
    if (t->prev != nullptr) t->prev->succ = t->succ; else g_head = t->succ;
    if (t->succ != nullptr) t->succ->prev = t->prev; else g_tail = t->prev;
    t->prev = t->succ = nullptr;
    g_queued.store(g_queued.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
}

// Claims the next part of t (g_lock held, t->next < t->nparts); a task whose
// last part is claimed leaves the queue.
int claim(Task *t)
{
    const int k = t->next++;
    if (t->next == t->nparts) queue_unlink(t);
    return k;
}

// A copied part (g_lock held).  t may be gone once this returns and the
// lock is released, if that was its last part.
void part_done(Task *t)
{
    if (t->left.fetch_sub(1, std::memory_order_acq_rel) == 1) pthread_cond_signal(&t->done);
}

// Polls (lock not held) until a task is queued, this worker's generation
// ends, no GPU job is active any more, or kSpin has passed.
void spin_for_work(unsigned gen)
{
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (unsigned i = 1;; ++i) {
        if (g_queued.load(std::memory_order_acquire) > 0 || g_gen.load(std::memory_order_relaxed) != gen ||
            g_active.load(std::memory_order_relaxed) == 0)
            return;
        cpu_relax();
        if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) return;
    }
}

void *worker_main(void *arg)
{
    const unsigned gen = (unsigned)(uintptr_t)arg;
    pthread_mutex_lock(&g_lock);
    for (;;) {
        if (g_gen.load(std::memory_order_relaxed) != gen) break;
        Task *t = g_head;
        if (t == nullptr) {
            if (g_active.load(std::memory_order_relaxed) > 0) {
                pthread_mutex_unlock(&g_lock);
                spin_for_work(gen);
                pthread_mutex_lock(&g_lock);
                if (g_head != nullptr || g_gen.load(std::memory_order_relaxed) != gen) continue;
            }
            pthread_cond_wait(&g_work, &g_lock); // re-checked at the loop's top
            continue;
        }
        const int k = claim(t);
        pthread_mutex_unlock(&g_lock);
        copy_part(t, k); // t lives: its caller waits for this part
        pthread_mutex_lock(&g_lock);
        part_done(t);
    }
    pthread_mutex_unlock(&g_lock);
    return nullptr;
}

// Threads that copy, the caller included: GPUAES_COPY_THREADS, else
// min(8, usable cores / 2); at least 1.
int configured_threads()
{
    unsigned hw = std::thread::hardware_concurrency();
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) { // taskset / cpuset limits
        const int c = CPU_COUNT(&set);
        if (c > 0 && (hw == 0 || (unsigned)c < hw)) hw = (unsigned)c;
    }
    int def = std::min(kDefaultMax, (int)(hw / 2));
    if (def < 1) def = 1;
    const char *e = std::getenv("GPUAES_COPY_THREADS");
    if (e != nullptr && e[0] != '\0') {
        char *end = nullptr;
        const long v = std::strtol(e, &end, 10);
        if (*end == '\0' && v >= 0) return v <= 1 ? 1 : (int)std::min<long>(v, kMaxThreads);
        // malformed: the default
    }
    return def;
}

// g_lock held, g_state == kNone.  Starts up to configured_threads() - 1
// workers; as many as could be created are used (0: callers copy alone).
void start_locked()
{
    const int want = configured_threads() - 1;
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

void parallel_memcpy(void *dst, const void *src, size_t n)
{
    if (n < 2 * kMinPart || g_state.load(std::memory_order_acquire) != kRunning ||
        g_nworkers.load(std::memory_order_relaxed) == 0) {
        if (n != 0) std::memcpy(dst, src, n);
        return;
    }
    Task t;
    t.dst = static_cast<unsigned char *>(dst);
    t.src = static_cast<const unsigned char *>(src);
    t.n = n;
    pthread_cond_init(&t.done, nullptr);

    pthread_mutex_lock(&g_lock);
    const int workers = g_nworkers.load(std::memory_order_relaxed);
    if (workers == 0) { // stopped meanwhile
        pthread_mutex_unlock(&g_lock);
        pthread_cond_destroy(&t.done);
        std::memcpy(dst, src, n);
        return;
    }
    // About two parts per thread (dynamic claiming evens out a late or slow
    // thread), none below kMinPart.
    const size_t maxparts = n / kMinPart; // >= 2
    t.nparts = (int)std::min<size_t>(maxparts, (size_t)2 * (size_t)(workers + 1));
    t.part = ((n + (size_t)t.nparts - 1) / (size_t)t.nparts + 63) & ~size_t(63);
    t.left.store(t.nparts, std::memory_order_relaxed);
    queue_push(&t);
    const int wake = std::min(t.nparts - 1, workers);
    if (wake >= workers) pthread_cond_broadcast(&g_work);
    else for (int i = 0; i < wake; ++i) pthread_cond_signal(&g_work);

    // Our own parts, while any is unclaimed.
    while (t.next < t.nparts) {
        const int k = claim(&t);
        pthread_mutex_unlock(&g_lock);
        copy_part(&t, k);
        pthread_mutex_lock(&g_lock);
        part_done(&t);
    }
    // The rest is being copied by workers: poll a little, then sleep.
    if (t.left.load(std::memory_order_acquire) != 0) {
        pthread_mutex_unlock(&g_lock);
        const auto until = std::chrono::steady_clock::now() + kSpin;
        for (unsigned i = 1; t.left.load(std::memory_order_acquire) != 0; ++i) {
            cpu_relax();
            if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) break;
        }
        pthread_mutex_lock(&g_lock); // also: the last worker has left part_done()
        while (t.left.load(std::memory_order_acquire) != 0) pthread_cond_wait(&t.done, &g_lock);
    }
    pthread_mutex_unlock(&g_lock);
    pthread_cond_destroy(&t.done);
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
    // Each finishes the part in hand (< 1 ms) and exits.  Queued tasks keep
    // their unclaimed parts: their callers copy them.
    for (int i = 0; i < n; ++i) (void)pthread_join(tids[i], nullptr);
}

void copy_pool_atfork_child()
{
    // The child has only the forking thread: no worker, no other caller.  A
    // parent thread may have held g_lock at fork() time.
    pthread_mutex_init(&g_lock, nullptr);
    pthread_cond_init(&g_work, nullptr);
    g_head = g_tail = nullptr;
    g_queued.store(0);
    g_active.store(0);
    g_nworkers.store(0);
    // A parent that had started the pool had used CUDA: its child never runs
    // a GPU job.  Close the pool anyway (plain memcpy, no thread, no join).
    if (g_state.load() != kNone) g_state.store(kClosed);
}

int copy_pool_workers() { return g_nworkers.load(std::memory_order_relaxed); }

} // namespace gpuaes
