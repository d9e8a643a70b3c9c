/*
 * serve.c - one reader thread per client (docs/SERVICE.md): its hello and
 * memfd segment, then its jobs, each checked (gpuaesd_check_request) before
 * anything it names is touched, and run by the GPU layer
 * (include/gpuaes_gpu.h) on the client's shared memory by up to
 * max_inflight worker threads of that client, so that several jobs of one
 * connection run at once (gpuaes_gpu_run is thread-safe).  Replies go out as
 * jobs complete, one send at a time.  While max_inflight jobs of a client
 * are queued or running, its reader reads nothing more: a client that sends
 * more is throttled by its own socket.  The segment is registered for DMA
 * once, in the background (segment_register: jobs then skip the layer's
 * staging copies), and unregistered before it is unmapped.  A malformed
 * request gets GPUAESD_EINVAL; a message that is not even framed right (size, magic,
 * version, type) ends that client's connection.  Nothing here ends the
 * service or another client.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gpuaes_gpu.h"
#include "fdpass.h"
#include "ring.h"
#include "mono_clock.h"
#include "service.h"

#define MAX_CLIENTS 256

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t table_empty = PTHREAD_COND_INITIALIZER;
static int table[MAX_CLIENTS];         /* socket fds of connected clients, -1: free */
static unsigned nclients;
static int table_ready;
static unsigned max_inflight = 4;      /* per client: gpuaesd_serve_init */

static atomic_ullong n_total, n_refused, n_jobs, n_jobs_gpu, n_bytes_gpu, n_malformed;
static atomic_ullong n_segs_registered, n_register_failed, n_jobs_direct, n_bytes_direct, n_segs_given,
    n_jobs_ring;
static _Atomic uint64_t last_activity, started_ms;

void gpuaesd_wipe(void *p, size_t n)
{
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* Not seen by ThreadSanitizer: its reads only fault pages in and their
 * values are dropped, while a segment's first jobs (run staged during its
 * registration) may write there: the GPU's DMA, or the emulator's stores in
 * the tests. */
__attribute__((no_sanitize("thread"))) void gpuaesd_fault_in(const void *p, size_t n)
{
    const volatile unsigned char *b = p;
    long page = sysconf(_SC_PAGESIZE);
    size_t step = page > 0 ? (size_t)page : 4096;

    for (size_t i = 0; i < n; i += step)
        (void)b[i];
}

unsigned gpuaesd_clients(void)
{
    unsigned n;

    pthread_mutex_lock(&table_lock);
    n = nclients;
    pthread_mutex_unlock(&table_lock);
    return n;
}

uint64_t gpuaesd_last_activity_ms(void)
{
    return atomic_load(&last_activity);
}

void gpuaesd_count_refused(void)
{
    atomic_fetch_add(&n_refused, 1);
}

void gpuaesd_status_fill(gpuaesd_status_reply *st)
{
    gpuaesd_status_self(st);
    gpuaesd_devices_add_status(st);    /* the other GPUs' workers, if any */
}

void gpuaesd_status_self(gpuaesd_status_reply *st)
{
    memset(st, 0, sizeof(*st));
    gpuaesd_hdr_init(&st->hdr, GPUAESD_STATUS_REPLY, sizeof(*st));
    st->service_pid = (uint32_t)getpid();
    st->clients = gpuaesd_clients();
    st->clients_total = atomic_load(&n_total);
    st->refused = atomic_load(&n_refused);
    st->jobs = atomic_load(&n_jobs);
    st->jobs_gpu = atomic_load(&n_jobs_gpu);
    st->bytes_gpu = atomic_load(&n_bytes_gpu);
    st->malformed = atomic_load(&n_malformed);
    st->uptime_ms = mono_ms() - atomic_load(&started_ms);
    st->segments_registered = atomic_load(&n_segs_registered);
    st->register_failed = atomic_load(&n_register_failed);
    st->jobs_direct = atomic_load(&n_jobs_direct);
    st->bytes_direct = atomic_load(&n_bytes_direct);
    st->segments_given = atomic_load(&n_segs_given);
    st->jobs_ring = atomic_load(&n_jobs_ring);
    st->spares_ready = gpuaesd_spares_ready();
    st->gpu_up = (uint32_t)gpuaesd_gpu_up();
    strncpy(st->gpu, st->gpu_up == GPUAESD_GPU_STARTING && gpuaes_gpu_started() ? "GPU warming up"
            : gpuaes_gpu_state(), sizeof(st->gpu) - 1);
}

/* Registration of a client's segment for DMA (client.dma). */
enum { DMA_NONE, DMA_REGISTERING, DMA_ON, DMA_OFF };
static int dma_off;                    /* GPUAESD_DMA=0: never register (A/B measurements) */

