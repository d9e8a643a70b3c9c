#define _GNU_SOURCE  /* sched_getaffinity, CPU_COUNT */
/*
 * dispatch.c - CPU or GPU, per call: the one place that decides.
 *
 * Asked only for calls at or above the operation's threshold (the size below
 * which the GPU path never won, measured on an idle H200: settings.c; or
 * offload_min_bytes).  From there on a call goes to the GPU only when it is
 * predicted to finish sooner there, from estimates this process keeps up to
 * date:
 *
 *   CPU:  ns per byte of the default provider, per operation, key size and
 *         size class (cache-hot or not), from CPU calls of at least
 *         DISPATCH_SAMPLE bytes (a class not sampled yet borrows a
 *         neighbour's: cpu_estimate).  Measured while the machine is as busy
 *         as it is, so a loaded CPU counts as slower.
 *   GPU:  ns per byte of a whole GPU job (copies, PCIe, kernels, waiting),
 *         per operation and size class (powers of two), scaled to one job
 *         alone: jobs in flight at once share the path.  Another process on
 *         the same GPU, memory pressure or a slow GPU show up here.
 *
 *   to the GPU  iff  len * gpu_ns(kind, len) * (1 + busy)
 *                  <  len * cpu_ns(kind, keylen)
 *
 * busy: the GPU jobs in flight now, or the other threads that sent it work
 * recently if more (gpu_users: stamped as for large calls, below), plus the threads deciding at
 * this moment: threads that decide together would otherwise all see an idle
 * GPU, and a GCM message stays on gpuaes's engine once it has it.  A thread
 * that decides for the GPU stamps itself before it leaves the decision, so
 * the next one counts it either way.  Plus, with the service backend, the
 * jobs other processes have in flight on the same GPU (gpu()->load(): the
 * service's published load; 0 in process, where nothing else is seen).
 * While this process's GPU estimate is not yet warm, the service's measured
 * rate for the op (same load) stands in for it, so that a fresh process
 * beside busy ones does not send its first jobs to a saturated GPU, and one
 * whose contention ended goes back to the GPU at once.
 *
 * The GPU path also takes CPU: the caller's core and the staging copy
 * threads (two host copies per byte outside CTR).  On the H200 machine, with
 * 16 threads on its 16 cores, every GPU share lost (0.83-0.97x: the copy
 * threads took cores from the application's threads; bench/results/README.md,
 * earlier runs: 2026-11-23-h200/evp-dispatch-first.txt).  So
 * while more than one thread, and more than half of the cores' worth of
 * threads, are making large calls, every call stays on its own core.  The
 * cores are those the process may run on (its affinity set, so taskset and
 * cpusets count), counted once.  A thread counts as making large calls from
 * its decision for up to ACTIVE_NS (the call) and IDLE_NS after its call
 * ended (the gap to its next one), so a phase of many threads is forgotten
 * IDLE_NS after it ends.
 *
 * Threads that begin large calls together (a pool woken at once) decide
 * before they can see each other: each counts only those that decided
 * before it.  That costs a block mode one call per thread; a GCM message
 * that starts on the GPU stays on gpuaes's engine for its whole length
 * (cipher_gcm.c; one left on the CPU moves to the GPU at a later update the
 * GPU would take, if its first data was large), its later updates asked here
 * again (gcm_engine.c: on the CPU they take the default provider's stitched
 * pass, gcm_fused.c).  Measured on the H200 before they were, 16 threads
 * starting GCM messages at once put 4-6 of them on the GPU for good
 * (0.72-0.84x the default provider: their host copies took memory bandwidth
 * and cores from the others).  So a GCM message does not start on the GPU while another thread
 * began making large calls less than RAMP_NS ago: the first of a burst may,
 * the rest start on the CPU, and a lone thread is never held.
 *
 * An estimate not yet measured is measured: the CPU's aside, by the first
 * caller that needs it (dispatch_cpu_claim, offload_measure_cpu; should
 * that fail, the call goes to the CPU), the GPU's by sending the call there.
 * The path that loses is tried again ("explored") by time, not by call
 * count, either way: once its estimate is EXPLORE_MIN_NS old and either
 * older than the kind's explore gap or sampled under a load (threads making
 * large calls) at least twice or half today's (and twice as old as the last
 * explore call took); for a loser FAR behind the gap is at least
 * EXPLORE_COST times its estimate of the call from the first look on.  One thread explores at a time (a CAS on the estimate's
 * time).  An explore sample FAR off its estimate replaces it (a fresh look
 * at a stale estimate); one that agrees doubles the gap (EXPLORE_MIN_NS ..
 * EXPLORE_MAX_NS, and at least EXPLORE_COST times the explore call's own
 * duration, which bounds what looking again costs).  The second far-off
 * sample in a row (the same way) of the winning path weighs 1/2 instead of
 * 1/8.  The CPU is not looked at again where a CPU answer binds later calls
 * (a GCM message's start: offload_call.cpu_binds).  A GPU failure
 * (an allocation that did not fit, say) keeps the GPU out for a back-off
 * that doubles with each failure in a row (10 ms .. 10 s) and ends with a
 * success: calls meanwhile go straight to the CPU instead of retrying.
 *
 * offload_min_bytes only moves the thresholds: from them on this still
 * decides.  dispatch = force (openssl.cnf or GPUAES_DISPATCH) is the user's
 * policy: every call from the threshold goes to the GPU, with no back-off
 * (the tests and the GPU path's benchmarks rely on it).
 */
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "prov_ctx.h"
#include "offload.h"
#include "debug.h"
#include "gpu_backend.h"

