/*
 * gpu_remote.c - the job part of include/gpuaes_gpu.h, run by gpuaesd, the
 * per-user GPU service (docs/SERVICE.md, "Step 2"), through its client
 * library.  A small pool of connections, each with its memfd segment: a job
 * is copied into a segment, run there by the service, and its output copied
 * out (the copies that pinned staging costs in-process).  Jobs longer than a
 * segment go in pieces.
 *
 * Nothing here blocks a caller on the service's start: a gpuaes-owned thread
 * connects (starting the service when none answers) while calls run on the
 * CPU.  A job the service does not answer in time, or whose connection dies
 * (a killed service), completes on the CPU (GPUAES_FAILED, the prefix the
 * service reported done); every connection is then dropped and a new start
 * tried after a back-off.  Keystream windows: remote_keystream.c.
 */
#define _GNU_SOURCE                    /* dladdr, secure_getenv */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "debug.h"
#include "gpu_backend.h"
#include "gpuaesd_client.h"
#include "gpuaesd_load.h"
#include "gpu_remote.h"

#define SEGMENT ((size_t)64 << 20)    /* per connection; longer jobs go in pieces */
#define CONNS 8                        /* jobs at once; more wait on the CPU (BUSY) */
#define START_MS 5000                  /* the background start: connect, spawn, hello */
#define DIAL_MS 200                    /* one more connection to a running service, inline */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000

enum { R_IDLE, R_STARTING, R_UP, R_DOWN };

typedef struct rconn {
    gpuaesd_conn *c;
    unsigned gen;
    size_t warm;                       /* its segment's bytes from the start this process has touched */
} rconn;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int state;
    int disabled;
    unsigned timeout_ms;               /* a wait's bound: this + the bytes in flight at 1 GB/s */
    size_t chunk;                      /* service_chunk: a job's pieces */
    unsigned first_wait_ms;            /* service_connect_wait_ms */
    int ctr_keystream;                 /* service_ctr_keystream: CTR jobs as keystream + XOR */
    _Atomic long long retry_at;        /* R_DOWN: no new start before (ms) */
    long long backoff;
    unsigned gen;                      /* bumped when the service is lost */
    rconn idle[CONNS];
    int nidle, nconns;                 /* idle; idle + in use */
    gpuaesd_conn *all[CONNS];          /* every open connection (the fork child closes them) */
    pthread_t starter;
    int starter_joinable;
    char path[PATH_MAX];               /* gpuaesd, or "" (connect only) */
    char dir[108];                     /* GPUAES_SERVICE_DIR, or "" (the default) */
    char why[GPUAES_ERROR_SIZE];       /* the last start's failure */
} R = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, R_IDLE, 0, 100, (size_t)4 << 20, 3, 1, 0,
        BACKOFF_MIN_MS, 0, { { 0 } }, 0, 0, { 0 }, 0, 0, "", "", "" };

/* The published load (below, "The service's published load"). */
static _Atomic(const gpuaesd_load_table *) load_table;
static _Atomic unsigned load_readers;
static _Atomic int conns_busy;

static long long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static _Atomic int conns_open;         /* R.nconns's open ones, read without R.mu */

static void track(gpuaesd_conn *c, int add)
{
    for (int i = 0; i < CONNS; i++)
        if (R.all[i] == (add ? NULL : c)) {
            R.all[i] = add ? c : NULL;
            atomic_fetch_add_explicit(&conns_open, add ? 1 : -1, memory_order_relaxed);
            return;
        }
}

/* Under R.mu. */
static void drop_locked(gpuaesd_conn *c)
{
    track(c, 0);
    R.nconns--;
    gpuaesd_close(c);
}

/* Fork: a start that is over is joined first (the child could not).  R.mu
 * is not held across the fork: a posix_spawn that runs these handlers
 * (sanitizers' does) from the start thread would deadlock on it. */
