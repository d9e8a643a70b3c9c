/*
 * provider.c - the module's entry point: the cipher table, provider
 * parameters, and the operations OpenSSL queries.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include "prov_ctx.h"
#include "gpu/offload.h"
#include "debug.h"
#include "block/keystream_xor.h"
#include "cipher_family.h"
#include "gpu/gpu_backend.h"
#include "assume/fallback_assumptions.h"

/*
 * One line per cipher variant: id, first name (as the default provider
 * spells it; aliases and OIDs are taken from it at load), mode, key bytes,
 * family, update function (the mode family's own: cipher_family.h).  Adding a
 * variant is adding a line.
 */
#define GPUAES_CIPHERS(X)                                                       \
    X(aes_128_ecb, "AES-128-ECB", MODE_ECB, 16, block, block_update)            \
    X(aes_192_ecb, "AES-192-ECB", MODE_ECB, 24, block, block_update)            \
    X(aes_256_ecb, "AES-256-ECB", MODE_ECB, 32, block, block_update)            \
    X(aes_128_cbc, "AES-128-CBC", MODE_CBC, 16, block, block_update)            \
    X(aes_192_cbc, "AES-192-CBC", MODE_CBC, 24, block, block_update)            \
    X(aes_256_cbc, "AES-256-CBC", MODE_CBC, 32, block, block_update)            \
    X(aes_128_cfb, "AES-128-CFB", MODE_CFB, 16, block, block_update_cfb)        \
    X(aes_192_cfb, "AES-192-CFB", MODE_CFB, 24, block, block_update_cfb)        \
    X(aes_256_cfb, "AES-256-CFB", MODE_CFB, 32, block, block_update_cfb)        \
    X(aes_128_ctr, "AES-128-CTR", MODE_CTR, 16, block, block_update_ctr)        \
    X(aes_192_ctr, "AES-192-CTR", MODE_CTR, 24, block, block_update_ctr)        \
    X(aes_256_ctr, "AES-256-CTR", MODE_CTR, 32, block, block_update_ctr)        \
    X(aes_128_gcm, "AES-128-GCM", MODE_GCM, 16, gcm, gcm_update)                \
    X(aes_192_gcm, "AES-192-GCM", MODE_GCM, 24, gcm, gcm_update)                \
    X(aes_256_gcm, "AES-256-GCM", MODE_GCM, 32, gcm, gcm_update)

enum {
#define VARIANT_INDEX(id, name, mode, keylen, family, update) V_##id,
    GPUAES_CIPHERS(VARIANT_INDEX)
    V_COUNT
};

static fallback_cipher fallbacks[V_COUNT];

/* The algorithm's static parameters (keylen, ivlen, mode, flags...) are the default provider's. */
static int variant_get_params(size_t v, OSSL_PARAM params[])
{
    const fallback_cipher *fb = gpuaes_variants[v].fallback;

    return fb->get_params != NULL && fb->get_params(params);
}

/*
 * A foreign core (prov_err.h: the application's libcrypto is not the one
 * gpuaes links) gets these tables: each function that can fail carries the
 * errors the fallback left on the linked libcrypto's queue over to the
 * core's when it fails.  The core's own libcrypto gets the plain functions:
 * no cost on its path, and the errors are on its queue already.
 */
#define FAMILY_CARRY(f)                                                       \
    static void *f##_dupctx_c(void *vctx)                                     \
    {                                                                         \
        void *r = f##_dupctx(vctx);                                           \
                                                                              \
        if (r == NULL)                                                        \
            err_carry(f##_prov_of(vctx));                                     \
        return r;                                                             \
    }                                                                         \
    static int f##_einit_c(void *vctx, const unsigned char *key, size_t keylen,\
                           const unsigned char *iv, size_t ivlen,             \
                           const OSSL_PARAM params[])                         \
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx),                            \
                                f##_einit(vctx, key, keylen, iv, ivlen, params));\
    }                                                                         \
    static int f##_dinit_c(void *vctx, const unsigned char *key, size_t keylen,\
                           const unsigned char *iv, size_t ivlen,             \
                           const OSSL_PARAM params[])                         \
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx),                            \
                                f##_dinit(vctx, key, keylen, iv, ivlen, params));\
    }                                                                         \
    static int f##_final_c(void *vctx, unsigned char *out, size_t *outl,      \
                           size_t outsize)                                    \
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx),                            \
                                f##_final(vctx, out, outl, outsize));         \
    }                                                                         \
    static int f##_cipher_c(void *vctx, unsigned char *out, size_t *outl,     \
                            size_t outsize, const unsigned char *in, size_t inl)\
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx),                            \
                                f##_cipher(vctx, out, outl, outsize, in, inl));\
    }                                                                         \
    static int f##_get_ctx_params_c(void *vctx, OSSL_PARAM params[])          \
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx), f##_get_ctx_params(vctx, params));\
    }                                                                         \
    static int f##_set_ctx_params_c(void *vctx, const OSSL_PARAM params[])    \
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx), f##_set_ctx_params(vctx, params));\
    }
