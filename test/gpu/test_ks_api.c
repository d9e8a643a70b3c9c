/*
 * test_ks_api.c - the keystream-window API of the GPU layer (include/gpuaes_gpu.h,
 * "Keystream ahead") on its own, against AES-ECB of the counter blocks:
 *  - 128-bit counters at 2^128 - k (carry through all 16 bytes, wrap to 0);
 *  - GCM inc32 counters at 2^32 - k (the low 32 bits wrap, the rest stays);
 *  - every key size, lengths of 1 block to 1 MiB;
 *  - 24 windows filled at once from 4 threads (coalesced launches on a GPU);
 *  - a window reused after it was ready, and freed while in flight;
 *  - the in-flight budget: refused fills reserve nothing;
 *  - gpuaes_gpu_release() (unload) frees the pool and leaves the layer
 *    usable; pooled windows idle for long are freed (real layer only).
 * Built twice: against the real GPU layer (label gpu, exit 77 without a GPU)
 * and against test/gpu/gpu_emulator.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/evp.h>

#include "check.h"
#include "gpuaes_gpu.h"
#include "rng.h"

/* The threads' seeds; each thread draws its jobs from its own. */
static rng_state seeds = { 0x6b735f617069ULL };

static void inc(unsigned char c[16], int ctr32)
{
    for (int i = 15; i >= (ctr32 ? 12 : 0); i--)
        if (++c[i] != 0)
            break;
}

/* The expected keystream: AES-ECB of ctr, ctr+1, ... */
static int expect(const unsigned char *key, size_t keylen, const unsigned char ctr[16], int ctr32,
                  unsigned char *out, size_t n)
{
    static const char *names[] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB" };
    EVP_CIPHER *ci = EVP_CIPHER_fetch(NULL, names[(keylen - 16) / 8], NULL);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned char c[16];
    int ok, outl = 0;

    memcpy(c, ctr, 16);
    for (size_t i = 0; i < n; i += 16) {
        memcpy(out + i, c, 16);
        inc(c, ctr32);
    }
    ok = ci != NULL && x != NULL && EVP_EncryptInit_ex2(x, ci, key, NULL, NULL)
        && EVP_CIPHER_CTX_set_padding(x, 0) && EVP_EncryptUpdate(x, out, &outl, out, (int)n);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(ci);
    return ok && outl == (int)n;
}

/* Polls until ready (or 10 s); 1 ready, -1 failed, 0 timed out. */
static int wait_ready(gpuaes_ks_window *w, char err[160])
{
    struct timespec ts = { 0, 20000 };

    for (int i = 0; i < 500000; i++) {
        int r = gpuaes_ks_ready(w, err);

        if (r != 0)
            return r;
        nanosleep(&ts, NULL);
    }
    return 0;
}

typedef struct {
    unsigned char key[32];
    size_t keylen;
    unsigned char ctr[16];
    int ctr32;
    size_t n;
    gpuaes_key *gk;
    gpuaes_ks_window *w;
} job;

static void make_job(job *j, rng_state *s, size_t cap)
{
    j->keylen = 16 + 8 * (size_t)(rng_next(s) % 3);
    for (int i = 0; i < 32; i++)
        j->key[i] = (unsigned char)rng_next(s);
    for (int i = 0; i < 16; i++)
        j->ctr[i] = (unsigned char)rng_next(s);
    j->ctr32 = (int)(rng_next(s) & 1);
    /* near the top: 2^128 - k, or low 32 bits at 2^32 - k */
    {
        uint32_t k = (uint32_t)(rng_next(s) % 5000);
        int from = j->ctr32 ? 12 : (int)(rng_next(s) % 2 ? 0 : 8);
        uint64_t v = ~(uint64_t)0 - k;

        memset(j->ctr + from, 0xff, (size_t)(16 - from));
        for (int i = 15; i >= 12; i--, v >>= 8)
            j->ctr[i] = (unsigned char)v;
    }
    j->n = 16 * (1 + (size_t)(rng_next(s) % (cap / 16)));
    j->gk = gpuaes_key_new(j->key, j->keylen);
}

