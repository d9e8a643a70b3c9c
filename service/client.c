/*
 * client.c - the client side of gpuaesd (include/gpuaesd_client.h): every
 * wait is bounded by the caller's timeout, every reply checked
 * (gpuaesd_check_reply) before it is believed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuaesd_client.h"
#include "fdpass.h"
#include "gpuaesd_load.h"
#include "mono_clock.h"
#include "ring.h"
#include "sockdir.h"

extern char **environ;

/* A request posted and not yet answered: what its reply is checked against
 * (no key kept). */
typedef struct posted {
    uint64_t id, len;
} posted;

struct gpuaesd_conn {
    int fd;
    int dead;
    gpuaesd_ring *ring;                /* jobs through the ring (RING_GIVEN), else the socket */
    int svc_efd, cli_efd;              /* the ring's wake-ups: the service's, ours */
    uint32_t sq_tail, cq_head;         /* our indices (the shared ones are only told) */
    int64_t end_checked_ms;            /* a ring poll's last look at the socket */
    unsigned char *seg;
    size_t seg_size;
    uint64_t next_id;
    unsigned max_inflight;             /* the service's, from the hello reply */
    const gpuaesd_load_table *load;    /* its published load (the hello reply's fd), or NULL */
    unsigned npending;
    posted pending[GPUAESD_INFLIGHT_MAX];
};

/* gpuaesd_client_abort: while set, every wait here gives up within 10 ms. */
static atomic_int g_abort;

void gpuaesd_client_abort(int on)
{
    atomic_store(&g_abort, on);
}

static int aborted(void)
{
    return atomic_load_explicit(&g_abort, memory_order_relaxed);
}

static void nap_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&t, NULL);
}

static int resolve_dir(const char *dir, char *buf, size_t n)
{
    if (dir == NULL)
        return gpuaesd_default_dir(buf, n);
    if (strlen(dir) >= n)
        return -1;
    strcpy(buf, dir);
    return 0;
}

/* One non-blocking connect; a full backlog (EAGAIN) is retried until the deadline. */
static int dial_until(const char *dir, int64_t deadline)
{
    struct sockaddr_un sa;

    if (gpuaesd_sock_addr(dir, &sa) != 0)
        return -1;
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

        if (fd < 0)
            return -1;
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
            return fd;
        close(fd);
        if ((errno != EAGAIN && errno != EINTR) || mono_ms() >= deadline || aborted())
            return -1;
        nap_ms(1);
    }
}

/* Waits for fd to be readable (POLLIN) or writable until the deadline. */
static int wait_fd(int fd, short ev, int64_t deadline)
{
    for (;;) {
        int64_t left = deadline - mono_ms();
        struct pollfd p = { fd, ev, 0 };
        int r;

        if (left <= 0 || aborted())
            return -1;
        r = poll(&p, 1, left > 10 ? 10 : (int)left);   /* slices: gpuaesd_client_abort */
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Sends one message (with fd when >= 0). */
static int send_until(int fd, const void *m, size_t n, int pass_fd, int64_t deadline)
{
    gpuaesd_cmsg cb;
    struct iovec iov = { (void *)m, n };
    struct msghdr mh = { 0 };

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (pass_fd >= 0)
        gpuaesd_fd_attach(&mh, &cb, pass_fd);
    for (;;) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);

        if (w == (ssize_t)n)
            return 0;
        if (w >= 0 || (errno != EAGAIN && errno != EINTR) || wait_fd(fd, POLLOUT, deadline) != 0)
            return -1;
    }
}

/* One message of up to n bytes (a longer one is an error); its length or -1.
 * With nfd > 0, the first nfd descriptors it carries in fds (-1 where none;
 * any other is closed). */
