/*
 * remote_keystream.c - keystream windows made by gpuaesd (docs/SERVICE.md,
 * "Keystream windows"), with the contract of the in-process ones
 * (include/gpuaes_gpu.h, "Keystream ahead"; the ks_ calls of gpu_backend.h's table).
 *
 * A process's windows are slots of one segment, on a connection of their
 * own: the keystream connection, made at the first window.  A fill is a
 * KEYSTREAM request for its slot, which the service's GPU writes (by DMA:
 * the segment is registered like every client's); it is ready once its
 * reply has come.  Nothing here waits on the service: a poll takes the
 * replies that are there (one recv at most every POLL_NS), posts the fills
 * queued behind the service's max_inflight, and fails fills that are
 * overdue (a hung service).  A fill answered BUSY (the service's GPU busy
 * or starting) is sent again a little later; its window is not ready
 * meanwhile, so its bytes go to the CPU, as with a window filled late.
 *
 * A lost connection (dead, or a fill overdue) is dead from then on: its
 * windows answer -1 (their contexts go to the CPU and report it once), a
 * later window makes a new connection, and the dead one is closed (its
 * segment unmapped) only when its last window is freed, so that no pinned
 * keystream can vanish under its reader.  A window freed while its fill is
 * in flight keeps its slot until the reply, since the service may still be
 * writing it.  Slots are wiped when given back.
 */
#define _POSIX_C_SOURCE 200809L      /* clock_gettime */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <openssl/crypto.h>

#include "debug.h"
#include "gpu_backend.h"
#include "gpu_remote.h"
#include "gpuaesd_client.h"

#define SLOTS_MAX 64
#define POLL_NS 10000LL                /* replies are looked for at most this often */
#define DIAL_MS 2000                   /* the keystream connection's dial (in the background): a
                                          service making a spare segment answers hellos late */
#define RETRY_MS 1000                  /* after a connection failed or was lost */
#define BUSY_HOLD_MS 20                /* a fill answered BUSY is sent again after this */
#define POST_MS 10                     /* a request the socket does not take in this: lost */
#define FREE_WAIT_NS 2000000LL         /* a freed window's fill in flight is waited for this long */

enum { W_IDLE, W_QUEUED, W_INFLIGHT, W_READY, W_FAILED };

typedef struct ks_conn ks_conn;

typedef struct rwin {
    ks_conn *kc;
    size_t slot;
    _Atomic int state;                 /* W_READY and W_FAILED are read without the lock */
    int orphan;                        /* freed while its fill is in flight */
    long long send_at_ms, due_ms;      /* W_QUEUED: not before; W_INFLIGHT: failed after */
    gpuaesd_job_req req;               /* the fill (key inside: wiped when it is over) */
    char why[96];                      /* W_FAILED */
} rwin;

struct ks_conn {
    gpuaesd_conn *c;
    unsigned char *seg;
    size_t slot_size, nslots;
    uint64_t slots_used;               /* a window's, or a freed window's fill in flight */
    rwin *waiting[SLOTS_MAX];          /* by slot: a fill queued or in flight */
    unsigned queued, inflight;
    unsigned orphans;                  /* windows freed with their fill in flight */
    int refs;                          /* windows on it */
    _Atomic int dead;                  /* read without the lock: a dead one's windows answer -1 */
    ks_conn *next;                     /* K.all */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t dialled;            /* a dial is over */
    /* No slot free on the live connection and none to come back: a new
     * window is refused without the lock (a context short of windows asks
     * at every update; note_full keeps it, under the lock). */
    atomic_int full;
    ks_conn *cur;                      /* the live connection, or NULL */
    ks_conn *all;                      /* every one not closed yet, cur and dead ones */
    long long retry_at_ms;
    long long polled_ns;
    /* gpu_remote_ks_limit: read by the next dial.  Atomics, not K.mu: every
     * provider load sets them, in process too, where no fork handler of
     * ours re-initialises K.mu (a fork while another thread loaded the
     * module left it locked in the child: fork_locks_emu under ASan). */
    _Atomic size_t total, windows_max;
    pthread_t dial;                    /* dial_main */
    int dialing, dial_joinable;
    size_t dial_slot, dial_n;
    /* GPUAES_DEBUG, at shutdown: fills, BUSY answers, socket polls, time freed windows waited */
    unsigned long long fills, fills_ready, busy, polls, free_wait_ns;
} K = { .mu = PTHREAD_MUTEX_INITIALIZER, .dialled = PTHREAD_COND_INITIALIZER, .total = (size_t)256 << 20,
        .windows_max = 6 };

