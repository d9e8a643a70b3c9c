/*
 * gpu_emulator.c - the GPU interface (include/gpuaes_gpu.h) emulated on the
 * CPU with OpenSSL's AES, for a second build of the module (build/emu/gpuaes.so).
 *
 * Why: CI has no GPU, yet the provider's GPU-path logic (splitting updates,
 * re-synchronising the fallback, finishing a partial GPU job on the CPU) is
 * where the subtle bugs live.  With the emulator, the GPU-labelled tests run
 * everywhere.  It copies the real layer's contract: chunked work, `done` is a
 * prefix, job->iv is the state at in + done, a configured fault (GPUAES_FAULT)
 * fails, and a job's cpu_share gets pieces from its end (see gpuaes_gpu_run).
 * GCM ops: CTR32 plus a GHASH of the done prefix's ciphertext of its own,
 * independent of the provider's gcm_math.c: byte tables (fast enough for the
 * 1 GiB tests; an emulator need not be constant time) built with a bitwise
 * SP 800-38D multiply.  GPUAES_EMU_NO_GCM=1 plays a GPU that cannot run the GCM
 * ops (compute capability 7.5: no binary MMAs with AND): gpuaes_gpu_supports()
 * says so and gpuaes_gpu_run() answers GPUAES_BUSY for them, as the real layer.
 * Memory (gpu_memory_max): a running job holds a slot's worth (the real
 * layer's size for the configured lanes and chunk; slots are not kept
 * between jobs here) and a window twice its size (pinned + device); what the
 * cap would not hold is refused and counted, as in cuda/runtime/memory_cap.cpp.
 * Registration for DMA (gpuaesd's segments): see "Registered ranges" below.
 * For gpuaesd_emu (the service never configures a fault): GPUAES_EMU_FAIL_EVERY=N
 * makes every N-th job run (counted process-wide) fail after half its blocks
 * (GPUAES_FAILED, done = half), and the state string reports the most jobs
 * that ran at once ("at most N jobs at once"), so that tests see the
 * service's concurrency.  GPUAES_EMU_COLD_MS=N: the first job of each op
 * waits N ms (a cold GPU layer).  gpuaes_host_copy is a plain memcpy.
 */
#define _POSIX_C_SOURCE 200809L  /* nanosleep */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "gpuaes_atexit.h"
#include "gpuaes_counter.h"
#include "gpuaes_gpu.h"
#include "rng.h"

#define EMU_CHUNK ((size_t)1 << 20)    /* small, so tests cross many chunk boundaries */

struct gpuaes_key {
    unsigned char key[32];
    size_t keylen;
};

gpuaes_key *gpuaes_key_new(const unsigned char *key, size_t keylen)
{
    gpuaes_key *k;

    if (keylen != 16 && keylen != 24 && keylen != 32)
        return NULL;
    k = OPENSSL_zalloc(sizeof(*k));
    if (k != NULL) {
        memcpy(k->key, key, keylen);
        k->keylen = keylen;
    }
    return k;
}

void gpuaes_key_free(gpuaes_key *key)
{
    OPENSSL_clear_free(key, sizeof(*key));
}

/*
 * Settings: what the provider configured (GPUAES_DISABLE_GPU, GPUAES_FAULT),
 * read from any thread; never configured (test_ks_api_emu), the defaults.
 */
static atomic_int emu_disabled;
static atomic_int emu_device;          /* the configured device: usable when below emu_devices() */
static atomic_int emu_fault = GPUAES_FAULT_NONE;
static _Atomic size_t emu_mem_max = (size_t)-1, emu_slot_bytes = (size_t)96 << 20;
static _Atomic size_t emu_mem_held;
static _Atomic unsigned long long emu_mem_refused;

void gpuaes_gpu_configure(const gpuaes_gpu_settings *s)
{
    size_t chunk = GPUAES_STAGING_CHUNK_MIN;

    if (s == NULL)
        return;
    atomic_store(&emu_disabled, s->disable_gpu != 0);
    atomic_store(&emu_device, s->device);
    atomic_store(&emu_fault, (int)s->fault);
    atomic_store(&emu_mem_max, s->gpu_memory_max);
    while (chunk * 2 <= s->staging_chunk && chunk < GPUAES_STAGING_CHUNK_MAX)
        chunk *= 2;
    /* cuda/staging/slot_pool.cu's slot_bytes(): per lane a pinned 2 x chunk (zero-copy
     * output) and a device 2 x chunk, plus GHASH matrices and scratch */
    atomic_store(&emu_slot_bytes, (size_t)s->staging_lanes * (4 * chunk + (24 << 10)));
}

/* As mem_reserve() / mem_release() of cuda/runtime/memory_cap.cpp. */
static int emu_mem_reserve(size_t bytes)
{
    size_t held = atomic_load(&emu_mem_held), max = atomic_load(&emu_mem_max);

    do {
        if (bytes > max || held > max - bytes) {
            atomic_fetch_add(&emu_mem_refused, 1);
            return 0;
        }
    } while (!atomic_compare_exchange_weak(&emu_mem_held, &held, held + bytes));
    return 1;
}

static void emu_mem_release(size_t bytes)
{
    atomic_fetch_sub(&emu_mem_held, bytes);
}

void gpuaes_gpu_memory(gpuaes_gpu_memory_stats *m)
{
    if (m == NULL)
        return;
    m->held = atomic_load(&emu_mem_held);
    m->refused = atomic_load(&emu_mem_refused);
    m->oom = 0;
}

/*
 * Start-up, as the real layer (cuda/runtime/device.cu): the first gpuaes_gpu_available()
 * starts it on a thread of its own and answers 0 until it is over.
 * GPUAES_EMU_INIT_MS=N makes it take N milliseconds (tests of the CPU path
 * during a slow start-up and of exit meanwhile); without it, it is over at
 * once.
 */
enum { EMU_NONE, EMU_STARTING, EMU_READY };
static _Atomic int emu_state = EMU_NONE;
static int emu_usable;                 /* written before emu_state becomes EMU_READY */
static pthread_mutex_t emu_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t emu_cv = PTHREAD_COND_INITIALIZER;
static pthread_t emu_thread;
static int emu_joinable;