FAMILY_CARRY(block)
FAMILY_CARRY(gcm)

/* Each update function (a family may have several: cipher_family.h). */
#define UPDATE_CARRY(f, update)                                               \
    static int update##_c(void *vctx, unsigned char *out, size_t *outl,       \
                          size_t outsize, const unsigned char *in, size_t inl)\
    {                                                                         \
        return err_carry_failed(f##_prov_of(vctx),                            \
                                update(vctx, out, outl, outsize, in, inl));   \
    }
UPDATE_CARRY(block, block_update)
UPDATE_CARRY(block, block_update_cfb)
UPDATE_CARRY(block, block_update_ctr)
UPDATE_CARRY(gcm, gcm_update)

#define FAMILY_DISPATCH_CARRY(f)                                              \
    { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))f##_freectx },                \
    { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))f##_dupctx_c },                \
    { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))f##_einit_c },           \
    { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))f##_dinit_c },           \
    { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))f##_final_c },                  \
    { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))f##_cipher_c },                \
    { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))f##_get_ctx_params_c },\
    { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))f##_set_ctx_params_c },\
    { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))f##_gettable_params },\
    { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_gettable_ctx_params },                              \
    { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_settable_ctx_params }

/* Cipher contexts made (newctx; dups not counted), per variant, counted only under debug (free
 * otherwise): the last teardown's debug line says which ciphers a program
 * really ran through gpuaes (bench/tls_loopback.sh checks its TLS runs so). */
static _Atomic unsigned long long made[V_COUNT];

static void count_made(size_t v)
{
    if (gpuaes_debug_enabled())
        atomic_fetch_add_explicit(&made[v], 1, memory_order_relaxed);
}

static void debug_made(void)
{
    char line[512];
    size_t n = 0;

    if (!gpuaes_debug_enabled())
        return;
    line[0] = '\0';
    for (size_t v = 0; v < V_COUNT && n < sizeof(line); v++) {
        unsigned long long k = atomic_load_explicit(&made[v], memory_order_relaxed);
        int w;

        if (k == 0)
            continue;
        w = snprintf(line + n, sizeof(line) - n, " %s %llu", gpuaes_variants[v].name, k);
        if (w < 0)
            break;
        n += (size_t)w;
    }
    gpuaes_debug("cipher contexts made:%s", n > 0 ? line : " none");
}

/* get_params has no context to find the core by: its errors (a malformed
 * parameter) stay on the linked libcrypto's queue under a foreign core. */