int gpuaesd_dma_off(void)
{
    return dma_off;
}

/* One client's state.  The reader sets seg before it queues any job; the
 * workers only read it. */
typedef struct client {
    int fd;
    int slot;
    pid_t pid;
    unsigned char *seg;                /* its memfd, mapped; NULL before the hello */
    uint64_t seg_size;
    _Atomic int dma;                   /* DMA_*, set by the registration thread */
    pthread_t dma_thread;              /* the registration (segment_register) */
    int dma_joinable;
    pthread_mutex_t mu;                /* the queue and counts below */
    pthread_cond_t work;               /* a job queued, or closing */
    pthread_cond_t room;               /* a job answered: the reader may read again */
    pthread_mutex_t send_mu;           /* one reply at a time on the socket */
    gpuaesd_job_req q[GPUAESD_INFLIGHT_MAX]; /* checked requests not yet taken (a ring) */
    uint64_t q_ns[GPUAESD_INFLIGHT_MAX]; /* when each was queued (GPUAESD_JOB_LOG) */
    unsigned qhead, qn;
    unsigned pending;                  /* jobs accepted and not yet answered (queued + running) */
    unsigned published;                /* jobs counted in the published load (until run or dropped) */
    unsigned workers, idle;
    int closing;                       /* the reader has ended: queued jobs are dropped */
    gpuaesd_ring *ring;                /* its job ring (RING_GIVEN), else jobs on the socket */
    int ring_fd, svc_efd, cli_efd;     /* the ring's memfd (until the hello reply), wake-ups */
    uint32_t sq_head, cq_tail;         /* our indices: the shared ones are only told */
    int routed;                        /* its first hello was looked at by devices.c */
    _Alignas(8) unsigned char first[sizeof(gpuaesd_hello)]; /* a handed-over connection's hello */
    size_t first_n;                    /* its length (0: none) */
    int first_mfd;                     /* and its memfd (-1: none) */
    pthread_t tid[GPUAESD_INFLIGHT_MAX];
} client;

/* Receives one message (at most n bytes) and the first fd it carries (*rfd,
 * -1 if none; every other fd is closed).  The length, 0 at the end, -1 on
 * an error, -2 for a message longer than n (framing). */
static ssize_t recv_msg(int fd, void *buf, size_t n, int *rfd)
{
    return gpuaesd_recv_fds(fd, buf, n, rfd, 1);
}

