/*
 * test_dispatch_model.c - provider/gpu/dispatch.c itself, compiled in, driven
 * with a model clock and modelled call times: no OpenSSL cipher, no GPU.
 * Each modelled thread is a real thread (dispatch keeps per-thread state)
 * that makes one dispatch call at a time for the driver, so a run is
 * deterministic.  A thread's call: dispatch_to_gpu, then either a CPU call
 * of len * cpu ns (dispatch_cpu_done) or a GPU job of len * gpu ns times
 * the jobs in flight, itself included (dispatch_gpu_begin/end).  Phases
 * change the threads and the true rates; `gpu` includes what dispatch
 * cannot see (another process, host memory bandwidth).
 *   after8 after16 opposite  a contention phase, then one thread: its calls
 *            are on the faster path within max(0.1 s, 3 calls) of the
 *            phase's end and stay there (explores aside: <= 5 % of the time)
 *   slowgpu fastgpu  one thread, steady: looking again costs <= 5 %
 *   fresh    a fresh process's lone thread, GPU 7x faster (~2 GiB in 64 MiB
 *            calls, 0.1 s): after its first call (the CPU measured) none
 *            goes to the CPU; a first look at the CPU 20 ms in cost a fresh
 *            process on the H200 13 ms of its ~70
 *   closegpu a lone thread, the GPU 1.5x slower than the CPU, then 2x faster
 *            (the same load): back on the GPU within max(0.1 s, 3 calls); a
 *            loser close behind is looked at every 20 ms or more, as a FAR one
 *            is not (bounding both held 4 processes' CTR on the CPU)
 *   load8 cores16    contention: the GPU takes no more jobs than pay, and
 *            none while more than half the cores' threads make large calls
 *   fastgcm  fastgpu with GCM: a message keeps the engine its first data
 *            chose, so its start never explores the CPU: no wrong call
 *   burst16  one thread, then 16 start GCM messages at once: at most 2 of
 *            their first messages start on the GPU (a message keeps its
 *            engine; cores16 counts the calls after the first 10 ms)
 *   cores N  the usable cores are N (run under taskset -c 0: 1), or the
 *            affinity set's count when N is 0
 *   others16 othersend  a lone thread of a fresh process beside 15 other
 *            processes' jobs on the GPU (the service's published load, through
 *            a model backend): its calls stay on the CPU from the first one;
 *            othersend: then the others end, and it is back on the GPU at once
 *   procs16 procs4  beside 15 (3) other processes' threads of large calls
 *            (their connections to the service, published), none on the
 *            GPU: no GPU call (16 of 16 cores busy), or the GPU's calls
 *   firstuse fastgpu, where thread 0's 6th GPU job of the last phase pays a
 *            first use (a fresh segment's pages: +60 ms, gpuaes_job.first_use):
 *            no sample, so the calls after it stay on the GPU (sampled, as
 *            `firstuse sampled` does, the thread went to the CPU for ~0.1 s)
 *   outlier [gcm]  a lone thread, the GPU 1.4x slower than the CPU, where
 *            thread 0's 6th CPU call of the last phase takes 3.5x (a stall):
 *            one such call moves the CPU estimate 1/8, so at most the GPU's
 *            explores go there after it (gcm: message starts, which never
 *            look again at the CPU; weighed 1/2, the outlier held them on the
 *            GPU for good)
 *   sizes    GCM message starts: a lone thread's 8 MiB calls (the CPU 1.4x
 *            faster), 4 threads' 64 MiB ones (the cache-cold CPU 3x slower),
 *            a pause, then 8 MiB again: on the CPU within max(0.1 s, 3 calls), as in
 *            the first phase (one CPU estimate for both sizes carried the
 *            64 MiB rate over and held them on the GPU for good:
 *            bench/results/README.md, earlier runs: session36-34d43d2 calls F, G)
 *   engine [starts]  GCM on gpuaes's engine (a CPU answer binds nothing):
 *            a lone thread, the CPU 1.4x faster than the GPU, then 8 threads
 *            (the CPU 3x slower), then one again: back on the CPU within
 *            max(0.1 s, 3 calls), as a block mode is (at 60 ms; `starts`,
 *            message starts, never look at the CPU again: it fails).  The
 *            CPU's explore samples beat the GPU without being 2x off the
 *            estimate: each counted 1/8 and doubled the gap, and the thread
 *            was back after ~1 s
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "prov_ctx.h"
#include "gpu/offload.h"
#include "gpu/gpu_backend.h"
#include "debug.h"

#define MS 1000000ULL
#define START (1000000 * MS)           /* model time 0 (far from 0, as a real clock) */
#define LEN ((size_t)64 << 20)
#define GAP_NS 10000ULL                /* between one thread's calls */
#define MAXT 16
#define MAXCALLS 200000

