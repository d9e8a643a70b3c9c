/*
 * test_keystream.c - keystream ahead (CTR), gpuaes against the default
 * provider, byte for byte.  Run with small knobs (ramp 4 KiB, windows of
 * 64 KiB, 1 MiB of keystream memory) so that windows turn over constantly:
 *  - random update splits (1 B .. 200 KiB) that cross window boundaries;
 *  - counters at 2^128 - k (the carry out of the top byte wraps);
 *  - counters whose low 32 bits are at 2^32 - k (CTR carries into bit 32);
 *  - re-init mid-window: no key and no IV (CTR goes on from its counter),
 *    a new IV, a new key;
 *  - dupctx mid-window: original and copy go on with different data;
 *  - num and the updated IV read back mid-stream;
 *  - many threads at once (more windows wanted than memory allows).
 * --gpu: a GPU is required (exit 77 without) and keystream must have been used.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>

#include "rng.h"
#include "testutil.h"

static test_env env;
static const char *const names[] = { "AES-128-CTR", "AES-192-CTR", "AES-256-CTR" };
static EVP_CIPHER *sub[3], *ref[3];

/* An update length: mostly small, sometimes across a window or two. */
static size_t rlen(rng_state *r)
{
    switch (rng_below(r, 8)) {
    case 0: return 1 + rng_below(r, 15);
    case 1: return 16 * (1 + rng_below(r, 4));
    case 2: return 1 + rng_below(r, 200 << 10);
    case 3: return 64 << 10;
    default: return 1 + rng_below(r, 16 << 10);
    }
}

typedef struct {
    EVP_CIPHER_CTX *a, *b;            /* gpuaes, default */
    unsigned char *in, *oa, *ob;
    size_t cap;
    const char *what;
    int ki;
} pair;

static int pair_init(pair *p, int ki, const unsigned char *key, const unsigned char *iv, int enc,
                     const char *what)
{
    p->ki = ki;
    p->what = what;
    p->a = EVP_CIPHER_CTX_new();
    p->b = EVP_CIPHER_CTX_new();
    p->cap = 256 << 10;
    p->in = malloc(p->cap);
    p->oa = malloc(p->cap);
    p->ob = malloc(p->cap);
    return p->a && p->b && p->in && p->oa && p->ob
        && EVP_CipherInit_ex2(p->a, sub[ki], key, iv, enc, NULL)
        && EVP_CipherInit_ex2(p->b, ref[ki], key, iv, enc, NULL);
}

static void pair_free(pair *p)
{
    EVP_CIPHER_CTX_free(p->a);
    EVP_CIPHER_CTX_free(p->b);
    free(p->in);
    free(p->oa);
    free(p->ob);
}

/* One update of n random bytes on both; outputs must agree.  Sometimes in place. */
static int pair_step(pair *p, rng_state *r, size_t n)
{
    int la = 0, lb = 0, ok;

    if (n > p->cap)
        n = p->cap;
    rng_bytes(r, p->in, n);
    if (rng_below(r, 4) == 0) {
        memcpy(p->oa, p->in, n);
        ok = EVP_CipherUpdate(p->a, p->oa, &la, p->oa, (int)n);
    } else {
        ok = EVP_CipherUpdate(p->a, p->oa, &la, p->in, (int)n);
    }
    ok = ok && EVP_CipherUpdate(p->b, p->ob, &lb, p->in, (int)n);
    CHECKF(ok && la == (int)n && lb == (int)n, "%s %s: update of %zu failed", names[p->ki], p->what, n);
    if (!ok)
        return 0;
    CHECKF(memcmp(p->oa, p->ob, n) == 0, "%s %s: output differs in an update of %zu bytes",
           names[p->ki], p->what, n);
    return memcmp(p->oa, p->ob, n) == 0;
}

/* num and updated IV as a caller reads them. */
static void pair_state(pair *p)
{
    unsigned char ia[16], ib[16];

    CHECKF(EVP_CIPHER_CTX_get_num(p->a) == EVP_CIPHER_CTX_get_num(p->b), "%s %s: num %d vs %d",
           names[p->ki], p->what, EVP_CIPHER_CTX_get_num(p->a), EVP_CIPHER_CTX_get_num(p->b));
    CHECKF(EVP_CIPHER_CTX_get_updated_iv(p->a, ia, 16) && EVP_CIPHER_CTX_get_updated_iv(p->b, ib, 16)
           && memcmp(ia, ib, 16) == 0, "%s %s: updated IV differs", names[p->ki], p->what);
}

