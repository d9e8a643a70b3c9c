/*
 * test_service_load.c - the published load (docs/SERVICE.md, "Published
 * load"; include/gpuaesd_load.h).
 *
 * seqlock: a writer thread publishes snapshots whose every word derives from
 * one counter while a child process reads them through its own read-only
 * mapping: no copy it accepts mixes two snapshots.  hostile: a client
 * refuses a pipe, an unsealed, short or foreign memfd; a table whose
 * sequence stays odd makes a read give up (bounded); nonsense values are
 * refused by gpuaesd_check_load.  service: two connections to gpuaesd_emu
 * (slow jobs, GPUAES_EMU_JOB_DELAY_MS) see each other's jobs in the table,
 * counts consistent in every copy read meanwhile; after the replies nothing
 * is in flight and the op has a rate; the descriptor the service passes can
 * be neither written, nor mapped writable, nor reopened for writing, nor
 * resealed, and its read-only mapping cannot be made writable.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuaesd_load.h"
#include "service_util.h"
#include "testutil.h"

int svc_run_load(const char *service);

/* The snapshot number i: every word derived from i. */
static void snapshot(gpuaesd_load *v, uint64_t i)
{
    memset(v, 0, sizeof(*v));
    v->jobs_queued = (uint32_t)i;
    v->jobs_running = (uint32_t)(i * 3);
    v->clients_busy = (uint32_t)(i * 5);
    v->clients = (uint32_t)(i * 7);
    v->gpu_up = (uint32_t)(i * 11);
    v->reserved = (uint32_t)(i * 13);
    v->bytes_inflight = i * 17;
    v->stamp_ns = i * 19;
    for (int k = 0; k < GPUAESD_LOAD_OPS; k++) {
        v->rate[k] = i * 23 + (uint64_t)k;
        v->rate_ns[k] = i * 29 + (uint64_t)k;
    }
}

static atomic_int writer_stop;

static void *writer_main(void *arg)
{
    gpuaesd_load_table *t = arg;
    gpuaesd_load v;

    for (uint64_t i = 1; !atomic_load(&writer_stop); i++) {
        snapshot(&v, i);
        gpuaesd_load_write(t, &v);
    }
    return NULL;
}

/* The child: reads for about a second; exit 0 when no copy was torn and
 * several snapshots came through. */
static int reader_child(int fd)
{
    const gpuaesd_load_table *t = gpuaesd_load_map(fd);
    gpuaesd_load v, want;
    uint64_t last = 0, seen = 0, torn = 0, failed = 0;
    time_t end = time(NULL) + 2;

    if (t == NULL)
        return 2;
    while (time(NULL) < end) {
        if (gpuaesd_load_read(t, &v) != 0) {
            failed++;
            continue;
        }
        snapshot(&want, v.jobs_queued);
        if (memcmp(&v, &want, sizeof(v)) != 0 && v.jobs_queued != 0)
            torn++;
        if (v.jobs_queued != last) {
            seen++;
            last = v.jobs_queued;
        }
    }
    printf("seqlock: %llu snapshots seen, %llu torn, %llu reads gave up\n", (unsigned long long)seen,
           (unsigned long long)torn, (unsigned long long)failed);
    fflush(stdout);                    /* _exit follows */
    gpuaesd_load_unmap(t);
    return torn == 0 && seen >= 2 ? 0 : 1;
}

static void test_seqlock(void)
{
    int fd, st;
    gpuaesd_load_table *t = gpuaesd_load_create(&fd);
    pthread_t w;
    pid_t pid;

    CHECKF(t != NULL, "gpuaesd_load_create (sealing a memfd needs Linux >= 5.1)");
    if (t == NULL)
        return;
    pid = fork();
    if (pid == 0)
        _exit(reader_child(fd));
    pthread_create(&w, NULL, writer_main, t);
    waitpid(pid, &st, 0);
    atomic_store(&writer_stop, 1);
    pthread_join(w, NULL);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "a reader in another process saw torn copies (%d)", st);
    close(fd);
    munmap(t, GPUAESD_LOAD_BYTES);
}

