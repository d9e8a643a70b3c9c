/*
 * test_mix.c - 32 threads mixing every mode, key size and direction, at the
 * dispatcher's own policy (no GPUAES_OFFLOAD_MIN_BYTES, no
 * GPUAES_DISPATCH=force; CTest sets GPUAES_GPU_START_BYTES=0 so that the
 * GPU starts at once): sizes around and above the default thresholds
 * (256 KiB, 1 MiB, 8 MiB), every output and tag checked against the default
 * provider (GCM decryption: of the default provider's ciphertext, with its
 * tag).  Between large calls each thread makes
 * small ones (< 64 KiB: they do not count as busy threads).
 *   crowd  every thread makes a burst of large calls at once: more threads
 *          than half the cores, so the busy-cores rule keeps calls on the CPU;
 *   turns  bursts take one of cores/2 tokens, each free again 120 ms after
 *          its burst (longer than dispatch.c's ACTIVE_NS): never busy, so the
 *          estimates decide and the GPU takes some.
 * Checks: all identical; gpu-bytes > 0 and less than the large calls' bytes
 * (both paths used); gpu-errors 0.  Without a GPU: skipped (77).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/err.h>

#include "api_util.h"
#include "rng.h"

#define THREADS 32
#define BURSTS 2                       /* per thread in the turns phase */
#define MAXLEN (((size_t)12 << 20) + 64)

static const size_t large[] = {
    ((size_t)256 << 10) - 16, (size_t)256 << 10, ((size_t)256 << 10) + 16,
    ((size_t)1 << 20) - 16, (size_t)1 << 20, ((size_t)1 << 20) + 48, ((size_t)2 << 20) + 32,
    ((size_t)8 << 20) - 16, (size_t)8 << 20, ((size_t)8 << 20) + 48, (size_t)12 << 20,
};
static const size_t small[] = { 16, 1008, 4096, 60000 };