enum { OP_DECIDE = 1, OP_CPU_DONE, OP_GPU_BEGIN, OP_GPU_END, OP_QUIT };
enum { IDLE, IN_CPU, IN_GPU };

typedef struct phase {
    double secs;
    int threads;
    double cpu, gpu;                   /* ns per byte: a CPU call, a GPU job alone */
    int others;                        /* other processes' jobs on the GPU all along (published) */
    int procs;                         /* other processes' threads of large calls (published) */
    size_t len;                        /* its calls' length (0: LEN) */
} phase;

/* The service backend as dispatch.c sees it (gpu()->load): the phase's
 * other jobs, and the GPU's rate alone as the service measured it. */
static _Atomic int model_others, model_procs;
static _Atomic uint64_t model_rate;    /* ns per byte, 16 fractional bits; 0 in process */

static unsigned model_load(gpuaes_op op, uint64_t *ns_per_byte, unsigned *procs)
{
    (void)op;
    *ns_per_byte = atomic_load(&model_rate);
    *procs = (unsigned)atomic_load(&model_procs);
    return (unsigned)atomic_load(&model_others);
}

static const gpu_backend model_backend = { .name = "model", .load = model_load };
_Atomic(const gpu_backend *) gpu_backend_in_use = &model_backend;

typedef struct worker {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int op, ret, busy;                 /* the request and its answer */
    int alone;                         /* dispatch_gpu_alone() after OP_DECIDE */
    uint64_t ns;
    int state;                         /* the model's */
    uint64_t next, dur;
    int busy_at_start;
    int called;                        /* made a call in the last phase */
    int first_use;                     /* its GPU job in flight paid a first use */
    size_t len;                        /* its call's length */
} worker;

typedef struct call {                  /* thread 0's calls in the last phase */
    uint64_t start, dur, other;        /* other: the same call on the other path */
    int gpu, right;
} call;

static worker w[MAXT];
static gpuaes_prov prov;
static offload_kind kind = OFFLOAD_CTR;
static call calls[MAXCALLS];
static int ncalls, max_inflight, gpu_calls;   /* gpu_calls: from 10 ms into the last phase */
static int first_gpu;                         /* threads whose first call of the last phase went to the GPU */
static int alone_calls, alone_wrong;           /* dispatch_gpu_alone() answers */
static int first_use_at = -1;                  /* firstuse: thread 0's GPU job of the last phase that pays it */
static int first_use_sampled;                  /* ... reported as an ordinary job (the old behaviour) */
static int cpu_binds = -1;                     /* a CPU answer binds later calls; -1: GCM's do */
static int outlier_at = -1;                    /* outlier: thread 0's CPU call of the last phase that stalls */
static int last_phase_cpu_calls;               /* thread 0's, so far */
static int last_phase_gpu_jobs;                /* thread 0's, so far */