/* GPUAES_EMU_DEVICES=N (1..16; default 1): the devices the emulated layer
 * sees (gpuaesd's workers of several GPUs, tested without one). */
static int emu_devices(void)
{
    const char *e = getenv("GPUAES_EMU_DEVICES");
    long n = e != NULL ? strtol(e, NULL, 10) : 1;

    return n >= 1 && n <= 16 ? (int)n : 1;
}

static void emu_finish(void)
{
    emu_usable = !atomic_load(&emu_disabled) && atomic_load(&emu_device) < emu_devices();
    pthread_mutex_lock(&emu_lock);
    atomic_store(&emu_state, EMU_READY);
    pthread_cond_broadcast(&emu_cv);
    pthread_mutex_unlock(&emu_lock);
}

static _Atomic int emu_exiting;

/* The real start-up is a few CUDA calls, and stops between them at exit:
 * this one is 10 ms steps. */
static void *emu_start_main(void *ms)
{
    struct timespec step = { 0, 10 * 1000000L };

    for (size_t waited = 0; waited < (size_t)ms && !atomic_load(&emu_exiting); waited += 10)
        nanosleep(&step, NULL);
    emu_finish();
    return NULL;
}

/* As cuda/runtime/device.cu's stop_init_at_exit(). */
static void emu_stop_at_exit(void *unused)
{
    int join;

    (void)unused;
    atomic_store(&emu_exiting, 1);
    pthread_mutex_lock(&emu_lock);
    join = emu_joinable;
    emu_joinable = 0;
    pthread_mutex_unlock(&emu_lock);
    if (join)
        pthread_join(emu_thread, NULL);
}

static void emu_start(void)
{
    const char *e = getenv("GPUAES_EMU_INIT_MS");
    size_t ms = e != NULL ? (size_t)strtoul(e, NULL, 10) : 0;

    pthread_mutex_lock(&emu_lock);
    if (atomic_load(&emu_state) == EMU_NONE) {
        atomic_store(&emu_state, EMU_STARTING);
        if (ms == 0) {
            pthread_mutex_unlock(&emu_lock);
            emu_finish();
            return;
        }
        static int registered;      /* under emu_lock */

        if (!registered)
            registered = gpuaes_atexit(emu_stop_at_exit, NULL) == 0;
        emu_joinable = pthread_create(&emu_thread, NULL, emu_start_main, (void *)ms) == 0;
        if (!emu_joinable) {
            pthread_mutex_unlock(&emu_lock);
            emu_finish();
            return;
        }
    }
    pthread_mutex_unlock(&emu_lock);
}

int gpuaes_gpu_available(void)
{
    if (atomic_load(&emu_state) != EMU_READY) {
        emu_start();
        if (atomic_load(&emu_state) != EMU_READY)
            return 0;
    }
    return emu_usable;
}

int gpuaes_gpu_wait(void)
{
    emu_start();
    pthread_mutex_lock(&emu_lock);
    while (atomic_load(&emu_state) != EMU_READY)
        pthread_cond_wait(&emu_cv, &emu_lock);
    pthread_mutex_unlock(&emu_lock);
    return emu_usable;
}

int gpuaes_gpu_started(void)
{
    return atomic_load(&emu_state) == EMU_READY;
}

int gpuaes_gpu_supports(gpuaes_op op)
{
    const char *no_gcm = getenv("GPUAES_EMU_NO_GCM");
    int gcm = op == GPUAES_GCM_ENCRYPT || op == GPUAES_GCM_DECRYPT;

    if (gcm && no_gcm != NULL && *no_gcm != '\0' && *no_gcm != '0')
        return 0;
    return gpuaes_gpu_available();
}

const char *gpuaes_gpu_description(void)
{
    static _Thread_local char buf[96];

    if (!gpuaes_gpu_wait())
        return atomic_load(&emu_disabled) ? "disabled by GPUAES_DISABLE_GPU"
                                          : "no usable GPU: no such emulated device";
    snprintf(buf, sizeof(buf), "CPU emulation of the GPU layer (tests only), device %d", atomic_load(&emu_device));
    return buf;
}

int gpuaes_gpu_device_count(void)
{
    return gpuaes_gpu_started() ? emu_devices() : 0;
}

static atomic_uint emu_running, emu_peak;     /* jobs in gpuaes_gpu_run now, and at most */

const char *gpuaes_gpu_state(void)
{
    static _Thread_local char buf[160];

    if (!gpuaes_gpu_started())
        return atomic_load(&emu_state) == EMU_NONE ? "GPU not started" : "GPU starting";
    snprintf(buf, sizeof(buf), "%s, at most %u jobs at once", gpuaes_gpu_description(),
             atomic_load(&emu_peak));
    return buf;
}

void gpuaes_host_copy(void *dst, const void *src, size_t n, int stream)
{
    (void)stream;
    memcpy(dst, src, n);
}

void gpuaes_host_copy_stop(void)
{
}

/* The emulator has no copy threads: a begun copy is made when it is ended,
 * so that a caller which used a slot before ending its copy, or never ended
 * one, reads or leaves the wrong bytes. */
struct gpuaes_host_copy_task {
    unsigned char *dst;
    const unsigned char *src, *ks;
    size_t n;
};

static void emu_copy(unsigned char *d, const unsigned char *s, const unsigned char *k, size_t n)
{
    if (k == NULL) {
        memmove(d, s, n);
    } else {
        for (size_t i = 0; i < n; i++)
            d[i] = s[i] ^ k[i];
    }
}

gpuaes_host_copy_task *gpuaes_host_copy_begin(void *dst, const void *src, const void *ks, size_t n, int stream)
{
    gpuaes_host_copy_task *t = malloc(sizeof(*t));

    (void)stream;
    if (t == NULL) {                   /* as the pool: no task, the copy done now */
        emu_copy(dst, src, ks, n);
        return NULL;
    }
    t->dst = dst;
    t->src = src;
    t->ks = ks;
    t->n = n;
    return t;
}