static long long mono_ns(void) { return (long long)remote_mono_ns(); }

static long long mono_ms(void) { return mono_ns() / 1000000; }

void gpu_remote_ks_limit(size_t total_bytes, size_t windows_max)
{
    atomic_store_explicit(&K.total, total_bytes, memory_order_relaxed);
    atomic_store_explicit(&K.windows_max, windows_max, memory_order_relaxed);
}

/* Under K.mu, after anything that takes or frees slots. */
static void note_full(void)
{
    const ks_conn *kc = K.cur;

    atomic_store_explicit(&K.full,
                          kc != NULL && kc->orphans == 0
                              && (size_t)__builtin_popcountll(kc->slots_used) >= kc->nslots,
                          memory_order_relaxed);
}

static void close_conn(ks_conn *kc)
{
    for (ks_conn **p = &K.all; *p != NULL; p = &(*p)->next)
        if (*p == kc) {
            *p = kc->next;
            break;
        }
    gpuaesd_close(kc->c);
    OPENSSL_free(kc);
}

static void window_gone(ks_conn *kc, rwin *w)
{
    OPENSSL_clear_free(w, sizeof(*w));
    if (--kc->refs == 0 && kc->dead)
        close_conn(kc);
}

/* A slot is free again: wiped (unless the connection is dead: a hung
 * service may still write it; it is unmapped soon). */
static void slot_free(ks_conn *kc, size_t slot)
{
    if (!kc->dead)
        OPENSSL_cleanse(kc->seg + slot * kc->slot_size, kc->slot_size);
    kc->slots_used &= ~((uint64_t)1 << slot);
}

static void fill_over(ks_conn *kc, rwin *w, int state, const char *why)
{
    if (w->state == W_INFLIGHT && --kc->inflight == 0)
        remote_count_conn(0, -1);
    if (w->state == W_QUEUED)
        kc->queued--;
    kc->waiting[w->slot] = NULL;
    OPENSSL_cleanse(&w->req, sizeof(w->req));
    if (w->orphan) {
        kc->orphans--;
        slot_free(kc, w->slot);
        window_gone(kc, w);
        return;
    }
    if (why != NULL)
        snprintf(w->why, sizeof(w->why), "%s", why);
    atomic_store_explicit(&w->state, state, memory_order_release);
}

/* The connection is lost: every fill fails, no new one goes on it. */
static void kill_conn(ks_conn *kc, const char *why)
{
    if (kc->dead)
        return;
    gpuaes_debug("keystream connection to gpuaesd lost (%s)", why);
    kc->dead = 1;
    kc->refs++;                        /* kc outlives its orphans' release below */
    for (size_t s = 0; s < kc->nslots; s++)
        if (kc->waiting[s] != NULL)
            fill_over(kc, kc->waiting[s], W_FAILED, why);
    remote_count_conn(-1, 0);
    if (K.cur == kc)
        K.cur = NULL;
    K.retry_at_ms = mono_ms() + RETRY_MS;
    note_full();
    if (--kc->refs == 0)
        close_conn(kc);
}

/* Under K.mu: takes the replies that are there, fails overdue fills, posts
 * queued ones.  force: look at the socket even if it was looked at just now. */
