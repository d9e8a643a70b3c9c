/*
 * test_ks_life.c - the lifecycle of keystream streams and windows (issue 12):
 *  jump   a stream in keystream mode that then makes only large updates (the
 *         whole-job path): the keystream it made and never used stays within
 *         one window set, its windows are retired, and it gives its keystream
 *         claim back (with keystream_max_contexts = 1 a second stream then
 *         gets keystream);
 *  mixed  large updates, each followed by a few small ones: the keystream made
 *         and never used stays within one window set (3) per large update;
 *  final  a stream that called final (not freed) gives its claim back: a
 *         second stream gets keystream (keystream_max_contexts = 1);
 *  pool   8 threads entering and leaving keystream mode over and over, with
 *         keystream_max_contexts = 2: never more than 3 x 2 windows exist.
 * Every output is compared with the default provider's.  Run with a small
 * ramp and windows (keystream.cmake).  --gpu: a GPU is required.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

#include "size.h"
#include "testutil.h"

static test_env env;
static EVP_CIPHER *sub, *ref;

static uint64_t param(const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    CHECKF(OSSL_PROVIDER_get_params(env.gpuaes, p) && OSSL_PARAM_modified(&p[0]), "parameter %s", key);
    return v;
}

/* A size knob as the test's environment sets it ("64K"); 0 when unset or malformed. */
static size_t knob(const char *name)
{
    const char *v = getenv(name);
    size_t n = 0;

    return v != NULL && size_parse(v, &n) ? n : 0;
}

/* A gpuaes stream and the default provider's, side by side. */
typedef struct {
    EVP_CIPHER_CTX *a, *b;
    unsigned char *in, *oa, *ob;
    size_t cap;
    uint64_t s;
} pair;

static void pair_init(pair *p, uint64_t seed, size_t cap)
{
    unsigned char key[16], iv[16];

    p->s = seed;
    p->cap = cap;
    for (int i = 0; i < 16; i++) {
        key[i] = (unsigned char)(seed >> (i % 8 * 8)) ^ (unsigned char)i;
        iv[i] = (unsigned char)(seed * 31 >> (i % 8 * 8));
    }
    p->a = EVP_CIPHER_CTX_new();
    p->b = EVP_CIPHER_CTX_new();
    p->in = malloc(cap);
    p->oa = malloc(cap);
    p->ob = malloc(cap);
    CHECKF(p->a && p->b && p->in && p->oa && p->ob && EVP_EncryptInit_ex2(p->a, sub, key, iv, NULL)
           && EVP_EncryptInit_ex2(p->b, ref, key, iv, NULL), "init");
    for (size_t i = 0; i < cap; i++)
        p->in[i] = (unsigned char)(i * 7 + seed);
}

static void pair_step(pair *p, size_t n)
{
    int la = 0, lb = 0;

    if (n > p->cap)
        n = p->cap;
    p->in[p->s++ % n] ^= 1;
    CHECKF(EVP_EncryptUpdate(p->a, p->oa, &la, p->in, (int)n) && la == (int)n
           && EVP_EncryptUpdate(p->b, p->ob, &lb, p->in, (int)n) && lb == (int)n, "update of %zu", n);
    CHECKF(memcmp(p->oa, p->ob, n) == 0, "output differs in an update of %zu bytes", n);
}

static void pair_final(pair *p)
{
    int la = -1, lb = -1;

    CHECKF(EVP_EncryptFinal_ex(p->a, p->oa, &la) && EVP_EncryptFinal_ex(p->b, p->ob, &lb) && la == 0
           && lb == 0, "final");
}

static void pair_free(pair *p)
{
    EVP_CIPHER_CTX_free(p->a);
    EVP_CIPHER_CTX_free(p->b);
    free(p->in);
    free(p->oa);
    free(p->ob);
}

/* Small updates until keystream is being made for this stream; 1 if it was.
 * `updates` of them at once, then (fills come back asynchronously: late on
 * a loaded host, or through the service) one a millisecond for up to 5 s. */
static int ramp(pair *p, int updates)
{
    uint64_t made = param("keystream-made");
    struct timespec ms = { 0, 1000000L };

    for (int i = 0; i < updates; i++)
        pair_step(p, 16384 + 5);
    for (int i = 0; i < 5000 && param("keystream-made") == made; i++) {
        nanosleep(&ms, NULL);
        pair_step(p, 16384 + 5);
    }
    return param("keystream-made") > made;
}

