/*
 * publish.c - the service's side of the published load (docs/SERVICE.md,
 * "Published load"; include/gpuaesd_load.h): serve.c reports each request
 * queued, started, ended or dropped and each client come or gone; this
 * keeps the counts and the per-op rates, and writes them to the shared page
 * under one lock (the seqlock has a single writer).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpuaes_gpu.h"
#include "gpuaesd_load.h"
#include "mono_clock.h"
#include "service.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static gpuaesd_load_table *table;      /* NULL: nothing published */
static int ro_fd = -1;
static gpuaesd_load cur;               /* what the page says, under mu */

/* Under mu. */
static void publish_locked(void)
{
    if (table == NULL)
        return;
    cur.gpu_up = (uint32_t)gpuaesd_gpu_up();
    cur.stamp_ns = mono_ns();
    gpuaesd_load_write(table, &cur);
}

void gpuaesd_publish_init(void)
{
    pthread_mutex_lock(&mu);
    if (table == NULL && (table = gpuaesd_load_create(&ro_fd)) == NULL)
        gpuaesd_log("no sealed memfd for the published load (a kernel before 5.1?): "
                    "clients dispatch without it");
    publish_locked();
    pthread_mutex_unlock(&mu);
}

int gpuaesd_publish_fd(void)
{
    return ro_fd;                      /* set once, before the first client */
}

void gpuaesd_publish_clients(int delta)
{
    pthread_mutex_lock(&mu);
    cur.clients += (uint32_t)delta;
    publish_locked();
    pthread_mutex_unlock(&mu);
}

void gpuaesd_publish_job(int queued, int running, int busy, int64_t bytes)
{
    pthread_mutex_lock(&mu);
    cur.jobs_queued += (uint32_t)queued;
    cur.jobs_running += (uint32_t)running;
    cur.clients_busy += (uint32_t)busy;
    cur.bytes_inflight += (uint64_t)bytes;
    publish_locked();
    pthread_mutex_unlock(&mu);
}

unsigned gpuaesd_publish_start(void)
{
    unsigned n;

    pthread_mutex_lock(&mu);
    cur.jobs_queued--;
    n = ++cur.jobs_running;
    publish_locked();
    pthread_mutex_unlock(&mu);
    return n;
}

void gpuaesd_publish_end(uint32_t op, uint64_t len, int whole, uint64_t ns, unsigned running_at_start,
                         int idle)
{
    pthread_mutex_lock(&mu);
    /* Shared with about this many requests while it ran: alone it would have
     * taken that many times less. */
    if (whole && ns > 0 && op < GPUAESD_LOAD_OPS) {
        uint64_t share = (running_at_start + cur.jobs_running) / 2, r;

        r = (uint64_t)((double)len * 1e9 * (double)(share > 0 ? share : 1) / (double)ns);
        if (r > GPUAESD_LOAD_RATE_MAX)
            r = GPUAESD_LOAD_RATE_MAX;
        cur.rate[op] = cur.rate[op] == 0 ? r : cur.rate[op] - cur.rate[op] / 8 + r / 8;
        cur.rate_ns[op] = mono_ns();
    }
    cur.jobs_running--;
    cur.clients_busy -= idle ? 1 : 0;
    cur.bytes_inflight -= len;
    publish_locked();
    pthread_mutex_unlock(&mu);
}

void gpuaesd_publish_read(gpuaesd_load *v)
{
    pthread_mutex_lock(&mu);
    *v = cur;
    v->gpu_up = (uint32_t)gpuaesd_gpu_up();
    pthread_mutex_unlock(&mu);
}