/* A stream of about `total` bytes with random splits and, when `events`,
 * state reads, re-inits and dups along the way. */
static void stream(rng_state *r, int ki, const unsigned char *iv, size_t total, int events, const char *what)
{
    unsigned char key[32], iv2[16];
    int enc = (int)rng_below(r, 2);
    pair p;
    size_t done = 0;

    rng_bytes(r, key, sizeof(key));
    if (!pair_init(&p, ki, key, iv, enc, what)) {
        CHECKF(0, "%s %s: init", names[ki], what);
        pair_free(&p);
        return;
    }
    while (done < total && test_failures == 0) {
        size_t n = rlen(r);

        if (!pair_step(&p, r, n))
            break;
        done += n;
        if (!events)
            continue;
        switch (rng_below(r, 40)) {
        case 0:
            pair_state(&p);
            break;
        case 1:                       /* re-init, no key, no IV: CTR goes on from its counter */
            CHECKF(EVP_CipherInit_ex2(p.a, NULL, NULL, NULL, enc, NULL)
                   && EVP_CipherInit_ex2(p.b, NULL, NULL, NULL, enc, NULL), "reinit");
            break;
        case 2:                       /* new IV, sometimes near the top */
            rng_bytes(r, iv2, 16);
            if (rng_below(r, 2))
                memset(iv2, 0xff, 14);
            CHECKF(EVP_CipherInit_ex2(p.a, NULL, NULL, iv2, enc, NULL)
                   && EVP_CipherInit_ex2(p.b, NULL, NULL, iv2, enc, NULL), "reinit iv");
            break;
        case 3:                       /* new key */
            rng_bytes(r, key, 32);
            CHECKF(EVP_CipherInit_ex2(p.a, NULL, key, NULL, enc, NULL)
                   && EVP_CipherInit_ex2(p.b, NULL, key, NULL, enc, NULL), "reinit key");
            break;
        case 4: case 5: {             /* dup: the copies go on with their own data */
            pair q = p;
            rng_state r2 = rng_seeded(rng_next(r));

            q.a = EVP_CIPHER_CTX_new();
            q.b = EVP_CIPHER_CTX_new();
            q.in = malloc(q.cap);
            q.oa = malloc(q.cap);
            q.ob = malloc(q.cap);
            q.what = "dup copy";
            CHECKF(q.a && q.b && q.in && q.oa && q.ob && EVP_CIPHER_CTX_copy(q.a, p.a)
                   && EVP_CIPHER_CTX_copy(q.b, p.b), "dup");
            for (int i = 0; i < 6 && test_failures == 0; i++) {
                pair_step(&q, &r2, rlen(&r2));
                pair_step(&p, r, rlen(r));
            }
            pair_state(&q);
            pair_free(&q);
            break;
        }
        default:
            break;
        }
    }
    pair_state(&p);
    pair_free(&p);
}

/* Counter block with its top 16 - `bytes` bytes random and the last `bytes` = 2^(8 bytes) - k. */
static void iv_near_top(rng_state *r, unsigned char iv[16], int bytes, uint64_t k)
{
    rng_bytes(r, iv, 16);
    memset(iv + 16 - bytes, 0xff, (size_t)bytes);
    /* subtract k - 1 from the last 8 bytes (k <= 2^32) */
    uint64_t lo = 0;
    for (int i = 8; i < 16; i++)
        lo = lo << 8 | iv[i];
    lo -= k - 1;
    for (int i = 15; i >= 8; i--, lo >>= 8)
        iv[i] = (unsigned char)lo;
}

typedef struct { uint64_t seed; int idx; } targ;

static void *thread_main(void *v)
{
    targ *t = v;
    rng_state r = rng_seeded(t->seed);
    unsigned char iv[16];

    for (int i = 0; i < 3 && test_failures == 0; i++) {
        rng_bytes(&r, iv, 16);
        stream(&r, (t->idx + i) % 3, iv, (3 << 20) + rng_below(&r, 1 << 20), 1, "thread");
    }
    return NULL;
}

static uint64_t u64_param(const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    OSSL_PROVIDER_get_params(env.gpuaes, p);
    return v;
}