static int send_msg(int fd, const void *m, size_t n)
{
    ssize_t w;

    do
        w = send(fd, m, n, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    return w == (ssize_t)n ? 0 : -1;
}

static int send_reply(client *c, const void *m, size_t n);

/* The hello reply: the ring's memfd and eventfds (RING_GIVEN), the segment
 * given (sfd, else -1), then the published load's descriptor when there is
 * one. */
static int send_hello_reply(client *c, const gpuaesd_hello_reply *rep, int sfd)
{
    gpuaesd_cmsg cb;
    struct iovec iov = { (void *)rep, sizeof(*rep) };
    struct msghdr mh = { 0 };
    int fds[5], n = 0;
    ssize_t w;

    if (rep->flags & GPUAESD_HELLO_RING_GIVEN) {
        fds[n++] = c->ring_fd;
        fds[n++] = c->svc_efd;
        fds[n++] = c->cli_efd;
    }
    if (sfd >= 0)
        fds[n++] = sfd;
    if (rep->status == GPUAESD_OK && (fds[n] = gpuaesd_publish_fd()) >= 0)
        n++;
    if (n == 0)
        return send_reply(c, rep, sizeof(*rep));
    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    gpuaesd_fd_attach_n(&mh, &cb, fds, (unsigned)n);
    pthread_mutex_lock(&c->send_mu);
    do
        w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
    while (w < 0 && errno == EINTR);
    pthread_mutex_unlock(&c->send_mu);
    return w == (ssize_t)sizeof(*rep) ? 0 : -1;
}

/* GPUAESD_RING=0: no job rings (A/B measurements): jobs on the socket. */
static int ring_off;

/* c's ring and its two eventfds, for the hello reply; 0, or -1 (none: c
 * is served on the socket). */
static int make_ring(client *c)
{
    if (ring_off || (c->ring = gpuaesd_ring_create(&c->ring_fd)) == NULL)
        return -1;
    c->svc_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->cli_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (c->svc_efd >= 0 && c->cli_efd >= 0)
        return 0;
    gpuaesd_ring_unmap(c->ring);
    c->ring = NULL;
    close(c->ring_fd);
    c->ring_fd = -1;
    return -1;
}

/* The next message of a ringed client: a request from its ring (copied out
 * once, its slot wiped: it holds a key), or, while the ring is empty, what
 * the socket brings (its end, or a STATUS).  As recv_msg; a request that is
 * not a JOB, or a ring index out of range, is framing (-2). */
static ssize_t ring_next(client *c, unsigned char *m, size_t n, int *mfd)
{
    *mfd = -1;
    for (;;) {
        uint32_t avail = ring_load(&c->ring->sq_tail) - c->sq_head;

        if (avail > GPUAESD_RING_SLOTS)
            return -2;
        if (avail > 0) {
            gpuaesd_job_req *slot = &c->ring->sq[c->sq_head % GPUAESD_RING_SLOTS];
            gpuaesd_hdr h;

            memcpy(m, slot, sizeof(*slot));
            gpuaesd_wipe(slot, sizeof(*slot));
            atomic_fetch_add(&n_jobs_ring, 1);
            ring_store(&c->ring->sq_head, ++c->sq_head);
            memcpy(&h, m, sizeof(h));
            return h.type == GPUAESD_JOB && n >= sizeof(*slot) ? (ssize_t)sizeof(*slot) : -2;
        }
        switch (ring_sleep(&c->ring->svc_sleeping, &c->ring->sq_tail, c->sq_head, c->fd, c->svc_efd, -1)) {
        case RING_SOCKET:
            return recv_msg(c->fd, m, n, mfd);
        case RING_ERROR:
            return -1;
        default:
            break;
        }
    }
}

/* A reply on c's socket: whole messages, never interleaved by workers. */
static int send_reply(client *c, const void *m, size_t n)
{
    int rc;

    pthread_mutex_lock(&c->send_mu);
    rc = send_msg(c->fd, m, n);
    pthread_mutex_unlock(&c->send_mu);
    return rc;
}

/* A job's reply: into c's ring (a client that took no reply while the ring
 * filled is broken: -1), else on the socket. */
static int reply_job(client *c, const gpuaesd_job_reply *rep)
{
    int rc = 0;

    if (c->ring == NULL)
        return send_reply(c, rep, sizeof(*rep));
    pthread_mutex_lock(&c->send_mu);
    if (c->cq_tail - ring_load(&c->ring->cq_head) >= GPUAESD_RING_SLOTS) {
        rc = -1;
    } else {
        c->ring->cq[c->cq_tail % GPUAESD_RING_SLOTS] = *rep;
        ring_store(&c->ring->cq_tail, ++c->cq_tail);
        ring_kick(&c->ring->cli_sleeping, c->cli_efd);
    }
    pthread_mutex_unlock(&c->send_mu);
    return rc;
}

/* Maps the memfd of a hello: it must be a sealed memfd (F_SEAL_SHRINK, so
 * that the client cannot truncate it under us: a SIGBUS here) of at least
 * seg_size bytes.  GPUAESD_OK or GPUAESD_ESEGMENT. */
static uint32_t map_segment(client *c, int mfd, uint64_t seg_size)
{
    struct stat st;
    int seals;
    void *p;

    if (mfd < 0)
        return GPUAESD_ESEGMENT;
    seals = fcntl(mfd, F_GET_SEALS);
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(mfd, &st) != 0 || !S_ISREG(st.st_mode)
        || st.st_size < 0 || (uint64_t)st.st_size < seg_size)
        return GPUAESD_ESEGMENT;
    p = mmap(NULL, (size_t)seg_size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED)
        return GPUAESD_ESEGMENT;
    c->seg = p;
    c->seg_size = seg_size;
    return GPUAESD_OK;
}

/* A hello asking for a segment: a spare of seg_size (spare.c) becomes c's,
 * its memfd in *sfd for the reply; GPUAESD_ESEGMENT when none is ready. */
static uint32_t take_spare(client *c, uint64_t seg_size, int *sfd)
{
    int registered;

    if (gpuaesd_spare_take(seg_size, sfd, &c->seg, &registered) != 0)
        return GPUAESD_ESEGMENT;
    c->seg_size = seg_size;
    atomic_store(&c->dma, registered ? DMA_ON : DMA_OFF);
    if (registered)
        atomic_fetch_add(&n_segs_registered, 1);   /* segment_unregister counts it out */
    atomic_fetch_add(&n_segs_given, 1);
    return GPUAESD_OK;
}

/* GPUAESD_JOB_LOG=1 (measurements, with --foreground): a line per job on
 * stderr, its wait in the client's queue and its run (the GPU bound's wait
 * included), and one per segment registered for DMA. */
static int job_log;

/* The registration thread: faults the segment in, waits for the GPU's
 * start-up (the layer's call never does), then registers.  A failure is
 * logged and counted; the client is served through the layer's staging
 * meanwhile and then. */