/* What a client must refuse from a service. */
static void test_hostile(void)
{
    int p[2], fd, ro;
    gpuaesd_load_table *t;
    gpuaesd_load v;

    CHECKF(pipe(p) == 0, "pipe");
    CHECKF(gpuaesd_load_map(p[0]) == NULL, "a pipe was mapped");
    close(p[0]);
    close(p[1]);
    fd = memfd_create("t", MFD_ALLOW_SEALING);
    CHECKF(fd >= 0 && ftruncate(fd, GPUAESD_LOAD_BYTES) == 0, "memfd");
    CHECKF(gpuaesd_load_map(fd) == NULL, "an unsealed memfd was mapped (shrinkable: a SIGBUS)");
    CHECKF(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0, "seals");
    CHECKF(gpuaesd_load_map(fd) == NULL, "a table without magic was mapped");
    close(fd);
    fd = memfd_create("t", MFD_ALLOW_SEALING);
    CHECKF(fd >= 0 && ftruncate(fd, 2 * GPUAESD_LOAD_BYTES) == 0
           && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) == 0, "memfd");
    CHECKF(gpuaesd_load_map(fd) == NULL, "a memfd of the wrong size was mapped");
    close(fd);

    /* A writer that never finishes: the sequence (at byte 16) stays odd. */
    t = gpuaesd_load_create(&ro);
    if (t != NULL) {
        const gpuaesd_load_table *r = gpuaesd_load_map(ro);

        CHECKF(r != NULL && gpuaesd_load_read(r, &v) == 0, "a fresh table reads");
        ((volatile uint64_t *)t)[2] |= 1;
        CHECKF(r != NULL && gpuaesd_load_read(r, &v) == -1, "a read of a table mid-write did not give up");
        gpuaesd_load_unmap(r);
        munmap(t, GPUAESD_LOAD_BYTES);
        close(ro);
    }

    memset(&v, 0, sizeof(v));
    CHECKF(gpuaesd_check_load(&v) == 0, "an idle table refused");
    v.clients = 1, v.clients_busy = 2, v.jobs_running = 2;
    CHECKF(gpuaesd_check_load(&v) != 0, "more busy clients than clients accepted");
    v.clients = 2, v.jobs_running = 1;
    CHECKF(gpuaesd_check_load(&v) != 0, "more busy clients than jobs accepted");
    v.jobs_running = GPUAESD_LOAD_JOBS_MAX + 1, v.clients_busy = 0;
    CHECKF(gpuaesd_check_load(&v) != 0, "a job count out of range accepted");
    memset(&v, 0, sizeof(v));
    v.gpu_up = 3;
    CHECKF(gpuaesd_check_load(&v) != 0, "an unknown GPU state accepted");
    v.gpu_up = 0, v.rate[3] = GPUAESD_LOAD_RATE_MAX + 1;
    CHECKF(gpuaesd_check_load(&v) != 0, "a rate out of range accepted");
    v.rate[3] = 0, v.bytes_inflight = 1;
    CHECKF(gpuaesd_check_load(&v) != 0, "bytes in flight without jobs accepted");
}

/* The descriptor of a raw hello's reply. */
static int table_fd_of_service(const char *dir)
{
    int s = gpuaesd_dial(dir, 2000), mfd = memfd_create("seg", MFD_ALLOW_SEALING), fd = -1;
    union { struct cmsghdr c; char b[CMSG_SPACE(sizeof(int))]; } cb;
    gpuaesd_hello h = { 0 };
    gpuaesd_hello_reply r;
    struct iovec iov = { &h, sizeof(h) };
    struct msghdr mh = { 0 };

    if (s < 0 || mfd < 0 || ftruncate(mfd, 65536) != 0 || fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK) != 0)
        return -1;
    gpuaesd_hdr_init(&h.hdr, GPUAESD_HELLO, sizeof(h));
    h.seg_size = 65536;
    memset(&cb, 0, sizeof(cb));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cb.b;
    mh.msg_controllen = sizeof(cb.b);
    CMSG_FIRSTHDR(&mh)->cmsg_level = SOL_SOCKET;
    CMSG_FIRSTHDR(&mh)->cmsg_type = SCM_RIGHTS;
    CMSG_FIRSTHDR(&mh)->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(CMSG_FIRSTHDR(&mh)), &mfd, sizeof(int));
    if (sendmsg(s, &mh, MSG_NOSIGNAL) != (ssize_t)sizeof(h))
        return -1;
    iov.iov_base = &r;
    iov.iov_len = sizeof(r);
    mh.msg_controllen = sizeof(cb.b);
    for (int i = 0; i < 200 && fd < 0; i++) {
        if (recvmsg(s, &mh, MSG_DONTWAIT) == (ssize_t)sizeof(r)) {
            if (CMSG_FIRSTHDR(&mh) != NULL && CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS)
                memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
            break;
        }
        usleep(10000);
    }
    close(mfd);
    close(s);
    return fd;
}

