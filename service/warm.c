/*
 * warm.c - the service's GPU is ready only once it is warm.
 *
 * The GPU layer's first jobs after its start-up pay one-time costs: staging
 * slots are allocated (pinned host and device memory, tens of ms each) and
 * each kernel's module is loaded at its first launch.  Measured on the H200:
 * a client's first real jobs then ran past the client's job bound (100 ms +
 * 1 ms/MB), and the calls waiting on them took 95-130 ms before finishing
 * on the CPU.  So the service pays those costs itself before it says "ready"
 * (STATUS.gpu_up, the published load) or runs a client's job: one small job
 * of every op on each of `jobs` threads at once (a slot each, as that many
 * clients' jobs will need).  Until then every job is answered BUSY at once,
 * and the client runs it on the CPU without waiting.  GPUAESD_WARM=0 turns
 * the warm-up off (A/B measurements; tests that count the layer's jobs).
 */
#define _GNU_SOURCE              /* clock_gettime (mono_clock.h) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "gpuaes_gpu.h"
#include "gpuaesd_proto.h"
#include "mono_clock.h"
#include "service.h"

#define WARM_BYTES ((size_t)1 << 20)   /* past the first-chunk size: the pipeline's whole path */
#define WARM_THREADS_MAX 16

static atomic_int warm_state = GPUAESD_GPU_STARTING;
static unsigned warm_threads = 4;
static pthread_t warm_thread;
static int warm_joinable;

/* Every op once, on zero data with a zero key (nothing secret). */
static void *warm_ops(void *arg)
{
    static const unsigned char zero_key[32];
    static const gpuaes_op ops[] = { GPUAES_ECB_ENCRYPT, GPUAES_ECB_DECRYPT, GPUAES_CTR128, GPUAES_CTR32,
                                     GPUAES_CBC_DECRYPT, GPUAES_CFB128_DECRYPT, GPUAES_GCM_ENCRYPT,
                                     GPUAES_GCM_DECRYPT };
    unsigned char *buf = calloc(1, WARM_BYTES);
    gpuaes_key *key = gpuaes_key_new(zero_key, sizeof(zero_key));
    int ok = buf != NULL && key != NULL;

    for (size_t i = 0; ok && i < sizeof(ops) / sizeof(ops[0]); i++) {
        gpuaes_job job;

        if (!gpuaes_gpu_supports(ops[i]))
            continue;                  /* GCM on a GPU without it: never asked for */
        memset(&job, 0, sizeof(job));
        job.op = ops[i];
        job.key = key;
        job.in = buf;
        job.out = buf;
        job.len = WARM_BYTES;
        gpuaes_gpu_run(&job);
        ok = job.status == GPUAES_OK;
    }
    if (key != NULL)
        gpuaes_key_free(key);
    free(buf);
    *(int *)arg = ok;
    return NULL;
}

static void *warm_main(void *arg)
{
    pthread_t t[WARM_THREADS_MAX];
    int ok[WARM_THREADS_MAX];
    unsigned n = 0, good = 0;
    uint64_t t0 = mono_ms();

    (void)arg;
    if (!gpuaes_gpu_wait()) {
        atomic_store(&warm_state, GPUAESD_GPU_NONE);
        gpuaesd_publish_clients(0);
        return NULL;
    }
    for (; n < warm_threads; n++)
        if (pthread_create(&t[n], NULL, warm_ops, &ok[n]) != 0)
            break;
    for (unsigned i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        good += ok[i] != 0;
    }
    /* A warm-up job that failed costs only its speed: the GPU serves anyway
     * (the layer reports a broken GPU itself, and jobs then fall back). */
    gpuaesd_log("GPU warm in %llu ms (%u of %u warm-up threads ran every op)",
                (unsigned long long)(mono_ms() - t0), good, n);
    atomic_store(&warm_state, gpuaes_gpu_available() ? GPUAESD_GPU_READY : GPUAESD_GPU_NONE);
    gpuaesd_publish_clients(0);        /* publishes gpu_up */
    if (gpuaes_gpu_available())
        gpuaesd_spare_start(gpuaesd_dma_off());   /* once warm: no warm-up job waits for it */
    return NULL;
}

void gpuaesd_warm_start(unsigned jobs)
{
    const char *off = getenv("GPUAESD_WARM");

    warm_threads = jobs < 1 ? 1 : jobs > WARM_THREADS_MAX ? WARM_THREADS_MAX : jobs;
    gpuaes_gpu_available();            /* the layer's start-up begins now, in the background */
    if (off != NULL && strcmp(off, "0") == 0) {   /* the A/B switch; tests that count jobs */
        gpuaesd_log("GPUAESD_WARM=0: the GPU serves cold");
        atomic_store(&warm_state, GPUAESD_GPU_READY);
        gpuaesd_spare_start(gpuaesd_dma_off());
    } else if (pthread_create(&warm_thread, NULL, warm_main, NULL) == 0) {
        warm_joinable = 1;
    } else {
        gpuaesd_log("no warm-up thread: the GPU serves cold");
        atomic_store(&warm_state, GPUAESD_GPU_READY);
    }
}

/* Before the layer's shutdown: no warm-up job may still run. */
void gpuaesd_warm_stop(void)
{
    if (warm_joinable)
        pthread_join(warm_thread, NULL);
    warm_joinable = 0;
}

int gpuaesd_gpu_up(void)
{
    int s = atomic_load(&warm_state);

    /* READY without a thread (above): the layer's own state decides. */
    if (s == GPUAESD_GPU_READY && !gpuaes_gpu_available())
        return gpuaes_gpu_started() ? GPUAESD_GPU_NONE : GPUAESD_GPU_STARTING;
    return s;
}
