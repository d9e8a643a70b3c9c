/* testutil.c - shared helpers for the gpuaes tests. */
#define _GNU_SOURCE
#include "testutil.h"

#include <execinfo.h>
#include <signal.h>
#include <unistd.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>

#include "rng.h"

int test_env_open(test_env *env)
{
    const char *dir = getenv("GPUAES_MODULE_DIR");

    memset(env, 0, sizeof(*env));
    env->libctx = OSSL_LIB_CTX_new();
    if (env->libctx == NULL)
        return 0;
    if (dir != NULL && !OSSL_PROVIDER_set_default_search_path(env->libctx, dir))
        return 0;
    env->deflt = OSSL_PROVIDER_load(env->libctx, "default");
    env->gpuaes = OSSL_PROVIDER_load(env->libctx, "gpuaes");
    if (env->deflt == NULL || env->gpuaes == NULL) {
        fprintf(stderr, "cannot load providers (GPUAES_MODULE_DIR=%s)\n", dir ? dir : "(unset)");
        ERR_print_errors_fp(stderr);
        return 0;
    }
    return 1;
}

void test_env_close(test_env *env)
{
    OSSL_PROVIDER_unload(env->gpuaes);
    OSSL_PROVIDER_unload(env->deflt);
    OSSL_LIB_CTX_free(env->libctx);
    memset(env, 0, sizeof(*env));
}

EVP_CIPHER *test_fetch(test_env *env, const char *name, const char *provider)
{
    char propq[64];

    snprintf(propq, sizeof(propq), "provider=%s", provider);
    return EVP_CIPHER_fetch(env->libctx, name, propq);
}

static uint64_t get_u64(test_env *env, const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    if (!OSSL_PROVIDER_get_params(env->gpuaes, p))
        return 0;
    return v;
}

int test_gpu_available(test_env *env)
{
    int v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_int("gpu-available", &v), OSSL_PARAM_END };

    if (!OSSL_PROVIDER_get_params(env->gpuaes, p))
        return 0;
    return v;
}

/* What GPU jobs did: the GPU's part and their callers' shares (gpu_cpu_share). */
uint64_t test_gpu_bytes(test_env *env)
{
    return get_u64(env, "gpu-bytes") + get_u64(env, "cpu-share-bytes");
}
uint64_t test_cpu_share_bytes(test_env *env) { return get_u64(env, "cpu-share-bytes"); }
uint64_t test_gpu_errors(test_env *env) { return get_u64(env, "gpu-errors"); }
uint64_t test_u64_param(test_env *env, const char *key) { return get_u64(env, key); }

int test_dispatch_forced(test_env *env)
{
    char policy[256] = "";
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_string("offload-policy", policy, sizeof(policy)),
                        OSSL_PARAM_END };

    return OSSL_PROVIDER_get_params(env->gpuaes, p) && strstr(policy, ",dispatch=force") != NULL;
}

void test_require_gpu(test_env *env)
{
    if (!test_gpu_available(env)) {
        char *desc = NULL;
        OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr("gpu", &desc, 0), OSSL_PARAM_END };

        OSSL_PROVIDER_get_params(env->gpuaes, p);
        printf("SKIP: no usable GPU (%s)\n", desc ? desc : "?");
        exit(TEST_SKIP);
    }
}

static rng_state test_rng;

void test_seed(uint64_t seed)
{
    const char *env = getenv("GPUAES_TEST_SEED");

    if (env != NULL)
        seed = strtoull(env, NULL, 0);
    printf("seed %llu (GPUAES_TEST_SEED reproduces it)\n", (unsigned long long)seed);
    test_rng = rng_seeded(seed);
}

uint64_t test_rand64(void) { return rng_next(&test_rng); }
size_t test_rand_below(size_t n) { return rng_below(&test_rng, n); }
void test_rand_bytes(unsigned char *p, size_t n) { rng_bytes(&test_rng, p, n); }

unsigned char *test_unhex(const char *hex, size_t *len)
{
    long l = 0;
    unsigned char *b;

    if (*hex == '\0') {
        *len = 0;
        return calloc(1, 1);
    }
    b = OPENSSL_hexstr2buf(hex, &l);
    *len = (size_t)l;
    return b;
}

int test_mapped(const char *file)
{
    char line[4608];
    FILE *f = fopen("/proc/self/maps", "r");
    int found = 0;

    while (f != NULL && !found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, file) != NULL;
    if (f != NULL)
        fclose(f);
    return found;
}

int test_report(const char *name)
{
    const char *backend = getenv("GPUAES_GPU_BACKEND");

    /* Service mode's promise (docs/SERVICE.md): no CUDA inside applications,
     * the service backend's copy threads included, nor the GPU layer. */
    if (backend != NULL && strcmp(backend, "service") == 0
        && (test_mapped("libcuda.so") || test_mapped("/" TEST_LAYER_FILE))) {
        printf("%s: libcuda or the GPU layer is loaded in this process, with gpu_backend = service\n",
               name);
        test_failures++;
    }
    return check_report(name);
}

static void crash_trace(int sig)
{
    void *frames[48];
    int n = backtrace(frames, 48);

    dprintf(2, "signal %d in pid %d:\n", sig, (int)getpid());
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

void test_trace_crashes(void)
{
    signal(SIGSEGV, crash_trace);
    signal(SIGBUS, crash_trace);
    signal(SIGABRT, crash_trace);
}