void gpuaes_host_copy_end(gpuaes_host_copy_task *task)
{
    if (task == NULL)
        return;
    emu_copy(task->dst, task->src, task->ks, task->n);
    free(task);
}

/* The emulator's own library context: made on first use, freed at shutdown. */
static OSSL_LIB_CTX *emu_libctx;
static OSSL_PROVIDER *emu_default;     /* our reference to its default provider */
static pthread_mutex_t emu_libctx_lock = PTHREAD_MUTEX_INITIALIZER;

static OSSL_LIB_CTX *emu_get_libctx(void)
{
    OSSL_LIB_CTX *l;

    pthread_mutex_lock(&emu_libctx_lock);
    if (emu_libctx == NULL && (emu_libctx = OSSL_LIB_CTX_new()) != NULL
        && (emu_default = OSSL_PROVIDER_load(emu_libctx, "default")) == NULL) {
        OSSL_LIB_CTX_free(emu_libctx);
        emu_libctx = NULL;
    }
    l = emu_libctx;
    pthread_mutex_unlock(&emu_libctx_lock);
    return l;
}

static void emu_ranges_check_none(void);

/* The last provider instance is gone: join the start-up, forget it. */
void gpuaes_gpu_shutdown(void)
{
    emu_ranges_check_none();
    gpuaes_gpu_release();             /* the pooled windows, as the real layer */
    pthread_mutex_lock(&emu_lock);
    int join = emu_joinable;

    emu_joinable = 0;
    pthread_mutex_unlock(&emu_lock);
    if (join)
        pthread_join(emu_thread, NULL);
    atomic_store(&emu_state, EMU_NONE);
    pthread_mutex_lock(&emu_libctx_lock);
    OSSL_PROVIDER_unload(emu_default);  /* else it outlives the context (LSan) */
    emu_default = NULL;
    OSSL_LIB_CTX_free(emu_libctx);
    emu_libctx = NULL;
    pthread_mutex_unlock(&emu_libctx_lock);
}

/* One AES block operation over n blocks with the default provider's ECB. */
static int ecb(const gpuaes_key *k, int enc, unsigned char *out, const unsigned char *in, size_t n)
{
    static const char *names[] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB" };
    OSSL_LIB_CTX *l = emu_get_libctx();
    EVP_CIPHER *c = l != NULL ? EVP_CIPHER_fetch(l, names[(k->keylen - 16) / 8], NULL) : NULL;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok, outl;

    ok = c != NULL && x != NULL && EVP_CipherInit_ex2(x, c, k->key, NULL, enc, NULL)
        && EVP_CIPHER_CTX_set_padding(x, 0) && EVP_CipherUpdate(x, out, &outl, in, (int)n);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok;
}

/* x = x * y in GCM's field, SP 800-38D algorithm 1, byte by byte. */
static void emu_gf_mul(unsigned char x[16], const unsigned char y[16])
{
    unsigned char z[16] = { 0 }, v[16];

    memcpy(v, y, 16);
    for (int i = 0; i < 128; i++) {
        unsigned char bit = (unsigned char)((x[i / 8] >> (7 - i % 8)) & 1);
        unsigned char lsb = v[15] & 1;

        for (int j = 0; j < 16; j++)
            z[j] ^= v[j] & (unsigned char)(0 - bit);
        for (int j = 15; j > 0; j--)
            v[j] = (unsigned char)((v[j] >> 1) | (v[j - 1] << 7));
        v[0] >>= 1;
        v[0] ^= (unsigned char)(0xe1 & (0 - lsb));
    }
    memcpy(x, z, 16);
}

/* x * H = XOR over byte positions i of t[i][x_i], t[i][v] = (v at byte i) * H. */
typedef struct { unsigned char t[16][256][16]; } emu_htab;

static void emu_htab_init(emu_htab *T, const unsigned char h[16])
{
    for (int i = 0; i < 16; i++) {
        memset(T->t[i][0], 0, 16);
        for (int j = 0; j < 8; j++) {            /* the single-bit values: e * H */
            unsigned char *b = T->t[i][1 << j];

            memset(b, 0, 16);
            b[i] = (unsigned char)(1 << j);
            emu_gf_mul(b, h);
        }
        for (int v = 3; v < 256; v++) {          /* the rest by linearity */
            int low = v & -v;

            if (v == low)
                continue;
            for (int k = 0; k < 16; k++)
                T->t[i][v][k] = T->t[i][v ^ low][k] ^ T->t[i][low][k];
        }
    }
}

/* Horner GHASH: x = (x ^ C) * H over len bytes of whole blocks. */
static void emu_ghash(unsigned char x[16], const emu_htab *T, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i += 16) {
        uint64_t z[2] = { 0, 0 }, t[2];

        for (int j = 0; j < 16; j++)
            x[j] ^= p[i + j];
        for (int j = 0; j < 16; j++) {          /* a row at a time, not a byte */
            memcpy(t, T->t[j][x[j]], 16);
            z[0] ^= t[0];
            z[1] ^= t[1];
        }
        memcpy(x, z, 16);
    }
}

/* The counter n blocks on: GCM's inc32, or CTR's 128-bit add. */
static void ctr_advance(unsigned char c[16], size_t n, int inc32)
{
    if (inc32)
        gpuaes_ctr32_add(c, n);
    else
        gpuaes_ctr128_add(c, n);
}

/* out = a ^ b over len bytes (a multiple of 16), eight at a time; out may be a. */
static void emu_xor(unsigned char *out, const unsigned char *a, const unsigned char *b, size_t len)
{
    for (size_t i = 0; i < len; i += 8) {
        uint64_t x, y;

        memcpy(&x, a + i, 8);
        memcpy(&y, b + i, 8);
        x ^= y;
        memcpy(out + i, &x, 8);
    }
}

/* One chunk: out = op(in), iv advanced, GCM: x = GHASH state after it.
 * in and out may be the same. */
