#define _POSIX_C_SOURCE 200809L  /* clock_gettime */
/*
 * dispatch.c - CPU or GPU, per call: the one place that decides.
 *
 * Asked only for calls at or above the operation's threshold (the size below
 * which the GPU path never won, measured on an idle H200: settings.c).  From
 * there on a call goes to the GPU only when it is predicted to finish sooner
 * there, from estimates this process keeps up to date:
 *
 *   CPU:  ns per byte of the default provider, per operation and key size,
 *         from CPU calls of at least DISPATCH_SAMPLE bytes.  Measured while
 *         the machine is as busy as it is, so a loaded CPU counts as slower.
 *   GPU:  ns per byte of a whole GPU job (copies, PCIe, kernels, waiting),
 *         per operation and size class (powers of two), scaled to one job
 *         alone: jobs in flight at once share the path.  Another process on
 *         the same GPU, memory pressure or a slow GPU show up here.
 *
 *   to the GPU  iff  len * gpu_ns(kind, len) * (1 + busy)
 *                  <  len * cpu_ns(kind, keylen)
 *
 * busy: the GPU jobs in flight now, or the other threads that sent it work
 * in the last ACTIVE_NS if more (gpu_users), plus the threads deciding at
 * this moment: threads that decide together would otherwise all see an idle
 * GPU, and a GCM message keeps the engine its first data chose.  A thread
 * that decides for the GPU stamps itself before it leaves the decision, so
 * the next one counts it either way.
 *
 * The GPU path also takes CPU: the caller's core and the staging copy
 * threads (two host copies per byte outside CTR).  On the H200 machine, with
 * 16 threads on its 16 cores, every GPU share lost (0.83-0.97x: the copy
 * threads took cores from the application's threads; bench/results).  So
 * while more than half of the cores' worth of threads are making large
 * calls (seen in the last ACTIVE_NS), every call stays on its own core.
 *
 * An estimate not yet measured is measured: an unknown CPU rate sends the
 * call to the CPU, an unknown GPU rate to the GPU.  A GPU estimate that says
 * "slower" is tried again now and then (one declined call in EXPLORE, when
 * no job is in flight), so a GPU that got faster is noticed.  A GPU failure
 * (an allocation that did not fit, say) keeps the GPU out for a back-off
 * that doubles with each failure in a row (10 ms .. 10 s) and ends with a
 * success: calls meanwhile go straight to the CPU instead of retrying.
 *
 * An explicit offload_min_bytes (openssl.cnf or GPUAES_OFFLOAD_MIN_BYTES) is
 * the user's policy: every call from that size goes to the GPU, as before,
 * with no back-off (the tests rely on it).
 */
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "gpuaes.h"

#define CLASSES 16                     /* size classes: 2^16 (64 KiB) .. 2^31 and up */
#define CLASS0 16
#define FIX 16                         /* estimates in ns per byte, 16 fractional bits */
#define EXPLORE 64
#define WARM 3                         /* GPU samples before an estimate may say "slower" */
#define BACKOFF_MIN_NS 10000000ULL     /* 10 ms */
#define BACKOFF_MAX_NS 10000000000ULL  /* 10 s */
#define ACTIVE_SLOTS 64                /* threads tracked (more are counted as 64) */
#define ACTIVE_NS 100000000ULL         /* a thread that made a large call this recently is active
                                          (longer than one 64 MiB call on a loaded core) */

static _Atomic uint64_t cpu_est[OFFLOAD_KINDS][3];        /* per key size: 128, 192, 256 */
static _Atomic uint64_t gpu_est[OFFLOAD_KINDS][CLASSES];
static _Atomic unsigned gpu_samples[OFFLOAD_KINDS][CLASSES];
static _Atomic unsigned declined[OFFLOAD_KINDS];
static _Atomic int inflight;                               /* GPU jobs now, all threads */
static _Atomic unsigned deciding;                          /* threads inside a decision now (a
                                                              fork during one leaves the child
                                                              counting one more: only cautious) */