static void *worker_main(void *arg)
{
    worker *me = arg;

    pthread_mutex_lock(&me->mu);
    for (;;) {
        while (me->op == 0)
            pthread_cond_wait(&me->cv, &me->mu);
        switch (me->op) {
        case OP_DECIDE:
            me->ret = dispatch_to_gpu(&prov, kind, 16, me->len, cpu_binds < 0 ? kind == OFFLOAD_GCM : cpu_binds);
            me->alone = dispatch_gpu_alone();
            break;
        case OP_CPU_DONE: dispatch_cpu_done(kind, 16, me->len, me->ns); break;
        case OP_GPU_BEGIN: me->ret = dispatch_gpu_begin(); break;
        case OP_GPU_END:
            dispatch_gpu_end(kind, me->len, me->len, 1, me->busy, me->ns, me->first_use && !first_use_sampled);
            break;
        default: break;
        }
        if (me->op == OP_QUIT)
            break;
        me->op = 0;
        pthread_cond_signal(&me->cv);
    }
    me->op = 0;
    pthread_cond_signal(&me->cv);
    pthread_mutex_unlock(&me->mu);
    return NULL;
}

/* Runs one dispatch call on model thread t and waits for it. */
static int on(int t, int op, uint64_t ns, int busy)
{
    worker *me = &w[t];
    int ret;

    pthread_mutex_lock(&me->mu);
    me->op = op;
    me->ns = ns;
    me->busy = busy;
    pthread_cond_signal(&me->cv);
    while (me->op != 0)
        pthread_cond_wait(&me->cv, &me->mu);
    ret = me->ret;
    pthread_mutex_unlock(&me->mu);
    return ret;
}

static uint64_t ns_of(double per_byte, size_t len)
{
    return (uint64_t)(per_byte * (double)len);
}

/* Runs the phases; thread 0's calls in the last one go to calls[]; the
 * largest number of GPU jobs at once and the GPU calls are counted in the
 * last phase too. */
static void simulate(const phase *ph, int nph)
{
    uint64_t begin[8] = { 0 }, end;
    int inflight = 0;

    begin[0] = START;
    for (int p = 0; p < nph; p++)
        begin[p + 1] = begin[p] + (uint64_t)(ph[p].secs * 1e9);
    end = begin[nph];
    for (int t = 0; t < MAXT; t++) {
        pthread_mutex_init(&w[t].mu, NULL);
        pthread_cond_init(&w[t].cv, NULL);
        pthread_create(&w[t].th, NULL, worker_main, &w[t]);
        w[t].state = IDLE;
        w[t].next = START + (uint64_t)t * 1000;      /* not all at the same ns */
    }
    for (;;) {
        int t = 0, p = 0;
        uint64_t now;
        worker *me;

        for (int i = 1; i < MAXT; i++)
            if (w[i].next < w[t].next)
                t = i;
        me = &w[t];
        now = me->next;
        if (now >= end)
            break;
        while (now >= begin[p + 1])
            p++;
        atomic_store(&dispatch_test_clock, now);
        atomic_store(&model_procs, ph[p].procs);
        if (ph[p].others != 0) {
            atomic_store(&model_others, ph[p].others);
            atomic_store(&model_rate, (uint64_t)(ph[p].gpu * 65536));
        } else {
            atomic_store(&model_others, 0);
        }
        if (me->state == IN_CPU) {
            on(t, OP_CPU_DONE, me->dur, 0);
            me->state = IDLE;
            me->next = now + GAP_NS;
        } else if (me->state == IN_GPU) {
            inflight--;
            on(t, OP_GPU_END, me->dur, me->busy_at_start);
            me->state = IDLE;
            me->next = now + GAP_NS;
        } else if (t >= ph[p].threads) {
            me->next = begin[p + 1] + (uint64_t)t * 1000; /* sits this phase out */
        } else {
            me->len = ph[p].len != 0 ? ph[p].len : LEN;
            int gpu = on(t, OP_DECIDE, 0, 0);

            /* "alone" (a GCM message may move to the GPU) only on a GPU
             * decision with no other thread or process making large calls
             * (from 10 ms into a phase: its threads have all begun). */
            alone_calls += me->alone;
            if (me->alone && (!gpu || ((ph[p].threads > 1 || ph[p].others > 0 || ph[p].procs > 0)
                                       && now >= begin[p] + 10 * MS)))
                alone_wrong++;
            uint64_t cpu_ns = ns_of(ph[p].cpu, me->len),
                     gpu_ns = ns_of(ph[p].gpu, me->len) * (uint64_t)(1 + ph[p].others),
                     alone = ns_of(ph[p].gpu, me->len);

            /* Shared with each job in flight for as long as both run. */
            for (int i = 0; i < MAXT; i++)
                if (w[i].state == IN_GPU)
                    gpu_ns += w[i].next - now < alone ? w[i].next - now : alone;

            if (p == nph - 1 && !me->called) {
                me->called = 1;
                first_gpu += gpu;
            }
            if (gpu) {
                me->busy_at_start = on(t, OP_GPU_BEGIN, 0, 0);
                inflight++;
                if (p == nph - 1) {
                    gpu_calls += now >= begin[p] + 10 * MS;
                    if (inflight > max_inflight)
                        max_inflight = inflight;
                }
            }
            me->first_use = 0;
            if (gpu && t == 0 && p == nph - 1 && last_phase_gpu_jobs++ == first_use_at) {
                me->first_use = 1;
                gpu_ns += 60 * MS;
            }
            if (!gpu && t == 0 && p == nph - 1 && last_phase_cpu_calls++ == outlier_at)
                cpu_ns = cpu_ns * 7 / 2;
            me->state = gpu ? IN_GPU : IN_CPU;
            me->dur = gpu ? gpu_ns : cpu_ns;
            me->next = now + me->dur;
            if (t == 0 && p == nph - 1 && ncalls < MAXCALLS)
                calls[ncalls++] = (call){ now, me->dur, gpu ? cpu_ns : gpu_ns, gpu,
                                          (gpu_ns < cpu_ns) == gpu };
        }
    }
    for (int t = 0; t < MAXT; t++) {
        on(t, OP_QUIT, 0, 0);
        pthread_join(w[t].th, NULL);
    }
}