static test_env env;
static unsigned char *input;
static EVP_CIPHER *gciph[API_NCIPHERS], *dciph[API_NCIPHERS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t crowd;
static uint64_t large_bytes;           /* under lock */
static int tokens;                     /* turns: free tokens now */
static uint64_t token_free_at[64];     /* when each token may be taken again */

static uint64_t now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

typedef struct { rng_state rng; unsigned char *a, *b; int id; } worker;

static uint64_t next(worker *w) { return rng_next(&w->rng); }

/* One call of cipher i, direction enc, len bytes (whole blocks for ECB and
 * CBC, which run without padding), against the default provider. */
static void one_call(worker *w, int i, int enc, size_t len)
{
    const char *name = api_ciphers[i];
    int gcm = strstr(name, "GCM") != NULL;
    unsigned char key[32], iv[16], tg[16], td[16];
    size_t la = 0, lb = 0;
    int og, od;

    if (strstr(name, "ECB") != NULL || strstr(name, "CBC") != NULL)
        len &= ~(size_t)15;
    for (size_t k = 0; k < 32; k++)
        key[k] = (unsigned char)next(w);
    for (size_t k = 0; k < 16; k++)
        iv[k] = (unsigned char)next(w);
    if (gcm && !enc) {                 /* the default provider's ciphertext and tag */
        od = api_crypt(dciph[i], 1, key, iv, NULL, 0, input, len, w->b, &lb, td, 0);
        og = od && api_crypt(gciph[i], 0, key, iv, NULL, 0, w->b, len, w->a, &la, td, 0);
        CHECKF(og && la == len && memcmp(w->a, input, len) == 0,
               "thread %d: %s decryption of %zu bytes", w->id, name, len);
    } else {
        og = api_crypt(gciph[i], enc, key, iv, NULL, 0, input, len, w->a, &la, tg, 0);
        od = api_crypt(dciph[i], enc, key, iv, NULL, 0, input, len, w->b, &lb, td, 0);
        CHECKF(og && od && la == len && lb == len && memcmp(w->a, w->b, len) == 0
               && (!gcm || memcmp(tg, td, 16) == 0),
               "thread %d: %s %s of %zu bytes differs", w->id, name, enc ? "enc" : "dec", len);
    }
    if (len >= large[0]) {
        pthread_mutex_lock(&lock);
        large_bytes += len;
        pthread_mutex_unlock(&lock);
    }
    ERR_clear_error();
}

static void burst(worker *w)
{
    for (int n = 1 + (int)(next(w) % 3); n > 0; n--)
        one_call(w, (int)(next(w) % API_NCIPHERS), (int)(next(w) & 1),
                 large[next(w) % (sizeof(large) / sizeof(large[0]))]);
}

static int take_token(void)
{
    int got = -1;
    uint64_t t = now_ns();

    pthread_mutex_lock(&lock);
    for (int k = 0; k < tokens && got < 0; k++)
        if (token_free_at[k] != UINT64_MAX && token_free_at[k] <= t) {
            token_free_at[k] = UINT64_MAX;
            got = k;
        }
    pthread_mutex_unlock(&lock);
    return got;
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    struct timespec pause = { 0, 1000000 };

    pthread_barrier_wait(&crowd);
    burst(w);                          /* crowd: all at once */
    for (int done = 0; done < BURSTS;) {
        int k = take_token();

        if (k >= 0) {
            burst(w);
            pthread_mutex_lock(&lock);
            token_free_at[k] = now_ns() + 120000000ULL;
            pthread_mutex_unlock(&lock);
            done++;
        } else {
            one_call(w, (int)(next(w) % API_NCIPHERS), (int)(next(w) & 1),
                     small[next(w) % (sizeof(small) / sizeof(small[0]))]);
            nanosleep(&pause, NULL);
        }
    }
    return NULL;
}

int main(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    worker w[THREADS];
    pthread_t tid[THREADS];
    uint64_t bytes, errors;

    if (getenv("GPUAES_OFFLOAD_MIN_BYTES") != NULL) {
        fprintf(stderr, "test_mix tests the dispatcher: unset GPUAES_OFFLOAD_MIN_BYTES\n");
        return 1;
    }
    if (!test_env_open(&env) || (input = malloc(MAXLEN)) == NULL)
        return 1;
    if (test_dispatch_forced(&env)) {
        fprintf(stderr, "test_mix tests the dispatcher: unset GPUAES_DISPATCH (or set it to auto)\n");
        return 1;
    }
    test_require_gpu(&env);
    test_seed(32);
    test_rand_bytes(input, MAXLEN);
    for (int i = 0; i < API_NCIPHERS; i++) {
        gciph[i] = api_fetch(&env, api_ciphers[i], "gpuaes");
        dciph[i] = api_fetch(&env, api_ciphers[i], "default");
    }
    tokens = cores / 2 < 1 ? 1 : cores / 2 > 64 ? 64 : (int)(cores / 2);
    pthread_barrier_init(&crowd, NULL, THREADS);
    for (int t = 0; t < THREADS; t++) {
        w[t].rng = rng_seeded((uint64_t)t + 1);   /* fixed, one stream per worker */
        w[t].id = t;
        w[t].a = malloc(MAXLEN);
        w[t].b = malloc(MAXLEN);
        if (w[t].a == NULL || w[t].b == NULL || pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0) {
            fprintf(stderr, "cannot start thread %d\n", t);
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++) {
        pthread_join(tid[t], NULL);
        free(w[t].a);
        free(w[t].b);
    }
    bytes = test_gpu_bytes(&env);
    errors = test_gpu_errors(&env);
    printf("%d threads, %d tokens: large calls %llu bytes, of them on the GPU %llu, gpu errors %llu\n",
           THREADS, tokens, (unsigned long long)large_bytes, (unsigned long long)bytes,
           (unsigned long long)errors);
    CHECKF(bytes > 0, "the dispatcher never used the GPU");
    CHECKF(bytes < large_bytes, "every large call went to the GPU: none to the CPU");
    CHECKF(errors == 0, "%llu GPU errors", (unsigned long long)errors);
    for (int i = 0; i < API_NCIPHERS; i++) {
        EVP_CIPHER_free(gciph[i]);
        EVP_CIPHER_free(dciph[i]);
    }
    pthread_barrier_destroy(&crowd);
    test_env_close(&env);
    free(input);
    return test_report("mix");
}
