/*
 * test_memcap.c - gpu_memory_max (GPUAES_GPU_MEMORY_MAX): what the cap would
 * not hold is not made, the work goes to the CPU with output identical to
 * the default provider, and each refusal counts (gpu-memory-refusals).
 * GPUAES_OFFLOAD_MIN_BYTES with GPUAES_DISPATCH=force sends every call to the
 * GPU layer (no dispatcher back-off in the way), keystream ahead off.
 *   --zero  a cap of 0: no slot at all, every call on the CPU, no error.
 *   --one   (CTest: 2 lanes of 1 MiB, a slot of ~8 MiB, cap 12 MiB) 8 threads at
 *           once: the GPU takes work, calls beyond its one slot are refused.
 *           On the emulator (each job lasts GPUAES_EMU_JOB_DELAY_MS, so
 *           they overlap) a refusal must be seen; on a GPU only printed.
 * Either way gpu-memory never passes the cap and gpu-errors stays 0.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>

#include "api_util.h"

#define LEN ((size_t)2 << 20)
#define THREADS 8
#define CALLS 6

static test_env env;
static const unsigned char *input;
static uint64_t cap;                   /* GPUAES_GPU_MEMORY_MAX, in bytes (CTest gives a number) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static const char *const names[] = { "AES-128-CTR", "AES-256-ECB", "AES-192-ECB", "AES-256-GCM" };  /* encrypting: GPU-able */

static uint64_t get_u64(const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    return OSSL_PROVIDER_get_params(env.gpuaes, p) ? v : 0;
}

static void *worker(void *arg)
{
    int id = (int)(size_t)arg;
    unsigned char key[32], iv[16], tg[16], td[16];
    unsigned char *a = malloc(LEN), *b = malloc(LEN);

    memset(key, id + 1, sizeof(key));
    memset(iv, 0x40 + id, sizeof(iv));
    for (int i = 0; a != NULL && b != NULL && i < CALLS; i++) {
        const char *name = names[(id + i) % 4];
        EVP_CIPHER *g = api_fetch(&env, name, "gpuaes"), *d = api_fetch(&env, name, "default");
        size_t la = 0, lb = 0;
        int og = api_crypt(g, 1, key, iv, NULL, 0, input, LEN, a, &la, tg, 0);
        int od = api_crypt(d, 1, key, iv, NULL, 0, input, LEN, b, &lb, td, 0);
        int gcm = strstr(name, "GCM") != NULL;

        pthread_mutex_lock(&lock);
        CHECKF(og && od && la == LEN && lb == LEN && memcmp(a, b, LEN) == 0
               && (!gcm || memcmp(tg, td, 16) == 0), "thread %d call %d (%s) differs", id, i, name);
        CHECKF(get_u64("gpu-memory") <= cap, "over the cap");
        pthread_mutex_unlock(&lock);
        EVP_CIPHER_free(g);
        EVP_CIPHER_free(d);
    }
    free(a);
    free(b);
    return NULL;
}

int main(int argc, char **argv)
{
    int zero = argc > 1 && strcmp(argv[1], "--zero") == 0;
    int one = argc > 1 && strcmp(argv[1], "--one") == 0;
    const char *cap_s = getenv("GPUAES_GPU_MEMORY_MAX");
    unsigned char *in = malloc(LEN);
    pthread_t tid[THREADS];
    uint64_t bytes, refusals, held;
    char *dp = NULL;
    OSSL_PARAM dparam[2] = { OSSL_PARAM_utf8_ptr("gpu", &dp, 0), OSSL_PARAM_END };
    int emulated;

    if (in == NULL || (!zero && !one) || cap_s == NULL || !test_env_open(&env))
        return 1;
    cap = strtoull(cap_s, NULL, 10);
    test_require_gpu(&env);
    emulated = OSSL_PROVIDER_get_params(env.gpuaes, dparam) && dp != NULL
        && strstr(dp, "emulation") != NULL;
    test_seed(13);
    test_rand_bytes(in, LEN);
    input = in;
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&tid[t], NULL, worker, (void *)(size_t)t) == 0);
    for (int t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    ERR_clear_error();
    bytes = test_gpu_bytes(&env);
    refusals = get_u64("gpu-memory-refusals");
    held = get_u64("gpu-memory");
    printf("%s: cap %llu, gpu bytes %llu of %llu, refusals %llu, held %llu, errors %llu\n",
           emulated ? "emulated" : "GPU", (unsigned long long)cap, (unsigned long long)bytes,
           (unsigned long long)THREADS * CALLS * LEN, (unsigned long long)refusals,
           (unsigned long long)held, (unsigned long long)test_gpu_errors(&env));
    CHECKF(held <= cap, "gpu-memory %llu over the cap", (unsigned long long)held);
    CHECKF(test_gpu_errors(&env) == 0, "a refusal is not an error");
    if (zero) {
        CHECKF(bytes == 0, "cap 0, yet %llu bytes on the GPU", (unsigned long long)bytes);
        CHECKF(refusals >= (uint64_t)THREADS * CALLS, "%llu refusals", (unsigned long long)refusals);
    } else {
        CHECKF(bytes > 0, "one slot's worth of cap, yet nothing on the GPU");
        CHECKF(!emulated || refusals > 0, "overlapping jobs, yet no refusal");
    }
    test_env_close(&env);
    free(in);
    return test_report(zero ? "memcap --zero" : "memcap --one");
}