static void check_job(job *j, const char *what)
{
    unsigned char *want = malloc(j->n);
    const unsigned char *ks = NULL;
    char err[160] = "";
    int r = wait_ready(j->w, err);

    CHECKF(r == 1, "%s: window not ready (%d: %s)", what, r, err);
    CHECKF(want != NULL && expect(j->key, j->keylen, j->ctr, j->ctr32, want, j->n), "%s: reference", what);
    if (r == 1 && want != NULL) {
        CHECKF(gpuaes_ks_pin(j->w, &ks, err) == 1 && ks != NULL, "%s: pin of a ready window: %s", what, err);
        if (ks != NULL) {
            CHECKF(memcmp(ks, want, j->n) == 0, "%s: keystream differs (key %zu, ctr32 %d, %zu bytes)", what,
                   j->keylen * 8, j->ctr32, j->n);
            gpuaes_ks_unpin(j->w);
        }
    }
    free(want);
}

#define CAP ((size_t)1 << 20)
#define PER_THREAD 6

static void *thread_main(void *arg)
{
    rng_state s = rng_seeded((uint64_t)(uintptr_t)arg);
    job j[PER_THREAD];
    char err[160];

    for (int round = 0; round < 4; round++) {
        int n = 0;

        for (int i = 0; i < PER_THREAD; i++) {
            make_job(&j[i], &s, CAP);
            j[i].w = gpuaes_ks_window_new(CAP);
            CHECKF(j[i].w != NULL && j[i].gk != NULL, "window/key");
            if (j[i].w == NULL || j[i].gk == NULL)
                break;
            CHECKF(gpuaes_ks_fill(j[i].w, j[i].gk, j[i].ctr, j[i].n, j[i].ctr32, err) == GPUAES_OK,
                   "fill: %s", err);
            n++;
        }
        for (int i = 0; i < n; i++) {
            check_job(&j[i], "batch");
            /* refill the same window after it was ready */
            gpuaes_key_free(j[i].gk);
            make_job(&j[i], &s, CAP);
            if (j[i].gk != NULL
                && gpuaes_ks_fill(j[i].w, j[i].gk, j[i].ctr, j[i].n, j[i].ctr32, err) == GPUAES_OK)
                check_job(&j[i], "refill");
        }
        /* freed while in flight: must not crash or leak keystream into the pool unwiped */
        for (int i = 0; i < n; i++) {
            gpuaes_key *k = j[i].gk;

            make_job(&j[i], &s, CAP);
            (void)gpuaes_ks_fill(j[i].w, j[i].gk, j[i].ctr, j[i].n, j[i].ctr32, err);
            gpuaes_ks_window_free(j[i].w);
            gpuaes_key_free(j[i].gk);
            gpuaes_key_free(k);
        }
    }
    return NULL;
}

/*
 * The in-flight budget: fills beyond it are refused (GPUAES_BUSY), a refused
 * fill reserves nothing, and once the windows are ready the whole budget is
 * back.  (A refused fill once gave back budget it had never taken; the count
 * wrapped below zero and every later fill in the process was refused.)
 */
#define BUDGET_WINDOWS 16             /* 64 MiB: more than the layer keeps in flight */
#define BUDGET_WINDOW ((size_t)4 << 20)