#define CLASSES 16                     /* size classes: 2^16 (64 KiB) .. 2^31 and up */
#define CLASS0 16
#define FIX 16                         /* estimates in ns per byte, 16 fractional bits */
#define WARM 3                         /* GPU samples before an estimate may say "slower" */
#define EXPLORE_MIN_NS 20000000ULL     /* 20 ms: an estimate younger than this is not explored */
#define EXPLORE_MAX_NS 1000000000ULL   /* 1 s: the longest a losing path goes unexplored, unless... */
#define EXPLORE_COST 16                /* ... its explore calls took more than 1/16 of that */
#define FAR 2                          /* a sample this many times off its estimate is news */
#define BACKOFF_MIN_NS 10000000ULL     /* 10 ms */
#define BACKOFF_MAX_NS 10000000000ULL  /* 10 s */
#define ACTIVE_SLOTS 64                /* threads tracked (more are counted as 64) */
#define ACTIVE_NS 100000000ULL         /* a thread in a large call counts this long from its decision
                                          (longer than one 64 MiB call on a loaded core) */
#define IDLE_NS 20000000ULL            /* ... and this long after its call ended */
#define RAMP_NS 5000000ULL             /* threads that began large calls this close together
                                          began as one burst */

/* One estimate: ns per byte, when it was last sampled, and the threads making
 * large calls then (a load twice or half today's makes it worth a new look);
 * far: its last sample was FAR slower (1) or faster (-1) than it, else 0. */
typedef struct estimate {
    _Atomic uint64_t ns, at;
    _Atomic unsigned load, samples;
    _Atomic int far;
} estimate;

static estimate cpu_est[OFFLOAD_KINDS][3][CLASSES];        /* per key size (128, 192, 256) and size class */
static _Atomic int cpu_claimed[OFFLOAD_KINDS][3];          /* its first estimate measured aside */
static estimate gpu_est[OFFLOAD_KINDS][CLASSES];
static _Atomic uint64_t explore_gap[OFFLOAD_KINDS];        /* 0: EXPLORE_MIN_NS */
static _Atomic uint64_t explore_ns[OFFLOAD_KINDS];         /* the last explore call's time */
static _Thread_local int exploring = -1;                   /* kind * 2 + path of this thread's
                                                              explore call, until its sample */
static _Thread_local uint64_t explore_bar;                 /* ... and the rate (the explored
                                                              path's terms) it had to beat */