static void *register_main(void *arg)
{
    client *c = arg;
    char err[GPUAES_ERROR_SIZE];
    int rc = -1;
    int64_t t0 = mono_ns(), t1;

    gpuaesd_fault_in(c->seg, (size_t)c->seg_size);   /* 64 MiB: 27-33 ms of stall avoided, H200 */
    t1 = mono_ns();
    if (gpuaes_gpu_wait())
        while ((rc = gpuaes_gpu_host_register(c->seg, (size_t)c->seg_size, err)) == 1)
            gpuaes_gpu_wait();         /* the layer was shut down and is starting again */
    else
        snprintf(err, sizeof(err), "%s", gpuaes_gpu_state());
    if (job_log)
        gpuaesd_log("client %ld: segment of %llu bytes faulted in in %.1f ms, registered %.1f ms later (rc %d)",
                    (long)c->pid, (unsigned long long)c->seg_size, (double)(t1 - t0) / 1e6,
                    (double)(mono_ns() - t1) / 1e6, rc);
    if (rc == 0) {
        atomic_fetch_add(&n_segs_registered, 1);
        atomic_store(&c->dma, DMA_ON);
    } else {
        atomic_fetch_add(&n_register_failed, 1);
        atomic_store(&c->dma, DMA_OFF);
        gpuaesd_log("client %ld: segment not registered for DMA (%s): served through staging", (long)c->pid, err);
    }
    return NULL;
}

/*
 * Once the hello is accepted: c's segment is registered for DMA on a thread
 * of its own (55 ms per 256 MiB, and the GPU may still be starting), so that
 * no hello or job waits for it; jobs that come first run staged.
 */
static void segment_register(client *c)
{
    if (dma_off) {
        atomic_store(&c->dma, DMA_OFF);
        return;
    }
    atomic_store(&c->dma, DMA_REGISTERING);
    c->dma_joinable = pthread_create(&c->dma_thread, NULL, register_main, c) == 0;
    if (!c->dma_joinable) {
        atomic_fetch_add(&n_register_failed, 1);
        atomic_store(&c->dma, DMA_OFF);
        gpuaesd_log("client %ld: no thread to register its segment for DMA: served through staging", (long)c->pid);
    }
}

/* Before the segment is unmapped, once no job of c runs any more (the
 * registration first ends: at most the GPU's start-up). */
static void segment_unregister(client *c)
{
    char err[GPUAES_ERROR_SIZE];

    if (c->dma_joinable)
        pthread_join(c->dma_thread, NULL);
    c->dma_joinable = 0;
    if (atomic_load(&c->dma) != DMA_ON)
        return;
    if (gpuaes_gpu_host_unregister(c->seg, err) != 0)
        gpuaesd_log("client %ld: unregistering its segment: %s", (long)c->pid, err);
    atomic_fetch_sub(&n_segs_registered, 1);
    atomic_store(&c->dma, DMA_OFF);
}

/* A job that did something on the GPU by DMA straight from the segment. */
static void count_direct(const gpuaes_job *job)
{
    if (job->direct && job->done != 0) {
        atomic_fetch_add(&n_jobs_direct, 1);
        atomic_fetch_add(&n_bytes_direct, job->done);
    }
}

static gpuaes_op op_of(uint32_t op)
{
    static const gpuaes_op map[] = {
        [GPUAESD_OP_ECB_ENCRYPT] = GPUAES_ECB_ENCRYPT, [GPUAESD_OP_ECB_DECRYPT] = GPUAES_ECB_DECRYPT,
        [GPUAESD_OP_CTR128] = GPUAES_CTR128, [GPUAESD_OP_CTR32] = GPUAES_CTR32,
        [GPUAESD_OP_CBC_DECRYPT] = GPUAES_CBC_DECRYPT, [GPUAESD_OP_CFB128_DECRYPT] = GPUAES_CFB128_DECRYPT,
        [GPUAESD_OP_GCM_ENCRYPT] = GPUAES_GCM_ENCRYPT, [GPUAESD_OP_GCM_DECRYPT] = GPUAES_GCM_DECRYPT,
        [GPUAESD_OP_KEYSTREAM128] = GPUAES_CTR128, [GPUAESD_OP_KEYSTREAM32] = GPUAES_CTR32,
    };
    return map[op];                    /* op was checked */
}

/*
 * Jobs on the GPU at once, all clients together (GPUAESD_GPU_JOBS; 0: no
 * bound), let in in the order they arrived.  Jobs at once share the copy
 * engines, so every client's oldest piece, the one it waits for, finishes
 * later the more run beside it.  GCM's jobs pass (their GHASH kernels keep
 * the GPU busy between copies: bounded, 4 threads fell from 34 to 27 GB/s
 * and 16 processes from 0.90x to 0.76x of the default provider).
 */