static int chunk(gpuaes_job *job, size_t off, size_t len, unsigned char x[16], const emu_htab *T)
{
    const unsigned char *in = job->in != NULL ? job->in + off : NULL;   /* NULL: a keystream job */
    unsigned char *out = job->out + off, *tmp = malloc(len), next[16];
    int ok = tmp != NULL;

    if (!ok)
        return 0;
    if (job->op == GPUAES_GCM_DECRYPT)           /* GHASH of the input, before in place overwrites it */
        emu_ghash(x, T, in, len);
    switch (job->op) {
    case GPUAES_ECB_ENCRYPT: ok = ecb(job->key, 1, out, in, len); break;
    case GPUAES_ECB_DECRYPT: ok = ecb(job->key, 0, out, in, len); break;
    case GPUAES_CTR128:
    case GPUAES_CTR32:
    case GPUAES_GCM_ENCRYPT:
    case GPUAES_GCM_DECRYPT:
        for (size_t i = 0; i < len; i += 16) {
            memcpy(tmp + i, job->iv, 16);
            ctr_advance(job->iv, 1, job->op != GPUAES_CTR128);
        }
        ok = ecb(job->key, 1, tmp, tmp, len);
        if (ok && in == NULL)
            memcpy(out, tmp, len);
        else if (ok)
            emu_xor(out, in, tmp, len);
        break;
    case GPUAES_CBC_DECRYPT:
    case GPUAES_CFB128_DECRYPT:
        memcpy(next, in + len - 16, 16);          /* before in place overwrites it */
        memcpy(tmp, job->iv, 16);
        memcpy(tmp + 16, in, len - 16);           /* the previous ciphertext blocks */
        if (job->op == GPUAES_CBC_DECRYPT) {
            unsigned char *p = malloc(len);
            ok = p != NULL && ecb(job->key, 0, p, in, len);
            if (ok)
                emu_xor(out, p, tmp, len);
            free(p);
        } else {
            ok = ecb(job->key, 1, tmp, tmp, len);
            if (ok)
                emu_xor(out, in, tmp, len);
        }
        memcpy(job->iv, next, 16);
        break;
    }
    if (ok && job->op == GPUAES_GCM_ENCRYPT)
        emu_ghash(x, T, out, len);
    OPENSSL_clear_free(tmp, len);
    return ok;
}

/* x = h^n (GCM's field; n public). */
static void emu_gf_pow(unsigned char x[16], const unsigned char h[16], uint64_t n)
{
    unsigned char b[16];

    memset(x, 0, 16);
    x[0] = 0x80;                              /* 1 in GCM's bit order */
    memcpy(b, h, 16);
    for (; n != 0; n >>= 1) {
        if (n & 1)
            emu_gf_mul(x, b);
        emu_gf_mul(b, b);
    }
}

/*
 * The caller's share (job.cpu_share), emulated: the "GPU" does a prefix
 * [0, p) in chunks while the callback gets the rest in pieces from the end,
 * alternating, as the real layer's caller takes them.  p and the pieces come
 * from a seeded generator (GPUAES_EMU_SEED, else 1; a new draw every time):
 * p at 0, at len, at a chunk boundary or anywhere; pieces of 16 bytes up to
 * all that is left.  The CBC/CFB chain block at p is kept before the prefix
 * can overwrite it in place, as the real layer does.
 */
static _Atomic uint64_t emu_draws;

/* The next number of seed's stream; the draw count is shared by the threads that run jobs. */
static uint64_t emu_rand(uint64_t seed)
{
    return rng_at(seed, atomic_fetch_add(&emu_draws, 1));
}

/* The GPU prefix's end; not 0 with a fault configured (tests expect it to strike). */
static size_t emu_split(size_t len, uint64_t r, int fault)
{
    size_t blocks = len / 16, chunks = (len + EMU_CHUNK - 1) / EMU_CHUNK, p;

    switch (r % 8) {
    case 0: p = 0; break;
    case 1: p = len; break;
    case 2: case 3: case 4:
        p = (size_t)((r >> 3) % (chunks + 1)) * EMU_CHUNK;
        p = p < len ? p : len;
        break;
    default: p = (size_t)((r >> 3) % (blocks + 1)) * 16; break;
    }
    if (fault && p == 0)
        p = len < EMU_CHUNK ? len : EMU_CHUNK;
    return p;
}

static size_t emu_piece(uint64_t r, size_t rest)
{
    size_t blocks = rest / 16, n;

    switch (r % 4) {
    case 0: n = 1; break;
    case 1: n = 1 + (size_t)((r >> 2) % 64); break;
    case 2: n = 1 + (size_t)((r >> 2) % 16384); break;
    default: n = 1 + (size_t)((r >> 2) % blocks); break;
    }
    return (n < blocks ? n : blocks) * 16;
}

/* job->iv_end: the state for in[len], from the job as given. */
static void emu_end_state(gpuaes_job *job)
{
    memcpy(job->iv_end, job->iv, 16);
    if (job->op == GPUAES_CBC_DECRYPT || job->op == GPUAES_CFB128_DECRYPT) {
        if (job->len >= 16)
            memcpy(job->iv_end, job->in + job->len - 16, 16);
    } else if (job->op != GPUAES_ECB_ENCRYPT && job->op != GPUAES_ECB_DECRYPT) {
        ctr_advance(job->iv_end, job->len / 16, job->op != GPUAES_CTR128);
    }
}