static void inflight_budget(void)
{
    static const unsigned char key[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };
    unsigned char ctr[16] = { 0 };
    gpuaes_ks_window *w[BUDGET_WINDOWS] = { NULL };
    int ok[BUDGET_WINDOWS] = { 0 }, refused = -1, nrefused = 0;
    gpuaes_key *gk = gpuaes_key_new(key, sizeof(key));
    char err[160] = "";

    CHECKF(gk != NULL, "key");
    for (int i = 0; gk != NULL && i < BUDGET_WINDOWS; i++) {
        gpuaes_status st;

        w[i] = gpuaes_ks_window_new(BUDGET_WINDOW);
        CHECKF(w[i] != NULL, "budget window %d", i);
        if (w[i] == NULL)
            break;
        st = gpuaes_ks_fill(w[i], gk, ctr, BUDGET_WINDOW, 0, err); /* nobody polls: all stay counted */
        CHECKF(st != GPUAES_FAILED, "budget fill %d: %s", i, err);
        ok[i] = st == GPUAES_OK;
        if (st == GPUAES_BUSY) {
            refused = i;
            nrefused++;
        }
    }
    /* Refused again and again while full: none of it may change the count. */
    for (int r = 0; refused >= 0 && r < 4; r++)
        CHECKF(gpuaes_ks_fill(w[refused], gk, ctr, BUDGET_WINDOW, 0, err) == GPUAES_BUSY,
               "a fill over the budget was accepted");
    for (int i = 0; i < BUDGET_WINDOWS; i++)
        if (ok[i])
            CHECKF(wait_ready(w[i], err) == 1, "budget window %d not ready: %s", i, err);
    /* All ready: the budget is whole again, so a quarter of it must be accepted. */
    for (int i = 0; gk != NULL && i < BUDGET_WINDOWS / 4; i++) {
        CHECKF(w[i] != NULL && gpuaes_ks_fill(w[i], gk, ctr, BUDGET_WINDOW, 0, err) == GPUAES_OK,
               "fill %d refused after every window was ready: in-flight budget lost", i);
        if (w[i] != NULL)
            (void)wait_ready(w[i], err);
    }
    for (int i = 0; i < BUDGET_WINDOWS; i++)
        gpuaes_ks_window_free(w[i]);
    gpuaes_key_free(gk);
    printf("in-flight budget: %d of %d fills refused while full\n", nrefused, BUDGET_WINDOWS);
}

/* One window through fill, check and free: the layer works. */
static void one_window(const char *what)
{
    job j;
    rng_state s = rng_seeded(99);

    make_job(&j, &s, CAP);
    j.w = gpuaes_ks_window_new(CAP);
    CHECKF(j.w != NULL && j.gk != NULL, "%s: window/key", what);
    if (j.w != NULL && j.gk != NULL) {
        char err[160] = "";

        CHECKF(gpuaes_ks_fill(j.w, j.gk, j.ctr, j.n, j.ctr32, err) == GPUAES_OK, "%s: fill: %s", what, err);
        check_job(&j, what);
    }
    gpuaes_ks_window_free(j.w);
    gpuaes_key_free(j.gk);
}

/* Unload: the pool is freed and the layer is usable again; idle windows go. */
static void lifecycle(int real)
{
    size_t windows = 0, pooled = 0;

    gpuaes_gpu_release();
    gpuaes_ks_windows(&windows, &pooled);
    CHECKF(windows == 0 && pooled == 0, "after release: %zu windows (%zu pooled)", windows, pooled);
    one_window("after release");
    gpuaes_ks_windows(&windows, &pooled);
    CHECKF(windows == 1 && pooled == 1, "one window freed: %zu windows (%zu pooled)", windows, pooled);
    if (!real)
        return;                       /* the emulator has no idle release thread */
    {
        struct timespec ts = { 3, 500000000 }; /* > 1.5 x the idle bound (2 s) */

        nanosleep(&ts, NULL);
    }
    gpuaes_ks_windows(&windows, &pooled);
    CHECKF(windows == 0, "a window idle for 3.5 s is still there (%zu windows)", windows);
    one_window("after the idle release");
}

int main(int argc, char **argv)
{
    pthread_t th[4];
    unsigned long long launches = 0, jobs = 0;

    (void)argc;
    (void)argv;
    if (!gpuaes_gpu_wait()) {
        printf("SKIP: no usable GPU (%s)\n", gpuaes_gpu_description());
        return 77;
    }
    gpuaes_ks_set_limit((size_t)64 << 20);
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, thread_main, (void *)(uintptr_t)rng_next(&seeds));
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    gpuaes_ks_set_limit((size_t)128 << 20);
    inflight_budget();
    /* Over the limit: no window, not an error. */
    gpuaes_ks_set_limit(0);
    {
        gpuaes_ks_window *w = gpuaes_ks_window_new((size_t)128 << 20);

        CHECKF(w == NULL, "a window beyond the limit");
        gpuaes_ks_window_free(w);
    }
    gpuaes_ks_set_limit((size_t)64 << 20);
    lifecycle(strncmp(gpuaes_gpu_description(), "CPU emulation", 13) != 0);
    gpuaes_ks_stats(&launches, &jobs);
    printf("ks_api: %llu fills in %llu launches; %s\n", jobs, launches, test_failures ? "FAILED" : "ok");
    gpuaes_gpu_release();
    return test_failures ? 1 : 0;
}