static ssize_t recv_fd_until(int fd, void *m, size_t n, int *fds, unsigned nfd, int64_t deadline)
{
    gpuaesd_cmsg cb;
    struct iovec iov = { m, n };
    struct msghdr mh = { 0 };

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    for (unsigned i = 0; i < nfd; i++)
        fds[i] = -1;
    for (;;) {
        ssize_t r;

        if (nfd > 0)
            gpuaesd_fd_expect(&mh, &cb);
        r = recvmsg(fd, &mh, MSG_TRUNC | MSG_CMSG_CLOEXEC);
        if (r >= 0 && nfd > 0)
            gpuaesd_fd_take_n(&mh, fds, nfd);
        if (r > 0)
            return (size_t)r <= n ? r : -1;
        if (r == 0)
            errno = ECONNRESET;        /* the peer hung up */
        if (r == 0 || (errno != EAGAIN && errno != EINTR) || wait_fd(fd, POLLIN, deadline) != 0)
            return -1;
    }
}

static ssize_t recv_until(int fd, void *m, size_t n, int64_t deadline)
{
    return recv_fd_until(fd, m, n, NULL, 0, deadline);
}

int gpuaesd_dial(const char *socket_dir, int timeout_ms)
{
    char dir[108], err[256];

    if (resolve_dir(socket_dir, dir, sizeof(dir)) != 0 || gpuaesd_dir_check(dir, 0, err, sizeof(err)) != 0)
        return -1;
    return dial_until(dir, mono_ms() + timeout_ms);
}

int gpuaesd_listening(const char *socket_dir)
{
    char dir[108];
    struct sockaddr_un sa;
    struct stat sb;

    return resolve_dir(socket_dir, dir, sizeof(dir)) == 0 && gpuaesd_sock_addr(dir, &sa) == 0
        && lstat(sa.sun_path, &sb) == 0 && S_ISSOCK(sb.st_mode);
}

/* What of the starting process's environment the service keeps: it serves
 * every process of the user, so nothing of one application's (LD_PRELOAD,
 * OPENSSL_CONF, its knobs) may ride along; only where things are, the
 * CUDA driver's and the service's own variables (GPUAESD_*; GPUAES_EMU_*
 * only the emulated test build reads) and the sanitizers'. */
static int service_env_keeps(const char *kv)
{
    static const char *const names[] = { "PATH=", "HOME=", "USER=", "LOGNAME=", "LANG=", "TMPDIR=",
                                         "XDG_RUNTIME_DIR=", "XDG_CONFIG_HOME=", "LD_LIBRARY_PATH=",
                                         "ASAN_OPTIONS=", "LSAN_OPTIONS=", "UBSAN_OPTIONS=", "TSAN_OPTIONS=" };
    static const char *const prefixes[] = { "LC_", "CUDA_", "NVIDIA_", "GPUAESD_", "GPUAES_EMU_" };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strncmp(kv, names[i], strlen(names[i])) == 0)
            return 1;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(kv, prefixes[i], strlen(prefixes[i])) == 0)
            return 1;
    return 0;
}

/* Starts the service detached; its first process exits once the service
 * listens (or failed), so waiting for it is short.  Reaped here, within the
 * deadline (an application that ignores SIGCHLD reaps it itself: ECHILD). */
static int start_service(const char *path, const char *dir, int64_t deadline)
{
    char *argv[] = { (char *)"gpuaesd", (char *)"--socket-dir", (char *)dir, NULL };
    posix_spawnattr_t a;
    sigset_t none, all;
    pid_t pid;
    int rc, st;
    size_t n = 0, k = 0;
    char **envp;

    while (environ != NULL && environ[n] != NULL)
        n++;
    if ((envp = calloc(n + 1, sizeof(*envp))) == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (service_env_keeps(environ[i]))
            envp[k++] = environ[i];

    if (posix_spawnattr_init(&a) != 0) {
        free(envp);
        return -1;
    }
    sigemptyset(&none);
    sigfillset(&all);
    posix_spawnattr_setflags(&a, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setsigmask(&a, &none);
    posix_spawnattr_setsigdefault(&a, &all);
    rc = posix_spawn(&pid, path, NULL, &a, argv, envp);
    posix_spawnattr_destroy(&a);
    free(envp);
    if (rc != 0)
        return -1;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);

        if (w == pid)
            return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
        if (w < 0 && errno != EINTR)
            return errno == ECHILD ? 0 : -1;
        if (mono_ms() >= deadline || aborted())
            return -1;             /* given up: that process, if it ends later, is reaped at our exit */
        nap_ms(1);
    }
}

/* A sealed memfd of n bytes, mapped: the service refuses one it could be
 * made to fault on (shrinkable). */
