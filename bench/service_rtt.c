/*
 * service_rtt.c - what one job costs through gpuaesd beyond the GPU's work:
 * tiny jobs (16 B ECB by default) through the client library, one at a time
 * (the round trip) and with K in flight (the rate of a pipeline), the median
 * of R rounds.  Run it with job rings on and off (GPUAESD_RING=0 for the
 * service it starts, or GPUAES_SERVICE_RING=0) to see what the rings save.
 *
 *   service_rtt --service PATH [--dir DIR] [--len BYTES] [--jobs N] [--inflight K] [--rounds R]
 *
 * The service is started in DIR (a fresh 0700 directory under /tmp by
 * default) if none answers there, and left running (stop it with SIGTERM,
 * or let it exit when idle).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_stats.h"
#include "gpuaesd_client.h"

static void request(gpuaesd_job_req *r, size_t len)
{
    memset(r, 0, sizeof(*r));
    r->op = GPUAESD_OP_ECB_ENCRYPT;
    r->keylen = 16;
    r->len = len;
}

/* n jobs with up to k in flight; the seconds they took, or a negative value. */
static double run(gpuaesd_conn *c, size_t len, int n, unsigned k)
{
    gpuaesd_job_req r;
    gpuaesd_job_reply rep;
    int posted = 0, done = 0;
    double t0 = bench_mono_s();

    while (done < n) {
        while (posted < n && gpuaesd_inflight(c) < k) {
            request(&r, len);
            if (gpuaesd_post(c, &r, 5000) != 0)
                return -1;
            posted++;
        }
        if (gpuaesd_wait_any(c, &rep, 5000) != 0 || rep.status != GPUAESD_OK)
            return -1;
        done++;
    }
    return bench_mono_s() - t0;
}

int main(int argc, char **argv)
{
    const char *service = NULL, *dir = NULL;
    size_t len = 16;
    int jobs = 20000, rounds = 5;
    unsigned inflight = 8;
    char tmp[] = "/tmp/service_rtt.XXXXXX", err[256];
    double one[64], many[64];
    gpuaesd_conn *c;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--service") == 0)
            service = argv[i + 1];
        else if (strcmp(argv[i], "--dir") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--len") == 0)
            len = strtoul(argv[i + 1], NULL, 10);
        else if (strcmp(argv[i], "--jobs") == 0)
            jobs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--inflight") == 0)
            inflight = (unsigned)atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
        else
            break;
    }
    if (service == NULL || len == 0 || len % 16 != 0 || len > ((size_t)1 << 20) || jobs < 1 || rounds < 1
        || rounds > 64 || inflight < 1 || inflight > GPUAESD_INFLIGHT_MAX) {
        fprintf(stderr, "usage: service_rtt --service PATH [--dir DIR] [--len BYTES (16..1M, of 16)] "
                        "[--jobs N] [--inflight K (1..64)] [--rounds R (1..64)]\n");
        return 2;
    }
    if (dir == NULL && (dir = mkdtemp(tmp)) == NULL)
        return 1;
    if ((c = gpuaesd_connect(dir, service, (size_t)4 << 20, 20000, err, sizeof(err))) == NULL) {
        fprintf(stderr, "service_rtt: %s\n", err);
        return 1;
    }
    if (inflight > gpuaesd_max_inflight(c))
        inflight = gpuaesd_max_inflight(c);
    if (run(c, len, 1000, inflight) < 0) {     /* warm-up; the GPU may still be starting */
        for (int i = 0; i < 200 && run(c, len, 1, 1) < 0; i++)
            nanosleep(&(struct timespec){ 0, 50000000L }, NULL);
    }
    for (int i = 0; i < rounds; i++) {
        one[i] = run(c, len, jobs / 4, 1) / (jobs / 4) * 1e6;
        many[i] = run(c, len, jobs, inflight) / jobs * 1e6;
        if (one[i] < 0 || many[i] < 0) {
            fprintf(stderr, "service_rtt: a job failed\n");
            return 1;
        }
    }
    bench_sort(one, rounds);
    bench_sort(many, rounds);
    printf("service_rtt len %zu: one at a time %.2f us per job, %u in flight %.2f us per job "
           "(medians of %d rounds; %s)\n", len, one[rounds / 2], inflight, many[rounds / 2], rounds, dir);
    gpuaesd_close(c);
    return 0;
}