static void at_fork_prepare(void)
{
    pthread_mutex_lock(&R.mu);
    if (R.starter_joinable && atomic_load(&R.state) != R_STARTING
        && !pthread_equal(R.starter, pthread_self())) {
        pthread_join(R.starter, NULL);
        R.starter_joinable = 0;
    }
    pthread_mutex_unlock(&R.mu);
}

/* The fork child must not use the parent's connections or segments (the
 * mappings are shared with the parent): closed here, a new start later. */
static void at_fork_child(void)
{
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cv, NULL);
    for (int i = 0; i < CONNS; i++)
        if (R.all[i] != NULL) {
            gpuaesd_close(R.all[i]);
            R.all[i] = NULL;
        }
    R.nidle = R.nconns = 0;
    R.gen++;
    atomic_store(&load_readers, 0);    /* a reader in another thread of the parent: gone */
    atomic_store(&conns_busy, 0);      /* the table (shared, read-only) stays: same service */
    atomic_store(&conns_open, 0);
    R.starter_joinable = 0;
    R.backoff = BACKOFF_MIN_MS;
    atomic_store(&R.state, R_IDLE);
    remote_ks_fork_child();
}

/* gpuaesd beside the module: ../libexec/gpuaes/gpuaesd, the same directory,
 * or where `cmake --install` put it; GPUAES_SERVICE_PATH wins. */
static void find_service(void)
{
    const char *env = secure_getenv("GPUAES_SERVICE_PATH");
    Dl_info info;

    if (env != NULL) {
        snprintf(R.path, sizeof(R.path), "%s", env);
        return;
    }
    if (dladdr((void *)find_service, &info) != 0 && info.dli_fname != NULL) {
        char dir[PATH_MAX - 32];
        const char *slash = strrchr(info.dli_fname, '/');
        size_t n = slash != NULL ? (size_t)(slash - info.dli_fname) : 1;
        const char *rel[] = { "/../libexec/gpuaes/gpuaesd", "/gpuaesd" };

        snprintf(dir, sizeof(dir), "%.*s", (int)n, slash != NULL ? info.dli_fname : ".");
        for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
            snprintf(R.path, sizeof(R.path), "%s%s", dir, rel[i]);
            if (access(R.path, X_OK) == 0)
                return;
        }
    }
#ifdef GPUAES_SERVICE_INSTALLED
    snprintf(R.path, sizeof(R.path), "%s", GPUAES_SERVICE_INSTALLED);
    if (access(R.path, X_OK) == 0)
        return;
#endif
    R.path[0] = '\0';
}

static void at_fork_register(void) { pthread_atfork(at_fork_prepare, NULL, at_fork_child); }
static pthread_once_t at_fork_once = PTHREAD_ONCE_INIT;

/* At each choice of this backend: a module kept mapped (gpu_backend_leave)
 * configures it again with the new load's settings. */
void gpu_remote_configure(const gpu_remote_settings *s)
{
    const char *dir = secure_getenv("GPUAES_SERVICE_DIR");

    R.disabled = s->disable_gpu;
    R.timeout_ms = s->timeout_ms;
    R.first_wait_ms = s->connect_wait_ms;
    R.ctr_keystream = s->ctr_keystream;
    R.chunk = s->chunk / 4096 * 4096 != 0 ? s->chunk / 4096 * 4096 : 4096;   /* slots page-aligned */
    snprintf(R.dir, sizeof(R.dir), "%s", dir != NULL ? dir : "");
    find_service();
    pthread_once(&at_fork_once, at_fork_register);
    gpuaes_debug("service backend: gpuaesd %s, socket directory %s",
                 R.path[0] ? R.path : "(not found: connect only)", R.dir[0] ? R.dir : "(default)");
}

/*
 * The service's published load (docs/SERVICE.md, "Published load"): the
 * table of the newest connection, read by dispatch.c before each decision
 * through remote_load.  Readers hold load_readers while they use the
 * mapping; a new table replaces the old one, which is unmapped once no
 * reader can still see it.  conns_busy: this process's connections in use,
 * which the table counts among its busy clients.
 */
