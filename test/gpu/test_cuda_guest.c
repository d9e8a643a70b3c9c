/* test_cuda_guest.c - gpuaes is a guest in a CUDA application (cuda/runtime/cuda_guest.h).
 *
 * The program uses CUDA itself: a driver context of its own (cuCtxCreate on
 * device 0) is current on the main thread, and a runtime error (a cudaMalloc
 * far larger than any GPU) is left pending on purpose.  Then, through gpuaes:
 *  (a) large ECB, CTR and GCM operations: right output, the program's context
 *      still current, its error still pending, exactly;
 *  (b) the same with a clean error state: the GPU was used, the context is
 *      unchanged, and no error is left;
 *  (c) the same on a thread that never touched CUDA (its current context stays
 *      none), plus a CTR stream of 16 KiB updates (keystream ahead).
 *
 * Built twice.  test_cuda_guest goes through EVP to gpuaes.so, which carries
 * its own static CUDA runtime: the program's error state is out of its reach
 * (gpuaes works in (a) too), its thread's driver context is not.
 * test_cuda_guest_layer (-DGUEST_LAYER) calls the GPU layer (cuda/) directly
 * and shares this program's runtime: in (a) every call must answer BUSY
 * without a CUDA call, so that the error stays the program's.
 *
 * The driver functions come through the runtime (cudaGetDriverEntryPointByVersion),
 * as in the module: the program does not link libcuda, so it starts on a
 * machine without a driver and exits 77 (skipped) there.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <openssl/evp.h>

#include "api_util.h"
#ifdef GUEST_LAYER
#include "gpuaes_gpu.h"
#endif

#define BIG ((size_t)8 << 20) /* each operation: 8 MiB, above every GPU threshold in use */

static PFN_cuInit_v2000 p_init;
static PFN_cuDeviceGet_v2000 p_device_get;
static CUresult (*p_ctx_create)(CUcontext *, CUctxCreateParams *, unsigned int, CUdevice); /* _v4 */
static PFN_cuCtxDestroy_v4000 p_ctx_destroy;
static PFN_cuCtxGetCurrent_v4000 p_ctx_get;

static unsigned char g_key[32], g_iv[16], *g_in, *g_out, *g_ref;
static cudaError_t g_pending; /* the error the program leaves pending */

/* 0 when there is no usable driver (the test is skipped). */
static int load_driver(void)
{
    static const struct { const char *name; void **fn; int version; } fns[] = {
        { "cuInit", (void **)&p_init, 12000 }, { "cuDeviceGet", (void **)&p_device_get, 12000 },
        { "cuCtxCreate", (void **)&p_ctx_create, 12050 }, /* _v4: (pctx, params, flags, dev) */
        { "cuCtxDestroy", (void **)&p_ctx_destroy, 12000 },
        { "cuCtxGetCurrent", (void **)&p_ctx_get, 12000 },
    };
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        /* cuCtxCreate's current form (_v4, CUDA 12.5 on): a 12000 query gave a
         * form that failed on the H200's CUDA 13 driver. */
        if (cudaGetDriverEntryPointByVersion(fns[i].name, fns[i].fn, fns[i].version, cudaEnableDefault, &q)
                != cudaSuccess ||
            q != cudaDriverEntryPointSuccess || *fns[i].fn == NULL)
            return 0;
    }
    return p_init(0) == CUDA_SUCCESS;
}

static CUcontext current_ctx(void)
{
    CUcontext c = NULL;
    if (p_ctx_get(&c) != CUDA_SUCCESS)
        return (CUcontext)(uintptr_t)1; /* never a context of ours */
    return c;
}

static void expect_ctx(CUcontext ctx, const char *where)
{
    CUcontext cur = current_ctx();

    CHECKF(cur == ctx, "%s: current context %p, the program's is %p", where, (void *)cur, (void *)ctx);
}

/* The thread's CUDA state is what the program left: context and pending error
 * (the context first: no runtime call of ours may be what makes one current). */
static void expect_state(CUcontext ctx, cudaError_t err, const char *where)
{
    cudaError_t e;

    expect_ctx(ctx, where);
    e = cudaPeekAtLastError();
    CHECKF(e == err, "%s: pending error %s, the program left %s", where, cudaGetErrorName(e), cudaGetErrorName(err));
}

#ifndef GUEST_LAYER
/* ---- through EVP to gpuaes.so -------------------------------------------- */

static test_env g_env;

static uint64_t param_u64(const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    return OSSL_PROVIDER_get_params(g_env.gpuaes, p) ? v : 0;
}

/* One whole operation with both providers; outputs (and GCM tags) equal. */
static void same_as_default(const char *name)
{
    EVP_CIPHER *g = api_fetch(&g_env, name, "gpuaes"), *d = api_fetch(&g_env, name, "default");
    unsigned char tg[16] = { 0 }, td[16] = { 0 };
    size_t ng = 0, nd = 0;

    CHECKF(api_crypt(g, 1, g_key, g_iv, NULL, 0, g_in, BIG, g_out, &ng, tg, 0), "%s: gpuaes failed", name);
    CHECKF(api_crypt(d, 1, g_key, g_iv, NULL, 0, g_in, BIG, g_ref, &nd, td, 0), "%s: default failed", name);
    CHECKF(ng == nd && memcmp(g_out, g_ref, nd) == 0 && memcmp(tg, td, 16) == 0, "%s: output differs", name);
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
}

