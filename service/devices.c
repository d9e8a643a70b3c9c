/*
 * devices.c - several GPUs (docs/SERVICE.md, "Several GPUs").
 *
 * The GPU layer serves one device per process, and CUDA cannot be used in a
 * child forked after it started.  So the service's own process serves the
 * first device and, once its GPU is up, starts a worker for each further one:
 * `gpuaesd --worker DEVICE`, executed afresh, with a control socket as fd 3.
 * Clients still dial the one socket.  At a connection's first hello the
 * service hands it over (with that hello and its memfd) to the least-loaded
 * GPU's process, which serves it from then on: the segment is registered
 * with that GPU and every job of the connection runs there.  The load is
 * each process's published page (publish.c); a worker sends its descriptor
 * in its READY.
 *
 * A worker ends when its control socket does (the service ended, however).
 * A worker that dies is left out; its clients see their connections close,
 * fall back to the CPU, and the next dial is routed elsewhere.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fdpass.h"
#include "gpuaes_gpu.h"
#include "gpuaesd_load.h"
#include "mono_clock.h"
#include "service.h"

extern char **environ;

/* The control protocol (one binary at both ends; still checked). */
enum { CTL_READY = 1, CTL_HANDOFF, CTL_ASK, CTL_ANSWER };

typedef struct ctl_msg {
    uint32_t type;
    uint32_t pid;                      /* HANDOFF: the client's */
    uint32_t seq;                      /* ASK, ANSWER */
    uint32_t hello_n;                  /* HANDOFF: bytes of hello */
    unsigned char hello[sizeof(gpuaesd_hello)];
    gpuaesd_status_reply status;       /* ANSWER */
    gpuaesd_device_load load;          /* ANSWER */
} ctl_msg;

enum { W_STARTING, W_READY, W_GONE };

typedef struct worker {
    int device;
    pid_t pid;
    int fd;                            /* the control socket */
    _Atomic int state;
    const gpuaesd_load_table *load;    /* set before state becomes W_READY */
    pthread_t reader;
    pthread_mutex_t mu;                /* asks and answers */
    pthread_cond_t answered;
    uint32_t seq_sent, seq_got;
    gpuaesd_status_reply st;
    gpuaesd_device_load dl;
} worker;

static int listed[GPUAESD_DEVICES_MAX], nlisted;   /* 0: every device the layer sees */
static worker workers[GPUAESD_DEVICES_MAX - 1];
static _Atomic int nworkers;           /* started; fixed once spawned */
static _Atomic int spawned;

int gpuaesd_devices_parse(const char *s)
{
    int n = 0;

    if (s == NULL || strcmp(s, "all") == 0) {
        nlisted = 0;
        return 0;
    }
    while (*s != '\0') {
        char *end;
        long d = strtol(s, &end, 10);

        if (end == s || d < 0 || d > GPUAES_DEVICE_MAX || n == (int)GPUAESD_DEVICES_MAX
            || (*end != ',' && *end != '\0'))
            return -1;
        for (int i = 0; i < n; i++)
            if (listed[i] == d)
                return -1;
        listed[n++] = (int)d;
        s = *end == ',' ? end + 1 : end;
    }
    if (n == 0)
        return -1;
    nlisted = n;
    return 0;
}

int gpuaesd_devices_self(void)
{
    return nlisted > 0 ? listed[0] : 0;
}

void gpuaesd_devices_serve_as(int device)
{
    listed[0] = device;                /* a worker: its own device, and no workers of its own */
    nlisted = 1;
}

/* One control message, its descriptors in fds[0..2) (-1: none); as
 * gpuaesd_recv_fds, and -2 for a message not of our size. */
static ssize_t ctl_recv(int fd, ctl_msg *m, int fds[2])
{
    ssize_t n = gpuaesd_recv_fds(fd, m, sizeof(*m), fds, 2);

    if (n > 0 && (size_t)n != sizeof(*m)) {
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
        return -2;
    }
    return n;
}

static int ctl_send(int fd, const ctl_msg *m, const int *fds, unsigned nfd)
{
    gpuaesd_cmsg cb;
    struct iovec iov = { (void *)m, sizeof(*m) };
    struct msghdr mh = { 0 };
    ssize_t w;

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfd > 0)
        gpuaesd_fd_attach_n(&mh, &cb, fds, nfd);
    do
        w = sendmsg(fd, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)sizeof(*m) ? 0 : -1;
}