#define LOAD_STALE_NS 1000000000ULL    /* a table unchanged this long shows no load: its
                                          service died or stopped (a live one changes it
                                          at every request) */
#define RATE_FRESH_NS 1000000000ULL    /* an op's rate older than this is not used */

static void load_adopt(gpuaesd_conn *c)
{
    const gpuaesd_load_table *old = atomic_exchange(&load_table, c != NULL ? gpuaesd_take_load(c) : NULL);

    while (atomic_load(&load_readers) != 0)
        sched_yield();                 /* a reader copies a few words: short */
    gpuaesd_load_unmap(old);
}

uint64_t remote_mono_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* A consistent copy of the published load into *v: 0, or -1 when there is no
 * table or no clean copy.  load_readers keeps the mapping alive meanwhile. */
static int load_snapshot(gpuaesd_load *v)
{
    const gpuaesd_load_table *t;
    int rc;

    atomic_fetch_add(&load_readers, 1);
    t = atomic_load(&load_table);
    rc = t != NULL && gpuaesd_load_read(t, v) == 0 ? 0 : -1;
    atomic_fetch_sub(&load_readers, 1);
    return rc;
}

static unsigned remote_load(gpuaes_op op, uint64_t *ns_per_byte, unsigned *procs)
{
    /* The op's twin (same kernels, same speed) when the op itself has no rate yet. */
    static const uint32_t twin[GPUAESD_LOAD_OPS] = {
        [GPUAESD_OP_CTR128] = GPUAESD_OP_CTR32, [GPUAESD_OP_CTR32] = GPUAESD_OP_CTR128,
        [GPUAESD_OP_GCM_ENCRYPT] = GPUAESD_OP_GCM_DECRYPT, [GPUAESD_OP_GCM_DECRYPT] = GPUAESD_OP_GCM_ENCRYPT,
    };
    gpuaesd_load v;
    uint64_t now, rate;
    uint32_t w = remote_wire_op(op);
    int ok, mine;

    *ns_per_byte = 0;
    *procs = 0;
    ok = load_snapshot(&v) == 0;
    now = remote_mono_ns();
    if (!ok || gpuaesd_check_load(&v) != 0 || v.stamp_ns > now + LOAD_STALE_NS)
        return 0;                      /* none, torn, or nonsense: decide alone */
    /* Only a recent rate: one measured under a contention that has ended
     * would hold every process on the CPU, and none would measure it again. */
    rate = v.rate[w] != 0 && now - v.rate_ns[w] < RATE_FRESH_NS ? v.rate[w]
         : v.rate[twin[w]] != 0 && now - v.rate_ns[twin[w]] < RATE_FRESH_NS ? v.rate[twin[w]] : 0;
    if (rate != 0)
        *ns_per_byte = ((uint64_t)1000000000 << 16) / rate + 1;
    if (now - v.stamp_ns > LOAD_STALE_NS)
        return 0;
    /* Other processes' connections: each was made by a thread of large calls. */
    mine = atomic_load_explicit(&conns_open, memory_order_relaxed);
    *procs = v.clients > (uint32_t)(mine > 0 ? mine : 0) ? v.clients - (uint32_t)(mine > 0 ? mine : 0) : 0;
    mine = atomic_load_explicit(&conns_busy, memory_order_relaxed);
    return v.clients_busy > (uint32_t)(mine > 0 ? mine : 0) ? v.clients_busy - (uint32_t)(mine > 0 ? mine : 0) : 0;
}