static int make_segment(gpuaesd_conn *c, size_t n)
{
    int mfd = memfd_create("gpuaes-segment", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (mfd < 0)
        return -1;
    if (ftruncate(mfd, (off_t)n) != 0
        || fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0
        || (c->seg = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)) == MAP_FAILED) {
        c->seg = NULL;
        close(mfd);
        return -1;
    }
    c->seg_size = n;
    return mfd;
}

/* The service's segment (a hello reply's GPUAESD_HELLO_SEG_GIVEN): a sealed
 * memfd of n bytes, its pages allocated by the service; mapped here.  With
 * GPUAESD_POPULATE=1, all of them at once (MAP_POPULATE: 7 ms per 64 MiB on a
 * 2-core VM against 33 ms of faults on first touch, but it makes the connect
 * that much longer, past the provider's 3 ms service_connect_wait_ms: an A/B
 * for the GPU machine).  Closes mfd. */
static int populate(void)
{
    const char *e = secure_getenv("GPUAESD_POPULATE");

    return e != NULL && strcmp(e, "1") == 0;
}

static int map_given(gpuaesd_conn *c, int mfd, size_t n)
{
    struct stat st;
    int seals = mfd >= 0 ? fcntl(mfd, F_GET_SEALS) : -1;
    void *p = MAP_FAILED;

    if (seals >= 0 && (seals & F_SEAL_SHRINK) && fstat(mfd, &st) == 0 && S_ISREG(st.st_mode)
        && st.st_size >= 0 && (uint64_t)st.st_size >= n)
        p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | (populate() ? MAP_POPULATE : 0), mfd, 0);
    if (mfd >= 0)
        close(mfd);
    if (p == MAP_FAILED)
        return -1;
    c->seg = p;
    c->seg_size = n;
    return 0;
}

/* One hello (with mfd when >= 0) and its checked reply, with up to
 * HELLO_FDS descriptors in fds (-1 where none).  0; HELLO_HUNG_UP when the
 * peer closed without a reply (a dying service's listener can still take a
 * connection); or -1 (fds closed either way). */
enum { HELLO_HUNG_UP = -2, HELLO_FDS = 5 };