int main(int argc, char **argv)
{
    int gpu = 0, nthreads = 8;
    rng_state r = rng_seeded(0x6b657973747265ULL);
    unsigned char iv[16];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0)
            gpu = 1;
        else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc)
            nthreads = atoi(argv[++i]);
    }
    if (getenv("GPUAES_TEST_SEED") != NULL)
        r = rng_seeded(strtoull(getenv("GPUAES_TEST_SEED"), NULL, 0));
    if (!test_env_open(&env))
        return 1;
    if (gpu)
        test_require_gpu(&env);
    for (int k = 0; k < 3; k++) {
        sub[k] = test_fetch(&env, names[k], "gpuaes");
        ref[k] = test_fetch(&env, names[k], "default");
        if (sub[k] == NULL || ref[k] == NULL) {
            fprintf(stderr, "fetch %s failed\n", names[k]);
            return 1;
        }
    }

    /* Random splits across window boundaries, each key size. */
    for (int k = 0; k < 3; k++) {
        rng_bytes(&r, iv, 16);
        stream(&r, k, iv, 6 << 20, 0, "splits");
    }
    /* 128-bit counter at 2^128 - k: wraps to zero inside a window. */
    for (int i = 0; i < 6; i++) {
        memset(iv, 0xff, 16);
        iv[15] -= (unsigned char)rng_below(&r, 200);
        iv[14] -= (unsigned char)rng_below(&r, 40);
        stream(&r, i % 3, iv, 3 << 20, 0, "counter at 2^128 - k");
    }
    /* Low 32 bits at 2^32 - k: the carry must reach bit 32 (not GCM's inc32). */
    for (int i = 0; i < 3; i++) {
        iv_near_top(&r, iv, 4, 1 + rng_below(&r, 20000));
        stream(&r, i, iv, 2 << 20, 0, "counter at 2^32 - k");
        iv_near_top(&r, iv, 8, 1 + rng_below(&r, 20000));
        stream(&r, i, iv, 2 << 20, 0, "counter at 2^64 - k");
    }
    /* Re-init, dup, state reads in the middle of windows. */
    for (int i = 0; i < 6; i++) {
        rng_bytes(&r, iv, 16);
        stream(&r, i % 3, iv, 8 << 20, 1, "events");
    }
    /* fork() in keystream mode: the child goes on (on a GPU, without it), right. */
    {
        unsigned char key[32];
        pair p;
        pid_t pid;
        int status = 0;

        rng_bytes(&r, key, 32);
        rng_bytes(&r, iv, 16);
        if (pair_init(&p, 0, key, iv, 1, "fork")) {
            for (int i = 0; i < 64; i++)
                pair_step(&p, &r, 16384 + 3);
            fflush(NULL);
            pid = fork();
            if (pid == 0) {
                int bad = 0;

                for (int i = 0; i < 64 && !bad; i++)
                    bad = !pair_step(&p, &r, 16384 + 5);
                _exit(bad || test_failures ? 1 : 0);
            }
            CHECKF(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status)
                   && WEXITSTATUS(status) == 0, "fork: the child's stream differs");
            for (int i = 0; i < 16; i++)
                pair_step(&p, &r, 16384 + 7);
        }
        pair_free(&p);
    }
    /* Many threads at once. */
    if (nthreads > 0) {
        pthread_t th[64];
        targ ta[64];

        if (nthreads > 64)
            nthreads = 64;
        for (int i = 0; i < nthreads; i++) {
            ta[i].seed = rng_next(&r);
            ta[i].idx = i;
            if (pthread_create(&th[i], NULL, thread_main, &ta[i]) != 0) {
                CHECKF(0, "pthread_create");
                nthreads = i;
                break;
            }
        }
        for (int i = 0; i < nthreads; i++)
            pthread_join(th[i], NULL);
    }

    {
        uint64_t made = u64_param("keystream-made"), used = u64_param("keystream-used");
        uint64_t launches = u64_param("keystream-launches"), jobs = u64_param("keystream-jobs");

        printf("keystream made %llu, used %llu (waste %.1f%%), %llu launches for %llu fills\n",
               (unsigned long long)made, (unsigned long long)used,
               made ? 100.0 * (double)(made - used) / (double)made : 0.0,
               (unsigned long long)launches, (unsigned long long)jobs);
        if (gpu)
            CHECKF(used > 0 && used <= made, "keystream was not used (made %llu, used %llu)",
                   (unsigned long long)made, (unsigned long long)used);
    }
    for (int k = 0; k < 3; k++) {
        EVP_CIPHER_free(sub[k]);
        EVP_CIPHER_free(ref[k]);
    }
    test_env_close(&env);
    return test_report("keystream");
}