static void *starter_main(void *arg)
{
    char why[GPUAES_ERROR_SIZE] = "";

    gpuaes_debug("service: connecting in the background");
    gpuaesd_conn *c = gpuaesd_connect(R.dir[0] ? R.dir : NULL, R.path[0] ? R.path : NULL, SEGMENT,
                                      START_MS, why, sizeof(why));

    (void)arg;
    pthread_mutex_lock(&R.mu);
    if (c != NULL) {
        load_adopt(c);
        R.idle[R.nidle++] = (rconn){ c, R.gen, 0 };
        R.nconns++;
        track(c, 1);
        R.backoff = BACKOFF_MIN_MS;
        atomic_store(&R.state, R_UP);
        gpuaes_debug("service connected");
    } else {
        snprintf(R.why, sizeof(R.why), "%s", why);
        R.retry_at = now_ms() + R.backoff;
        gpuaes_debug("service unavailable (%s): CPU; next try in %lld ms", why, R.backoff);
        R.backoff = R.backoff * 2 < BACKOFF_MAX_MS ? R.backoff * 2 : BACKOFF_MAX_MS;
        atomic_store(&R.state, R_DOWN);
    }
    pthread_cond_broadcast(&R.cv);
    pthread_mutex_unlock(&R.mu);
    return NULL;
}

/* Under R.mu: starts a connect in the background if none runs and the
 * back-off allows.  The thread blocks every signal (the application's
 * handlers run on its own threads). */
static int kick_locked(void)
{
    int st = atomic_load(&R.state);
    sigset_t all, old;

    if (R.disabled || st == R_STARTING || st == R_UP || (st == R_DOWN && now_ms() < R.retry_at))
        return 0;
    if (R.starter_joinable) {          /* over: it set the state under R.mu */
        pthread_join(R.starter, NULL);
        R.starter_joinable = 0;
    }
    atomic_store(&R.state, R_STARTING);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    if (pthread_create(&R.starter, NULL, starter_main, NULL) == 0) {
        R.starter_joinable = 1;
    } else {
        R.retry_at = now_ms() + R.backoff;
        atomic_store(&R.state, R_DOWN);
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return R.starter_joinable;
}

/* An op the service answered BUSY for (its GPU starting, or unable to run
 * it) is not sent again for BUSY_HOLD_MS: a BUSY answer costs the copy in. */
#define BUSY_HOLD_MS 20
static _Atomic long long busy_until[GPUAESD_OP_LAST + 1];

/* Whether the service's GPU is up and warm, as its published load says (no
 * table or no clean copy: its answers will tell).  Jobs sent before would
 * only come back BUSY, each having cost its copy in. */
static int service_gpu_ready(void)
{
    gpuaesd_load v;

    return load_snapshot(&v) != 0 || v.gpu_up == GPUAESD_GPU_READY;
}

/*
 * Up (and the service's GPU ready), or a start kicked off in the background.
 * wait_ms: how long the caller that kicks a start waits for it, when the
 * socket directory holds a service's socket (a running service answers its
 * hello in well under 3 ms; one that must be started takes hundreds of ms).
 * Every other caller answers at once.
 */
static int up_or_start(unsigned wait_ms)
{
    struct timespec until;
    int st = atomic_load_explicit(&R.state, memory_order_acquire);

    if (st == R_UP)
        return service_gpu_ready();
    if (R.disabled || st == R_STARTING || (st == R_DOWN && now_ms() < atomic_load(&R.retry_at)))
        return 0;                      /* the common answers, without the lock */
    pthread_mutex_lock(&R.mu);
    if (kick_locked() && wait_ms > 0 && gpuaesd_listening(R.dir[0] ? R.dir : NULL)) {
        remote_deadline(&until, wait_ms);
        while (atomic_load(&R.state) == R_STARTING && pthread_cond_timedwait(&R.cv, &R.mu, &until) == 0)
            ;
    }
    pthread_mutex_unlock(&R.mu);
    return atomic_load(&R.state) == R_UP && service_gpu_ready();
}

static int remote_available(void) { return up_or_start(0); }

int remote_ready(void) { return up_or_start(0); }

void remote_deadline(struct timespec *until, unsigned ms)
{
    clock_gettime(CLOCK_REALTIME, until);
    until->tv_sec += ms / 1000;
    until->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until->tv_nsec >= 1000000000L) {
        until->tv_sec++;
        until->tv_nsec -= 1000000000L;
    }
}
const char *remote_socket_dir(void) { return R.dir[0] ? R.dir : NULL; }
unsigned remote_timeout_ms(void) { return R.timeout_ms; }
unsigned remote_connect_wait_ms(void) { return R.first_wait_ms; }

