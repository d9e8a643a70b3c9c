/*
 * test_service_spare.c - spare segments (service/spare.c; docs/SERVICE.md,
 * "Shared memory"): a client of a warm service gets a segment the service
 * made and registered ahead, so its jobs run direct from the first one; the
 * next client gets another (a new memfd, never the same); a client of
 * another size, or any client under GPUAESD_SPARE=0, makes its own as
 * before.  The service's exit must be clean: the emulated layer aborts on a
 * range still registered at its shutdown (a spare not dropped).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service_util.h"
#include "testutil.h"

int svc_run_spare(const char *service);

#define SPARE_SEG ((size_t)64 << 20)   /* spare.c's SPARE_SIZE */

/* The inode of the shared mapping that starts at p (/proc/self/maps), 0 if none. */
static unsigned long long inode_of(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long long start, end, ino = 0, found = 0;

    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &start, &end, &ino) == 3 && start == (uintptr_t)p)
            found = ino;
    if (f != NULL)
        fclose(f);
    return found;
}

/* `--status`'s spare line agrees with st. */
static void check_status_line(const char *service, const char *dir, const gpuaesd_status_reply *st)
{
    char cmd[512], line[256];
    unsigned long long given = ~0ull;
    unsigned ready = ~0u;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "%s --socket-dir %s --status", service, dir);
    CHECK((p = popen(cmd, "r")) != NULL);
    while (p != NULL && fgets(line, sizeof(line), p) != NULL)
        if (strncmp(line, "spare: ", 7) == 0)
            CHECK(sscanf(line, "spare: %llu segments handed out, %u ready", &given, &ready) == 2);
    if (p != NULL)
        CHECK(pclose(p) == 0);
    CHECK(given == st->segments_given);
}

int svc_run_spare(const char *service)
{
    const char *env = getenv("GPUAESD_SPARE");
    const int off = env != NULL && strcmp(env, "0") == 0;
    char dir[64], err[256];
    gpuaesd_conn *c[3];
    unsigned long long ino[2];
    gpuaesd_status_reply st;
    uint64_t jobs0 = 0, direct0 = 0;
    pid_t pid;

    svc_tmpdir(dir);
    pid = svc_start_fg(service, dir);
    CHECK(svc_wait_spares(dir, 20000) == (off ? 0u : 1u));
    for (int i = 0; i < 2; i++) {
        size_t n;

        c[i] = gpuaesd_connect(dir, NULL, SPARE_SEG, 5000, err, sizeof(err));
        CHECK(c[i] != NULL);
        if (c[i] == NULL)
            return test_report("service spare");
        ino[i] = inode_of(gpuaesd_segment(c[i], &n));
        CHECK(ino[i] != 0 && n == SPARE_SEG);
        CHECK(gpuaesd_query_status(dir, &st, 5000) == 0);
        CHECK(st.segments_given == (off ? 0u : (unsigned)i + 1));
        if (!off)                      /* registered before it was handed out */
            CHECK(st.segments_registered == (unsigned)i + 1);
        jobs0 = st.jobs;
        direct0 = st.jobs_direct;
        for (int j = 0; j < 4; j++)
            CHECK(svc_job_check(c[i], 0, (size_t)1 << 20, 1, 20000) == 1);
        CHECK(gpuaesd_query_status(dir, &st, 5000) == 0);
        CHECK(st.jobs - jobs0 == 4);
        if (!off) {                    /* direct from the first job on */
            if (st.jobs_direct - direct0 != 4)
                fprintf(stderr, "client %d: %llu of 4 jobs direct\n", i,
                        (unsigned long long)(st.jobs_direct - direct0));
            CHECK(st.jobs_direct - direct0 == 4);
        }
        if (i == 0)                    /* the next one is made */
            CHECK(svc_wait_spares(dir, 20000) == (off ? 0u : 1u));
    }
    CHECK(ino[0] != ino[1]);      /* a new memfd, not the first client's */
    /* another size: no spare of it, the client's own segment (same connection) */
    c[2] = gpuaesd_connect(dir, NULL, (size_t)1 << 20, 5000, err, sizeof(err));
    CHECK(c[2] != NULL);
    if (c[2] != NULL)
        CHECK(svc_job_check(c[2], 0, (size_t)256 << 10, 1, 20000) == 1);
    /* the three and this query (an earlier query's connection is counted
     * out once the service's thread sees it closed) */
    for (int i = 0; i < 200 && gpuaesd_query_status(dir, &st, 5000) == 0 && st.clients != 4; i++)
        usleep(10 * 1000);
    CHECK(st.segments_given == (off ? 0u : 2u) && st.malformed == 0 && st.clients == 4);
    check_status_line(service, dir, &st);
    for (int i = 0; i < 3; i++)
        gpuaesd_close(c[i]);
    CHECK(svc_stop(pid) == 0);    /* spares dropped (unregistered) before the layer's shutdown */
    svc_rmdir(dir);
    return test_report(off ? "service spare (GPUAESD_SPARE=0)" : "service spare");
}