/* Thread 0 in the last phase (which began at `from`): back on the faster
 * path by max(0.1 s, its 4th call), and explores aside it stays there. */
static void check_recovery(uint64_t from)
{
    uint64_t deadline = from + 100 * MS, wrong_ns = 0, all_ns = 0, back = 0;
    int first = -1, wrong = 0, pairs = 0, wrong_gpu = 0;   /* wrong_gpu: on the CPU, wrongly */

    if (ncalls > 3 && calls[3].start > deadline)
        deadline = calls[3].start;
    for (int i = ncalls - 1; i >= 0 && first < 0; i--)      /* the last wrong pair */
        if (i > 0 && !calls[i].right && !calls[i - 1].right)
            first = i + 1;
    for (int i = 0; i < ncalls; i++) {
        if (first < 0 && calls[i].right)
            first = i;
        if (calls[i].start < deadline)
            continue;
        all_ns += calls[i].dur < calls[i].other ? calls[i].dur : calls[i].other;
        if (!calls[i].right) {
            wrong++;
            wrong_gpu += !calls[i].gpu;
            wrong_ns += calls[i].dur - calls[i].other;
            pairs += i > 0 && !calls[i - 1].right;
        }
    }
    if (first >= 0 && first < ncalls)
        back = calls[first].start - from;
    if (first < 0 || first >= ncalls)
        printf("last phase: %d calls of thread 0, never settled on the faster path; ", ncalls);
    else
        printf("last phase: %d calls of thread 0, on the faster path from %.1f ms (call %d); ",
               ncalls, back / 1e6, first);
    printf("after the deadline %d wrong, costing %.2f %%\n", wrong, all_ns ? 100.0 * wrong_ns / all_ns : 0);
    CHECKF(first >= 0 && first < ncalls && calls[first].start <= deadline,
           "not back on the faster path by %.1f ms", (deadline - from) / 1e6);
    CHECKF(pairs == 0, "%d wrong calls in a row after the deadline", pairs);
    CHECKF(wrong_ns * 20 <= all_ns, "looking again cost more than 5 %%");
    CHECKF(kind != OFFLOAD_GCM || cpu_binds == 0 || wrong_gpu == 0, "%d GCM messages began on the slower engine",
           wrong_gpu);
}