static _Atomic uint64_t backoff_until, backoff_ns, backoffs;

/* Threads making large calls: each thread stamps a slot of its own. */
static _Atomic uint64_t active_seen[ACTIVE_SLOTS];
static _Atomic uint64_t gpu_seen[ACTIVE_SLOTS];            /* ... and sent the GPU a job */
static _Atomic unsigned active_next;
static _Thread_local int active_slot = -1;
static long ncores;

static unsigned active_threads(uint64_t now)
{
    unsigned n = 0;

    if (active_slot < 0)
        active_slot = (int)(atomic_fetch_add(&active_next, 1) % ACTIVE_SLOTS);
    atomic_store_explicit(&active_seen[active_slot], now, memory_order_relaxed);
    for (int i = 0; i < ACTIVE_SLOTS; i++)
        if (now - atomic_load_explicit(&active_seen[i], memory_order_relaxed) < ACTIVE_NS)
            n++;
    return n;
}

/*
 * Other threads that sent the GPU work in the last ACTIVE_NS (this thread's
 * slot is stamped by active_threads()).  Jobs in flight undercount the GPU's
 * load where decisions are made together: threads starting at once all see
 * none in flight, and a GCM message decided for the GPU keeps it for every
 * later piece (measured, H200: 4 threads x 8 MiB GCM messages, all on the GPU,
 * 0.75x; 16 threads x 64 MiB, 0.76x).
 */
static unsigned gpu_users(uint64_t now)
{
    unsigned n = 0;

    for (int i = 0; i < ACTIVE_SLOTS; i++)
        if (i != active_slot
            && now - atomic_load_explicit(&gpu_seen[i], memory_order_relaxed) < ACTIVE_NS)
            n++;
    return n;
}

/* This thread sends (or is about to send) the GPU a job. */
static void to_gpu(uint64_t now)
{
    if (active_slot >= 0)
        atomic_store_explicit(&gpu_seen[active_slot], now, memory_order_relaxed);
}

static int cores_busy(uint64_t now)
{
    if (ncores <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        ncores = n > 0 ? n : 1;
    }
    return (long)active_threads(now) * 2 > ncores;
}

uint64_t dispatch_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

static int size_class(size_t len)
{
    int c = 0;

    while (c < CLASSES - 1 && (len >> (CLASS0 + c + 1)) != 0)
        c++;
    return c;
}

static int key_index(size_t keylen)
{
    return keylen <= 16 ? 0 : keylen <= 24 ? 1 : 2;
}

/* Exponentially weighted: recent calls count most (1/8 each; 1/2 while
 * `young`, so that a first sample that paid one-time costs fades fast); a
 * lost race loses one sample. */
static void ewma(_Atomic uint64_t *e, uint64_t sample, int young)
{
    uint64_t old = atomic_load_explicit(e, memory_order_relaxed);
    unsigned shift = young ? 1 : 3;

    atomic_store_explicit(e, old == 0 ? sample : old - (old >> shift) + (sample >> shift),
                          memory_order_relaxed);
}

static uint64_t per_byte(uint64_t ns, size_t len)
{
    uint64_t v = len > 0 ? (ns << FIX) / len : 0;

    return v > 0 ? v : 1;              /* 0 means "not measured" */
}

/* Sooner on the GPU, shared `busy` more ways, than on the CPU? */
static int gpu_sooner(offload_kind kind, size_t len, uint64_t cpu, unsigned busy)
{
    uint64_t gpu = atomic_load_explicit(&gpu_est[kind][size_class(len)], memory_order_relaxed);

    if (gpu == 0 || atomic_load_explicit(&gpu_samples[kind][size_class(len)],
                                         memory_order_relaxed) < WARM)
        return busy == 0;              /* a first job, alone: it includes one-time costs */
    if (gpu * (uint64_t)(1 + busy) < cpu)
        return 1;
    /* Look again now and then: the GPU may have become faster. */
    return busy == 0 && atomic_fetch_add_explicit(&declined[kind], 1, memory_order_relaxed)
                            % EXPLORE == EXPLORE - 1;
}