void remote_count_conn(int open_delta, int busy_delta)
{
    atomic_fetch_add_explicit(&conns_open, open_delta, memory_order_relaxed);
    atomic_fetch_add_explicit(&conns_busy, busy_delta, memory_order_relaxed);
}

/* The call that starts the connection (offload_gpu_up, past gpu_start_bytes)
 * waits up to service_connect_wait_ms (3) for a running service, so that a
 * fresh process's first large call can already run on the GPU. */
static int remote_start(void) { return up_or_start(R.first_wait_ms); }

/* For explicit questions (the gpu-available parameter, tests): waits for a
 * start under way (at most START_MS), and then, connected, for the service's
 * own GPU start-up (its status; at most START_MS more), so that "available"
 * means that jobs can run on a GPU, as in process. */
static int remote_wait(void)
{
    gpuaesd_status_reply st;
    long long until;
    int up;

    pthread_mutex_lock(&R.mu);
    kick_locked();
    while (atomic_load(&R.state) == R_STARTING)
        pthread_cond_wait(&R.cv, &R.mu);
    up = atomic_load(&R.state) == R_UP;
    pthread_mutex_unlock(&R.mu);
    /* A status query that times out (a loaded host: CI's two cores under
     * ctest -j2) is asked again while the connection stands: "no GPU" is
     * the service's answer, never a slow dial's. */
    for (until = now_ms() + START_MS; up && now_ms() < until; usleep(5000)) {
        if (gpuaesd_query_status(R.dir[0] ? R.dir : NULL, &st, DIAL_MS) != 0) {
            up = atomic_load(&R.state) == R_UP;
            continue;
        }
        if (st.gpu_up != GPUAESD_GPU_STARTING)
            return st.gpu_up == GPUAESD_GPU_READY;
    }
    return 0;
}

static int remote_started(void) { return atomic_load(&R.state) == R_UP; }

/* The service answers BUSY for an op its GPU cannot run. */
static int remote_supports(gpuaes_op op) { (void)op; return remote_available(); }

/* What the user's gpuaesd says of itself, asked without starting anything
 * (its STATUS: a connection of its own, no hello): "gpuaesd serving (pid,
 * clients, GPU)" or "no gpuaesd running". */
static void service_said(char *buf, size_t n)
{
    static const char *const up[] = { "its GPU starting: ", "", "" };
    gpuaesd_status_reply st;

    if (R.disabled || gpuaesd_query_status(R.dir[0] ? R.dir : NULL, &st, DIAL_MS) != 0) {
        snprintf(buf, n, "no gpuaesd running");
        return;
    }
    snprintf(buf, n, "gpuaesd serving: pid %u, %u client(s) now, %s%s", st.service_pid,
             st.clients > 0 ? st.clients - 1 : 0, up[st.gpu_up <= GPUAESD_GPU_NONE ? st.gpu_up : 2],
             st.gpu);
}

/* For `openssl list -providers -verbose` (the provider's name): this
 * process's connection and the service's own state; never starts either. */
static const char *remote_state(void)
{
    static _Thread_local char buf[512];
    char said[300];

    service_said(said, sizeof(said));
    switch (atomic_load(&R.state)) {
    case R_UP:
        snprintf(buf, sizeof(buf), "service: connected; %s", said);
        break;
    case R_STARTING:
        snprintf(buf, sizeof(buf), "service: connecting; %s", said);
        break;
    case R_DOWN:
        pthread_mutex_lock(&R.mu);
        snprintf(buf, sizeof(buf), "service: unavailable (%s), on the CPU; %s", R.why, said);
        pthread_mutex_unlock(&R.mu);
        break;
    default:
        snprintf(buf, sizeof(buf), "service: %s; %s",
                 R.disabled ? "GPU disabled" : "not connected (connects after gpu_start_bytes of GPU-worthy work)",
                 said);
    }
    return buf;
}

