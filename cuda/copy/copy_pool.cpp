// copy_pool.cpp - parallel host memcpy (and the XOR of data against GPU
// keystream) for the staging copies (see copy_pool.h): the queues, the
// workers and their waits; one part's copy is copy_part.cpp's, the load
// rule copy_load.cpp's.
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
// the process if destroyed unjoined), with every signal blocked
// (runtime/quiet_thread.h), and are
// joined by copy_pool_stop(): at exit (atexit handler) or dlclose, so that
// no thread runs the module's code once it is unloaded.  The pool's own
// primitives are statically initialised pthread ones, never destroyed (no
// static destructor runs at exit).
//
// Fork: copy_pool_atfork_child(), the module's fork handler's part
// (runtime/fork_child.h), registered at the first start (and by the GPU
// layer when it is loaded: copy_pool_atfork_install), re-creates the lock
// and forgets the workers, which exist only in the parent (its exit-time
// stop must not join them); the child's next enter starts its own (a child
// in service mode copies into its segments).
#include "copy/copy_pool.h"
#include "copy/copy_part.h"
#include "copy/copy_load.h"
#include "runtime/gpu_settings.h"
#include "runtime/clock.h"
#include "runtime/fork_child.h"
#include "runtime/poll_wait.h"
#include "runtime/quiet_thread.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <sched.h>
#include <unistd.h>