int dispatch_to_gpu(const gpuaes_prov *prov, offload_kind kind, size_t keylen, size_t len)
{
    uint64_t cpu, now, until = atomic_load_explicit(&backoff_until, memory_order_relaxed);
    unsigned busy, users;
    int jobs, go;

    if (prov->offload_min_set)
        return 1;
    now = dispatch_now_ns();
    if ((until != 0 && now < until) || cores_busy(now))
        return 0;
    cpu = atomic_load_explicit(&cpu_est[kind][key_index(keylen)], memory_order_relaxed);
    if (cpu == 0)
        return 0;                      /* measure the CPU first */
    /* acq_rel: a thread that enters after another left sees its stamp. */
    busy = atomic_fetch_add_explicit(&deciding, 1, memory_order_acq_rel);
    users = gpu_users(now);
    jobs = atomic_load_explicit(&inflight, memory_order_relaxed);
    busy += jobs > (int)users ? (unsigned)jobs : users;
    go = gpu_sooner(kind, len, cpu, busy);
    if (go)
        to_gpu(now);
    atomic_fetch_sub_explicit(&deciding, 1, memory_order_acq_rel);
    return go;
}

void dispatch_cpu_done(offload_kind kind, size_t keylen, size_t len, uint64_t ns)
{
    if (len >= DISPATCH_SAMPLE)
        (void)active_threads(dispatch_now_ns());
    if (len >= DISPATCH_SAMPLE)
        ewma(&cpu_est[kind][key_index(keylen)], per_byte(ns, len), 0);
}

int dispatch_gpu_begin(void)
{
    uint64_t now = dispatch_now_ns();

    (void)active_threads(now);
    to_gpu(now);
    return atomic_fetch_add_explicit(&inflight, 1, memory_order_relaxed);
}

void dispatch_gpu_end(offload_kind kind, size_t len, size_t done, int ok, int busy_at_start,
                      uint64_t ns)
{
    int busy_at_end = atomic_fetch_sub_explicit(&inflight, 1, memory_order_relaxed) - 1;

    if (!ok) {                         /* back off: 10 ms, doubling, at most 10 s */
        uint64_t b = atomic_load(&backoff_ns);

        b = b == 0 ? BACKOFF_MIN_NS : b * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : b * 2;
        atomic_store(&backoff_ns, b);
        atomic_store(&backoff_until, dispatch_now_ns() + b);
        atomic_fetch_add(&backoffs, 1);
        gpuaes_debug("GPU failed: the CPU takes every call for %llu ms",
                     (unsigned long long)(b / 1000000));
        return;
    }
    /* Only work done ends a back-off: a GPUAES_BUSY answer (no slot free, the
     * memory cap, the GPU layer's own back-off) says nothing of the GPU. */
    if (done > 0 && atomic_load_explicit(&backoff_ns, memory_order_relaxed) != 0) {
        atomic_store(&backoff_ns, 0);
        atomic_store(&backoff_until, 0);
    }
    if (done == len && len > 0) {
        /* Shared with about this many jobs for its duration: one alone would
         * have taken that many times less. */
        uint64_t share = 1 + (uint64_t)(busy_at_start + (busy_at_end > 0 ? busy_at_end : 0)) / 2;

        unsigned n = atomic_fetch_add_explicit(&gpu_samples[kind][size_class(len)], 1,
                                               memory_order_relaxed);

        ewma(&gpu_est[kind][size_class(len)], per_byte(ns, len) / share + 1, n < 2 * WARM);
    }
}

uint64_t dispatch_backoffs(void)
{
    return atomic_load(&backoffs);
}