/* No way for a client to write the service's table. */
static void cannot_write(int fd)
{
    char path[64], b = 1;
    void *p;
    int rw;

    CHECKF(fcntl(fd, F_GETFL) >= 0 && (fcntl(fd, F_GETFL) & O_ACCMODE) == O_RDONLY,
           "the table's descriptor is not read-only");
    CHECKF(write(fd, &b, 1) < 0 && pwrite(fd, &b, 1, 100) < 0, "the table was written through its descriptor");
    p = mmap(NULL, GPUAESD_LOAD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECKF(p == MAP_FAILED, "the table was mapped writable");
    p = mmap(NULL, GPUAESD_LOAD_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    CHECKF(p != MAP_FAILED && mprotect(p, GPUAESD_LOAD_BYTES, PROT_READ | PROT_WRITE) != 0,
           "a read-only mapping of the table was made writable");
    if (p != MAP_FAILED)
        munmap(p, GPUAESD_LOAD_BYTES);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    rw = open(path, O_RDWR);
    if (rw >= 0) {                     /* memfds reopen read-write: the seal must still hold */
        CHECKF(write(rw, &b, 1) < 0, "the table was written through a reopened descriptor");
        p = mmap(NULL, GPUAESD_LOAD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0);
        CHECKF(p == MAP_FAILED, "the table was mapped writable through a reopened descriptor");
        CHECKF(ftruncate(rw, 0) != 0, "the table was truncated");
        close(rw);
    }
    CHECKF(fcntl(fd, F_ADD_SEALS, F_SEAL_WRITE) != 0, "the table's seals were changed");
}

typedef struct watch {
    const gpuaesd_load_table *t;
    atomic_int stop;
    unsigned long reads, bad;
} watch;

/* Reads the table as fast as it can while jobs come and go: every copy that
 * comes through must make sense (gpuaesd_check_load). */
static void *watch_main(void *arg)
{
    watch *w = arg;
    gpuaesd_load v;

    while (!atomic_load(&w->stop))
        if (gpuaesd_load_read(w->t, &v) == 0) {
            w->reads++;
            w->bad += gpuaesd_check_load(&v) != 0 || v.clients_busy > 2 || v.jobs_queued + v.jobs_running > 4;
        }
    return NULL;
}

/* Polls t (up to 10 s) until it shows `jobs` requests of `busy` clients and
 * `bytes` in flight among `clients`. */
static int shows(const gpuaesd_load_table *t, unsigned jobs, unsigned busy, uint64_t bytes, unsigned clients)
{
    gpuaesd_load v = { 0 };

    for (int i = 0; i < 1000; i++) {
        if (gpuaesd_load_read(t, &v) == 0 && v.jobs_queued + v.jobs_running == jobs && v.clients_busy == busy
            && v.bytes_inflight == bytes && v.clients == clients)
            return 1;
        usleep(10000);
    }
    printf("table: %u queued, %u running, %u busy of %u clients, %llu bytes (want %u, %u of %u, %llu)\n",
           v.jobs_queued, v.jobs_running, v.clients_busy, v.clients, (unsigned long long)v.bytes_inflight,
           jobs, busy, clients, (unsigned long long)bytes);
    return 0;
}

static void ctr_req(gpuaesd_job_req *r, unsigned k)
{
    memset(r, 0, sizeof(*r));
    r->op = GPUAESD_OP_CTR128;
    r->keylen = 16;
    r->in_off = r->out_off = (uint64_t)k * 65536;
    r->len = 65536;
}

static void test_service(const char *service)
{
    char dir[64], err[256];
    gpuaesd_conn *a, *b;
    const gpuaesd_load_table *ta, *tb;
    gpuaesd_job_req r;
    gpuaesd_job_reply rep;
    gpuaesd_load v;
    watch w = { 0 };
    pthread_t wt;
    pid_t pid;
    int fd;

    svc_tmpdir(dir);
    setenv("GPUAES_EMU_JOB_DELAY_MS", "2000", 1);   /* the service's jobs: slow enough to be seen */
    setenv("GPUAESD_WARM", "0", 1);                 /* the table counts this test's jobs only */
    pid = svc_start_fg(service, dir);
    unsetenv("GPUAES_EMU_JOB_DELAY_MS");
    unsetenv("GPUAESD_WARM");
    a = gpuaesd_connect(dir, NULL, (size_t)1 << 20, 5000, err, sizeof(err));
    b = gpuaesd_connect(dir, NULL, (size_t)1 << 20, 5000, err, sizeof(err));
    CHECKF(a != NULL && b != NULL, "connect: %s", err);
    if (a == NULL || b == NULL)
        goto out;
    for (int i = 0; i < 1000; i++) {   /* the GPU up (started by the first hello's registration) */
        gpuaesd_status_reply st;

        if (gpuaesd_query_status(dir, &st, 2000) == 0 && st.gpu_up != GPUAESD_GPU_STARTING)
            break;
        usleep(10000);
    }
    ta = gpuaesd_load_of(a);
    tb = gpuaesd_load_of(b);
    CHECKF(ta != NULL && tb != NULL, "no published load with the hello reply");
    if (ta == NULL || tb == NULL)
        goto out;
    w.t = tb;
    pthread_create(&wt, NULL, watch_main, &w);
    CHECKF(shows(tb, 0, 0, 0, 2), "two idle clients");
    for (unsigned k = 0; k < 3; k++) {
        ctr_req(&r, k);
        CHECKF(gpuaesd_post(a, &r, 5000) == 0, "post");
    }
    CHECKF(shows(tb, 3, 1, 3 * 65536, 2), "b sees a's 3 jobs");
    ctr_req(&r, 0);
    CHECKF(gpuaesd_post(b, &r, 5000) == 0, "post");
    CHECKF(shows(ta, 4, 2, 4 * 65536, 2), "a sees its 3 jobs and b's");
    for (unsigned k = 0; k < 3; k++)
        CHECKF(gpuaesd_wait_any(a, &rep, 10000) == 0 && rep.status == GPUAESD_OK, "a's reply");
    CHECKF(gpuaesd_wait_any(b, &rep, 10000) == 0 && rep.status == GPUAESD_OK, "b's reply");
    /* Counted out before each reply went: nothing in flight now, at once. */
    CHECKF(gpuaesd_load_read(ta, &v) == 0 && v.jobs_queued + v.jobs_running == 0 && v.clients_busy == 0
           && v.bytes_inflight == 0, "jobs still in flight after their replies");
    CHECKF(v.rate[GPUAESD_OP_CTR128] > 0 && v.rate_ns[GPUAESD_OP_CTR128] > 0 && v.rate[GPUAESD_OP_ECB_ENCRYPT] == 0,
           "rates: CTR %llu, ECB %llu", (unsigned long long)v.rate[GPUAESD_OP_CTR128],
           (unsigned long long)v.rate[GPUAESD_OP_ECB_ENCRYPT]);
    CHECKF(v.gpu_up == GPUAESD_GPU_READY, "GPU state %u", v.gpu_up);
    atomic_store(&w.stop, 1);
    pthread_join(wt, NULL);
    printf("service: %lu copies read while jobs ran, %lu made no sense\n", w.reads, w.bad);
    CHECKF(w.reads > 0 && w.bad == 0, "copies that made no sense");
    fd = table_fd_of_service(dir);
    CHECKF(fd >= 0, "no table descriptor with a raw hello's reply");
    if (fd >= 0) {
        cannot_write(fd);
        close(fd);
    }
    gpuaesd_close(b);
    b = NULL;
    CHECKF(shows(ta, 0, 0, 0, 1), "b's going counted");
out:
    gpuaesd_close(a);
    gpuaesd_close(b);
    CHECKF(svc_stop(pid) == 0, "the service's exit");
    svc_rmdir(dir);
}

int svc_run_load(const char *service)
{
    test_seqlock();
    test_hostile();
    test_service(service);
    return check_report("load");
}