static void pump(ks_conn *kc, int force)
{
    gpuaesd_job_reply rep;
    long long now_ns = mono_ns(), now = now_ns / 1000000;
    int rc;

    if (kc->dead || (kc->queued == 0 && kc->inflight == 0))
        return;
    if (!force && now_ns - K.polled_ns < POLL_NS)
        return;
    K.polled_ns = now_ns;
    K.polls++;
    while (kc->inflight > 0 && (rc = gpuaesd_poll_reply(kc->c, &rep)) != 0) {
        rwin *w = NULL;

        if (rc < 0) {
            kill_conn(kc, "gpuaesd gone");
            return;
        }
        for (size_t s = 0; s < kc->nslots && w == NULL; s++)
            if (kc->waiting[s] != NULL && kc->waiting[s]->state == W_INFLIGHT
                && kc->waiting[s]->req.id == rep.id)
                w = kc->waiting[s];
        if (w == NULL) {               /* the client library checked it against a request of ours */
            kill_conn(kc, "a reply to no fill");
            return;
        }
        if (rep.status == GPUAESD_OK) {
            if (K.fills_ready++ == 0)
                gpuaes_debug("keystream through gpuaesd: the first fill is ready");
            fill_over(kc, w, W_READY, NULL);
        } else if (rep.status == GPUAESD_BUSY && !w->orphan) {
            K.busy++;
            if (--kc->inflight == 0)
                remote_count_conn(0, -1);
            kc->queued++;
            w->send_at_ms = now + BUSY_HOLD_MS;
            atomic_store(&w->state, W_QUEUED);
        } else {
            char why[64];

            snprintf(why, sizeof(why), "gpuaesd answered status %u to a keystream fill", rep.status);
            fill_over(kc, w, W_FAILED, why);
        }
    }
    for (size_t s = 0; s < kc->nslots; s++) {
        rwin *w = kc->waiting[s];

        if (w == NULL)
            continue;
        if (w->state == W_INFLIGHT && now > w->due_ms) {
            kill_conn(kc, "no answer to a keystream fill in time");
            return;
        }
        if (w->state == W_QUEUED && now >= w->send_at_ms
            && gpuaesd_inflight(kc->c) < gpuaesd_max_inflight(kc->c)) {
            if ((rc = gpuaesd_post(kc->c, &w->req, POST_MS)) < 0) {
                kill_conn(kc, "gpuaesd gone");
                return;
            }
            if (rc > 0)
                continue;
            kc->queued--;
            if (kc->inflight++ == 0)
                remote_count_conn(0, 1);
            w->due_ms = now + remote_timeout_ms() + (long long)(w->req.len >> 20);
            atomic_store(&w->state, W_INFLIGHT);
        }
    }
    note_full();                       /* replies to freed windows gave their slots back */
}

/* The dial of the keystream connection, on a thread of its own: a
 * service registering another client's segment holds its mmap lock, and a
 * hello to it then waits tens of ms (measured on the H200: 33 ms, inside a
 * 4 KiB update of `openssl enc`); no caller waits for that. */
static void *dial_main(void *arg)
{
    size_t slot_size = K.dial_slot, n = K.dial_n;
    char why[GPUAES_ERROR_SIZE];
    gpuaesd_conn *c;
    ks_conn *kc;

    (void)arg;
    c = gpuaesd_connect(remote_socket_dir(), NULL, n * slot_size, DIAL_MS, why, sizeof(why));
    pthread_mutex_lock(&K.mu);
    pthread_cond_broadcast(&K.dialled);
    if (c != NULL && (kc = OPENSSL_zalloc(sizeof(*kc))) != NULL) {
        kc->c = c;
        kc->seg = gpuaesd_segment(c, NULL);
        kc->slot_size = slot_size;
        kc->nslots = n;
        kc->next = K.all;
        K.all = kc;
        K.cur = kc;
        note_full();
        remote_count_conn(1, 0);
        gpuaes_debug("keystream connection to gpuaesd: %zu slots of %zu bytes", n, slot_size);
    } else {
        gpuaesd_close(c);
        gpuaes_debug("no keystream connection to gpuaesd (%s): CPU", c != NULL ? "out of memory" : why);
        K.retry_at_ms = mono_ms() + RETRY_MS;
    }
    K.dialing = 0;
    pthread_mutex_unlock(&K.mu);
    return NULL;
}