static _Atomic int inflight;                               /* GPU jobs now, all threads */
static _Atomic unsigned deciding;                          /* threads inside a decision now (a
                                                              fork during one leaves the child
                                                              counting one more: only cautious) */
static _Atomic uint64_t backoff_until, backoff_ns, backoffs;

/* Threads making large calls: each thread stamps a slot of its own with the
 * time until which it counts. */
static _Atomic uint64_t active_until[ACTIVE_SLOTS];
static _Atomic uint64_t gpu_until[ACTIVE_SLOTS];           /* ... as a GPU user */
static _Atomic uint64_t began[ACTIVE_SLOTS];               /* when its current run of large
                                                              calls began */
static _Atomic unsigned active_next;
static _Thread_local int active_slot = -1;
static _Atomic long ncores;                                /* usable cores; 0: not counted yet */

#ifdef GPUAES_TEST_HOOKS
_Atomic uint64_t dispatch_test_clock;

static long usable_cores(void);

long dispatch_test_cores(long set)
{
    if (set > 0)
        atomic_store(&ncores, set);
    return usable_cores();
}
#endif

/* Stamps this thread as making large calls until `until`; returns how many
 * do now, and in *burst (if not NULL) whether another of them began less than
 * RAMP_NS ago. */
static unsigned active_threads(uint64_t now, uint64_t until, int *burst)
{
    unsigned n = 0;

    if (active_slot < 0)
        active_slot = (int)(atomic_fetch_add(&active_next, 1) % ACTIVE_SLOTS);
    if (atomic_exchange_explicit(&active_until[active_slot], until, memory_order_relaxed) <= now)
        atomic_store_explicit(&began[active_slot], now, memory_order_relaxed);
    if (burst != NULL)
        *burst = 0;
    for (int i = 0; i < ACTIVE_SLOTS; i++) {
        if (now >= atomic_load_explicit(&active_until[i], memory_order_relaxed))
            continue;
        n++;
        if (burst != NULL && i != active_slot
            && atomic_load_explicit(&began[i], memory_order_relaxed) + RAMP_NS > now)
            *burst = 1;
    }
    return n;
}

/*
 * Other threads that sent the GPU work recently (this thread's slot is
 * stamped by active_threads()).  Jobs in flight undercount the GPU's load
 * where decisions are made together: threads starting at once all see none
 * in flight, and a GCM message decided for the GPU keeps it for every later
 * piece (measured, H200: 4 threads x 8 MiB GCM messages, all on the GPU,
 * 0.75x; 16 threads x 64 MiB, 0.76x).
 */
static unsigned gpu_users(uint64_t now)
{
    unsigned n = 0;

    for (int i = 0; i < ACTIVE_SLOTS; i++)
        if (i != active_slot && now < atomic_load_explicit(&gpu_until[i], memory_order_relaxed))
            n++;
    return n;
}

/* This thread uses (or is about to use) the GPU until `until`. */
static void to_gpu(uint64_t until)
{
    if (active_slot >= 0)
        atomic_store_explicit(&gpu_until[active_slot], until, memory_order_relaxed);
}

/* The cores this process may run on (taskset, cpusets), counted once; a race
 * counts twice, alike. */
static long usable_cores(void)
{
    long n = atomic_load_explicit(&ncores, memory_order_relaxed);
    cpu_set_t set;

    if (n > 0)
        return n;
    n = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    if (n <= 0)                        /* more CPUs than a cpu_set_t holds */
        n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n <= 0)
        n = 1;
    {
        long none = 0;                 /* threads that count at once: one says so */

        if (atomic_compare_exchange_strong_explicit(&ncores, &none, n, memory_order_relaxed,
                                                    memory_order_relaxed))
            gpuaes_debug("dispatch: %ld usable cores", n);
    }
    return n;
}

/* A lone thread's copy threads take no application thread's core: its own
 * GPU estimate says whether they pay. */