#define VARIANT_DISPATCH(id, name, mode, keylen, family, update)                      \
    static void *id##_newctx(void *provctx)                                  \
    {                                                                         \
        void *r = family##_newctx(provctx, &gpuaes_variants[V_##id]);        \
                                                                              \
        if (r != NULL)                                                        \
            count_made(V_##id);                                              \
        return r;                                                             \
    }                                                                         \
    static void *id##_newctx_c(void *provctx)                                \
    {                                                                         \
        void *r = id##_newctx(provctx);                                       \
                                                                              \
        if (r == NULL)                                                        \
            err_carry(provctx);                                               \
        return r;                                                             \
    }                                                                         \
    static int id##_get_params(OSSL_PARAM params[])                           \
    {                                                                         \
        return variant_get_params(V_##id, params);                           \
    }                                                                         \
    static const OSSL_DISPATCH id##_dispatch[] = {                           \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))id##_newctx },            \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))id##_get_params },    \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))update },                \
        FAMILY_DISPATCH(family),                                             \
        { 0, NULL }                                                          \
    };                                                                        \
    static const OSSL_DISPATCH id##_dispatch_carry[] = {                     \
        { OSSL_FUNC_CIPHER_NEWCTX, (void (*)(void))id##_newctx_c },          \
        { OSSL_FUNC_CIPHER_GET_PARAMS, (void (*)(void))id##_get_params },    \
        { OSSL_FUNC_CIPHER_UPDATE, (void (*)(void))update##_c },             \
        FAMILY_DISPATCH_CARRY(family),                                       \
        { 0, NULL }                                                          \
    };
GPUAES_CIPHERS(VARIANT_DISPATCH)

/* The variant of a mode (ecb, ctr, ...) and key length in bytes. */
#define V_OF(mode, keylen) \
    ((keylen) == 16 ? V_aes_128_##mode : (keylen) == 24 ? V_aes_192_##mode : V_aes_256_##mode)

const gpuaes_variant gpuaes_variants[] = {
#define VARIANT_ENTRY(id, name, mode, keylen, family, update) \
    { name, mode, keylen, id##_dispatch, &fallbacks[V_##id], id##_dispatch_carry, \
      V_OF(ecb, keylen), V_OF(ctr, keylen) },
    GPUAES_CIPHERS(VARIANT_ENTRY)
};
const size_t gpuaes_variant_count = V_COUNT;

/* ---- The provider ---- */

static OSSL_ALGORITHM algorithms[V_COUNT + 1], algorithms_carry[V_COUNT + 1];

static const OSSL_PARAM *gpuaes_gettable_params(void *provctx)
{
    static const OSSL_PARAM table[] = {
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_NAME, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_VERSION, NULL, 0),
        OSSL_PARAM_utf8_ptr(OSSL_PROV_PARAM_BUILDINFO, NULL, 0),
        OSSL_PARAM_int(OSSL_PROV_PARAM_STATUS, NULL),
        OSSL_PARAM_utf8_ptr("gpu", NULL, 0),
        OSSL_PARAM_int("gpu-available", NULL),
        OSSL_PARAM_uint64("gpu-bytes", NULL),
        OSSL_PARAM_uint64("cpu-share-bytes", NULL),
        OSSL_PARAM_uint64("gcm-fused-bytes", NULL),
        OSSL_PARAM_uint64("gpu-errors", NULL),
        OSSL_PARAM_uint64("gpu-backoffs", NULL),
        OSSL_PARAM_uint64("gpu-memory", NULL),
        OSSL_PARAM_uint64("gpu-memory-refusals", NULL),
        OSSL_PARAM_uint64("gpu-memory-oom", NULL),
        OSSL_PARAM_uint64("offload-min-bytes", NULL),
        OSSL_PARAM_utf8_string("offload-policy", NULL, 0),
        OSSL_PARAM_utf8_string("settings", NULL, 0),
        OSSL_PARAM_utf8_ptr("fallback", NULL, 0),
        OSSL_PARAM_int("keystream", NULL),
        OSSL_PARAM_uint64("keystream-made", NULL),
        OSSL_PARAM_uint64("keystream-used", NULL),
        OSSL_PARAM_uint64("keystream-launches", NULL),
        OSSL_PARAM_uint64("keystream-jobs", NULL),
        OSSL_PARAM_uint64("keystream-windows", NULL),
        OSSL_PARAM_END
    };
    return table;
}

/*
 * `openssl list -providers -verbose` prints only the standard keys, so the
 * name also says how the GPU stands, without waiting for it (loading and
 * listing never start CUDA): "not started" in a fresh process.  The "gpu"
 * parameter waits for the GPU and names it.
 */
static const char *provider_name(void)
{
    static _Thread_local char buf[600];

    snprintf(buf, sizeof(buf), "gpuaes: AES on NVIDIA GPUs through CUDA [%s]", gpu()->job.state());
    return buf;
}

static int keystream_get_params(const gpuaes_prov *prov, OSSL_PARAM params[]);

/* The GPU layer's memory beyond the CUDA context (README, "Device memory"):
 * bytes held now, slots and windows refused (gpu_memory_max, or the back-off
 * after memory was found full), allocations that found it full. */
static int memory_get_params(OSSL_PARAM params[])
{
    gpuaes_gpu_memory_stats m = { 0, 0, 0 };
    OSSL_PARAM *p;

    gpu()->job.memory(&m);
    p = OSSL_PARAM_locate(params, "gpu-memory");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, m.held))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-memory-refusals");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, m.refused))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-memory-oom");
    return p == NULL || OSSL_PARAM_set_uint64(p, m.oom);
}