static const char *remote_description(void)
{
    remote_wait();
    return remote_state();
}

/* A connection for one job, or NULL (the job goes to the CPU). */
static rconn take(void)
{
    rconn r = { NULL, 0, 0 };
    int dial = 0;

    pthread_mutex_lock(&R.mu);
    if (atomic_load(&R.state) == R_UP) {
        if (R.nidle > 0) {
            /* The warmest: a lone thread after many keeps using the segment
             * whose pages it has touched most, not the last one given back,
             * and pays no more first uses (remote_pipeline.c). */
            int best = R.nidle - 1;

            for (int i = 0; i + 1 < R.nidle; i++)
                if (R.idle[i].warm > R.idle[best].warm)
                    best = i;
            r = R.idle[best];
            R.idle[best] = R.idle[--R.nidle];
        } else if (R.nconns < CONNS) {
            R.nconns++;                /* reserved while we dial */
            r.gen = R.gen;
            dial = 1;
        }
    }
    pthread_mutex_unlock(&R.mu);
    if (dial) {
        char why[GPUAES_ERROR_SIZE];

        /* A running service answers in well under a millisecond; never starts one. */
        r.c = gpuaesd_connect(R.dir[0] ? R.dir : NULL, NULL, SEGMENT, DIAL_MS, why, sizeof(why));
        pthread_mutex_lock(&R.mu);
        if (r.c != NULL) {
            track(r.c, 1);
            load_adopt(r.c);           /* the newest: a service restarted since publishes anew */
        } else {
            R.nconns--;
        }
        pthread_mutex_unlock(&R.mu);
    }
    if (r.c != NULL)
        atomic_fetch_add(&conns_busy, 1);
    return r;
}

static void give_back(rconn r)
{
    atomic_fetch_sub(&conns_busy, 1);
    pthread_mutex_lock(&R.mu);
    if (r.gen != R.gen || atomic_load(&R.state) != R_UP)
        drop_locked(r.c);
    else
        R.idle[R.nidle++] = r;
    pthread_mutex_unlock(&R.mu);
}

/* The service did not answer (killed, hung): this connection is abandoned,
 * the others dropped, and a new start waits for the back-off. */
static void lost(rconn r)
{
    atomic_fetch_sub(&conns_busy, 1);
    pthread_mutex_lock(&R.mu);
    drop_locked(r.c);
    if (r.gen == R.gen) {
        R.gen++;
        while (R.nidle > 0)
            drop_locked(R.idle[--R.nidle].c);
        R.retry_at = now_ms() + R.backoff;
        R.backoff = R.backoff * 2 < BACKOFF_MAX_MS ? R.backoff * 2 : BACKOFF_MAX_MS;
        snprintf(R.why, sizeof(R.why), "it stopped answering");
        if (atomic_load(&R.state) == R_UP)
            atomic_store(&R.state, R_DOWN);
    }
    pthread_mutex_unlock(&R.mu);
}

uint32_t remote_wire_op(gpuaes_op op)
{
    switch (op) {
    case GPUAES_ECB_ENCRYPT: return GPUAESD_OP_ECB_ENCRYPT;
    case GPUAES_ECB_DECRYPT: return GPUAESD_OP_ECB_DECRYPT;
    case GPUAES_CTR128: return GPUAESD_OP_CTR128;
    case GPUAES_CTR32: return GPUAESD_OP_CTR32;
    case GPUAES_CBC_DECRYPT: return GPUAESD_OP_CBC_DECRYPT;
    case GPUAES_CFB128_DECRYPT: return GPUAESD_OP_CFB128_DECRYPT;
    case GPUAES_GCM_ENCRYPT: return GPUAESD_OP_GCM_ENCRYPT;
    case GPUAES_GCM_DECRYPT: return GPUAESD_OP_GCM_DECRYPT;
    }
    return 0;
}

