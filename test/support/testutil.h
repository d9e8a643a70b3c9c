/* testutil.h - shared helpers for the gpuaes tests. */
#ifndef GPUAES_TESTUTIL_H
#define GPUAES_TESTUTIL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "check.h"

#define TEST_SKIP 77   /* CTest SKIP_RETURN_CODE */

/* One library context holding both providers, loaded from GPUAES_MODULE_DIR. */
typedef struct {
    OSSL_LIB_CTX *libctx;
    OSSL_PROVIDER *gpuaes;
    OSSL_PROVIDER *deflt;
} test_env;

int test_env_open(test_env *env);             /* 1 on success; prints why not */
void test_env_close(test_env *env);

/* Fetch a cipher from exactly one provider ("gpuaes" or "default"). */
EVP_CIPHER *test_fetch(test_env *env, const char *name, const char *provider);

/* Provider parameters of gpuaes (see README: "Provider parameters"). */
int test_gpu_available(test_env *env);
uint64_t test_gpu_bytes(test_env *env);        /* gpu-bytes + cpu-share-bytes: GPU jobs' bytes */
uint64_t test_cpu_share_bytes(test_env *env);
uint64_t test_gpu_errors(test_env *env);
/* Any uint64 parameter of gpuaes (0 if it has none). */
uint64_t test_u64_param(test_env *env, const char *key);
/* dispatch = force is in force (offload-policy says so): every call at or
 * above its threshold goes to the GPU, the dispatcher out of the way. */
int test_dispatch_forced(test_env *env);

/* SIGSEGV, SIGBUS and SIGABRT print a backtrace on stderr, then kill as
 * they would have (children that must not crash: their logs say where). */
void test_trace_crashes(void);

/* For GPU-labelled tests: exit(TEST_SKIP) when gpuaes has no usable GPU. */
void test_require_gpu(test_env *env);

/* One deterministic generator for the process (support/rng.h), seeded from GPUAES_TEST_SEED or
 * the given seed; threads that draw at once keep an rng_state each instead. */
void test_seed(uint64_t seed);
uint64_t test_rand64(void);
size_t test_rand_below(size_t n);
void test_rand_bytes(unsigned char *p, size_t n);

/* Hex helpers: returns malloc'ed bytes, *len set. */
unsigned char *test_unhex(const char *hex, size_t *len);

/* 1 when a file whose path contains `file` is mapped into this process
 * (/proc/self/maps): e.g. "/" TEST_LAYER_FILE, the GPU layer gpuaes loads when
 * the GPU starts (include/gpuaes_layer.h). */
int test_mapped(const char *file);
#define TEST_LAYER_FILE "gpuaes_gpu.so"
int test_report(const char *name);   /* check_report, after service mode's promise; the exit code */

#endif