/* This process's own line of a DEVICES reply. */
static void self_load(gpuaesd_device_load *d, const gpuaesd_status_reply *st)
{
    gpuaesd_load l;

    gpuaesd_publish_read(&l);
    memset(d, 0, sizeof(*d));
    d->device = (uint32_t)gpuaesd_devices_self();
    d->pid = (uint32_t)getpid();
    d->gpu_up = st->gpu_up;
    d->clients = l.clients;
    d->jobs_queued = l.jobs_queued;
    d->jobs_running = l.jobs_running;
    d->jobs_gpu = st->jobs_gpu;
    d->bytes_gpu = st->bytes_gpu;
    d->bytes_inflight = l.bytes_inflight;
    snprintf(d->gpu, sizeof(d->gpu), "%.95s", st->gpu);
}

/* ---- The service's side ---- */

/* A worker's messages: its READY, then answers; its end (EOF) when it exits. */
static void *reader_main(void *arg)
{
    worker *w = arg;

    for (;;) {
        ctl_msg m;
        int fds[2];
        ssize_t n = ctl_recv(w->fd, &m, fds);

        if (n == 0 || n == -1)
            break;
        if (n < 0)
            continue;
        if (m.type == CTL_READY && fds[0] >= 0 && atomic_load(&w->state) == W_STARTING) {
            w->load = gpuaesd_load_map(fds[0]);
            atomic_store(&w->state, w->load != NULL ? W_READY : W_GONE);
            gpuaesd_log("device %d: worker %ld %s", w->device, (long)w->pid,
                        w->load != NULL ? "ready" : "sent no load page: left out");
        } else if (m.type == CTL_ANSWER) {
            pthread_mutex_lock(&w->mu);
            if (m.seq > w->seq_got && m.seq <= w->seq_sent) {
                w->st = m.status;
                w->st.gpu[sizeof(w->st.gpu) - 1] = '\0';
                w->dl = m.load;
                w->dl.gpu[sizeof(w->dl.gpu) - 1] = '\0';
                w->seq_got = m.seq;
                pthread_cond_broadcast(&w->answered);
            }
            pthread_mutex_unlock(&w->mu);
        }
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
    int was = atomic_exchange(&w->state, W_GONE), st = 0;

    pthread_mutex_lock(&w->mu);
    pthread_cond_broadcast(&w->answered);
    pthread_mutex_unlock(&w->mu);
    waitpid(w->pid, &st, 0);           /* its control socket closes only as it exits */
    if (was != W_GONE)
        gpuaesd_log("device %d: worker %ld gone (%s %d)", w->device, (long)w->pid,
                    WIFSIGNALED(st) ? "signal" : "exit status", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    return NULL;
}

static int spawn_worker(worker *w, int device, const char *dir, unsigned jobs, long idle_s)
{
    char exe[PATH_MAX], dev_s[16], jobs_s[16], idle_s_s[24];
    char *argv[] = { (char *)"gpuaesd", (char *)"--worker", dev_s, (char *)"--socket-dir", (char *)dir,
                     (char *)"--jobs", jobs_s, (char *)"--idle-exit", idle_s_s, NULL };
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t a;
    sigset_t none, all;
    ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    int sp[2], rc;

    if (l <= 0 || socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0)
        return -1;
    exe[l] = '\0';
    snprintf(dev_s, sizeof(dev_s), "%d", device);
    snprintf(jobs_s, sizeof(jobs_s), "%u", jobs);
    snprintf(idle_s_s, sizeof(idle_s_s), "%ld", idle_s);
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, sp[1], 3);   /* dup2 clears close-on-exec */
    posix_spawnattr_init(&a);
    posix_spawnattr_setflags(&a, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&a, &none);
    posix_spawnattr_setsigdefault(&a, &all);
    rc = posix_spawn(&w->pid, exe, &fa, &a, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&a);
    close(sp[1]);
    if (rc != 0) {
        close(sp[0]);
        return -1;
    }
    w->device = device;
    w->fd = sp[0];
    atomic_store(&w->state, W_STARTING);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->answered, NULL);
    if (pthread_create(&w->reader, NULL, reader_main, w) != 0) {
        close(w->fd);                  /* it sees EOF and ends */
        waitpid(w->pid, NULL, 0);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->answered);
        return -1;
    }
    return 0;
}