static int gpuaes_get_params(void *provctx, OSSL_PARAM params[])
{
    const gpuaes_prov *prov = provctx;
    OSSL_PARAM *p;

    p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_NAME);
    if (p != NULL && !OSSL_PARAM_set_utf8_ptr(p, provider_name()))
        return 0;
    p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_VERSION);
    if (p != NULL && !OSSL_PARAM_set_utf8_ptr(p, GPUAES_VERSION))
        return 0;
    p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_BUILDINFO);
    if (p != NULL && !OSSL_PARAM_set_utf8_ptr(p, GPUAES_BUILDINFO))
        return 0;
    p = OSSL_PARAM_locate(params, OSSL_PROV_PARAM_STATUS);
    if (p != NULL && !OSSL_PARAM_set_int(p, 1))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu");
    if (p != NULL && !OSSL_PARAM_set_utf8_ptr(p, gpu()->job.description()))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-available");
    if (p != NULL && !OSSL_PARAM_set_int(p, gpu()->job.wait()))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-bytes");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, offload_gpu_bytes()))
        return 0;
    p = OSSL_PARAM_locate(params, "cpu-share-bytes");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, offload_cpu_share_bytes()))
        return 0;
    p = OSSL_PARAM_locate(params, "gcm-fused-bytes");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, offload_gcm_fused_bytes()))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-errors");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, offload_gpu_errors()))
        return 0;
    p = OSSL_PARAM_locate(params, "gpu-backoffs");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, dispatch_backoffs()))
        return 0;
    if (!memory_get_params(params))
        return 0;
    p = OSSL_PARAM_locate(params, "offload-min-bytes");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, prov->offload_min_bytes == SIZE_MAX ? UINT64_MAX
                                                                    : prov->offload_min_bytes))
        return 0;
    p = OSSL_PARAM_locate(params, "offload-policy");
    if (p != NULL && !OSSL_PARAM_set_utf8_string(p, settings_policy(prov)))
        return 0;
    p = OSSL_PARAM_locate(params, "fallback");
    if (p != NULL && !OSSL_PARAM_set_utf8_ptr(p, prov->fallback_desc))
        return 0;
    p = OSSL_PARAM_locate(params, "settings");
    if (p != NULL && !OSSL_PARAM_set_utf8_string(p, settings_describe(prov)))
        return 0;
    return keystream_get_params(prov, params);
}

/* Keystream ahead: enabled, bytes of keystream made / used (waste = made - used), launches and
 * jobs, windows that exist now (in use or pooled). */
static int keystream_get_params(const gpuaes_prov *prov, OSSL_PARAM params[])
{
    unsigned long long launches = 0, jobs = 0;
    OSSL_PARAM *p;

    p = OSSL_PARAM_locate(params, "keystream");
    if (p != NULL && !OSSL_PARAM_set_int(p, offload_keystream_on(prov)))
        return 0;
    p = OSSL_PARAM_locate(params, "keystream-made");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, ks_bytes_made()))
        return 0;
    p = OSSL_PARAM_locate(params, "keystream-used");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, ks_bytes_used()))
        return 0;
    gpu()->job.ks_stats(&launches, &jobs);
    p = OSSL_PARAM_locate(params, "keystream-launches");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, launches))
        return 0;
    p = OSSL_PARAM_locate(params, "keystream-jobs");
    if (p != NULL && !OSSL_PARAM_set_uint64(p, jobs))
        return 0;
    p = OSSL_PARAM_locate(params, "keystream-windows");
    if (p != NULL) {
        size_t windows = 0;

        gpu()->job.ks_windows(&windows, NULL);
        if (!OSSL_PARAM_set_uint64(p, windows))
            return 0;
    }
    return 1;
}