/* Under K.mu: the dial thread is over (joined), or there is none. */
static void dial_join_locked(void)
{
    while (K.dial_joinable && K.dialing) {
        pthread_mutex_unlock(&K.mu);
        nanosleep(&(struct timespec){ 0, 100000 }, NULL);
        pthread_mutex_lock(&K.mu);
    }
    if (K.dial_joinable) {
        pthread_join(K.dial, NULL);
        K.dial_joinable = 0;
    }
}

/* Under K.mu: the live connection; else a dial begun in the background
 * (never starting a service: gpu_remote.c does that), and NULL for now. */
static ks_conn *conn_for(size_t cap)
{
    size_t slot_size = (cap + 4095) / 4096 * 4096, n;
    sigset_t all, old;

    if (K.cur != NULL)
        return cap <= K.cur->slot_size ? K.cur : NULL;
    n = atomic_load_explicit(&K.total, memory_order_relaxed) / slot_size;
    if (n > atomic_load_explicit(&K.windows_max, memory_order_relaxed))
        n = atomic_load_explicit(&K.windows_max, memory_order_relaxed);
    if (n > SLOTS_MAX)
        n = SLOTS_MAX;
    if (n == 0 || K.dialing || mono_ms() < K.retry_at_ms)
        return NULL;
    dial_join_locked();                /* the last one, over */
    K.dial_slot = slot_size;
    K.dial_n = n;
    K.dialing = 1;
    gpuaes_debug("keystream connection to gpuaesd: dialling");
    sigfillset(&all);                  /* the application's handlers run on its own threads */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    K.dial_joinable = pthread_create(&K.dial, NULL, dial_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!K.dial_joinable) {
        K.dialing = 0;
        K.retry_at_ms = mono_ms() + RETRY_MS;
        return NULL;
    }
    /* As the job connection's first call: a running service answers well
     * within service_connect_wait_ms (3); one busy registering does not. */
    {
        struct timespec until;

        remote_deadline(&until, remote_connect_wait_ms());
        while (K.dialing && pthread_cond_timedwait(&K.dialled, &K.mu, &until) == 0)
            ;
    }
    return K.cur != NULL && cap <= K.cur->slot_size ? K.cur : NULL;
}

gpuaes_ks_window *remote_ks_window_new(size_t cap)
{
    ks_conn *kc;
    rwin *w = NULL;

    if (cap == 0 || cap % 16 != 0 || atomic_load_explicit(&K.full, memory_order_relaxed) || !remote_ready())
        return NULL;
    pthread_mutex_lock(&K.mu);
    if (K.cur != NULL)
        pump(K.cur, 0);                /* replies free the slots of windows freed in flight */
    if ((kc = conn_for(cap)) != NULL)
        for (size_t s = 0; s < kc->nslots && w == NULL; s++)
            if ((kc->slots_used & ((uint64_t)1 << s)) == 0 && (w = OPENSSL_zalloc(sizeof(*w))) != NULL) {
                kc->slots_used |= (uint64_t)1 << s;
                kc->refs++;
                w->kc = kc;
                w->slot = s;
                atomic_init(&w->state, W_IDLE);
            }
    note_full();
    pthread_mutex_unlock(&K.mu);
    return (gpuaes_ks_window *)w;
}