void gpuaesd_devices_spawn(const char *dir, unsigned jobs, long idle_s)
{
    int want[GPUAESD_DEVICES_MAX], n = 0;

    if (atomic_exchange(&spawned, 1))
        return;
    if (nlisted > 0) {
        for (int i = 1; i < nlisted; i++)
            want[n++] = listed[i];
    } else {
        int count = gpuaes_gpu_device_count();

        for (int d = 1; d < count && n < (int)GPUAESD_DEVICES_MAX - 1; d++)
            want[n++] = d;
    }
    for (int i = 0; i < n; i++) {
        int k = atomic_load(&nworkers);

        if (spawn_worker(&workers[k], want[i], dir, jobs, idle_s) == 0)
            atomic_store(&nworkers, k + 1);
        else
            gpuaesd_log("device %d: no worker could be started: %s", want[i], strerror(errno));
    }
}

int gpuaesd_devices_spawned(void)
{
    return atomic_load(&spawned);
}

/* A ready worker's load, checked; -1 when it has none to show. */
static int worker_load(worker *w, gpuaesd_load *l)
{
    return atomic_load(&w->state) == W_READY && gpuaesd_load_read(w->load, l) == 0 && gpuaesd_check_load(l) == 0
           ? 0 : -1;
}

int gpuaesd_devices_route(int fd, pid_t pid, const void *hello, size_t n, int mfd)
{
    int k = atomic_load(&nworkers), best = -1;
    gpuaesd_load self, l;
    uint64_t best_clients, best_bytes;
    ctl_msg m;
    int fds[2] = { fd, mfd };

    if (k == 0 || n > sizeof(m.hello))
        return 0;
    gpuaesd_publish_read(&self);
    /* This connection counts among our own clients already. */
    best_clients = self.gpu_up == GPUAESD_GPU_READY ? (uint64_t)self.clients - (self.clients > 0) : UINT64_MAX;
    best_bytes = self.bytes_inflight;
    for (int i = 0; i < k; i++) {
        if (worker_load(&workers[i], &l) != 0 || l.gpu_up != GPUAESD_GPU_READY)
            continue;
        if (l.clients < best_clients || (l.clients == best_clients && l.bytes_inflight < best_bytes)) {
            best = i;
            best_clients = l.clients;
            best_bytes = l.bytes_inflight;
        }
    }
    if (best < 0)
        return 0;
    memset(&m, 0, sizeof(m));
    m.type = CTL_HANDOFF;
    m.pid = (uint32_t)pid;
    m.hello_n = (uint32_t)n;
    memcpy(m.hello, hello, n);
    if (ctl_send(workers[best].fd, &m, fds, mfd >= 0 ? 2 : 1) != 0) {
        gpuaesd_wipe(&m, sizeof(m));
        return 0;                      /* served here */
    }
    gpuaesd_wipe(&m, sizeof(m));
    return 1;
}