static void test_jump(void)
{
    const size_t win = knob("GPUAES_KEYSTREAM_MAX_WINDOW");
    pair p, q;
    uint64_t made, used;

    pair_init(&p, 1, (size_t)3 << 20);
    CHECKF(ramp(&p, 40), "jump: the first stream got no keystream");
    made = param("keystream-made");
    used = param("keystream-used");
    for (int i = 0; i < 40; i++)           /* 3 MiB each: the whole-job path */
        pair_step(&p, (size_t)3 << 20);
    /* The windows it jumped over, at most one set (3 windows), were made and never used. */
    printf("jump: %lld bytes of keystream made and not used after 40 large updates (window %zu)\n",
           (long long)(param("keystream-made") - made) - (long long)(param("keystream-used") - used), win);
    CHECKF(param("keystream-made") - made <= 3 * win + (param("keystream-used") - used),
           "jump: keystream made for a stream of large updates: %llu bytes, %llu used",
           (unsigned long long)(param("keystream-made") - made),
           (unsigned long long)(param("keystream-used") - used));
    /* Its claim is back: the only keystream stream of the process is another's now. */
    pair_init(&q, 2, 64 << 10);
    CHECKF(ramp(&q, 40), "jump: a second stream got no keystream (the first kept its claim)");
    pair_free(&q);
    /* And small updates again: the first stream ramps back (the second is gone). */
    CHECKF(ramp(&p, 40), "jump: the first stream did not return to keystream mode");
    pair_free(&p);
}

static void test_mixed(void)
{
    const size_t win = knob("GPUAES_KEYSTREAM_MAX_WINDOW");
    const int cycles = 30;
    pair p;
    uint64_t made, used, waste;

    pair_init(&p, 5, (size_t)3 << 20);
    CHECKF(ramp(&p, 40), "mixed: the stream got no keystream");
    made = param("keystream-made");
    used = param("keystream-used");
    for (int c = 0; c < cycles; c++) {
        pair_step(&p, (size_t)3 << 20);
        for (int i = 0; i < 8; i++)
            pair_step(&p, 16384 + 5);
    }
    pair_free(&p);                        /* its last windows are counted */
    waste = (param("keystream-made") - made) - (param("keystream-used") - used);
    printf("mixed: %llu bytes of keystream made, %llu not used, over %d large updates (window %zu)\n",
           (unsigned long long)(param("keystream-made") - made), (unsigned long long)waste, cycles, win);
    CHECKF(waste <= (uint64_t)(cycles + 1) * 3 * win, "mixed: %llu bytes wasted, more than a window set per large update",
           (unsigned long long)waste);
}

static void test_final(void)
{
    pair p, q;

    pair_init(&p, 3, 64 << 10);
    CHECKF(ramp(&p, 40), "final: the first stream got no keystream");
    pair_final(&p);                       /* finished, not freed */
    pair_init(&q, 4, 64 << 10);
    CHECKF(ramp(&q, 40), "final: a second stream got no keystream (the finished one kept its claim)");
    pair_free(&q);
    pair_free(&p);
}

static _Atomic int pool_stop;
static uint64_t pool_most;

static void *pool_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg;

    for (int round = 0; round < 60; round++) {
        pair p;

        pair_init(&p, seed++, 64 << 10);
        for (int i = 0; i < 64; i++)      /* uses windows up: 3 of them ahead */
            pair_step(&p, 16384 + 3 * (size_t)i);
        pair_free(&p);                    /* leaves keystream mode */
    }
    return NULL;
}

static void *pool_watch(void *arg)
{
    (void)arg;
    while (!pool_stop) {
        uint64_t n = param("keystream-windows");

        if (n > pool_most)
            pool_most = n;
    }
    return NULL;
}

static void test_pool(void)
{
    const size_t streams = knob("GPUAES_KEYSTREAM_MAX_CONTEXTS");
    pthread_t th[8], watch;

    CHECKF(pthread_create(&watch, NULL, pool_watch, NULL) == 0, "thread");
    for (int i = 0; i < 8; i++)
        CHECKF(pthread_create(&th[i], NULL, pool_thread, (void *)(uintptr_t)(1000 * (i + 1))) == 0, "thread");
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    pool_stop = 1;
    pthread_join(watch, NULL);
    if (param("keystream-windows") > pool_most)
        pool_most = param("keystream-windows");
    printf("pool: at most %llu windows with %zu keystream streams\n", (unsigned long long)pool_most, streams);
    CHECKF(pool_most > 0, "pool: no window was ever made");
    CHECKF(pool_most <= 3 * streams, "pool: %llu windows exist, more than 3 x %zu streams",
           (unsigned long long)pool_most, streams);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";

    if (!test_env_open(&env))
        return 1;
    if (argc > 2 && strcmp(argv[2], "--gpu") == 0)
        test_require_gpu(&env);
    sub = test_fetch(&env, "AES-128-CTR", "gpuaes");
    ref = test_fetch(&env, "AES-128-CTR", "default");
    if (sub == NULL || ref == NULL)
        return 1;
    if (strcmp(which, "jump") == 0)
        test_jump();
    else if (strcmp(which, "mixed") == 0)
        test_mixed();
    else if (strcmp(which, "final") == 0)
        test_final();
    else if (strcmp(which, "pool") == 0)
        test_pool();
    else
        CHECKF(0, "usage: test_ks_life jump|mixed|final|pool [--gpu]");
    EVP_CIPHER_free(sub);
    EVP_CIPHER_free(ref);
    test_env_close(&env);
    return test_report(which);
}