static int cores_busy(unsigned active)
{
    return active > 1 && (long)active * 2 > usable_cores();
}

uint64_t dispatch_now_ns(void)
{
    struct timespec t;

#ifdef GPUAES_TEST_HOOKS
    uint64_t fake = atomic_load_explicit(&dispatch_test_clock, memory_order_relaxed);

    if (fake != 0)
        return fake;
#endif
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

static uint64_t load_u64(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static int far_off(uint64_t a, uint64_t b)
{
    return a > b * FAR || b > a * FAR;
}

static int load_changed(unsigned then, unsigned now)
{
    return then != 0 && (then >= 2 * now || now >= 2 * then);
}

/*
 * A sample of e, taken at `now` with `load` threads making large calls.
 * Exponentially weighted: recent calls count most (1/8 each; 1/2 while
 * `young`, so that a first sample that paid one-time costs fades fast, or
 * when FAR off the same way as the sample before it: one such call is
 * noise, two are news); an explore sample FAR off, or one that beats the
 * path that won (the loser has become the winner), replaces the estimate.
 * A single slow CPU call at 3x the rest (H200 through gpuaesd, AES-256-GCM
 * 8 MiB, one thread) took 1/2 once and held that thread's messages on a GPU
 * 1.4x slower than the CPU for its whole run (0.74x: session36-34d43d2 call
 * A).  A lost race loses one sample.  An explore sets the kind's next
 * explore gap.
 */
static void sample(offload_kind kind, int path, estimate *e, uint64_t v, uint64_t now,
                   unsigned load, int young, uint64_t ns)
{
    uint64_t old = load_u64(&e->ns), next = v;
    int far = old != 0 && far_off(old, v), explored = exploring == (int)kind * 2 + path;
    int way = far ? (v > old ? 1 : -1) : 0;
    int again = atomic_exchange_explicit(&e->far, way, memory_order_relaxed) == way && far;
    int news = explored && (far || v < explore_bar);

    if (old != 0 && !news) {
        unsigned shift = young || again ? 1 : 3;

        next = old - (old >> shift) + (v >> shift);
    }
    atomic_store_explicit(&e->ns, next > 0 ? next : 1, memory_order_relaxed);
    atomic_store_explicit(&e->at, now, memory_order_relaxed);
    atomic_store_explicit(&e->load, load, memory_order_relaxed);
    if (explored) {
        uint64_t gap = load_u64(&explore_gap[kind]);

        exploring = -1;
        gap = news || gap < EXPLORE_MIN_NS ? EXPLORE_MIN_NS
              : gap * 2 > EXPLORE_MAX_NS ? EXPLORE_MAX_NS : gap * 2;
        if (gap < EXPLORE_COST * ns)
            gap = EXPLORE_COST * ns;
        atomic_store_explicit(&explore_gap[kind], gap, memory_order_relaxed);
        atomic_store_explicit(&explore_ns[kind], ns, memory_order_relaxed);
    }
}

static uint64_t per_byte(uint64_t ns, size_t len)
{
    uint64_t v = len > 0 ? (ns << FIX) / len : 0;

    return v > 0 ? v : 1;              /* 0 means "not measured" */
}

/*
 * Is e, the estimate of the path about to lose, due a new look?  Claims it
 * (its time set to now) so that other threads do not look too.  cost: the
 * loser's estimate of this call when it is FAR behind, else 0.
 */
static int explore_due(offload_kind kind, estimate *e, uint64_t now, unsigned active, uint64_t cost)
{
    uint64_t at = load_u64(&e->at), gap = load_u64(&explore_gap[kind]);

    if (at >= now || now - at < EXPLORE_MIN_NS)
        return 0;
    /* A loser FAR behind: the gap holds from the first look on, by its own
     * estimate of the call.  A fresh process on the H200 sent its 8th 64 MiB
     * CTR call to the CPU 20 ms in (16 ms instead of 2.5;
     * bench/results/README.md, earlier runs: 2026-11-27-h200/s31-b).  A loser
     * close behind keeps the gap the explore calls set: bounding it too held
     * 4 fresh processes' CTR on the CPU (H100 machine, 0.78-0.93x against
     * 1.29-1.44x: earlier runs 2026-11-27-h200/s31-h, s31-i). */
    if (gap < EXPLORE_COST * cost)
        gap = EXPLORE_COST * cost;
    /* A load that keeps changing costs at most a third of the time. */
    if (now - at < gap
        && (now - at < 2 * load_u64(&explore_ns[kind])
            || !load_changed(atomic_load_explicit(&e->load, memory_order_relaxed), active)))
        return 0;
    return atomic_compare_exchange_strong_explicit(&e->at, &at, now, memory_order_relaxed,
                                                   memory_order_relaxed);
}

/* Other processes' GPU jobs in flight, the shared GPU rate, and other
 * processes' threads of large calls (gpu()->load). */
static unsigned shared_load(offload_kind kind, uint64_t *gpu_ns, unsigned *procs)
{
    return gpu()->load(offload_op(kind), gpu_ns, procs);
}

/* This thread's last decision was for the GPU, by its estimates rather than
 * to look again, with no other thread of large calls in this process or
 * another and no other process's job on the GPU (dispatch_gpu_alone). */
static _Thread_local int gpu_alone;

int dispatch_gpu_alone(void)
{
    return gpu_alone;
}

/* What a decision saw, for GPUAES_DEBUG's line when a thread's decision for
 * a kind changes (decision_changed). */
typedef struct decision {
    const char *why;
    uint64_t cpu, gpu, shared_gpu;
    unsigned active, procs, busy, others, samples;
} decision;

static _Thread_local signed char last_go[OFFLOAD_KINDS];   /* 0: none yet, 1: CPU, 2: GPU */

static __attribute__((noinline, cold)) void decision_changed(offload_kind kind, size_t len, int go,
                                                            const decision *d)
{
    static const char *const names[OFFLOAD_KINDS] = {
        [OFFLOAD_ECB_ENC] = "ECB enc", [OFFLOAD_ECB_DEC] = "ECB dec", [OFFLOAD_CBC_DEC] = "CBC dec",
        [OFFLOAD_CFB_DEC] = "CFB dec", [OFFLOAD_CTR] = "CTR", [OFFLOAD_GCM] = "GCM",
    };

    gpuaes_debug("dispatch: %s, %zu bytes, now the %s (%s): CPU %.3f ns/B, GPU %.3f ns/B (%u samples; "
                 "the service's %.3f), busy %u (others' jobs %u), threads of large calls %u here, %u in other "
                 "processes", names[kind], len, go ? "GPU" : "CPU", d->why, (double)d->cpu / (1 << FIX),
                 (double)d->gpu / (1 << FIX), d->samples, (double)d->shared_gpu / (1 << FIX), d->busy, d->others,
                 d->active, d->procs);
}

static int decide(offload_kind kind, size_t keylen, size_t len, int cpu_binds, decision *d);

int dispatch_to_gpu(const gpuaes_prov *prov, offload_kind kind, size_t keylen, size_t len, int cpu_binds)
{
    decision d = { "", 0, 0, 0, 0, 0, 0, 0, 0 };
    int go;

    gpu_alone = 1;                     /* dispatch = force: the GPU, as if alone */
    if (prov->dispatch == DISPATCH_FORCE)
        return 1;
    gpu_alone = 0;
    go = decide(kind, keylen, len, cpu_binds, &d);
    if (last_go[kind] != go + 1) {
        last_go[kind] = (signed char)(go + 1);
        if (gpuaes_debug_enabled())
            decision_changed(kind, len, go, &d);
    }
    return go;
}

/*
 * The CPU's estimate for a call of len bytes: its size class's, or while that
 * has no sample the nearest smaller class's that has, else the nearest
 * larger's (none: the class's own, unknown).  Per class, because the default
 * provider's rate depends on the call's size: on the H200 host a lone
 * thread's 8 MiB GCM calls ran at ~0.1 ns/B, cache-cold 64 MiB ones at
 * 0.17-0.29; one estimate for both carried 0.239 from 64 MiB rows into an 8 MiB
 * row and sent it to a GPU 1.5x slower (bench/results/README.md, earlier runs: session36-34d43d2
 * call G; call F: 0.75x).  A smaller class is cache-hotter: borrowed, the CPU
 * looks its fastest and takes the call, which samples the call's own class
 * (dispatch_cpu_done); a look at the CPU does too.  The borrowed estimate's
 * time rules its explores, as if it were the class's own.
 */
static estimate *cpu_estimate(offload_kind kind, size_t keylen, size_t len)
{
    estimate *row = cpu_est[kind][key_index(keylen)];
    int c = size_class(len);

    for (int i = c; i >= 0; i--)
        if (load_u64(&row[i].ns) != 0)
            return &row[i];
    for (int i = c + 1; i < CLASSES; i++)
        if (load_u64(&row[i].ns) != 0)
            return &row[i];
    return &row[c];
}

static int decide(offload_kind kind, size_t keylen, size_t len, int cpu_binds, decision *d)
{
    uint64_t cpu, gpu, now, until = load_u64(&backoff_until), shared_gpu;
    estimate *ce = cpu_estimate(kind, keylen, len), *ge = &gpu_est[kind][size_class(len)];
    unsigned active, busy, users, others, procs;
    int jobs, go, burst;

    now = dispatch_now_ns();
    active = active_threads(now, now + ACTIVE_NS, &burst);
    /* Other processes' threads of large calls count as this one's: with more
     * than half the cores making them, the GPU path's copies cost the others
     * more memory bandwidth than it saves (16 processes on the H200: 0.56x). */
    others = shared_load(kind, &shared_gpu, &procs);
    d->active = active;
    d->procs = procs;
    d->others = others;
    d->shared_gpu = shared_gpu;
    d->why = until != 0 && now < until ? "a GPU failure's back-off" : cores_busy(active + procs)
             ? "the cores busy with large calls" : kind == OFFLOAD_GCM && burst ? "a burst of GCM messages" : "";
    if (d->why[0] != '\0')
        return 0;
    cpu = load_u64(&ce->ns);
    d->cpu = cpu;
    d->why = "the CPU's rate unknown";
    if (cpu == 0)
        return 0;                      /* measure the CPU first */
    /* acq_rel: a thread that enters after another left sees its stamp. */
    busy = atomic_fetch_add_explicit(&deciding, 1, memory_order_acq_rel);
    users = gpu_users(now);
    jobs = atomic_load_explicit(&inflight, memory_order_relaxed);
    busy += (jobs > (int)users ? (unsigned)jobs : users) + others;
    gpu = load_u64(&ge->ns);
    d->gpu = gpu;
    d->busy = busy;
    d->samples = atomic_load_explicit(&ge->samples, memory_order_relaxed);
    if (gpu == 0 || d->samples < WARM) {
        /* A first job, alone: it includes one-time costs.  The service's rate
         * (measured on other processes' jobs) decides while ours is not warm. */
        go = shared_gpu != 0 ? shared_gpu * (uint64_t)(1 + busy) < cpu : busy == 0;
        d->why = shared_gpu != 0 ? "the GPU not warm: the service's rate" : "the GPU not warm";
    } else {
        uint64_t g = gpu * (uint64_t)(1 + busy), cost;

        go = g < cpu;
        d->why = "the estimates";
        cost = far_off(g, cpu) ? ((go ? cpu : g) * (uint64_t)len) >> FIX : 0;   /* the loser's call, if FAR */
        /* Look again at the loser: it may have become faster.  Not at the
         * CPU where that binds later calls: a GCM message's first data would
         * put the whole message on the default provider (its CPU calls are
         * sampled anyway whenever the GPU loses).  A message on gpuaes's
         * engine may: its CPU blocks go back to the GPU at the next update. */
        if ((!go || !cpu_binds) && explore_due(kind, go ? ce : ge, now, active, cost)) {
            explore_bar = go ? g : cpu / (1 + busy);
            go = !go;
            exploring = (int)kind * 2 + go;
            d->why = "looking again at the loser";
        }
    }
    if (go)
        to_gpu(now + ACTIVE_NS);
    gpu_alone = go && exploring != (int)kind * 2 + 1 && active <= 1 && procs == 0 && busy == 0;
    atomic_fetch_sub_explicit(&deciding, 1, memory_order_acq_rel);
    return go;
}

void dispatch_cpu_done(offload_kind kind, size_t keylen, size_t len, uint64_t ns)
{
    uint64_t now;

    if (len < DISPATCH_SAMPLE)
        return;
    now = dispatch_now_ns();
    sample(kind, 0, &cpu_est[kind][key_index(keylen)][size_class(len)], per_byte(ns, len), now,
           active_threads(now, now + IDLE_NS, NULL), 0, ns);
}

int dispatch_gpu_begin(void)
{
    uint64_t now = dispatch_now_ns();

    (void)active_threads(now, now + ACTIVE_NS, NULL);
    to_gpu(now + ACTIVE_NS);
    return atomic_fetch_add_explicit(&inflight, 1, memory_order_relaxed);
}

void dispatch_gpu_end(offload_kind kind, size_t len, size_t done, int ok, int busy_at_start,
                      uint64_t ns, int one_time)
{
    int busy_at_end = atomic_fetch_sub_explicit(&inflight, 1, memory_order_relaxed) - 1;
    uint64_t now = dispatch_now_ns();
    unsigned active = active_threads(now, now + IDLE_NS, NULL);

    to_gpu(now + IDLE_NS);
    if (!ok) {                         /* back off: 10 ms, doubling, at most 10 s */
        uint64_t b = atomic_load(&backoff_ns);

        if (exploring == (int)kind * 2 + 1)
            exploring = -1;            /* no sample: the estimate stays claimed for a gap */
        b = b == 0 ? BACKOFF_MIN_NS : b * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : b * 2;
        atomic_store(&backoff_ns, b);
        atomic_store(&backoff_until, now + b);
        atomic_fetch_add(&backoffs, 1);
        gpuaes_debug("GPU failed: the CPU takes every call for %llu ms",
                     (unsigned long long)(b / 1000000));
        return;
    }
    /* Only work done ends a back-off: a GPUAES_BUSY answer (no slot free, the
     * memory cap, the GPU layer's own back-off) says nothing of the GPU. */
    if (done > 0 && load_u64(&backoff_ns) != 0) {
        atomic_store(&backoff_ns, 0);
        atomic_store(&backoff_until, 0);
    }
    if (done == len && len > 0 && !one_time) {
        /* Shared with about this many jobs for its duration: one alone would
         * have taken that many times less. */
        uint64_t share = 1 + (uint64_t)(busy_at_start + (busy_at_end > 0 ? busy_at_end : 0)) / 2;
        estimate *e = &gpu_est[kind][size_class(len)];
        unsigned n = atomic_fetch_add_explicit(&e->samples, 1, memory_order_relaxed);

        sample(kind, 1, e, per_byte(ns, len) / share + 1, now, active, n < 2 * WARM, ns);
    } else if (exploring == (int)kind * 2 + 1) {
        exploring = -1;                /* a partial job, or a first use (20x one job's time, once
                                        * per segment: sampled, it held a lone thread on the CPU
                                        * for ~16 such calls' time): no sample */
    }
}

int dispatch_cpu_claim(offload_kind kind, size_t keylen)
{
    int none = 0;

    return load_u64(&cpu_estimate(kind, keylen, DISPATCH_SAMPLE)->ns) == 0
        && atomic_compare_exchange_strong_explicit(&cpu_claimed[kind][key_index(keylen)], &none, 1,
                                                   memory_order_relaxed, memory_order_relaxed);
}

uint64_t dispatch_backoffs(void)
{
    return atomic_load(&backoffs);
}