static const OSSL_ALGORITHM *gpuaes_query(void *provctx, int operation_id, int *no_cache)
{
    const gpuaes_prov *prov = provctx;

    *no_cache = 0;
    if (operation_id != OSSL_OP_CIPHER)
        return NULL;
    return prov->err.foreign ? algorithms_carry : algorithms;
}

static void gpuaes_teardown(void *provctx)
{
    gpuaes_prov *prov = provctx;
    unsigned long long launches = 0, jobs = 0;

    gpu()->job.ks_stats(&launches, &jobs);
    if (ks_bytes_made() > 0)
        gpuaes_debug("keystream: made %llu, used %llu bytes (%.1f%% wasted), %llu launches for %llu fills",
                     (unsigned long long)ks_bytes_made(), (unsigned long long)ks_bytes_used(),
                     100.0 * (double)(ks_bytes_made() - ks_bytes_used()) / (double)ks_bytes_made(),
                     launches, jobs);
    fallback_unload(prov);
    OPENSSL_free(prov);
    if (gpu_backend_leave())           /* the last instance: the GPU layer's threads and memory went back */
        debug_made();
}

static const OSSL_DISPATCH provider_functions[] = {
    { OSSL_FUNC_PROVIDER_TEARDOWN, (void (*)(void))gpuaes_teardown },
    { OSSL_FUNC_PROVIDER_GETTABLE_PARAMS, (void (*)(void))gpuaes_gettable_params },
    { OSSL_FUNC_PROVIDER_GET_PARAMS, (void (*)(void))gpuaes_get_params },
    { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void))gpuaes_query },
    { 0, NULL }
};

/* The algorithm table: our implementations under the default provider's names. */
static CRYPTO_ONCE algorithms_once = CRYPTO_ONCE_STATIC_INIT;

static void build_algorithms(void)
{
    for (size_t v = 0; v < V_COUNT; v++) {
        algorithms[v].algorithm_names = gpuaes_variants[v].fallback->names;
        algorithms[v].property_definition = "provider=gpuaes";
        algorithms[v].implementation = gpuaes_variants[v].dispatch;
        algorithms[v].algorithm_description = "AES on NVIDIA GPUs (gpuaes)";
        algorithms_carry[v] = algorithms[v];
        algorithms_carry[v].implementation = gpuaes_variants[v].dispatch_carry;
    }
}

__attribute__((visibility("default")))
int OSSL_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                                      const OSSL_DISPATCH **out, void **provctx)
{
    OSSL_FUNC_core_get_params_fn *core_get_params = NULL;
    gpuaes_prov *prov;

    const OSSL_DISPATCH *d;

    for (d = in; d->function_id != 0; d++)
        if (d->function_id == OSSL_FUNC_CORE_GET_PARAMS)
            core_get_params = OSSL_FUNC_core_get_params(d);

    prov = OPENSSL_zalloc(sizeof(*prov));
    if (prov == NULL)
        return 0;
    prov->handle = handle;
    err_core_init(&prov->err, in);         /* first: the knobs' errors go there */
    settings_load(prov, core_get_params);
    gpu_inprocess_configure(&prov->gpu);    /* before anything can use the GPU */
    gpu_backend_select((gpu_backend_kind)prov->gpu_backend,
                       &(gpu_remote_settings){ prov->gpu.disable_gpu, (unsigned)prov->service_timeout_ms,
                                               prov->service_chunk, (unsigned)prov->service_connect_wait_ms,
                                               prov->service_ctr_keystream });
    ks_xor_init();
    if (!fallback_load(prov, in)) {
        err_carry(prov);
        OPENSSL_free(prov);
        (void)gpu_backend_leave();
        return 0;
    }
    (void)assume_verify_at_load(prov);     /* a failure turns the GPU path off */
    if (!CRYPTO_THREAD_run_once(&algorithms_once, build_algorithms)) {
        err_carry(prov);
        fallback_unload(prov);
        OPENSSL_free(prov);
        (void)gpu_backend_leave();
        return 0;
    }
    gpuaes_debug("loaded; offload thresholds %s", settings_policy(prov));
    *out = provider_functions;
    *provctx = prov;
    return 1;
}