namespace gpuaes {
namespace {

constexpr size_t kDefaultPart = size_t(256) << 10; // largest part (the unit threads claim)
// Smallest part worth handing to another thread (measured: 256 KiB parts lost
// 10-25 % on 1-4 MiB jobs against 64 KiB ones).
constexpr size_t kMinPart = size_t(64) << 10;
constexpr int kMaxParts = 1 << 14;
constexpr int kMaxThreads = 64;               // GPUAES_COPY_THREADS is capped here
constexpr int kDefaultMax = 8;                // default: min(8, cores / 2) threads exist
// Idle workers, and an owner waiting for the workers' last parts, poll
// kPollBeforeSleepNs before they sleep (poll_wait.h).  A sleeping worker
// wakes 10-40 us late here (bench/probe/copy_latency.cpp "pool cold"), the
// time of one to two 256 KiB parts at ~12 GB/s.
// The load rule (copy_workers_for), re-sampled at most this often.
constexpr int64_t kSampleNs = 50'000'000;

enum State : int { kNone, kRunning, kClosed };

// Lock order: g_stop_lock, then g_lock.  g_stop_lock makes a restart wait
// until the workers of a stop have been joined (each worker slot, with its
// condition variable, is used by one thread at a time).
pthread_mutex_t g_stop_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
std::atomic<int> g_state{kNone};      // changed under g_lock
std::atomic<int> g_nworkers{0};       // changed under g_lock
std::atomic<int> g_allowed{0};        // workers that may take parts now (the load rule)
std::atomic<unsigned> g_gen{0};       // bumped under g_lock by stop: older workers exit
std::atomic<int> g_queued{0};         // copies in the queue (changed under g_lock)
std::atomic<int> g_active{0};         // owners between enter and leave (the load rule's "jobs")
std::atomic<size_t> g_part{kDefaultPart}; // GPUAES_COPY_PART, read at start
std::atomic<bool> g_fixed{false};     // GPUAES_COPY_THREADS set: no load rule
int g_test_threads = 0;               // copy_pool_test_auto_threads() (g_lock)
int g_sleepers = 0;                   // workers asleep, not yet woken (g_lock)
// Copies with unclaimed parts (g_lock): [0] normal, [1] urgent (taken first).
struct Queue {
    CopyTask *head = nullptr, *tail = nullptr;
};
Queue g_q[2];
// One worker.  Each sleeps on its own condition variable, so that an owner
// wakes exactly the workers the load rule allows (the lowest-numbered ones).
struct Worker {
    pthread_t tid;
    unsigned gen = 0;                     // its generation (set under g_lock before it starts)
    pthread_cond_t cv;                    // (g_lock) wakes this worker
    bool sleeping = false;                // (g_lock) waiting on cv, nobody woke it yet
    std::atomic<int64_t> awake_since{0};  // steady ns of its last wake-up, 0 while asleep
};
Worker g_w[kMaxThreads];
pthread_once_t g_cv_once = PTHREAD_ONCE_INIT;
std::atomic<int64_t> g_awake_ns{0};     // workers' finished awake spells, summed
std::atomic<int64_t> g_next_sample{0};  // steady ns of the next load sample
std::atomic<bool> g_sampling{false};    // a thread is sampling now

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

// Polls (lock not held) until a copy is queued (true), or for
// kPollBeforeSleepNs, or until this worker's generation ended (false).
bool spin_for_work(unsigned gen)
{
    const int64_t until = mono_ns() + kPollBeforeSleepNs;
    for (unsigned i = 1;; ++i) {
        if (g_queued.load(std::memory_order_acquire) > 0) return true;
        if (g_gen.load(std::memory_order_relaxed) != gen) return false;
        cpu_relax();
        if ((i & 63) == 0 && mono_ns() >= until) return false;
    }
}

// g_lock held: sleeps until an owner or stop wakes this worker.  The waker
// clears `sleeping` (so that two owners never count one sleeper twice).
void sleep_locked(Worker &me, unsigned gen)
{
    me.sleeping = true;
    ++g_sleepers;
    g_awake_ns.fetch_add(mono_ns() - me.awake_since.load(std::memory_order_relaxed), std::memory_order_relaxed);
    me.awake_since.store(0, std::memory_order_relaxed);
    while (me.sleeping && g_gen.load(std::memory_order_relaxed) == gen) pthread_cond_wait(&me.cv, &g_lock);
    if (me.sleeping) { // stopped
        me.sleeping = false;
        --g_sleepers;
    }
    me.awake_since.store(mono_ns(), std::memory_order_relaxed);
}

// g_lock held, a copy with unclaimed parts queued: wakes one sleeping
// worker among the allowed ones if fewer than `want` of those are awake.
// One at a time: the owner pays one wake-up (a futex system call, a few us)
// at most per copy, and each woken worker that finds parts left wakes the
// next (a chain: ~7 wake-ups take well under a 64 MiB copy's first part).
// No sleeper, no system call.
void wake_one_locked(int want)
{
    if (g_sleepers == 0 || want <= 0) return; // every worker is awake: they find the copy
    const int allowed = std::min(g_allowed.load(std::memory_order_relaxed), g_nworkers.load(std::memory_order_relaxed));
    int awake = 0;
    for (int i = 0; i < allowed; ++i) awake += g_w[i].sleeping ? 0 : 1;
    if (awake >= want) return;
    for (int i = 0; i < allowed; ++i) {
        if (!g_w[i].sleeping) continue;
        g_w[i].sleeping = false;
        --g_sleepers;
        pthread_cond_signal(&g_w[i].cv);
        return;
    }
}

// A worker copies parts while the load rule allows it (id < g_allowed),
// polls kPollBeforeSleepNs for more after its last one, then sleeps until an
// owner wakes it.  `spun`: it has polled since its last part or wake-up.
void *worker_main(void *arg)
{
    const int id = (int)(uintptr_t)arg;
    Worker &me = g_w[id];
    pthread_mutex_lock(&g_lock);
    const unsigned gen = me.gen;
    bool spun = false;
    for (;;) {
        if (g_gen.load(std::memory_order_relaxed) != gen) break;
        const bool allowed = id < g_allowed.load(std::memory_order_relaxed);
        CopyTask *t = allowed ? queue_first() : nullptr;
        if (t != nullptr) {
            const int k = claim(t);
            wake_one_locked(t->nparts - t->next); // parts left for others: wake the next
            pthread_mutex_unlock(&g_lock);
            copy_part(t, k); // t lives: its owner waits for this part
            pthread_mutex_lock(&g_lock);
            worker_part_done(t);
            spun = false;
            continue;
        }
        if (!spun) {
            spun = true;
            if (allowed) {
                pthread_mutex_unlock(&g_lock);
                (void)spin_for_work(gen);
                pthread_mutex_lock(&g_lock);
            }
            continue; // re-checked under the lock: a copy queued now is seen, or wakes us
        }
        sleep_locked(me, gen);
        spun = false;
    }
    g_awake_ns.fetch_add(mono_ns() - me.awake_since.load(std::memory_order_relaxed), std::memory_order_relaxed);
    me.awake_since.store(0, std::memory_order_relaxed);
    pthread_mutex_unlock(&g_lock);
    return nullptr;
}

// The workers' awake time so far (ns): finished spells and running ones.
int64_t workers_awake_ns(int64_t now)
{
    int64_t s = g_awake_ns.load(std::memory_order_relaxed);
    const int n = g_nworkers.load(std::memory_order_relaxed);
    for (int i = 0; i < n; ++i) {
        const int64_t a = g_w[i].awake_since.load(std::memory_order_relaxed);
        if (a != 0 && now > a) s += now - a;
    }
    return s;
}


// Re-computes g_allowed from the load since the previous sample (the
// first one: since boot).  Run by one thread at a time (g_sampling).
void sample_load(int64_t now)
{
    const int n = copy_load_sample(now, workers_awake_ns(now), g_nworkers.load(std::memory_order_relaxed), g_active);
    if (n >= 0) g_allowed.store(n, std::memory_order_relaxed);
}

// Re-samples the load if the last sample is older than kSampleNs (load rule only).
void maybe_sample()
{
    if (g_fixed.load(std::memory_order_relaxed)) return;
    const int64_t now = mono_ns();
    if (now < g_next_sample.load(std::memory_order_relaxed)) return;
    if (g_sampling.exchange(true, std::memory_order_acquire)) return; // another thread does it
    g_next_sample.store(now + kSampleNs, std::memory_order_relaxed);
    sample_load(now);
    g_sampling.store(false, std::memory_order_release);
}

// Threads that may copy, the caller included: GPUAES_COPY_THREADS, else
// min(8, usable cores / 2); at least 1.  The load rule decides how many of
// the workers copy at any time.
int configured_threads()
{
    const int set = gpu_settings().copy_threads; // 1..64 (the provider checked), 0: the default
    if (set > 0) return std::min(set, kMaxThreads);
    if (g_test_threads > 0) return g_test_threads;
    const long online = sysconf(_SC_NPROCESSORS_ONLN);
    unsigned hw = online > 0 ? (unsigned)online : 0;
    cpu_set_t set_cpus;
    CPU_ZERO(&set_cpus);
    if (sched_getaffinity(0, sizeof set_cpus, &set_cpus) == 0) { // taskset / cpuset limits
        const int c = CPU_COUNT(&set_cpus);
        if (c > 0 && (hw == 0 || (unsigned)c < hw)) hw = (unsigned)c;
    }
    const int def = std::min(kDefaultMax, (int)(hw / 2));
    return def < 1 ? 1 : def;
}

void init_cvs()
{
    for (Worker &w : g_w) pthread_cond_init(&w.cv, nullptr);
}

// g_stop_lock and g_lock held, g_state == kNone, no worker left from an
// earlier start.  Starts up to configured_threads() - 1 workers; as many as
// could be created are used (0: owners copy alone).
void start_locked()
{
    pthread_once(&g_cv_once, init_cvs);
    const int want = configured_threads() - 1;
    g_fixed.store(gpu_settings().copy_threads > 0, std::memory_order_relaxed);
    g_part.store(gpu_settings().copy_part & ~size_t(63), std::memory_order_relaxed);
    const unsigned gen = g_gen.load(std::memory_order_relaxed);
    int n = 0;
    if (want > 0) {
        for (; n < want; ++n) {
            Worker &w = g_w[n];
            w.gen = gen;
            w.sleeping = false;
            w.awake_since.store(mono_ns(), std::memory_order_relaxed);
            if (!start_quiet_thread(&w.tid, worker_main, (void *)(uintptr_t)n, "gpuaes-copy")) {
                w.awake_since.store(0, std::memory_order_relaxed);
                break;
            }
        }
    }
    g_nworkers.store(n, std::memory_order_relaxed);
    // Fixed: all of them.  Load rule: none until the first sample (next).
    g_allowed.store(g_fixed.load(std::memory_order_relaxed) ? n : 0, std::memory_order_relaxed);
    g_next_sample.store(0, std::memory_order_relaxed);
    g_state.store(kRunning, std::memory_order_release);
}

} // namespace

void copy_pool_enter()
{
    g_active.fetch_add(1, std::memory_order_relaxed);
    copy_pool_ready();
}

void copy_pool_ready()
{
    if (g_state.load(std::memory_order_acquire) == kNone) {
        // Our own part of the fork handler, registered before the first
        // worker exists (and outside the locks): the pool does not rely on
        // its users' fork handling.
        copy_pool_atfork_install();
        pthread_mutex_lock(&g_stop_lock); // a stop's workers are joined first
        pthread_mutex_lock(&g_lock);
        if (g_state.load(std::memory_order_relaxed) == kNone) start_locked();
        pthread_mutex_unlock(&g_lock);
        pthread_mutex_unlock(&g_stop_lock);
    }
    maybe_sample();
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
    const int allowed = std::min(g_allowed.load(std::memory_order_relaxed), g_nworkers.load(std::memory_order_relaxed));
    const size_t threads = (size_t)std::max(allowed, 0) + 1;
    size_t part = (n / threads + 63) & ~size_t(63);
    part = std::max(kMinPart, std::min(part, g_part.load(std::memory_order_relaxed)));
    const size_t parts = (n + part - 1) / part;
    t->nparts = (int)std::min<size_t>(parts == 0 ? 1 : parts, (size_t)kMaxParts);
    t->part = ((n + (size_t)t->nparts - 1) / (size_t)t->nparts + 63) & ~size_t(63);
    if (t->part == 0) t->part = 64;
    t->left.store(t->nparts, std::memory_order_relaxed);
    if (t->nparts < 2 || allowed <= 0 || g_state.load(std::memory_order_acquire) != kRunning)
        return; // the owner copies it all
    pthread_cond_init(&t->done, nullptr);
    pthread_mutex_lock(&g_lock);
    if (g_nworkers.load(std::memory_order_relaxed) == 0) { // stopped meanwhile
        pthread_mutex_unlock(&g_lock);
        pthread_cond_destroy(&t->done);
        return;
    }
    t->queued = true;
    queue_push(t);
    wake_one_locked(std::min(t->nparts - 1, allowed)); // the owner takes parts too
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
        // The rest is being copied by workers (a part each, ~20 us): poll
        // as long as a wake-up would cost, then sleep.
        const int64_t until = mono_ns() + kPollBeforeSleepNs;
        for (unsigned i = 1; t->left.load(std::memory_order_acquire) != 0; ++i) {
            cpu_relax();
            if ((i & 63) == 0 && mono_ns() >= until) break;
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
    pthread_mutex_lock(&g_stop_lock);
    pthread_mutex_lock(&g_lock);
    const int n = g_nworkers.load(std::memory_order_relaxed);
    g_nworkers.store(0, std::memory_order_relaxed);
    g_allowed.store(0, std::memory_order_relaxed);
    g_gen.store(g_gen.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (final) g_state.store(kClosed, std::memory_order_release);
    else if (g_state.load(std::memory_order_relaxed) == kRunning) g_state.store(kNone, std::memory_order_release);
    for (int i = 0; i < n; ++i) {
        tids[i] = g_w[i].tid;
        if (g_w[i].sleeping) {
            g_w[i].sleeping = false;
            --g_sleepers;
        }
        pthread_cond_signal(&g_w[i].cv);
    }
    pthread_mutex_unlock(&g_lock);
    // Each finishes the part in hand (< 1 ms) and exits.  Queued copies keep
    // their unclaimed parts: their owners copy them.
    for (int i = 0; i < n; ++i) (void)pthread_join(tids[i], nullptr);
    pthread_mutex_unlock(&g_stop_lock);
}

void copy_pool_atfork_install() { fork_child_add(ForkReset::copy_pool, copy_pool_atfork_child); }

void copy_pool_atfork_child()
{
    // The child has only the forking thread: no worker, no other owner.  A
    // parent thread may have held a lock at fork() time.
    pthread_mutex_init(&g_stop_lock, nullptr);
    pthread_mutex_init(&g_lock, nullptr);
    g_q[0] = g_q[1] = Queue();
    g_queued.store(0);
    g_active.store(0);
    g_nworkers.store(0);
    g_allowed.store(0);
    g_sleepers = 0;
    for (Worker &w : g_w) {
        w.sleeping = false;
        w.awake_since.store(0);
    }
    g_sampling.store(false);
    for (Worker &w : g_w) pthread_cond_init(&w.cv, nullptr); // as the lock: a parent thread may have been in one
    // No worker exists here (g_nworkers 0: nothing of the parent's is
    // joined); the next enter starts a new set.  A child of a process that
    // used CUDA never runs a GPU job, but one in service mode copies into
    // its segments (gpuaes_host_copy).  A pool closed for good stays closed.
    if (g_state.load() == kRunning) g_state.store(kNone);
}

int copy_pool_workers() { return g_nworkers.load(std::memory_order_relaxed); }

int copy_pool_owners() { return g_active.load(std::memory_order_relaxed); }

int copy_pool_allowed()
{
    return std::min(g_allowed.load(std::memory_order_relaxed), g_nworkers.load(std::memory_order_relaxed));
}

void copy_pool_test_auto_threads(int threads)
{
    pthread_mutex_lock(&g_lock);
    g_test_threads = std::max(0, std::min(threads, kMaxThreads));
    pthread_mutex_unlock(&g_lock);
}

} // namespace gpuaes