static void emu_run(gpuaes_job *job)
{
    int fault = atomic_load(&emu_fault);
    /* An allocation failure ends the real job before anything runs. */
    gpuaes_cpu_share_fn share = fault == GPUAES_FAULT_ALLOC ? NULL : job->cpu_share;
    int gcm = job->op == GPUAES_GCM_ENCRYPT || job->op == GPUAES_GCM_DECRYPT;
    int ctr = job->op == GPUAES_CTR128 || job->op == GPUAES_CTR32 || gcm;
    int chained = job->op == GPUAES_CBC_DECRYPT || job->op == GPUAES_CFB128_DECRYPT;
    unsigned char x[16] = { 0 }, xc[16];     /* GCM: GHASH (S) of the done prefix */
    unsigned char yt[16] = { 0 }, ht[16], hk[16], y[16], st[16], iv0[16], chain[16];
    size_t p, from, off = 0, nchunks, fail_at;
    uint64_t seed = 1;
    emu_htab *T = NULL;

    job->done = 0;
    job->cpu_from = job->len;
    job->status = GPUAES_OK;
    memset(job->ghash, 0, sizeof(job->ghash));
    memset(job->ghash_tail, 0, sizeof(job->ghash_tail));
    memcpy(job->iv_end, job->iv, 16);
    if (!gpuaes_gpu_supports(job->op) || (job->len % 16) != 0) {
        job->status = GPUAES_BUSY;
        return;
    }
    if (job->in == NULL && (!ctr || gcm || job->cpu_share != NULL)) {   /* only CTR makes keystream */
        job->status = GPUAES_FAILED;
        strcpy(job->error, "invalid job: no input");
        return;
    }
    {
        /* GPUAES_EMU_JOB_DELAY_MS: a slow (or shared, or busy) GPU */
        const char *d = getenv("GPUAES_EMU_JOB_DELAY_MS");
        long ms = d != NULL ? strtol(d, NULL, 10) : 0;

        if (ms > 0) {
            struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

            nanosleep(&t, NULL);
        }
        /* GPUAES_EMU_COLD_MS: the first job of each op in the process waits
         * this long (the real layer's one-time costs: a slot's pinned and
         * device memory, a kernel's module loaded at its first launch). */
        static atomic_int cold_done[GPUAES_GCM_DECRYPT + 1];
        d = getenv("GPUAES_EMU_COLD_MS");
        ms = d != NULL ? strtol(d, NULL, 10) : 0;
        if (ms > 0 && (unsigned)job->op <= GPUAES_GCM_DECRYPT && !atomic_exchange(&cold_done[job->op], 1)) {
            struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

            nanosleep(&t, NULL);
        }
        d = getenv("GPUAES_EMU_SEED");
        if (d != NULL)
            seed = strtoull(d, NULL, 0);
    }
    if (gcm) {
        if ((T = OPENSSL_malloc(sizeof(*T))) == NULL) {
            job->status = GPUAES_BUSY;
            return;
        }
        emu_htab_init(T, job->h);
        emu_gf_pow(ht, job->h, 0);
    }
    emu_end_state(job);
    memcpy(iv0, job->iv, 16);
    p = share != NULL ? emu_split(job->len, emu_rand(seed), fault != GPUAES_FAULT_NONE) : job->len;
    memcpy(chain, chained && p >= 16 ? job->in + p - 16 : job->iv, 16);   /* before the prefix overwrites it */
    nchunks = (p + EMU_CHUNK - 1) / EMU_CHUNK;
    /* A fault strikes the second chunk of a long prefix, else the first. */
    fail_at = fault == GPUAES_FAULT_NONE ? (size_t)-1
        : fault == GPUAES_FAULT_ALLOC || nchunks < 3 ? 0 : 1;
    from = job->len;
    while (off < p || (share != NULL && from > p)) {
        if (off < p) {
            size_t len = p - off < EMU_CHUNK ? p - off : EMU_CHUNK;

            memcpy(xc, x, 16);
            if (off / EMU_CHUNK == fail_at || !chunk(job, off, len, xc, T)) {
                job->status = GPUAES_FAILED;
                strcpy(job->error, off / EMU_CHUNK == fail_at ? "emulated fault injected by GPUAES_FAULT"
                                                              : "emulator");
                break;                        /* no more pieces either, as the real layer */
            }
            memcpy(x, xc, 16);                /* the chunk is done: its GHASH counts */
            job->done += len;
            off += len;
        }
        if (share != NULL && from > p) {
            size_t n = emu_piece(emu_rand(seed), from - p), a = from - n;

            memset(st, 0, 16);
            memset(y, 0, 16);
            if (ctr) {
                memcpy(st, iv0, 16);
                ctr_advance(st, a / 16, job->op != GPUAES_CTR128);
            } else if (chained) {
                memcpy(st, a == p ? chain : job->in + a - 16, 16);
            }
            if (!share(job->cpu_share_arg, job->in + a, job->out + a, n, st, y)) {
                share = NULL;
                job->status = GPUAES_FAILED;
                strcpy(job->error, "emulator: the CPU share failed");
                continue;
            }
            if (gcm) {                        /* Y_tail = Y_piece * H^|tail| ^ Y_tail */
                emu_gf_pow(hk, job->h, n / 16);
                emu_gf_mul(y, ht);
                for (int i = 0; i < 16; i++)
                    yt[i] ^= y[i];
                emu_gf_mul(ht, hk);
            }
            from = a;
        }
    }
    job->cpu_from = from;
    if (job->status == GPUAES_OK && job->done != from)
        job->status = GPUAES_FAILED;          /* cannot happen */
    if (gcm) {                                /* the Y form: S * H */
        emu_gf_mul(x, job->h);
        memcpy(job->ghash, x, 16);
        memcpy(job->ghash_tail, yt, 16);
    }
    OPENSSL_clear_free(T, T != NULL ? sizeof(*T) : 0);
    OPENSSL_cleanse(x, sizeof(x));
    OPENSSL_cleanse(xc, sizeof(xc));
    OPENSSL_cleanse(yt, sizeof(yt));
    OPENSSL_cleanse(ht, sizeof(ht));
    OPENSSL_cleanse(hk, sizeof(hk));
    OPENSSL_cleanse(y, sizeof(y));
    OPENSSL_cleanse(st, sizeof(st));
    OPENSSL_cleanse(iv0, sizeof(iv0));
    OPENSSL_cleanse(chain, sizeof(chain));
}

static const char *const emu_op_names[] = { "ecb-enc", "ecb-dec", "ctr128", "ctr32", "cbc-dec",
                                            "cfb-dec", "gcm-enc", "gcm-dec" };