/* A CTR stream of 16 KiB updates: past the ramp, keystream ahead runs. */
static void ctr_stream(void)
{
    EVP_CIPHER *g = api_fetch(&g_env, "AES-256-CTR", "gpuaes"), *d = api_fetch(&g_env, "AES-256-CTR", "default");
    EVP_CIPHER_CTX *cg = EVP_CIPHER_CTX_new(), *cd = EVP_CIPHER_CTX_new();
    uint64_t used = param_u64("keystream-used");
    int n = 0, ok = cg != NULL && cd != NULL && EVP_EncryptInit_ex2(cg, g, g_key, g_iv, NULL) &&
                    EVP_EncryptInit_ex2(cd, d, g_key, g_iv, NULL);

    for (size_t off = 0; ok && off < BIG; off += 16384)
        ok = EVP_EncryptUpdate(cg, g_out + off, &n, g_in + off, 16384) && n == 16384 &&
             EVP_EncryptUpdate(cd, g_ref + off, &n, g_in + off, 16384) && n == 16384;
    CHECKF(ok && memcmp(g_out, g_ref, BIG) == 0, "CTR stream of 16 KiB updates: output differs");
    CHECKF(param_u64("keystream-used") > used, "CTR stream: no keystream from the GPU was used");
    EVP_CIPHER_CTX_free(cg);
    EVP_CIPHER_CTX_free(cd);
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
}

/* Every operation; with expect_gpu, gpu-bytes must grow. */
static void run_ops(int expect_gpu, int stream)
{
    uint64_t before = test_gpu_bytes(&g_env);

    same_as_default("AES-128-ECB");
    same_as_default("AES-192-CTR");
    same_as_default("AES-256-GCM");
    if (stream)
        ctr_stream();
    if (expect_gpu)
        CHECKF(test_gpu_bytes(&g_env) > before, "gpu-bytes did not grow: the GPU was not used");
}

static int open_gpuaes(void)
{
    if (!test_env_open(&g_env))
        return 0;
    test_require_gpu(&g_env); /* exit 77 without a usable GPU */
    return 1;
}

static void close_gpuaes(void) { test_env_close(&g_env); }

#else
/* ---- the GPU layer itself, sharing this program's runtime ---------------- */

/* AES-256 (ECB of in, or the CTR keystream from g_iv XORed into in) by OpenSSL. */
static void reference(const char *name, const unsigned char *in, unsigned char *out, size_t len)
{
    EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
    EVP_CIPHER *ci = EVP_CIPHER_fetch(NULL, name, NULL);
    int n = 0;

    if (c == NULL || ci == NULL || !EVP_EncryptInit_ex2(c, ci, g_key, g_iv, NULL) ||
        !EVP_CIPHER_CTX_set_padding(c, 0) || !EVP_EncryptUpdate(c, out, &n, in, (int)len) || (size_t)n != len) {
        fprintf(stderr, "OpenSSL %s failed\n", name);
        exit(1);
    }
    EVP_CIPHER_CTX_free(c);
    EVP_CIPHER_free(ci);
}

/* One job; OK and the reference output, or BUSY with nothing done. */
static void job(gpuaes_op op, int expect_gpu)
{
    static const char *const names[] = { [GPUAES_ECB_ENCRYPT] = "ECB", [GPUAES_CTR128] = "CTR128",
                                         [GPUAES_GCM_ENCRYPT] = "GCM_ENCRYPT" };
    gpuaes_key *k = gpuaes_key_new(g_key, 32);
    gpuaes_job j;
    static const unsigned char zero[16];

    memset(&j, 0, sizeof j);
    j.op = op;
    j.key = k;
    memcpy(j.iv, g_iv, 16);
    j.in = g_in;
    j.out = g_out;
    j.len = BIG;
    reference("AES-256-ECB", zero, j.h, 16); /* GCM: H = E_K(0) */
    gpuaes_gpu_run(&j);
    if (!expect_gpu) {
        CHECKF(j.status == GPUAES_BUSY && j.done == 0, "%s: status %d, done %zu with an error pending: want BUSY, 0",
               names[op], (int)j.status, j.done);
    } else if (!gpuaes_gpu_supports(op)) {
        CHECKF(j.status == GPUAES_BUSY, "%s: unsupported op: status %d", names[op], (int)j.status);
    } else {
        /* GCM's bulk is CTR32 from iv: with iv's low word far from 2^32, CTR128's keystream. */
        reference(op == GPUAES_ECB_ENCRYPT ? "AES-256-ECB" : "AES-256-CTR", g_in, g_ref, BIG);
        CHECKF(j.status == GPUAES_OK && j.done == BIG && memcmp(g_out, g_ref, BIG) == 0,
               "%s: status %d, done %zu (%s), output %s", names[op], (int)j.status, j.done, j.error,
               memcmp(g_out, g_ref, j.done) == 0 ? "right" : "wrong");
    }
    gpuaes_key_free(k);
}