/* A worker's status and line, asked over its control socket (at most 500 ms). */
static int ask_worker(worker *w, gpuaesd_status_reply *st, gpuaesd_device_load *dl)
{
    ctl_msg m;
    int64_t deadline = mono_ms() + 500;
    int rc = -1;

    if (atomic_load(&w->state) != W_READY)
        return -1;
    memset(&m, 0, sizeof(m));
    m.type = CTL_ASK;
    pthread_mutex_lock(&w->mu);
    m.seq = ++w->seq_sent;
    if (ctl_send(w->fd, &m, NULL, 0) == 0) {
        while (w->seq_got < m.seq && atomic_load(&w->state) == W_READY) {
            struct timespec until;
            int64_t left = deadline - mono_ms();

            if (left <= 0)
                break;
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += left / 1000;
            until.tv_nsec += (left % 1000) * 1000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&w->answered, &w->mu, &until);
        }
        if (w->seq_got >= m.seq) {
            *st = w->st;
            *dl = w->dl;
            rc = 0;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

void gpuaesd_devices_add_status(gpuaesd_status_reply *st)
{
    int k = atomic_load(&nworkers), more = 0;

    for (int i = 0; i < k; i++) {
        gpuaesd_status_reply w;
        gpuaesd_device_load dl;

        if (ask_worker(&workers[i], &w, &dl) != 0)
            continue;
        more++;
        st->clients += w.clients;
        st->jobs += w.jobs;
        st->jobs_gpu += w.jobs_gpu;
        st->bytes_gpu += w.bytes_gpu;
        st->malformed += w.malformed;
        st->segments_registered += w.segments_registered;
        st->register_failed += w.register_failed;
        st->jobs_direct += w.jobs_direct;
        st->bytes_direct += w.bytes_direct;
        st->segments_given += w.segments_given;
        st->jobs_ring += w.jobs_ring;
        st->spares_ready += w.spares_ready;
        if (st->gpu_up != GPUAESD_GPU_READY && w.gpu_up == GPUAESD_GPU_READY)
            st->gpu_up = GPUAESD_GPU_READY;
    }
    if (more > 0) {
        size_t l = strlen(st->gpu);

        snprintf(st->gpu + l, sizeof(st->gpu) - l, "; and %d more GPU%s", more, more == 1 ? "" : "s");
    }
}

void gpuaesd_devices_fill(gpuaesd_devices_reply *r)
{
    gpuaesd_status_reply st;
    int k = atomic_load(&nworkers);

    memset(r, 0, sizeof(*r));
    gpuaesd_hdr_init(&r->hdr, GPUAESD_DEVICES_REPLY, sizeof(*r));
    gpuaesd_status_self(&st);
    self_load(&r->dev[0], &st);
    r->n = 1;
    for (int i = 0; i < k; i++) {
        gpuaesd_device_load *d = &r->dev[r->n];

        if (ask_worker(&workers[i], &st, d) == 0) {
            r->n++;
        } else {
            memset(d, 0, sizeof(*d));  /* starting or gone: shown as such */
            d->device = (uint32_t)workers[i].device;
            d->pid = (uint32_t)workers[i].pid;
            d->gpu_up = atomic_load(&workers[i].state) == W_STARTING ? GPUAESD_GPU_STARTING : GPUAESD_GPU_NONE;
            snprintf(d->gpu, sizeof(d->gpu), "%s", atomic_load(&workers[i].state) == W_STARTING
                                                    ? "worker starting" : "worker gone");
            r->n++;
        }
    }
}

unsigned gpuaesd_devices_clients(void)
{
    int k = atomic_load(&nworkers);
    unsigned n = 0;
    gpuaesd_load l;

    for (int i = 0; i < k; i++)
        if (worker_load(&workers[i], &l) == 0)
            n += l.clients;
    return n;
}

uint64_t gpuaesd_devices_last_activity_ms(void)
{
    int k = atomic_load(&nworkers);
    uint64_t last = 0;
    gpuaesd_load l;

    for (int i = 0; i < k; i++)        /* stamp_ns: the monotonic time of its last change */
        if (worker_load(&workers[i], &l) == 0 && l.stamp_ns / 1000000 > last)
            last = l.stamp_ns / 1000000;
    return last;
}

void gpuaesd_devices_stop(void)
{
    int k = atomic_load(&nworkers);

    for (int i = 0; i < k; i++)
        shutdown(workers[i].fd, SHUT_RDWR);   /* the worker sees its end and stops */
}

void gpuaesd_devices_join(void)
{
    int k = atomic_load(&nworkers);

    for (int i = 0; i < k; i++) {
        pthread_join(workers[i].reader, NULL);
        close(workers[i].fd);
        if (workers[i].load != NULL)
            gpuaesd_load_unmap(workers[i].load);
    }
}

/* ---- A worker's side ---- */

int gpuaesd_worker_serve(int ctl, int sfd)
{
    ctl_msg m;
    int fds[2], lfd = gpuaesd_publish_fd();

    memset(&m, 0, sizeof(m));
    m.type = CTL_READY;
    if (lfd < 0 || ctl_send(ctl, &m, &lfd, 1) != 0) {
        gpuaesd_log("worker: no READY sent (no load page, or the service is gone)");
        return -1;
    }
    for (;;) {
        struct pollfd p[2] = { { ctl, POLLIN, 0 }, { sfd, POLLIN, 0 } };
        ssize_t n;

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            return -1;
        if (p[1].revents & POLLIN)
            return 0;
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        n = ctl_recv(ctl, &m, fds);
        if (n == 0 || n == -1)
            return 0;                  /* the service ended */
        if (n < 0)
            continue;
        if (m.type == CTL_HANDOFF && fds[0] >= 0 && m.hello_n <= sizeof(m.hello)) {
            gpuaesd_serve_handed(fds[0], (pid_t)m.pid, m.hello, m.hello_n, fds[1]);
            fds[0] = fds[1] = -1;      /* the client's now */
        } else if (m.type == CTL_ASK) {
            uint32_t seq = m.seq;

            memset(&m, 0, sizeof(m));
            m.type = CTL_ANSWER;
            m.seq = seq;
            gpuaesd_status_self(&m.status);
            self_load(&m.load, &m.status);
            ctl_send(ctl, &m, NULL, 0);
        }
        gpuaesd_wipe(&m, sizeof(m));
        for (int i = 0; i < 2; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    }
}