static _Atomic unsigned long long emu_jobs[sizeof(emu_op_names) / sizeof(emu_op_names[0])];
static pthread_once_t emu_report_once = PTHREAD_ONCE_INIT;
static void emu_register_report(void);
/*
 * Registered ranges, as cuda/staging/host_register.cu keeps them: a job whose in and
 * out lie in one live range runs "direct" (job->direct: the service counts
 * them), and unregistration waits for those running.  Registration answers
 * 1 until the start-up is over, as the real one.  GPUAES_EMU_REGISTER_FAIL=1:
 * every registration fails (the service must serve through staging);
 * GPUAES_EMU_REGISTER_MS=N: each takes N ms (cudaHostRegister's ~14 ms per
 * 64 MiB, made long enough that a test sees jobs staged meanwhile).  A
 * range still registered at shutdown aborts the process: gpuaesd must
 * unregister each client's segment before it unmaps it.
 */
enum { EMU_RANGES = 256, EMU_RANGE_FREE = 0, EMU_RANGE_LIVE, EMU_RANGE_LEAVING };
static struct emu_range { uintptr_t base; size_t len; int state, users; } emu_ranges[EMU_RANGES];
static pthread_mutex_t emu_range_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t emu_range_cv = PTHREAD_COND_INITIALIZER;

static int emu_range_holds(const struct emu_range *r, const void *p, size_t len)
{
    uintptr_t a = (uintptr_t)p;

    return a >= r->base && len <= r->len && a - r->base <= r->len - len;
}

int gpuaes_gpu_host_register(void *base, size_t len, char error[160])
{
    const char *fail = getenv("GPUAES_EMU_REGISTER_FAIL");
    uintptr_t b = (uintptr_t)base;
    int slot = -1;

    error[0] = '\0';
    if (base == NULL || len == 0 || b + len < b) {
        snprintf(error, 160, "invalid range");
        return -1;
    }
    if (!gpuaes_gpu_available()) {
        if (!gpuaes_gpu_started())
            return 1;
        snprintf(error, 160, "%s", gpuaes_gpu_state());
        return -1;
    }
    if (fail != NULL && *fail != '\0' && *fail != '0') {
        snprintf(error, 160, "cudaHostRegister: emulated failure (GPUAES_EMU_REGISTER_FAIL)");
        return -1;
    }
    if (getenv("GPUAES_EMU_REGISTER_MS") != NULL) {
        long ms = strtol(getenv("GPUAES_EMU_REGISTER_MS"), NULL, 10);
        struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

        if (ms > 0)
            nanosleep(&t, NULL);
    }
    pthread_mutex_lock(&emu_range_lock);
    for (int i = 0; i < EMU_RANGES; i++) {
        struct emu_range *r = &emu_ranges[i];

        if (r->state == EMU_RANGE_FREE) {
            if (slot < 0)
                slot = i;
        } else if (b < r->base + r->len && r->base < b + len) {
            slot = -2;
            break;
        }
    }
    if (slot >= 0)
        emu_ranges[slot] = (struct emu_range){ b, len, EMU_RANGE_LIVE, 0 };
    pthread_mutex_unlock(&emu_range_lock);
    if (slot < 0)
        snprintf(error, 160, slot == -2 ? "overlaps a registered range" : "too many ranges");
    return slot >= 0 ? 0 : -1;
}

int gpuaes_gpu_host_unregister(void *base, char error[160])
{
    int slot = -1;

    error[0] = '\0';
    pthread_mutex_lock(&emu_range_lock);
    for (int i = 0; i < EMU_RANGES && slot < 0; i++)
        if (emu_ranges[i].state == EMU_RANGE_LIVE && emu_ranges[i].base == (uintptr_t)base)
            slot = i;
    if (slot >= 0) {
        emu_ranges[slot].state = EMU_RANGE_LEAVING;
        while (emu_ranges[slot].users > 0)
            pthread_cond_wait(&emu_range_cv, &emu_range_lock);
        emu_ranges[slot] = (struct emu_range){ 0, 0, EMU_RANGE_FREE, 0 };
    }
    pthread_mutex_unlock(&emu_range_lock);
    if (slot < 0)
        snprintf(error, 160, "not registered");
    return slot >= 0 ? 0 : -1;
}

/* The live range holding the job's in and out (a use of it), or -1. */
static int emu_direct_take(const gpuaes_job *job)
{
    int slot = -1;

    pthread_mutex_lock(&emu_range_lock);
    for (int i = 0; i < EMU_RANGES && slot < 0 && job->len != 0; i++)
        if (emu_ranges[i].state == EMU_RANGE_LIVE
            && emu_range_holds(&emu_ranges[i], job->in != NULL ? job->in : job->out, job->len)
            && emu_range_holds(&emu_ranges[i], job->out, job->len)) {
            emu_ranges[i].users++;
            slot = i;
        }
    pthread_mutex_unlock(&emu_range_lock);
    return slot;
}

static void emu_direct_put(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&emu_range_lock);
    if (--emu_ranges[slot].users == 0 && emu_ranges[slot].state == EMU_RANGE_LEAVING)
        pthread_cond_broadcast(&emu_range_cv);
    pthread_mutex_unlock(&emu_range_lock);
}

static void emu_ranges_check_none(void)
{
    int left = 0;

    pthread_mutex_lock(&emu_range_lock);
    for (int i = 0; i < EMU_RANGES; i++)
        left += emu_ranges[i].state != EMU_RANGE_FREE;
    pthread_mutex_unlock(&emu_range_lock);
    if (left != 0) {
        fprintf(stderr, "gpu_emulator: %d range(s) still registered at shutdown\n", left);
        abort();
    }
}