static unsigned gpu_jobs_max = 3;
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static unsigned long long gate_next, gate_turn;
static unsigned gate_running;

static void gate_enter(int gcm)
{
    unsigned long long ticket;

    if (gpu_jobs_max == 0 || gcm)
        return;
    pthread_mutex_lock(&gate_mu);
    ticket = gate_next++;
    while (ticket != gate_turn || gate_running >= gpu_jobs_max)
        pthread_cond_wait(&gate_cv, &gate_mu);
    gate_turn++;
    gate_running++;
    pthread_cond_broadcast(&gate_cv);  /* the next ticket may fit too */
    pthread_mutex_unlock(&gate_mu);
}

static void gate_leave(int gcm)
{
    if (gpu_jobs_max == 0 || gcm)
        return;
    pthread_mutex_lock(&gate_mu);
    gate_running--;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

/* Runs a checked request on the GPU layer; fills the reply.  The key, its
 * schedule and the job's secrets are wiped before returning. */
static void run_job(client *c, const gpuaesd_job_req *r, gpuaesd_job_reply *rep)
{
    gpuaes_job job;
    gpuaes_key *key;

    rep->status = GPUAESD_BUSY;
    if (gpuaesd_gpu_up() != GPUAESD_GPU_READY)   /* starting, or warming up (warm.c) */
        return;
    if ((key = gpuaes_key_new(r->key, r->keylen)) == NULL)
        return;
    memset(&job, 0, sizeof(job));
    job.op = op_of(r->op);
    job.key = key;
    memcpy(job.iv, r->iv, 16);
    memcpy(job.h, r->h, 16);
    /* A keystream fill has no input: the layer writes E(ctr) ... to out. */
    job.in = r->op >= GPUAESD_OP_KEYSTREAM128 ? NULL : c->seg + r->in_off;
    job.out = c->seg + r->out_off;
    job.len = (size_t)r->len;
    gate_enter(job.op == GPUAES_GCM_ENCRYPT || job.op == GPUAES_GCM_DECRYPT);
    gpuaes_gpu_run(&job);
    gate_leave(job.op == GPUAES_GCM_ENCRYPT || job.op == GPUAES_GCM_DECRYPT);
    gpuaes_key_free(key);
    /* No caller's share: whatever is not done is the client's (done == cpu_from on OK). */
    if (job.status == GPUAES_OK && job.done == job.len) {
        rep->status = GPUAESD_OK;
    } else if (job.status == GPUAES_BUSY || job.done == 0) {
        rep->status = GPUAESD_BUSY;
        job.done = 0;
    } else {
        rep->status = GPUAESD_FAILED;
    }
    rep->done = job.done;
    memcpy(rep->iv, job.iv, 16);
    memcpy(rep->iv_end, job.iv_end, 16);
    if (job.done != 0)
        memcpy(rep->ghash, job.ghash, 16);
    if (job.done != 0) {
        atomic_fetch_add(&n_jobs_gpu, 1);
        atomic_fetch_add(&n_bytes_gpu, job.done);
    }
    count_direct(&job);
    gpuaesd_wipe(&job, sizeof(job));
}

/* Takes the next queued job (c->mu held, c->qn > 0), runs and answers it
 * without the lock; returns with c->mu held again. */
static void run_next_locked(client *c)
{
    gpuaesd_job_req r = c->q[c->qhead];
    uint64_t queued = c->q_ns[c->qhead];
    gpuaesd_job_reply rep = { 0 };
    unsigned running;
    uint64_t t0;

    gpuaesd_wipe(&c->q[c->qhead], sizeof(r));
    c->qhead = (c->qhead + 1) % GPUAESD_INFLIGHT_MAX;
    c->qn--;
    pthread_mutex_unlock(&c->mu);
    running = gpuaesd_publish_start();
    t0 = mono_ns();
    gpuaesd_hdr_init(&rep.hdr, GPUAESD_JOB_REPLY, sizeof(rep));
    rep.id = r.id;
    run_job(c, &r, &rep);
    if (job_log)                       /* op, length, status: no secret */
        fprintf(stderr, "gpuaesd job: client %d op %u len %llu status %u: queued %.1f us, ran %.1f us "
                "(%u running)\n", (int)c->pid, (unsigned)r.op, (unsigned long long)r.len, (unsigned)rep.status,
                (double)(t0 - queued) / 1e3, (double)(mono_ns() - t0) / 1e3, running);
    pthread_mutex_lock(&c->mu);        /* counted out before the reply, so its client sees it */
    gpuaesd_publish_end(r.op, r.len, rep.status == GPUAESD_OK, mono_ns() - t0, running, --c->published == 0);
    pthread_mutex_unlock(&c->mu);
    gpuaesd_wipe(&r, sizeof(r));
    atomic_fetch_add(&n_jobs, 1);
    atomic_store(&last_activity, mono_ms());
    if (reply_job(c, &rep) != 0)
        shutdown(c->fd, SHUT_RDWR);    /* the reader sees the end and drops the client */
    gpuaesd_wipe(&rep, sizeof(rep));
    pthread_mutex_lock(&c->mu);
    c->pending--;
    pthread_cond_signal(&c->room);
}

/* A worker: runs its client's queued jobs until the reader ends; jobs still
 * queued then are dropped (wiped): nobody would read their replies. */
static void *worker_main(void *arg)
{
    client *c = arg;

    /* The layer's pipeline naps while the GPU works (a chunk's D2H is tens
     * of us): a 1 us slack, not the default 50, wakes it when it asked. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->qn == 0 && !c->closing) {
            c->idle++;
            pthread_cond_wait(&c->work, &c->mu);
            c->idle--;
        }
        if (c->closing)
            break;
        run_next_locked(c);
    }
    while (c->qn > 0) {
        gpuaesd_publish_job(-1, 0, --c->published == 0 ? -1 : 0, -(int64_t)c->q[c->qhead].len);
        gpuaesd_wipe(&c->q[c->qhead], sizeof(c->q[0]));
        c->qhead = (c->qhead + 1) % GPUAESD_INFLIGHT_MAX;
        c->qn--;
        c->pending--;
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

/* Queues a checked request for the workers, and starts one more worker when
 * none is idle (at most max_inflight: the most that can be pending).  With
 * no worker at all (none could be made) the reader runs it itself. */
static void queue_job(client *c, const unsigned char *m)
{
    gpuaesd_job_req *r;

    pthread_mutex_lock(&c->mu);
    r = &c->q[(c->qhead + c->qn) % GPUAESD_INFLIGHT_MAX];
    memcpy(r, m, sizeof(*r));
    c->q_ns[(c->qhead + c->qn) % GPUAESD_INFLIGHT_MAX] = job_log ? mono_ns() : 0;
    gpuaesd_publish_job(1, 0, c->published++ == 0, (int64_t)r->len);
    c->qn++;
    c->pending++;
    if (c->idle < c->qn && c->workers < max_inflight
        && pthread_create(&c->tid[c->workers], NULL, worker_main, c) == 0)
        c->workers++;
    else
        pthread_cond_signal(&c->work);
    while (c->workers == 0 && c->qn > 0)
        run_next_locked(c);
    pthread_mutex_unlock(&c->mu);
}

/* One message: 0 to go on; -1 malformed, 1 the socket failed: drop the
 * client; 2 handed over to another GPU's worker: drop it here. */
static int handle(client *c, const unsigned char *m, size_t n, int *mfd)
{
    gpuaesd_hdr h;

    if (n < sizeof(h))
        return -1;
    memcpy(&h, m, sizeof(h));
    if (h.type == GPUAESD_HELLO) {
        gpuaesd_hello hello;
        gpuaesd_hello_reply rep = { 0 };
        int sfd = -1, rc;

        if (c->seg != NULL || gpuaesd_check_hello(m, n) != 0)
            return -1;
        /* A client's first hello decides its GPU: another's worker may take
         * the connection (devices.c), then this process is done with it. */
        if (!c->routed) {
            c->routed = 1;
            if (gpuaesd_devices_route(c->fd, c->pid, m, n, *mfd) == 1)
                return 2;
        }
        memcpy(&hello, m, sizeof(hello));
        gpuaesd_hdr_init(&rep.hdr, GPUAESD_HELLO_REPLY, sizeof(rep));
        if (hello.flags & GPUAESD_HELLO_WANT_SEG) {
            if (*mfd >= 0)
                return -1;             /* its own segment or ours, not both */
            rep.status = take_spare(c, hello.seg_size, &sfd);
            rep.flags = rep.status == GPUAESD_OK ? GPUAESD_HELLO_SEG_GIVEN : GPUAESD_HELLO_NO_SPARE;
        } else {
            rep.status = map_segment(c, *mfd, hello.seg_size);
        }
        rep.service_pid = (uint32_t)getpid();
        rep.max_job = c->seg_size;
        rep.max_inflight = max_inflight;
        if (rep.status == GPUAESD_OK && (hello.flags & GPUAESD_HELLO_RING) && make_ring(c) == 0)
            rep.flags |= GPUAESD_HELLO_RING_GIVEN;
        rc = send_hello_reply(c, &rep, sfd);
        if (sfd >= 0)
            close(sfd);                /* both mappings keep the memory; nobody else has it */
        if (c->ring_fd >= 0)
            close(c->ring_fd);         /* both mappings keep the ring */
        c->ring_fd = -1;
        if (rc != 0)
            return 1;
        if (rep.status == GPUAESD_OK && sfd < 0)
            segment_register(c);       /* in the background: nobody waits for it */
        return rep.status == GPUAESD_OK || rep.flags == GPUAESD_HELLO_NO_SPARE ? 0 : -1;
    }
    if (h.type == GPUAESD_STATUS) {
        gpuaesd_status_reply st;

        if (gpuaesd_check_hdr(m, n, GPUAESD_STATUS) != 0)
            return -1;
        gpuaesd_status_fill(&st);
        return send_reply(c, &st, sizeof(st)) == 0 ? 0 : 1;
    }
    if (h.type == GPUAESD_DEVICES) {
        gpuaesd_devices_reply *r;
        int rc;

        if (gpuaesd_check_hdr(m, n, GPUAESD_DEVICES) != 0 || (r = calloc(1, sizeof(*r))) == NULL)
            return -1;
        gpuaesd_devices_fill(r);
        rc = send_reply(c, r, sizeof(*r)) == 0 ? 0 : 1;
        free(r);
        return rc;
    }
    if (h.type == GPUAESD_JOB && gpuaesd_check_hdr(m, n, GPUAESD_JOB) == 0) {
        gpuaesd_job_reply rep = { 0 };
        int rc;

        if (c->seg != NULL && gpuaesd_check_request(m, n, c->seg_size, c->seg_size) == 0) {
            queue_job(c, m);
            return 0;
        }
        gpuaesd_hdr_init(&rep.hdr, GPUAESD_JOB_REPLY, sizeof(rep));
        memcpy(&rep.id, m + offsetof(gpuaesd_job_req, id), sizeof(rep.id));
        rep.status = GPUAESD_EINVAL;
        atomic_fetch_add(&n_malformed, 1);
        atomic_fetch_add(&n_jobs, 1);
        atomic_store(&last_activity, mono_ms());
        rc = reply_job(c, &rep) == 0 ? 0 : 1;
        return rc;
    }
    return -1;                         /* framing */
}

static void *client_main(void *arg)
{
    client *c = arg;
    /* Room for any valid message and more, so that an oversized one is seen as such. */
    _Alignas(8) unsigned char m[512];

    for (;;) {
        int mfd;
        ssize_t n;
        int rc;

        pthread_mutex_lock(&c->mu);    /* max_inflight pending: read nothing more (throttle) */
        while (c->pending >= max_inflight)
            pthread_cond_wait(&c->room, &c->mu);
        pthread_mutex_unlock(&c->mu);
        if (c->first_n > 0) {          /* handed over with its hello, read by the router */
            n = (ssize_t)c->first_n;
            memcpy(m, c->first, c->first_n);
            mfd = c->first_mfd;
            c->first_n = 0;
            gpuaesd_wipe(c->first, sizeof(c->first));
        } else if (c->ring != NULL) {
            n = ring_next(c, m, sizeof(m), &mfd);
        } else {
            n = recv_msg(c->fd, m, sizeof(m), &mfd);
        }
        rc = n > 0 ? handle(c, m, (size_t)n, &mfd) : n == -2 ? -1 : 1;
        if (n > 0)
            gpuaesd_wipe(m, (size_t)n);  /* a request's key */
        if (mfd >= 0)
            close(mfd);                /* mapped or refused: the mapping keeps the memory */
        if (rc < 0)
            atomic_fetch_add(&n_malformed, 1);
        if (rc != 0)
            break;                     /* handed over (2): closing our copy leaves the connection up */
    }
    gpuaesd_wipe(m, sizeof(m));
    pthread_mutex_lock(&c->mu);        /* running jobs finish, queued ones are dropped */
    c->closing = 1;
    pthread_cond_broadcast(&c->work);
    pthread_mutex_unlock(&c->mu);
    for (unsigned i = 0; i < c->workers; i++)
        pthread_join(c->tid[i], NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->send_mu);
    pthread_cond_destroy(&c->work);
    pthread_cond_destroy(&c->room);
    if (c->seg != NULL) {
        segment_unregister(c);         /* its jobs are over */
        munmap(c->seg, (size_t)c->seg_size);
    }
    if (c->ring != NULL) {
        gpuaesd_ring_unmap(c->ring);
        close(c->svc_efd);
        close(c->cli_efd);
    }
    close(c->fd);
    pthread_mutex_lock(&table_lock);
    table[c->slot] = -1;
    if (--nclients == 0)
        pthread_cond_broadcast(&table_empty);
    pthread_mutex_unlock(&table_lock);
    gpuaesd_publish_clients(-1);
    atomic_store(&last_activity, mono_ms());
    gpuaesd_wipe(c, sizeof(*c));
    free(c);
    return NULL;
}

unsigned gpuaesd_serve_init(unsigned jobs_per_client)
{
    unsigned n;

    pthread_mutex_lock(&table_lock);
    if (jobs_per_client >= 1 && jobs_per_client <= GPUAESD_INFLIGHT_MAX)
        max_inflight = jobs_per_client;
    for (int i = 0; i < MAX_CLIENTS; i++)
        table[i] = -1;
    table_ready = 1;
    dma_off = getenv("GPUAESD_DMA") != NULL && strcmp(getenv("GPUAESD_DMA"), "0") == 0;
    ring_off = getenv("GPUAESD_RING") != NULL && strcmp(getenv("GPUAESD_RING"), "0") == 0;
    job_log = getenv("GPUAESD_JOB_LOG") != NULL && strcmp(getenv("GPUAESD_JOB_LOG"), "1") == 0;
    if (getenv("GPUAESD_GPU_JOBS") != NULL && strtoul(getenv("GPUAESD_GPU_JOBS"), NULL, 10) <= 64)
        gpu_jobs_max = (unsigned)strtoul(getenv("GPUAESD_GPU_JOBS"), NULL, 10);
    if (dma_off)
        gpuaesd_log("GPUAESD_DMA=0: client segments are not registered for DMA");
    atomic_store(&started_ms, mono_ms());
    atomic_store(&last_activity, mono_ms());
    n = max_inflight;
    pthread_mutex_unlock(&table_lock);
    gpuaesd_publish_init();
    return n;
}

int gpuaesd_serve(int fd, pid_t pid)
{
    return gpuaesd_serve_handed(fd, pid, NULL, 0, -1);
}

int gpuaesd_serve_handed(int fd, pid_t pid, const void *hello, size_t n, int mfd)
{
    client *c = n <= sizeof(gpuaesd_hello) ? calloc(1, sizeof(*c)) : NULL;
    pthread_attr_t a;
    pthread_t t;
    int slot = -1, ok = 0;

    pthread_mutex_lock(&table_lock);
    for (int i = 0; i < MAX_CLIENTS && slot < 0 && c != NULL; i++)
        if (table[i] < 0)
            slot = i;
    if (slot >= 0) {
        pthread_mutex_init(&c->mu, NULL);
        pthread_mutex_init(&c->send_mu, NULL);
        pthread_cond_init(&c->work, NULL);
        pthread_cond_init(&c->room, NULL);
        c->fd = fd;
        c->slot = slot;
        c->pid = pid;
        c->ring_fd = c->svc_efd = c->cli_efd = -1;
        c->routed = hello != NULL;     /* a worker's connection stays with it */
        c->first_n = hello != NULL ? n : 0;
        c->first_mfd = hello != NULL ? mfd : -1;
        if (hello != NULL)
            memcpy(c->first, hello, n);
        table[slot] = fd;
        nclients++;
        atomic_fetch_add(&n_total, 1); /* before its thread: a STATUS it answers counts itself */
        gpuaesd_publish_clients(1);    /* ... and before it counts itself out */
        if (pthread_attr_init(&a) == 0) {
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            ok = pthread_create(&t, &a, client_main, c) == 0;
            pthread_attr_destroy(&a);
        }
        if (!ok) {
            table[slot] = -1;
            nclients--;
            atomic_fetch_sub(&n_total, 1);
            gpuaesd_publish_clients(-1);
        }
    }
    pthread_mutex_unlock(&table_lock);
    if (!ok) {
        if (c != NULL && slot >= 0) {
            pthread_mutex_destroy(&c->mu);
            pthread_mutex_destroy(&c->send_mu);
            pthread_cond_destroy(&c->work);
            pthread_cond_destroy(&c->room);
        }
        if (c != NULL)
            gpuaesd_wipe(c, sizeof(*c));
        free(c);
        close(fd);
        if (mfd >= 0)
            close(mfd);
        return -1;
    }
    return 0;
}

int gpuaesd_clients_stop(int wait_ms)
{
    struct timespec until;
    int left;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += wait_ms / 1000;
    until.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&table_lock);
    for (int i = 0; table_ready && i < MAX_CLIENTS; i++)
        if (table[i] >= 0)
            shutdown(table[i], SHUT_RDWR);   /* its recv returns 0; a running job finishes first */
    while (nclients != 0 && pthread_cond_timedwait(&table_empty, &table_lock, &until) == 0)
        ;
    left = (int)nclients;
    pthread_mutex_unlock(&table_lock);
    return left == 0 ? 0 : -1;
}