/* A keystream window: filled and right, or none while an error is pending. */
static void window(int expect_gpu)
{
    enum { CAP = 1 << 20 };
    gpuaes_ks_window *w = gpuaes_ks_window_new(CAP);
    gpuaes_key *k = gpuaes_key_new(g_key, 32);
    char err[160] = "";
    int r = 0;

    if (!expect_gpu) {
        CHECKF(w == NULL, "a keystream window was made with an error pending");
    } else if (w == NULL) {
        CHECKF(0, "no keystream window");
    } else {
        CHECKF(gpuaes_ks_fill(w, k, g_iv, CAP, 0, err) == GPUAES_OK, "keystream fill: %s", err);
        for (long i = 0; i < 100000000L && (r = gpuaes_ks_ready(w, err)) == 0; ++i)
            ;
        memset(g_in + BIG - CAP, 0, CAP);
        reference("AES-256-CTR", g_in + BIG - CAP, g_ref, CAP); /* keystream = CTR of zeros */
        {
            const unsigned char *ks = NULL;
            int same = r == 1 && gpuaes_ks_pin(w, &ks, err) == 1 && memcmp(ks, g_ref, CAP) == 0;

            if (ks != NULL)
                gpuaes_ks_unpin(w);
            CHECKF(same, "keystream window: ready %d (%s), data %s", r, err, same ? "right" : "wrong");
        }
    }
    gpuaes_ks_window_free(w);
    gpuaes_key_free(k);
}

static void run_ops(int expect_gpu, int stream)
{
    job(GPUAES_ECB_ENCRYPT, expect_gpu);
    job(GPUAES_CTR128, expect_gpu);
    job(GPUAES_GCM_ENCRYPT, expect_gpu);
    if (stream || !expect_gpu)
        window(expect_gpu);
}

static int open_gpuaes(void)
{
    if (!gpuaes_gpu_wait()) { /* the start-up runs on gpuaes's own thread */
        printf("no usable GPU: %s\n", gpuaes_gpu_description());
        exit(TEST_SKIP);
    }
    return 1;
}

static void close_gpuaes(void) { gpuaes_gpu_release(); }
#endif

/* (c): a thread that never touched CUDA keeps no context. */
static void *fresh_thread(void *arg)
{
    (void)arg;
    expect_ctx(NULL, "(c) new thread, before");
    run_ops(1, 1);
    expect_state(NULL, cudaSuccess, "(c) new thread, after");
    return NULL;
}

int main(void)
{
    CUdevice dev = 0;
    CUcontext app = NULL;
    void *huge = NULL;
    pthread_t t;

    test_seed(12);
    if (!load_driver() || p_device_get(&dev, 0) != CUDA_SUCCESS) {
        printf("no CUDA driver or device: skipped\n");
        return TEST_SKIP;
    }
    /* The program's own context, current on this thread (pushed by cuCtxCreate). */
    {
        CUresult r = p_ctx_create(&app, NULL, 0, dev);

        if (r != CUDA_SUCCESS || current_ctx() != app) {
            fprintf(stderr, "cuCtxCreate failed: %d\n", (int)r);
            return 1;
        }
    }
    /* ... and an error it has not looked at yet. */
    g_pending = cudaMalloc(&huge, (size_t)1 << 62);
    CHECKF(g_pending != cudaSuccess, "the program's oversized cudaMalloc did not fail");
    expect_state(app, g_pending, "setup (the test's premise)");

    g_in = malloc(BIG);
    g_out = malloc(BIG);
    g_ref = malloc(BIG);
    if (g_in == NULL || g_out == NULL || g_ref == NULL)
        return 1;
    test_rand_bytes(g_key, sizeof g_key);
    test_rand_bytes(g_iv, sizeof g_iv);
    g_iv[12] = 0; /* GCM's inc32 stays far from 2^32: its keystream is CTR128's */
    test_rand_bytes(g_in, BIG);

    open_gpuaes(); /* gpuaes starts up (on its own thread) and is waited for */
    expect_state(app, g_pending, "after gpuaes's initialisation");

    /* (a) an error pending. */
#ifdef GUEST_LAYER
    run_ops(0, 0);
#else
    run_ops(0, 1);
#endif
    expect_state(app, g_pending, "(a) after the operations");
    CHECKF(cudaGetLastError() == g_pending && cudaGetLastError() == cudaSuccess, "(a) the program's error was not kept");

    /* (b) clean. */
    run_ops(1, 1);
    expect_state(app, cudaSuccess, "(b) after the operations");

    /* (c) another thread. */
    CHECKF(pthread_create(&t, NULL, fresh_thread, NULL) == 0 && pthread_join(t, NULL) == 0, "thread");
    expect_state(app, cudaSuccess, "(c) main thread afterwards");

    close_gpuaes();
    expect_state(app, cudaSuccess, "after unloading gpuaes");
    p_ctx_destroy(app);
    free(g_in);
    free(g_out);
    free(g_ref);
    return test_report("cuda_guest");
}