/* A job holds a slot's memory while it runs; beyond gpu_memory_max: BUSY. */
void gpuaes_gpu_run(gpuaes_job *job)
{
    size_t slot = atomic_load(&emu_slot_bytes);
    int held = gpuaes_gpu_supports(job->op), range;

    static atomic_ulong runs;
    const char *every = getenv("GPUAES_EMU_FAIL_EVERY");
    unsigned long n = every != NULL ? strtoul(every, NULL, 10) : 0, k;
    unsigned now, peak;

    pthread_once(&emu_report_once, emu_register_report);

    job->direct = 0;
    if (held && !emu_mem_reserve(slot)) {
        job->done = 0;
        job->cpu_from = job->len;
        memset(job->ghash, 0, sizeof(job->ghash));
        memset(job->ghash_tail, 0, sizeof(job->ghash_tail));
        job->status = GPUAES_BUSY;
        return;
    }
    range = emu_direct_take(job);
    now = atomic_fetch_add(&emu_running, 1) + 1;
    peak = atomic_load(&emu_peak);
    while (now > peak && !atomic_compare_exchange_weak(&emu_peak, &peak, now))
        ;
    k = atomic_fetch_add(&runs, 1) + 1;
    if (n > 0 && k % n == 0 && job->cpu_share == NULL && job->len >= 32) {
        /* a fault in the middle: the first half done, as the real layer's prefix */
        size_t len = job->len;
        unsigned char iv0[16], at_done[16];

        memcpy(iv0, job->iv, 16);
        job->len = len / 32 * 16;
        emu_run(job);
        job->len = len;
        memcpy(at_done, job->iv, 16);
        memcpy(job->iv, iv0, 16);
        emu_end_state(job);            /* the whole job's, from its iv */
        memcpy(job->iv, at_done, 16);
        job->cpu_from = len;
        if (job->status == GPUAES_OK) {
            job->status = GPUAES_FAILED;
            strcpy(job->error, "emulated fault injected by GPUAES_EMU_FAIL_EVERY");
        }
    } else {
        emu_run(job);
    }
    atomic_fetch_sub(&emu_running, 1);
    if (job->done > 0 && (size_t)job->op < sizeof(emu_jobs) / sizeof(emu_jobs[0]))
        atomic_fetch_add(&emu_jobs[job->op], 1);
    job->direct = range >= 0 && job->status != GPUAES_BUSY;
    emu_direct_put(range);
    if (held)
        emu_mem_release(slot);
}

/* ---- Keystream ahead (emulated) ----
 * Windows are plain heap buffers; a fill computes the keystream at once, but
 * the window reports ready only on the second poll, so the provider's
 * "keystream not ready yet: CPU path" branch runs in every test.  The
 * process-wide limit is honoured (tests set it small).  Any configured fault
 * (GPUAES_FAULT) makes every fill fail when polled.
 * The real layer's lifecycle contract is mirrored: freed windows are wiped
 * and pooled (a new window of the same size comes from the pool), and at
 * exit every window is wiped and its buffer freed, except while its owner
 * is inside a call on it or has it pinned (waited for, up to a bound); every
 * call after that fails cleanly.  gpuaes_gpu_release() frees the pool. */

struct gpuaes_ks_window {
    unsigned char *buf;               /* NULL once freed by the exit-time release */
    size_t cap;
    int polls;                        /* polls since the last fill */
    int pending;                      /* a fill is in flight */
    _Atomic int busy;                 /* the owner is in a call on it, or has it pinned */
    int pooled;
    struct gpuaes_ks_window *next;    /* every window made (emu_all) */
};

static _Atomic size_t emu_ks_limit = (size_t)256 << 20;
static _Atomic size_t emu_ks_used;
static _Atomic unsigned long long emu_ks_fills;
static _Atomic int emu_ks_closing;     /* the exit-time release ran: no call uses a window */
static pthread_mutex_t emu_ks_lock = PTHREAD_MUTEX_INITIALIZER; /* emu_all, pooled, counts */
static struct gpuaes_ks_window *emu_all;
static size_t emu_nwindows, emu_npooled;
static pthread_once_t emu_atexit_once = PTHREAD_ONCE_INIT;

/* The owner's use of w, as the real layer's: a seq_cst store, then the flag. */
static int emu_enter(gpuaes_ks_window *w)
{
    atomic_store(&w->busy, 1);
    if (!atomic_load(&emu_ks_closing))
        return 1;
    atomic_store(&w->busy, 0);
    return 0;
}

static void emu_leave(gpuaes_ks_window *w)
{
    atomic_store_explicit(&w->busy, 0, memory_order_release);
}

/* Exit: wipe and free every window's buffer; a busy one is waited for (up
 * to 1 s in all) and left alone if it stays busy. */
static void emu_ks_exit_release(void *unused)
{
    struct timespec ts = { 0, 100000 };
    int waits = 10000;

    (void)unused;
    atomic_store(&emu_ks_closing, 1);
    pthread_mutex_lock(&emu_ks_lock);
    for (gpuaes_ks_window *w = emu_all; w != NULL; w = w->next) {
        while (atomic_load(&w->busy) && waits-- > 0)
            nanosleep(&ts, NULL);
        if (atomic_load(&w->busy) || w->buf == NULL)
            continue;
        OPENSSL_clear_free(w->buf, w->cap);
        w->buf = NULL;
    }
    pthread_mutex_unlock(&emu_ks_lock);
}

static void emu_register_atexit(void)
{
    gpuaes_atexit(emu_ks_exit_release, NULL);
}

void gpuaes_ks_set_limit(size_t total_bytes)
{
    atomic_store(&emu_ks_limit, total_bytes);
}

gpuaes_ks_window *gpuaes_ks_window_new(size_t cap)
{
    gpuaes_ks_window *w;

    if (cap == 0 || cap % 16 != 0 || !gpuaes_gpu_available() || atomic_load(&emu_ks_closing))
        return NULL;
    pthread_once(&emu_atexit_once, emu_register_atexit);
    pthread_once(&emu_report_once, emu_register_report);
    pthread_mutex_lock(&emu_ks_lock);
    for (w = emu_all; w != NULL; w = w->next)
        if (w->pooled && w->cap == cap && w->buf != NULL) {
            w->pooled = 0;
            emu_npooled--;
            pthread_mutex_unlock(&emu_ks_lock);
            return w;
        }
    pthread_mutex_unlock(&emu_ks_lock);
    if (atomic_fetch_add(&emu_ks_used, cap) + cap > atomic_load(&emu_ks_limit)) {
        atomic_fetch_sub(&emu_ks_used, cap);
        return NULL;
    }
    if (!emu_mem_reserve(2 * cap)) {              /* pinned + device */
        atomic_fetch_sub(&emu_ks_used, cap);
        return NULL;
    }
    w = OPENSSL_zalloc(sizeof(*w));
    if (w != NULL)
        w->buf = OPENSSL_zalloc(cap);
    if (w == NULL || w->buf == NULL) {
        OPENSSL_free(w);
        atomic_fetch_sub(&emu_ks_used, cap);
        emu_mem_release(2 * cap);
        return NULL;
    }
    w->cap = cap;
    pthread_mutex_lock(&emu_ks_lock);
    w->next = emu_all;
    emu_all = w;
    emu_nwindows++;
    pthread_mutex_unlock(&emu_ks_lock);
    return w;
}