gpuaes_status remote_ks_fill(gpuaes_ks_window *win, const gpuaes_key *key, const unsigned char ctr[16],
                             size_t nbytes, int ctr32, char error[GPUAES_ERROR_SIZE])
{
    rwin *w = (rwin *)win;
    const remote_key *k = (const remote_key *)key;
    ks_conn *kc;
    int st;

    if (w == NULL || k == NULL || nbytes == 0 || nbytes % 16 != 0 || nbytes > w->kc->slot_size
        || (st = atomic_load(&w->state)) == W_QUEUED || st == W_INFLIGHT) {
        snprintf(error, GPUAES_ERROR_SIZE, "keystream fill: bad window, key or length");
        return GPUAES_FAILED;
    }
    pthread_mutex_lock(&K.mu);
    kc = w->kc;
    if (kc->dead) {
        pthread_mutex_unlock(&K.mu);
        snprintf(error, GPUAES_ERROR_SIZE, "keystream fill: the connection to gpuaesd was lost");
        return GPUAES_FAILED;
    }
    memset(&w->req, 0, sizeof(w->req));
    w->req.op = ctr32 ? GPUAESD_OP_KEYSTREAM32 : GPUAESD_OP_KEYSTREAM128;
    w->req.keylen = (uint32_t)k->keylen;
    memcpy(w->req.key, k->key, k->keylen);
    memcpy(w->req.iv, ctr, 16);
    w->req.in_off = w->req.out_off = (uint64_t)(w->slot * kc->slot_size);
    w->req.len = nbytes;
    w->send_at_ms = 0;
    atomic_store(&w->state, W_QUEUED);
    kc->waiting[w->slot] = w;
    kc->queued++;
    K.fills++;
    pump(kc, 1);
    pthread_mutex_unlock(&K.mu);
    return GPUAES_OK;
}

int remote_ks_ready(gpuaes_ks_window *win, char error[GPUAES_ERROR_SIZE])
{
    rwin *w = (rwin *)win;
    int st = atomic_load_explicit(&w->state, memory_order_acquire);

    /* A dead connection's slots may be rewritten: by a hung service, or,
     * in a forked child, by the parent's next fills (the mapping is shared). */
    if (atomic_load_explicit(&w->kc->dead, memory_order_acquire)) {
        snprintf(error, GPUAES_ERROR_SIZE, "%s",
                 st == W_FAILED ? w->why : "the keystream connection to gpuaesd was lost");
        return -1;
    }
    if (st == W_QUEUED || st == W_INFLIGHT) {
        pthread_mutex_lock(&K.mu);
        pump(w->kc, 0);
        pthread_mutex_unlock(&K.mu);
        st = atomic_load_explicit(&w->state, memory_order_acquire);
    }
    if (st == W_FAILED || atomic_load(&w->kc->dead)) {
        snprintf(error, GPUAES_ERROR_SIZE, "%s",
                 st == W_FAILED ? w->why : "the keystream connection to gpuaesd was lost");
        return -1;
    }
    return st == W_READY || st == W_IDLE;
}

/* The data of a ready window stays mapped while the window exists
 * (close_conn waits for its last window): pinning needs no more. */
int remote_ks_pin(gpuaes_ks_window *win, const unsigned char **data, char error[GPUAES_ERROR_SIZE])
{
    rwin *w = (rwin *)win;
    int r = remote_ks_ready(win, error);

    *data = r > 0 ? w->kc->seg + w->slot * w->kc->slot_size : NULL;
    return r;
}

void remote_ks_unpin(gpuaes_ks_window *win) { (void)win; }