int main(int argc, char **argv)
{
    const char *s = argc > 1 ? argv[1] : "";
    phase ph[4];
    int n = 0;

    if (strcmp(s, "cores") == 0) {             /* before anything else counts them */
        cpu_set_t set;
        long want = argc > 2 ? atol(argv[2]) : 0, got = dispatch_test_cores(0);

        CHECKF(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity");
        if (want == 0)
            want = CPU_COUNT(&set);
        printf("usable cores: %ld (want %ld)\n", got, want);
        CHECKF(got == want, "dispatch counts %ld cores, the process may use %ld", got, want);
        return test_failures != 0;
    }
    gpuaes_debug_set(getenv("GPUAES_DEBUG") != NULL);   /* dispatch's decision log, on stderr */
    dispatch_test_cores(16);                   /* the H200 machine */
    if (strcmp(s, "after8") == 0) {            /* CTR: CPU 4 GB/s, GPU alone 40 */
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.025, 0, 0, 0 };
        ph[n++] = (phase){ 2, 8, 0.3, 0.5, 0, 0, 0 };  /* the GPU 20x slower than dispatch sees */
        ph[n++] = (phase){ 3, 1, 0.25, 0.025, 0, 0, 0 };
    } else if (strcmp(s, "after16") == 0) {    /* GCM: CPU 12 GB/s, GPU alone 6x */
        kind = OFFLOAD_GCM;
        ph[n++] = (phase){ 0.5, 1, 0.08, 0.013, 0, 0, 0 };
        ph[n++] = (phase){ 2, 16, 0.16, 0.3, 0, 0, 0 };
        ph[n++] = (phase){ 3, 1, 0.08, 0.013, 0, 0, 0 };
    } else if (strcmp(s, "opposite") == 0) {   /* a loaded CPU, then a GPU taken by another */
        ph[n++] = (phase){ 2, 8, 2.0, 0.025, 0, 0, 0 };
        ph[n++] = (phase){ 3, 1, 0.25, 0.5, 0, 0, 0 };
    } else if (strcmp(s, "slowgpu") == 0) {
        ph[n++] = (phase){ 2, 1, 0.25, 5.0, 0, 0, 0 }; /* the first jobs (WARM) are measured here */
        ph[n++] = (phase){ 10, 1, 0.25, 5.0, 0, 0, 0 };
    } else if (strcmp(s, "fastgpu") == 0) {
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.025, 0, 0, 0 };
        ph[n++] = (phase){ 10, 1, 0.25, 0.025, 0, 0, 0 };
    } else if (strcmp(s, "firstuse") == 0) {
        first_use_at = 5;
        first_use_sampled = argc > 2 && strcmp(argv[2], "sampled") == 0;
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.025, 0, 0, 0 };
        ph[n++] = (phase){ 1, 1, 0.25, 0.025, 0, 0, 0 };
    } else if (strcmp(s, "closegpu") == 0) {
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.375, 0, 0, 0 };
        ph[n++] = (phase){ 2, 1, 0.25, 0.125, 0, 0, 0 };
    } else if (strcmp(s, "fresh") == 0) {      /* CTR: CPU 4 GB/s (cold buffers), GPU alone 27 */
        ph[n++] = (phase){ 0.1, 1, 0.25, 0.037, 0, 0, 0 };
    } else if (strcmp(s, "load8") == 0) {      /* the GPU 4x faster alone */
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.0625, 0, 0, 0 };
        ph[n++] = (phase){ 3, 8, 0.25, 0.0625, 0, 0, 0 };
    } else if (strcmp(s, "cores16") == 0) {
        ph[n++] = (phase){ 0.5, 1, 0.25, 0.025, 0, 0, 0 };
        ph[n++] = (phase){ 2, 16, 0.25, 0.025, 0, 0, 0 };
    } else if (strcmp(s, "fastgcm") == 0) {
        kind = OFFLOAD_GCM;
        ph[n++] = (phase){ 0.5, 1, 0.08, 0.013, 0, 0, 0 };
        ph[n++] = (phase){ 10, 1, 0.08, 0.013, 0, 0, 0 };
    } else if (strcmp(s, "burst16") == 0) {    /* GCM: CPU 12 GB/s, GPU alone 6x */
        kind = OFFLOAD_GCM;
        ph[n++] = (phase){ 0.5, 1, 0.08, 0.013, 0, 0, 0 };
        ph[n++] = (phase){ 0.5, 0, 0.08, 0.013, 0, 0, 0 };
        ph[n++] = (phase){ 1, 16, 0.08, 0.013, 0, 0, 0 };
    } else if (strcmp(s, "others16") == 0) {   /* CTR: GPU alone 10x, shared by 16 jobs */
        ph[n++] = (phase){ 0.2, 1, 0.25, 0.025, 15, 0, 0 };   /* the CPU's estimate measured here */
        ph[n++] = (phase){ 3, 1, 0.25, 0.025, 15, 0, 0 };
    } else if (strcmp(s, "procs16") == 0) {    /* 15 other processes' threads of large calls */
        ph[n++] = (phase){ 0.2, 1, 0.25, 0.025, 0, 15, 0 };
        ph[n++] = (phase){ 2, 1, 0.25, 0.025, 0, 15, 0 };
    } else if (strcmp(s, "procs4") == 0) {     /* ... 3 of them: the GPU still pays */
        ph[n++] = (phase){ 0.2, 1, 0.25, 0.025, 0, 3, 0 };
        ph[n++] = (phase){ 2, 1, 0.25, 0.025, 0, 3, 0 };
    } else if (strcmp(s, "othersend") == 0) {
        ph[n++] = (phase){ 0.2, 1, 0.25, 0.025, 15, 0, 0 };
        ph[n++] = (phase){ 2, 1, 0.25, 0.025, 15, 0, 0 };
        ph[n++] = (phase){ 3, 1, 0.25, 0.025, 0, 0, 0 };
    } else if (strcmp(s, "outlier") == 0) {    /* GCM-like: CPU 10.7 GB/s, GPU 7.6 */
        outlier_at = 5;
        kind = argc > 2 && strcmp(argv[2], "gcm") == 0 ? OFFLOAD_GCM : OFFLOAD_CTR;
        ph[n++] = (phase){ 0.5, 1, 0.093, 0.132, 0, 0, 0 };
        ph[n++] = (phase){ 1, 1, 0.093, 0.132, 0, 0, 0 };
    } else if (strcmp(s, "sizes") == 0) {      /* GCM message starts, H200-like rates by size */
        kind = OFFLOAD_GCM;
        ph[n++] = (phase){ 0.3, 1, 0.09, 0.13, 0, 0, (size_t)8 << 20 };    /* 8 MiB: the CPU faster */
        ph[n++] = (phase){ 0.5, 4, 0.26, 0.1, 0, 0, 0 };                  /* 64 MiB, 4 threads: cold CPU */
        ph[n++] = (phase){ 0.1, 0, 0.09, 0.13, 0, 0, 0 };                 /* between rows */
        ph[n++] = (phase){ 2, 1, 0.09, 0.13, 0, 0, (size_t)8 << 20 };
    } else if (strcmp(s, "engine") == 0) {
        kind = OFFLOAD_GCM;
        cpu_binds = argc > 2 && strcmp(argv[2], "starts") == 0;
        ph[n++] = (phase){ 0.5, 1, 0.093, 0.132, 0, 0, 0 };
        ph[n++] = (phase){ 2, 8, 0.3, 0.132, 0, 0, 0 };
        ph[n++] = (phase){ 3, 1, 0.093, 0.132, 0, 0, 0 };
    } else {
        fprintf(stderr, "usage: %s after8|after16|opposite|slowgpu|fastgpu|firstuse [sampled]|closegpu|fresh|load8|cores16|fastgcm|burst16|others16|othersend|procs16|procs4|outlier [gcm]|engine [starts]|sizes|cores N\n",
                argv[0]);
        return 2;
    }
    simulate(ph, n);
    if (strcmp(s, "load8") == 0) {
        printf("at most %d GPU jobs at once, %d GPU calls\n", max_inflight, gpu_calls);
        CHECKF(max_inflight <= 4, "%d GPU jobs at once for a GPU 4x faster", max_inflight);
    } else if (strcmp(s, "burst16") == 0) {
        printf("%d of 16 threads began on the GPU\n", first_gpu);
        CHECKF(first_gpu <= 2, "%d of 16 GCM messages begun at once went to the GPU", first_gpu);
    } else if (strcmp(s, "others16") == 0) {
        int on_gpu = 0;

        for (int i = 0; i < ncalls; i++)
            on_gpu += calls[i].gpu;
        printf("%d of %d calls on the GPU beside 15 other jobs\n", on_gpu, ncalls);
        CHECKF(on_gpu == 0 && gpu_calls == 0, "%d calls sent to a GPU 1.6x slower than the CPU for them", on_gpu);
    } else if (strcmp(s, "procs16") == 0 || strcmp(s, "procs4") == 0) {
        printf("%s: %d GPU calls\n", s, gpu_calls);
        if (s[5] == '1')
            CHECKF(gpu_calls == 0, "%d GPU calls with 16 processes' threads on 16 cores", gpu_calls);
        else
            CHECKF(gpu_calls * 10 > ncalls * 9, "%d of %d calls on a GPU 10x faster beside 3 processes", gpu_calls, ncalls);
    } else if (strcmp(s, "fresh") == 0) {
        int cpu_calls = 0;

        for (int i = 1; i < ncalls; i++)
            cpu_calls += !calls[i].gpu;
        printf("fresh: %d calls, the first on the %s, %d CPU calls after it\n", ncalls,
               ncalls > 0 && calls[0].gpu ? "GPU" : "CPU", cpu_calls);
        CHECKF(ncalls > 10 && cpu_calls == 0, "%d of a fresh process's %d calls after its first went to the CPU",
              cpu_calls, ncalls);
    } else if (strcmp(s, "firstuse") == 0) {
        int cpu_calls = 0, after = -1;

        for (int i = 0; i < ncalls; i++) {
            if (after < 0 && calls[i].gpu && calls[i].dur > 50 * MS)
                after = i;             /* the first use */
            else if (after >= 0 && !calls[i].gpu)
                cpu_calls++;
        }
        printf("firstuse%s: the first use at call %d of %d; %d CPU calls after it\n",
               first_use_sampled ? " (sampled)" : "", after, ncalls, cpu_calls);
        CHECKF(after > 0, "no first use modelled");
        /* Explores of the CPU aside: at most ~1/17 of the time, 1 s at 16 ms a call. */
        CHECKF(cpu_calls <= 4, "%d calls went to the CPU after a first use", cpu_calls);
    } else if (strcmp(s, "outlier") == 0) {
        int gpu_after = 0, after = -1;

        for (int i = 0; i < ncalls; i++) {
            if (after < 0 && !calls[i].gpu && calls[i].dur > calls[i].other * 2)
                after = i;             /* the stall */
            else if (after >= 0)
                gpu_after += calls[i].gpu;
        }
        printf("outlier%s: the stall at call %d of %d; %d GPU calls after it\n",
               kind == OFFLOAD_GCM ? " (GCM message starts)" : "", after, ncalls, gpu_after);
        CHECKF(after > 0, "no stall modelled");
        /* Explores of the GPU aside: at most ~1/17 of the time. */
        CHECKF(gpu_after * 17 <= ncalls - after, "%d of %d calls went to the slower GPU after one slow CPU call",
               gpu_after, ncalls - after);
    } else if (strcmp(s, "cores16") == 0) {
        printf("%d GPU calls\n", gpu_calls);
        CHECKF(gpu_calls == 0, "%d GPU calls from 16 threads on 16 cores", gpu_calls);
    } else {
        uint64_t from = START;

        for (int p = 0; p < n - 1; p++)
            from += (uint64_t)(ph[p].secs * 1e9);
        check_recovery(from);
    }
    CHECKF(alone_wrong == 0, "%d decisions called alone beside other threads or processes", alone_wrong);
    if (strcmp(s, "fastgpu") == 0)
        CHECKF(alone_calls > 0, "a lone thread's GPU decisions never alone");
    return check_report(s);
}