static void close_fds(int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

static int say_hello(gpuaesd_conn *c, const gpuaesd_hello *h, int mfd, gpuaesd_hello_reply *r,
                     int fds[HELLO_FDS], int64_t deadline)
{
    ssize_t n = -1;

    for (int i = 0; i < HELLO_FDS; i++)
        fds[i] = -1;
    errno = 0;
    if (send_until(c->fd, h, sizeof(*h), mfd, deadline) == 0)
        n = recv_fd_until(c->fd, r, sizeof(*r), fds, HELLO_FDS, deadline);
    if (n >= 0 && gpuaesd_check_hello_reply(r, (size_t)n) == 0)
        return 0;
    close_fds(fds, HELLO_FDS);
    return n < 0 && (errno == ECONNRESET || errno == EPIPE) ? HELLO_HUNG_UP : -1;
}

/* GPUAES_SERVICE_RING=0: jobs over the socket (A/B measurements). */
static int want_ring(void)
{
    const char *e = secure_getenv("GPUAES_SERVICE_RING");

    return e == NULL || strcmp(e, "0") != 0;
}

/* A RING_GIVEN reply's first three descriptors (taken: -1 left there):
 * the ring mapped and both eventfds kept.  0, or -1. */
static int take_ring(gpuaesd_conn *c, int fds[HELLO_FDS])
{
    if (fds[0] < 0 || fds[1] < 0 || fds[2] < 0 || (c->ring = gpuaesd_ring_map(fds[0])) == NULL)
        return -1;
    close(fds[0]);
    c->svc_efd = fds[1];
    c->cli_efd = fds[2];
    fds[0] = fds[1] = fds[2] = -1;
    c->sq_tail = ring_load(&c->ring->sq_tail);
    c->cq_head = ring_load(&c->ring->cq_head);
    return 0;
}

/* A connection to a service, started when none answers. */
static int dial_or_start(const char *dir, const char *service, int64_t deadline)
{
    int fd = dial_until(dir, deadline);

    if (fd < 0 && service != NULL && start_service(service, dir, deadline) == 0) {
        /* Ours listens now; but if another starter's service won the lock,
         * it may bind a moment after ours gave way. */
        while ((fd = dial_until(dir, deadline)) < 0 && mono_ms() < deadline && !aborted())
            nap_ms(5);
    }
    return fd;
}

gpuaesd_conn *gpuaesd_connect(const char *socket_dir, const char *service, size_t seg_size,
                              int timeout_ms, char *err, size_t errn)
{
    int64_t deadline = mono_ms() + timeout_ms;
    char dir[108];
    gpuaesd_conn *c = calloc(1, sizeof(*c));
    gpuaesd_hello h = { 0 };
    gpuaesd_hello_reply r;
    int mfd, lfd = -1, fds[HELLO_FDS];
    int rc, k;

    if (c == NULL || resolve_dir(socket_dir, dir, sizeof(dir)) != 0) {
        snprintf(err, errn, "out of memory, or socket directory name too long");
        free(c);
        return NULL;
    }
    if (gpuaesd_dir_check(dir, service != NULL, err, errn) != 0) {
        free(c);
        return NULL;
    }
    c->svc_efd = c->cli_efd = -1;
    /* First a spare segment of the service's (ready and registered: no page
     * faults, no staged jobs); when none is ready, on the same connection
     * (one more round trip, tens of µs), a segment of our own.  A service
     * killed a moment ago may take the connection and hang up: dialled
     * again (a new one starts) until the deadline. */
    gpuaesd_hdr_init(&h.hdr, GPUAESD_HELLO, sizeof(h));
    h.seg_size = seg_size;
    h.pid = (uint32_t)getpid();
    h.flags = GPUAESD_HELLO_WANT_SEG | (want_ring() ? GPUAESD_HELLO_RING : 0);
    for (;;) {
        c->fd = dial_or_start(dir, service, deadline);
        if (c->fd < 0) {
            snprintf(err, errn, "no service answers in %s", dir);
            free(c);
            return NULL;
        }
        rc = say_hello(c, &h, -1, &r, fds, deadline);
        if (rc != HELLO_HUNG_UP || mono_ms() >= deadline || aborted())
            break;
        close(c->fd);
        nap_ms(5);
    }
    /* The reply's descriptors: the ring's three (RING_GIVEN), the segment
     * (SEG_GIVEN), the published load. */
    if (rc == 0 && r.status == GPUAESD_OK && (r.flags & GPUAESD_HELLO_SEG_GIVEN)) {
        k = (r.flags & GPUAESD_HELLO_RING_GIVEN) ? 3 : 0;
        rc = k > 0 && take_ring(c, fds) != 0 ? -1 : map_given(c, fds[k], seg_size);
        fds[k] = -1;                   /* map_given closed it */
        lfd = fds[k + 1];
        fds[k + 1] = -1;
    } else if (rc == 0 && (r.flags & GPUAESD_HELLO_NO_SPARE)) {
        close_fds(fds, HELLO_FDS);
        if ((mfd = make_segment(c, seg_size)) < 0) {
            snprintf(err, errn, "memfd segment of %zu bytes: %s", seg_size, strerror(errno));
            gpuaesd_close(c);
            return NULL;
        }
        h.flags &= ~GPUAESD_HELLO_WANT_SEG;
        rc = say_hello(c, &h, mfd, &r, fds, deadline) == 0 && r.status == GPUAESD_OK
             && (r.flags & ~GPUAESD_HELLO_RING_GIVEN) == 0 ? 0 : -1;
        close(mfd);                    /* both mappings keep the memory */
        k = (r.flags & GPUAESD_HELLO_RING_GIVEN) ? 3 : 0;
        if (rc == 0 && k > 0 && take_ring(c, fds) != 0)
            rc = -1;
        lfd = fds[k];
        fds[k] = -1;
    } else if (rc == 0) {
        rc = -1;                       /* refused: nothing of it kept */
    }
    close_fds(fds, HELLO_FDS);
    if (rc != 0) {
        snprintf(err, errn, "the service refused or did not answer the hello");
        if (lfd >= 0)
            close(lfd);
        gpuaesd_close(c);
        return NULL;
    }
    if (lfd >= 0) {                    /* the published load: optional, checked */
        c->load = gpuaesd_load_map(lfd);
        close(lfd);
    }
    c->max_inflight = r.max_inflight;
    return c;
}

unsigned char *gpuaesd_segment(gpuaesd_conn *c, size_t *size)
{
    if (size != NULL)
        *size = c->seg_size;
    return c->seg;
}

const gpuaesd_load_table *gpuaesd_load_of(const gpuaesd_conn *c)
{
    return c->load;
}

const gpuaesd_load_table *gpuaesd_take_load(gpuaesd_conn *c)
{
    const gpuaesd_load_table *t = c->load;

    c->load = NULL;
    return t;
}

unsigned gpuaesd_max_inflight(const gpuaesd_conn *c)
{
    return c->max_inflight;
}

unsigned gpuaesd_inflight(const gpuaesd_conn *c)
{
    return c->npending;
}

int gpuaesd_post(gpuaesd_conn *c, gpuaesd_job_req *req, int timeout_ms)
{
    if (c == NULL || c->dead)
        return -1;
    if (c->npending >= c->max_inflight)
        return 1;
    gpuaesd_hdr_init(&req->hdr, GPUAESD_JOB, sizeof(*req));
    req->id = ++c->next_id;
    if (c->ring != NULL) {
        /* Its slot's last request is answered (no more than max_inflight,
         * <= GPUAESD_RING_SLOTS, are unanswered): the service is done with it. */
        c->ring->sq[c->sq_tail % GPUAESD_RING_SLOTS] = *req;
        ring_store(&c->ring->sq_tail, ++c->sq_tail);
        ring_kick(&c->ring->svc_sleeping, c->svc_efd);
    } else if (send_until(c->fd, req, sizeof(*req), -1, mono_ms() + timeout_ms) != 0) {
        c->dead = 1;
        return -1;
    }
    c->pending[c->npending++] = (posted){ req->id, req->len };
    return 0;
}

/* A received reply: checked against the request it names, which is then
 * answered.  0, or -1 (the connection is dead). */
static int take_reply(gpuaesd_conn *c, const gpuaesd_job_reply *rep, ssize_t n)
{
    gpuaesd_job_req req;

    if (n == (ssize_t)sizeof(*rep)) {
        for (unsigned i = 0; i < c->npending; i++) {
            if (c->pending[i].id != rep->id)
                continue;
            memset(&req, 0, sizeof(req));
            req.id = c->pending[i].id;
            req.len = c->pending[i].len;
            if (gpuaesd_check_reply(rep, (size_t)n, &req) != 0)
                break;
            c->pending[i] = c->pending[--c->npending];
            return 0;
        }
    }
    c->dead = 1;                       /* a late or forged reply would be out of step: never read on */
    return -1;
}

/* The ring's next reply, if any: 1 (checked and taken), 0, or -1 (dead). */
static int ring_reply(gpuaesd_conn *c, gpuaesd_job_reply *rep)
{
    uint32_t avail = ring_load(&c->ring->cq_tail) - c->cq_head;

    if (avail == 0)
        return 0;
    if (avail > GPUAESD_RING_SLOTS) {  /* nonsense from the service */
        c->dead = 1;
        return -1;
    }
    *rep = c->ring->cq[c->cq_head % GPUAESD_RING_SLOTS];
    ring_store(&c->ring->cq_head, ++c->cq_head);
    return take_reply(c, rep, sizeof(*rep)) == 0 ? 1 : -1;
}

int gpuaesd_poll_reply(gpuaesd_conn *c, gpuaesd_job_reply *rep)
{
    ssize_t r;

    if (c == NULL || c->dead || c->npending == 0)
        return c == NULL || c->dead ? -1 : 0;
    if (c->ring != NULL) {
        int rc = ring_reply(c, rep);
        char b;

        /* Nothing yet: at most once a millisecond, whether the service is
         * gone (its socket's end), as a poll on the socket would tell. */
        if (rc == 0 && mono_ms() != c->end_checked_ms) {
            c->end_checked_ms = mono_ms();
            r = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
            if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                c->dead = 1;
                return -1;
            }
        }
        return rc;
    }
    do
        r = recv(c->fd, rep, sizeof(*rep), MSG_TRUNC | MSG_DONTWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
        return 0;
    if (r <= 0 || (size_t)r > sizeof(*rep)) {
        c->dead = 1;
        return -1;
    }
    return take_reply(c, rep, r) == 0 ? 1 : -1;
}

/* Waits for the ring's next reply until the deadline: our eventfd wakes us
 * once we said we sleep; the socket, on which a ringed service sends
 * nothing, tells its end. */
static int ring_wait(gpuaesd_conn *c, gpuaesd_job_reply *rep, int64_t deadline)
{
    for (;;) {
        int rc = ring_reply(c, rep), slept;
        int64_t left = deadline - mono_ms();

        if (rc != 0)
            return rc > 0 ? 0 : -1;
        slept = left > 0 ? ring_sleep(&c->ring->cli_sleeping, &c->ring->cq_tail, c->cq_head, c->fd, c->cli_efd,
                                      left > INT32_MAX ? INT32_MAX : (int)left)
                         : RING_TIMEOUT;
        if (slept != RING_MOVED) {             /* its end, the deadline, or an error */
            if ((rc = ring_reply(c, rep)) != 0)   /* answered before that */
                return rc > 0 ? 0 : -1;
            c->dead = 1;
            return -1;
        }
    }
}

int gpuaesd_wait_any(gpuaesd_conn *c, gpuaesd_job_reply *rep, int timeout_ms)
{
    ssize_t n;

    if (c == NULL || c->dead || c->npending == 0)
        return -1;
    if (c->ring != NULL)
        return ring_wait(c, rep, mono_ms() + timeout_ms);
    if ((n = recv_until(c->fd, rep, sizeof(*rep), mono_ms() + timeout_ms)) < 0) {
        c->dead = 1;
        return -1;
    }
    return take_reply(c, rep, n);
}

int gpuaesd_submit(gpuaesd_conn *c, gpuaesd_job_req *req, gpuaesd_job_reply *rep, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;

    if (c == NULL || c->dead || c->npending != 0)
        return -1;
    if (gpuaesd_post(c, req, timeout_ms) != 0
        || gpuaesd_wait_any(c, rep, (int)(deadline - mono_ms() > 0 ? deadline - mono_ms() : 0)) != 0) {
        c->dead = 1;
        return -1;
    }
    return 0;
}

void gpuaesd_close(gpuaesd_conn *c)
{
    if (c == NULL)
        return;
    if (c->seg != NULL)
        munmap(c->seg, c->seg_size);
    gpuaesd_load_unmap(c->load);
    gpuaesd_ring_unmap(c->ring);
    if (c->svc_efd >= 0)
        close(c->svc_efd);
    if (c->cli_efd >= 0)
        close(c->cli_efd);
    if (c->fd >= 0)
        close(c->fd);
    free(c);
}

/* One question without a hello (STATUS, DEVICES) and its reply's length, or -1. */
static ssize_t ask(const char *socket_dir, enum gpuaesd_type type, void *reply, size_t n, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    int fd = gpuaesd_dial(socket_dir, timeout_ms);
    gpuaesd_hdr h;
    ssize_t got = -1;

    if (fd < 0)
        return -1;
    gpuaesd_hdr_init(&h, type, sizeof(h));
    if (send_until(fd, &h, sizeof(h), -1, deadline) == 0)
        got = recv_until(fd, reply, n, deadline);
    close(fd);
    return got;
}

int gpuaesd_query_status(const char *socket_dir, gpuaesd_status_reply *st, int timeout_ms)
{
    ssize_t n = ask(socket_dir, GPUAESD_STATUS, st, sizeof(*st), timeout_ms);

    return n >= 0 && gpuaesd_check_status_reply(st, (size_t)n) == 0 ? 0 : -1;
}

int gpuaesd_query_devices(const char *socket_dir, gpuaesd_devices_reply *r, int timeout_ms)
{
    ssize_t n = ask(socket_dir, GPUAESD_DEVICES, r, sizeof(*r), timeout_ms);

    return n >= 0 && gpuaesd_check_devices_reply(r, (size_t)n) == 0 ? 0 : -1;
}