gpuaes_status gpuaes_ks_fill(gpuaes_ks_window *w, const gpuaes_key *key,
                             const unsigned char ctr[16], size_t nbytes, int ctr32,
                             char error[160])
{
    unsigned char c[16];

    if (w == NULL || key == NULL || nbytes == 0 || nbytes % 16 != 0 || nbytes > w->cap
        || (w->pending && w->polls < 2)) {    /* the previous fill is still "in flight" */
        if (error != NULL)
            strcpy(error, "emulator: invalid fill");
        return GPUAES_FAILED;
    }
    if (!emu_enter(w))
        return GPUAES_BUSY;
    memcpy(c, ctr, 16);
    for (size_t i = 0; i < nbytes; i += 16) {
        memcpy(w->buf + i, c, 16);
        ctr_advance(c, 1, ctr32);
    }
    if (!ecb(key, 1, w->buf, w->buf, nbytes)) {
        emu_leave(w);
        if (error != NULL)
            strcpy(error, "emulator: AES failed");
        return GPUAES_FAILED;
    }
    w->pending = 1;
    w->polls = 0;
    atomic_fetch_add(&emu_ks_fills, 1);
    emu_leave(w);
    return GPUAES_OK;
}

/* ready(); 1 leaves the window entered (pinned). */
static int emu_ready(gpuaes_ks_window *w, char error[160])
{

    if (w == NULL || !emu_enter(w))
        return -1;
    if (!w->pending) {
        emu_leave(w);
        return -1;
    }
    if (++w->polls < 2) {
        emu_leave(w);
        return 0;
    }
    if (atomic_load(&emu_fault) != GPUAES_FAULT_NONE) {
        emu_leave(w);
        if (error != NULL)
            strcpy(error, "emulated fault injected by GPUAES_FAULT");
        return -1;
    }
    return 1;
}

int gpuaes_ks_ready(gpuaes_ks_window *w, char error[160])
{
    int r = emu_ready(w, error);

    if (r > 0)
        emu_leave(w);
    return r;
}

int gpuaes_ks_pin(gpuaes_ks_window *w, const unsigned char **data, char error[160])
{
    int r = emu_ready(w, error);

    *data = r > 0 ? w->buf : NULL;
    return r;
}

void gpuaes_ks_unpin(gpuaes_ks_window *w)
{
    emu_leave(w);
}

void gpuaes_ks_window_free(gpuaes_ks_window *w)
{
    if (w == NULL || !emu_enter(w))
        return;                       /* exit: the release wiped and freed it */
    OPENSSL_cleanse(w->buf, w->cap);
    w->pending = 0;
    w->polls = 0;
    emu_leave(w);
    pthread_mutex_lock(&emu_ks_lock);
    w->pooled = 1;
    emu_npooled++;
    pthread_mutex_unlock(&emu_ks_lock);
}

void gpuaes_ks_windows(size_t *windows, size_t *pooled)
{
    pthread_mutex_lock(&emu_ks_lock);
    if (windows != NULL)
        *windows = emu_nwindows;
    if (pooled != NULL)
        *pooled = emu_npooled;
    pthread_mutex_unlock(&emu_ks_lock);
}

/* Unload: the pool is freed (no window may be in use: the contract). */
void gpuaes_gpu_release(void)
{
    gpuaes_ks_window **pp = &emu_all;

    pthread_mutex_lock(&emu_ks_lock);
    while (*pp != NULL) {
        gpuaes_ks_window *w = *pp;

        if (!w->pooled) {
            pp = &w->next;
            continue;
        }
        *pp = w->next;
        emu_nwindows--;
        emu_npooled--;
        atomic_fetch_sub(&emu_ks_used, w->cap);
        emu_mem_release(2 * w->cap);
        OPENSSL_clear_free(w->buf, w->cap);
        OPENSSL_free(w);
    }
    pthread_mutex_unlock(&emu_ks_lock);
}

void gpuaes_ks_stats(unsigned long long *launches, unsigned long long *jobs)
{
    if (launches != NULL)
        *launches = atomic_load(&emu_ks_fills);
    if (jobs != NULL)
        *jobs = atomic_load(&emu_ks_fills);
}

/*
 * GPUAES_EMU_REPORT=path: at exit, the jobs of each op that the "GPU" did a
 * part of, and the keystream fills, one "name count" line each, for a
 * program that cannot ask the provider (another libcrypto's,
 * test/py/test_wheel.py): its calls met the GPU path, not only the fallback.
 */
static void emu_report_at_exit(void *unused)
{
    const char *path = getenv("GPUAES_EMU_REPORT");
    FILE *f = path != NULL ? fopen(path, "w") : NULL;

    (void)unused;
    if (f == NULL)
        return;
    for (size_t i = 0; i < sizeof(emu_op_names) / sizeof(emu_op_names[0]); i++)
        fprintf(f, "%s %llu\n", emu_op_names[i], atomic_load(&emu_jobs[i]));
    fprintf(f, "keystream-fills %llu\n", atomic_load(&emu_ks_fills));
    fclose(f);
}

static void emu_register_report(void)
{
    if (getenv("GPUAES_EMU_REPORT") != NULL)
        gpuaes_atexit(emu_report_at_exit, NULL);
}
