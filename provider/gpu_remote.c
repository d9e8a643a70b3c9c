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
 * tried after a back-off.  Keystream windows are not served yet: NULL.
 */
#define _GNU_SOURCE                    /* dladdr */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>

#include "gpuaes.h"
#include "gpuaes_counter.h"
#include "gpuaesd_client.h"
#include "gcm_math.h"

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
} rconn;

typedef struct remote_key {
    size_t keylen;
    unsigned char key[32];
} remote_key;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    _Atomic int state;
    int disabled;
    unsigned timeout_ms;               /* a job's bound: this + its length at 1 GB/s */
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
    char why[160];                     /* the last start's failure */
} R = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, R_IDLE, 0, 100, 0,
        BACKOFF_MIN_MS, 0, { { 0 } }, 0, 0, { 0 }, 0, 0, "", "", "" };

static long long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static void track(gpuaesd_conn *c, int add)
{
    for (int i = 0; i < CONNS; i++)
        if (R.all[i] == (add ? NULL : c)) {
            R.all[i] = add ? c : NULL;
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
    R.starter_joinable = 0;
    R.backoff = BACKOFF_MIN_MS;
    atomic_store(&R.state, R_IDLE);
}

/* gpuaesd beside the module: ../libexec/gpuaes/gpuaesd, the same directory,
 * or where `cmake --install` put it; GPUAES_SERVICE_PATH wins. */
static void find_service(void)
{
    const char *env = getenv("GPUAES_SERVICE_PATH");
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

void gpu_remote_configure(int disable_gpu, unsigned timeout_ms)
{
    const char *dir = getenv("GPUAES_SERVICE_DIR");

    R.disabled = disable_gpu;
    R.timeout_ms = timeout_ms;
    snprintf(R.dir, sizeof(R.dir), "%s", dir != NULL ? dir : "");
    find_service();
    pthread_atfork(at_fork_prepare, NULL, at_fork_child);
    gpuaes_debug("service backend: gpuaesd %s, socket directory %s",
                 R.path[0] ? R.path : "(not found: connect only)", R.dir[0] ? R.dir : "(default)");
}

static void *starter_main(void *arg)
{
    char why[160] = "";
    gpuaesd_conn *c = gpuaesd_connect(R.dir[0] ? R.dir : NULL, R.path[0] ? R.path : NULL, SEGMENT,
                                      START_MS, why, sizeof(why));

    (void)arg;
    pthread_mutex_lock(&R.mu);
    if (c != NULL) {
        R.idle[R.nidle++] = (rconn){ c, R.gen };
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
static void kick_locked(void)
{
    int st = atomic_load(&R.state);
    sigset_t all, old;

    if (R.disabled || st == R_STARTING || st == R_UP || (st == R_DOWN && now_ms() < R.retry_at))
        return;
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
}

/* An op the service answered BUSY for (its GPU starting, or unable to run
 * it) is not sent again for BUSY_HOLD_MS: a BUSY answer costs the copy in. */
#define BUSY_HOLD_MS 20
static _Atomic long long busy_until[GPUAESD_OP_LAST + 1];

static int remote_available(void)
{
    int st = atomic_load_explicit(&R.state, memory_order_acquire);

    if (st == R_UP)
        return 1;
    if (R.disabled || st == R_STARTING || (st == R_DOWN && now_ms() < atomic_load(&R.retry_at)))
        return 0;                      /* the common answers, without the lock */
    pthread_mutex_lock(&R.mu);
    kick_locked();
    pthread_mutex_unlock(&R.mu);
    return atomic_load(&R.state) == R_UP;
}

/* For explicit questions (the gpu-available parameter, tests): waits for a
 * start under way (at most START_MS). */
static int remote_wait(void)
{
    int up;

    pthread_mutex_lock(&R.mu);
    kick_locked();
    while (atomic_load(&R.state) == R_STARTING)
        pthread_cond_wait(&R.cv, &R.mu);
    up = atomic_load(&R.state) == R_UP;
    pthread_mutex_unlock(&R.mu);
    return up;
}

static int remote_started(void) { return atomic_load(&R.state) == R_UP; }

/* The service answers BUSY for an op its GPU cannot run. */
static int remote_supports(gpuaes_op op) { (void)op; return remote_available(); }

static const char *remote_state(void)
{
    static _Thread_local char buf[256];

    switch (atomic_load(&R.state)) {
    case R_UP: return "service: connected";
    case R_STARTING: return "service: starting";
    case R_DOWN:
        pthread_mutex_lock(&R.mu);
        snprintf(buf, sizeof(buf), "service: unavailable (%s), on the CPU", R.why);
        pthread_mutex_unlock(&R.mu);
        return buf;
    default:
        return R.disabled ? "service: GPU disabled" : "service: not started";
    }
}

static const char *remote_description(void)
{
    remote_wait();
    return remote_state();
}

/* A connection for one job, or NULL (the job goes to the CPU). */
static rconn take(void)
{
    rconn r = { NULL, 0 };
    int dial = 0;

    pthread_mutex_lock(&R.mu);
    if (atomic_load(&R.state) == R_UP) {
        if (R.nidle > 0) {
            r = R.idle[--R.nidle];
        } else if (R.nconns < CONNS) {
            R.nconns++;                /* reserved while we dial */
            r.gen = R.gen;
            dial = 1;
        }
    }
    pthread_mutex_unlock(&R.mu);
    if (dial) {
        char why[160];

        /* A running service answers in well under a millisecond; never starts one. */
        r.c = gpuaesd_connect(R.dir[0] ? R.dir : NULL, NULL, SEGMENT, DIAL_MS, why, sizeof(why));
        pthread_mutex_lock(&R.mu);
        if (r.c != NULL)
            track(r.c, 1);
        else
            R.nconns--;
        pthread_mutex_unlock(&R.mu);
    }
    return r;
}

static void give_back(rconn r)
{
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

static uint32_t wire_op(gpuaes_op op)
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

static int is_gcm(gpuaes_op op) { return op == GPUAES_GCM_ENCRYPT || op == GPUAES_GCM_DECRYPT; }

/* The state for in[len] (gpuaes_job.iv_end), taken before an in-place job
 * overwrites the input. */
static void state_at_end(const gpuaes_job *job, unsigned char end[16])
{
    memcpy(end, job->iv, 16);
    switch (job->op) {
    case GPUAES_CTR128: gpuaes_ctr128_add(end, job->len / 16); break;
    case GPUAES_CTR32: case GPUAES_GCM_ENCRYPT: case GPUAES_GCM_DECRYPT:
        gpuaes_ctr32_add(end, job->len / 16);
        break;
    case GPUAES_CBC_DECRYPT: case GPUAES_CFB128_DECRYPT:
        memcpy(end, job->in + job->len - 16, 16);
        break;
    default: break;
    }
}

static void remote_run(gpuaes_job *job)
{
    const remote_key *k = (const remote_key *)job->key;
    gpuaesd_job_req req;
    gpuaesd_job_reply rep;
    size_t off = 0, segn;
    unsigned char *seg;
    rconn r;

    job->done = 0;
    job->cpu_from = job->len;
    job->error[0] = '\0';
    memset(job->ghash, 0, 16);
    memset(job->ghash_tail, 0, 16);
    state_at_end(job, job->iv_end);
    job->status = GPUAES_BUSY;
    if (k == NULL || job->len == 0 || job->len % 16 != 0
        || now_ms() < atomic_load_explicit(&busy_until[wire_op(job->op)], memory_order_relaxed)
        || (r = take()).c == NULL)
        return;
    seg = gpuaesd_segment(r.c, &segn);
    while (off < job->len) {
        size_t n = job->len - off < segn ? job->len - off : segn;
        unsigned timeout = R.timeout_ms + (unsigned)(n / 1000000);

        memset(&req, 0, sizeof(req));
        req.op = wire_op(job->op);
        req.keylen = (uint32_t)k->keylen;
        memcpy(req.key, k->key, k->keylen);
        memcpy(req.iv, job->iv, 16);
        if (is_gcm(job->op))
            memcpy(req.h, job->h, 16);
        req.len = n;                   /* in place at offset 0 */
        memcpy(seg, job->in + off, n);
        if (gpuaesd_submit(r.c, &req, &rep, (int)timeout) != 0) {
            OPENSSL_cleanse(&req, sizeof(req));
            snprintf(job->error, sizeof(job->error), "gpuaesd gone or no answer within %u ms", timeout);
            lost(r);
            job->status = GPUAES_FAILED;
            return;
        }
        OPENSSL_cleanse(&req, sizeof(req));
        if (rep.done > 0) {
            memcpy(job->out + off, seg, rep.done);
            if (is_gcm(job->op)) {     /* Y(A || B) = Y(A) * H^blocks(B) + Y(B) */
                unsigned char hm[16];

                gf128_pow(hm, job->h, rep.done / 16);
                gf128_mul(job->ghash, hm);
                for (int i = 0; i < 16; i++)
                    job->ghash[i] ^= rep.ghash[i];
                OPENSSL_cleanse(hm, sizeof(hm));
            }
            off += rep.done;
            job->done = off;
            memcpy(job->iv, rep.iv, 16);
        }
        if (rep.status != GPUAESD_OK) {
            if (off == 0 && rep.status == GPUAESD_BUSY) {
                job->status = GPUAES_BUSY;
                atomic_store_explicit(&busy_until[wire_op(job->op)], now_ms() + BUSY_HOLD_MS,
                                      memory_order_relaxed);
            } else {
                job->status = GPUAES_FAILED;
                snprintf(job->error, sizeof(job->error), "gpuaesd answered status %u after %zu bytes",
                         rep.status, off);
            }
            OPENSSL_cleanse(&rep, sizeof(rep));
            give_back(r);
            return;
        }
    }
    OPENSSL_cleanse(&rep, sizeof(rep));
    give_back(r);
    job->status = GPUAES_OK;
    job->cpu_from = job->done;
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

/* Keystream windows are in-process only so far (docs/SERVICE.md). */
static gpuaes_ks_window *remote_ks_window_new(size_t cap) { (void)cap; return NULL; }

/* The last provider instance goes: no job runs.  The start thread is
 * joined (bounded by START_MS) before the module can be unloaded. */
static void remote_shutdown(void)
{
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
    pthread_mutex_unlock(&R.mu);
}

const gpu_backend gpu_backend_service = {
    "service",
    remote_available, remote_wait, remote_available, remote_supports, remote_description,
    remote_started, remote_state, remote_run, remote_key_new, remote_key_free,
    remote_ks_window_new, remote_shutdown
};
