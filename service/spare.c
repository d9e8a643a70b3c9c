/*
 * spare.c - spare client segments, made ahead (docs/SERVICE.md, "Shared
 * memory").  A fresh client's own segment costs its first call ~25 ms on the
 * H200: the memfd's pages faulted in, and its jobs staged until the service
 * has registered it for DMA (~14 ms per 64 MiB).  So once the GPU is warm,
 * a thread here keeps GPUAESD_SPARE (0..SPARE_MAX, default 1) segments of
 * SPARE_SIZE ready: a fresh memfd, sealed so that nobody can change its size,
 * its pages populated, mapped and registered; a hello asking for one
 * (GPUAESD_HELLO_WANT_SEG) takes it, and the thread makes the next.  Each is
 * made for the one client that takes it and never handed out again: the
 * service's mapping becomes that client's (serve.c), unmapped when it goes.
 * Spares not taken are unregistered and unmapped at the service's end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuaes_gpu.h"
#include "service.h"

#define SPARE_MAX 2
#define SPARE_SIZE ((uint64_t)64 << 20)   /* gpu_remote.c's SEGMENT, what a provider asks for */

typedef struct spare {
    int fd;
    unsigned char *map;
    int registered;
} spare;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static spare ready[SPARE_MAX];
static unsigned nready, want = 1;
static int stopping, joinable, failed;
static pthread_t maker;
static int no_dma;

/* A spare of SPARE_SIZE: 0, or -1 (nothing left behind). */
static int spare_make(spare *s)
{
    char err[GPUAES_ERROR_SIZE];
    int rc;

    s->fd = memfd_create("gpuaesd-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (s->fd < 0)
        return -1;
    s->map = MAP_FAILED;
    if (ftruncate(s->fd, (off_t)SPARE_SIZE) != 0
        || fcntl(s->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0
        || (s->map = mmap(NULL, (size_t)SPARE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd, 0)) == MAP_FAILED) {
        gpuaesd_log("spare segment: %s", strerror(errno));
        close(s->fd);
        return -1;
    }
    gpuaesd_fault_in(s->map, (size_t)SPARE_SIZE);
    s->registered = 0;
    if (no_dma)
        return 0;
    while ((rc = gpuaes_gpu_host_register(s->map, (size_t)SPARE_SIZE, err)) == 1)
        if (!gpuaes_gpu_wait())
            break;
    if (rc == 0) {
        s->registered = 1;
        return 0;
    }
    /* Registration fails for the clients' own segments too: no spares then
     * (they would save nothing but the page faults). */
    gpuaesd_log("spare segment not registered for DMA (%s): no spare segments", rc == 1 ? "no GPU" : err);
    munmap(s->map, (size_t)SPARE_SIZE);
    close(s->fd);
    return -1;
}

static void spare_drop(spare *s)
{
    char err[GPUAES_ERROR_SIZE];

    if (s->registered && gpuaes_gpu_host_unregister(s->map, err) != 0)
        gpuaesd_log("unregistering a spare segment: %s", err);
    munmap(s->map, (size_t)SPARE_SIZE);
    close(s->fd);
}

static void *maker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    while (!stopping && !failed) {
        spare s;

        if (nready >= want) {
            pthread_cond_wait(&cv, &mu);
            continue;
        }
        pthread_mutex_unlock(&mu);
        failed = spare_make(&s) != 0;   /* only this thread writes it while it runs */
        pthread_mutex_lock(&mu);
        if (!failed)
            ready[nready++] = s;
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

void gpuaesd_spare_start(int dma_off)
{
    const char *env = getenv("GPUAESD_SPARE");

    if (env != NULL && *env != '\0') {
        char *end;
        long n = strtol(env, &end, 10);

        want = *end == '\0' && n >= 0 && n <= SPARE_MAX ? (unsigned)n : want;
    }
    no_dma = dma_off;
    if (want == 0) {
        gpuaesd_log("GPUAESD_SPARE=0: no spare segments");
        return;
    }
    pthread_mutex_lock(&mu);
    if (!stopping && !joinable)
        joinable = pthread_create(&maker, NULL, maker_main, NULL) == 0;
    pthread_mutex_unlock(&mu);
}

int gpuaesd_spare_take(uint64_t seg_size, int *fd, unsigned char **map, int *registered)
{
    int ok = 0;

    pthread_mutex_lock(&mu);
    if (seg_size == SPARE_SIZE && nready > 0) {
        spare s = ready[--nready];

        *fd = s.fd;
        *map = s.map;
        *registered = s.registered;
        ok = 1;
        pthread_cond_signal(&cv);      /* the next one */
    }
    pthread_mutex_unlock(&mu);
    return ok ? 0 : -1;
}

unsigned gpuaesd_spares_ready(void)
{
    unsigned n;

    pthread_mutex_lock(&mu);
    n = nready;
    pthread_mutex_unlock(&mu);
    return n;
}

void gpuaesd_spare_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    if (joinable)
        pthread_join(maker, NULL);
    joinable = 0;
    while (nready > 0)
        spare_drop(&ready[--nready]);
}