void remote_ks_window_free(gpuaes_ks_window *win)
{
    rwin *w = (rwin *)win;
    ks_conn *kc;

    if (w == NULL)
        return;
    pthread_mutex_lock(&K.mu);
    kc = w->kc;
    /* As in process, a fill in flight is waited for, so that the next
     * context finds the slot free; but only briefly (a hung service's fill
     * is left to its reply or to the connection's end). */
    long long waited = mono_ns();
    for (long long until = waited + FREE_WAIT_NS;
         atomic_load(&w->state) == W_INFLIGHT && mono_ns() < until;) {
        pump(kc, 1);
        if (atomic_load(&w->state) == W_INFLIGHT) {
            pthread_mutex_unlock(&K.mu);
            nanosleep(&(struct timespec){ 0, 10000 }, NULL);
            pthread_mutex_lock(&K.mu);
        }
    }
    K.free_wait_ns += (unsigned long long)(mono_ns() - waited);
    if (atomic_load(&w->state) == W_INFLIGHT) {
        w->orphan = 1;                 /* slot and window go at its reply, or with the connection */
        kc->orphans++;
    } else {
        if (atomic_load(&w->state) == W_QUEUED)
            fill_over(kc, w, W_IDLE, NULL);
        slot_free(kc, w->slot);
        window_gone(kc, w);
    }
    note_full();
    pthread_mutex_unlock(&K.mu);
}

/* Slots held, by windows or by fills of freed ones still in flight (none
 * is pooled: a slot is free or a window's). */
void remote_ks_windows(size_t *windows, size_t *pooled)
{
    size_t n = 0;

    pthread_mutex_lock(&K.mu);
    for (const ks_conn *kc = K.all; kc != NULL; kc = kc->next)
        n += (size_t)__builtin_popcountll(kc->slots_used);
    pthread_mutex_unlock(&K.mu);
    *windows = n;
    if (pooled != NULL)
        *pooled = 0;
}

/* The child's copies of the parent's connections are never used (the
 * mappings are shared with the parent): closed; their windows (in the
 * child's copies of its contexts) answer -1 and are freed as usual. */
void remote_ks_fork_child(void)
{
    pthread_mutex_init(&K.mu, NULL);
    pthread_cond_init(&K.dialled, NULL);
    K.dialing = K.dial_joinable = 0;   /* a dial of the parent's is the parent's (its socket leaks here) */
    for (ks_conn *kc = K.all; kc != NULL; kc = kc->next) {
        kc->dead = 1;
        for (size_t s = 0; s < kc->nslots; s++)
            if (kc->waiting[s] != NULL) {
                rwin *w = kc->waiting[s];

                kc->waiting[s] = NULL;
                OPENSSL_cleanse(&w->req, sizeof(w->req));
                if (w->orphan) {       /* freed by its context already */
                    OPENSSL_clear_free(w, sizeof(*w));
                    kc->refs--;
                    kc->orphans--;
                    continue;
                }
                snprintf(w->why, sizeof(w->why), "forked: the parent's keystream connection");
                atomic_store(&w->state, W_FAILED);
            }
        kc->queued = kc->inflight = 0;
        gpuaesd_close(kc->c);
        kc->c = NULL;
    }
    K.cur = NULL;
    K.retry_at_ms = 0;
    atomic_store(&K.full, 0);
    /* a ks_conn with no window left is freed now; the others with their last window */
    for (ks_conn **p = &K.all; *p != NULL;) {
        ks_conn *kc = *p;

        if (kc->refs == 0) {
            *p = kc->next;
            OPENSSL_free(kc);
        } else {
            p = &kc->next;
        }
    }
}

/* The last provider instance goes: no window exists. */
void remote_ks_shutdown(void)
{
    pthread_mutex_lock(&K.mu);
    dial_join_locked();                /* at most DIAL_MS: before the module can go */
    if (K.fills > 0)
        gpuaes_debug("keystream through gpuaesd: %llu fills, %llu answered BUSY, %llu polls, freed windows "
                     "waited %.3f ms", K.fills, K.busy, K.polls, (double)K.free_wait_ns / 1e6);
    if (K.cur != NULL)
        kill_conn(K.cur, "unloaded");
    K.retry_at_ms = 0;
    pthread_mutex_unlock(&K.mu);
}