static void remote_run(gpuaes_job *job)
{
    const remote_pipe_settings s = { R.chunk, R.timeout_ms, R.ctr_keystream };
    int busy_answer;
    rconn r;

    gpu_job_unstarted(job);
    if (job->key == NULL || job->len == 0 || job->len % 16 != 0
        || now_ms() < atomic_load_explicit(&busy_until[remote_wire_op(job->op)], memory_order_relaxed))
        return;
    if ((r = take()).c == NULL)
        return;
    if (remote_pipeline(job, (const remote_key *)job->key, r.c, &s, &busy_answer, &r.warm) != 0) {
        snprintf(job->error, sizeof(job->error), "gpuaesd gone or no answer within %u ms + 1 ms/MB",
                 R.timeout_ms);
        lost(r);
        job->status = GPUAES_FAILED;
    } else {
        give_back(r);
    }
    if (busy_answer)                   /* a BUSY answer costs the copy in: hold the op */
        atomic_store_explicit(&busy_until[remote_wire_op(job->op)], now_ms() + BUSY_HOLD_MS,
                              memory_order_relaxed);
}

static gpuaes_key *remote_key_new(const unsigned char *key, size_t keylen)
{
    remote_key *k;

    if ((keylen != 16 && keylen != 24 && keylen != 32) || (k = OPENSSL_zalloc(sizeof(*k))) == NULL)
        return NULL;
    k->keylen = keylen;
    memcpy(k->key, key, keylen);
    return (gpuaes_key *)k;
}

static void remote_key_free(gpuaes_key *key)
{
    OPENSSL_clear_free(key, sizeof(remote_key));
}

/* The last provider instance goes: no job runs.  The start thread and the
 * keystream connection's dial are joined before the module can be unloaded;
 * they give up at once (gpuaesd_client_abort), so that an application that
 * exits while gpuaesd starts, or while one that is stopped does not answer,
 * does not wait for their deadlines. */
static void remote_shutdown(void)
{
    gpuaes_debug("service backend: shutting down");
    gpuaesd_client_abort(1);
    pthread_mutex_lock(&R.mu);
    while (atomic_load(&R.state) == R_STARTING)
        pthread_cond_wait(&R.cv, &R.mu);
    if (R.starter_joinable) {
        pthread_join(R.starter, NULL);
        R.starter_joinable = 0;
    }
    R.gen++;
    while (R.nidle > 0)
        drop_locked(R.idle[--R.nidle].c);
    R.backoff = BACKOFF_MIN_MS;
    atomic_store(&R.state, R_IDLE);
    load_adopt(NULL);                  /* no decision runs now */
    pthread_mutex_unlock(&R.mu);
    remote_ks_shutdown();
    gpuaesd_client_abort(0);
    gpuaes_host_copy_stop();           /* the copy threads: none may run once the module goes */
    gpuaes_debug("service backend: shut down");
}

/* What only the in-process layer has: its memory and keystream launches
 * (the service's are its own: gpuaesd --status); the settings reach this
 * backend through gpu_remote_configure and gpu_remote_ks_limit. */
static void remote_memory(gpuaes_gpu_memory_stats *m) { *m = (gpuaes_gpu_memory_stats){ 0, 0, 0 }; }
static void remote_ks_stats(unsigned long long *launches, unsigned long long *jobs) { *launches = *jobs = 0; }
static void remote_configure(const gpuaes_gpu_settings *s) { (void)s; }
static void remote_ks_set_limit(size_t total_bytes) { (void)total_bytes; }

const gpu_backend gpu_backend_service = {
    "service", remote_start, remote_load,
    { GPUAES_LAYER_ABI, sizeof(gpuaes_layer),
      remote_configure, remote_available, remote_wait, remote_supports, remote_description, remote_started,
      remote_state, remote_run, remote_key_new, remote_key_free, remote_memory, remote_shutdown,
      remote_ks_set_limit, remote_ks_window_new, remote_ks_fill, remote_ks_ready, remote_ks_pin,
      remote_ks_unpin, remote_ks_window_free, remote_ks_stats, remote_ks_windows }
};
