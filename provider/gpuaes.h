/*
 * gpuaes.h - what the provider's files share.
 *
 * Design: each gpuaes cipher context owns a context of OpenSSL's default
 * provider (the application's, or one loaded privately: fallback.c; called through its own
 * dispatch functions).  That "fallback" context owns the mode semantics
 * (padding, num, chaining IV, parameters, TLS).  The GPU only ever takes
 * whole, aligned blocks from the middle of an update; afterwards the fallback
 * context is re-synchronised (new IV / counter), so a context can switch
 * between the paths on every update.
 */
#ifndef GPUAES_PROVIDER_H
#define GPUAES_PROVIDER_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>

#include "gpuaes_gpu.h"
#include "prov_err.h"
#include "gpu_backend.h"          /* routes the job calls to the chosen layer */

/* The default provider's implementation of one cipher, as its dispatch table gives it. */
typedef struct fallback_cipher {
    const char *names;                     /* the default provider's names, aliases, OIDs */
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_dupctx_fn *dupctx;
    OSSL_FUNC_cipher_encrypt_init_fn *einit;
    OSSL_FUNC_cipher_decrypt_init_fn *dinit;
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_cipher_fn *cipher;
    OSSL_FUNC_cipher_get_params_fn *get_params;
    OSSL_FUNC_cipher_get_ctx_params_fn *get_ctx_params;
    OSSL_FUNC_cipher_set_ctx_params_fn *set_ctx_params;
    OSSL_FUNC_cipher_gettable_params_fn *gettable_params;
    OSSL_FUNC_cipher_gettable_ctx_params_fn *gettable_ctx_params;
    OSSL_FUNC_cipher_settable_ctx_params_fn *settable_ctx_params;
} fallback_cipher;

/* The modes gpuaes registers. */
typedef enum { MODE_ECB, MODE_CBC, MODE_CFB, MODE_CTR, MODE_GCM } gpuaes_mode;

/* One registered cipher variant: a line of the table in provider.c. */
typedef struct gpuaes_variant {
    const char *name;                      /* first name, as the default provider spells it */
    gpuaes_mode mode;
    size_t keylen;                         /* bytes */
    const OSSL_DISPATCH *dispatch;         /* our implementation */
    /* The default provider's, from the first load: only the functions without
     * a provider context (get_params) and the names read it; everything else
     * goes through the loading instance's own (gpuaes_fallback). */
    fallback_cipher *fallback;
    const OSSL_DISPATCH *dispatch_carry;   /* ours for a foreign core (provider.c, prov_err.h) */
} gpuaes_variant;

/* The GPU operations, each with its own offload threshold. */
typedef enum {
    OFFLOAD_ECB_ENC, OFFLOAD_ECB_DEC, OFFLOAD_CBC_DEC, OFFLOAD_CFB_DEC, OFFLOAD_CTR, OFFLOAD_GCM,
    OFFLOAD_KINDS
} offload_kind;

/*
 * gpu_cpu_share: the GPU jobs whose calling thread takes pieces from the
 * job's end on the CPU.  Default CTR only: on the H200 at 64 MiB, one thread,
 * the share took CTR from 42.0 to 45.6 GB/s but cost ECB 34.2 -> 33.4, CBC
 * 33.9 -> 32.1 and CFB 31.8 -> 26.3 (the default provider's CFB decryption is
 * serial, 0.8 GB/s: a piece stalls the pipeline); there the caller's core
 * does more good helping the copies (bench/results/2026-11-23-h200).
 */
enum { CPU_SHARE_OFF, CPU_SHARE_CTR, CPU_SHARE_ALL };

/* fallback: whose default provider does the CPU work (docs/DESIGN.md, "Which OpenSSL
 * does the CPU work"): the application's (the default), through a child library
 * context, where it has one loaded that passes the load checks, else one loaded
 * privately into the libcrypto gpuaes links. */
enum { FALLBACK_PRIVATE, FALLBACK_APPLICATION };

/* Provider context: one per load of the module into a library context. */
typedef struct gpuaes_prov {
    const OSSL_CORE_HANDLE *handle;
    gpuaes_core_err err;                   /* the core's error upcalls (prov_err.h) */
    int fallback_want;                     /* fallback: FALLBACK_* asked for */
    int fallback_app;                      /* the application's default provider is in use */
    char fallback_desc[512];               /* "application 3.5.6 (/path/of/its/code)" */
    OSSL_LIB_CTX *fallback_libctx;         /* private, or the child of the application's */
    OSSL_PROVIDER *fallback_prov;
    void *fallback_provctx;
    fallback_cipher *fallbacks;            /* its functions, one per variant */
    /* Updates at least this long go to the GPU (SIZE_MAX: never).  From
     * offload_min_bytes when set, else the measured per-operation defaults. */
    size_t offload_min[OFFLOAD_KINDS];
    int offload_min_set;                   /* offload_min_bytes was given (cnf or env) */
    size_t offload_min_bytes;              /* its value, when given */
    /* Bytes of GPU-worthy work done on the CPU before the GPU is started. */
    size_t gpu_start_bytes;
    /* Keystream ahead (CTR): see docs/DESIGN.md, "Keystream ahead". */
    int ks_enabled;                        /* keystream / GPUAES_KEYSTREAM */
    size_t ks_ramp;                        /* a CTR context this long (bytes) gets keystream windows */
    size_t ks_max_window;                  /* largest window (bytes, multiple of 16) */
    size_t ks_total;                       /* pinned memory for keystream, process-wide */
    size_t ks_max_contexts;                /* keystream contexts at once, process-wide */
    int cpu_share;                         /* gpu_cpu_share: CPU_SHARE_* */
    int gpu_backend;                       /* gpu_backend: gpu_backend_kind (gpu_backend.h) */
    int service_timeout_ms;                /* service_timeout_ms: a job's bound, plus 1 ms per MB */
    size_t service_chunk;                  /* service_chunk: the pieces a job goes to gpuaesd in */
    int service_connect_wait_ms;           /* the first call's wait for a running service */
    int service_ctr_keystream;             /* CTR jobs through the service as keystream + XOR */
    gpuaes_gpu_settings gpu;               /* the GPU layer's knobs (gpuaes_gpu_configure) */
} gpuaes_prov;

/* fallback.c: the default provider (the application's through a child library
 * context, or one loaded privately: fallback_want); fills prov->fallbacks, and
 * each variant's shared table on the first load.  `in`: the core's functions
 * (NULL: private only). */
int fallback_load(gpuaes_prov *prov, const OSSL_DISPATCH *in);
void fallback_unload(gpuaes_prov *prov);
/* prov's default-provider functions for var. */
#define gpuaes_fallback(prov, var) (&(prov)->fallbacks[(var) - gpuaes_variants])

/* settings.c: every knob from openssl.cnf and the environment (README, "Knobs"):
 * fills prov's offload_*, ks_* and gpu, sets the debug switch; a bad value
 * leaves an error on the queue and the default in force. */
void settings_load(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params);
/* "debug=off,offload_min_bytes=...": every knob's value in force, for the provider parameter. */
const char *settings_describe(const gpuaes_prov *prov);
/* "ecb-enc=4M,ecb-dec=...": the thresholds in force, for the provider parameter. */
const char *settings_policy(const gpuaes_prov *prov);

/* offload.c: the decision to use the GPU, and running a job with its reporting. */
/* Whether the GPU can take this kind at all (GCM needs compute capability 8.0). */
int offload_possible(offload_kind kind);
/* The GPU is up for a call of len bytes that it could take; starts it once the
 * process has done gpu_start_bytes of such work (never blocks). */
int offload_gpu_up(const gpuaes_prov *prov, size_t len);
/* Known never to run on the GPU in this process (asks nothing of a GPU not started). */
int offload_ruled_out(offload_kind kind);
/* The GPU is there, the call is at or above the kind's threshold, and dispatch says GPU. */
int offload_wanted(const gpuaes_prov *prov, offload_kind kind, size_t keylen, size_t len);
/* Runs job on the GPU (and its cpu_share, if any); on failure records the
 * error (queue, debug log, counter).  Returns job->done, the GPU prefix
 * (job->iv is the state at in + done); the caller completes the gap
 * [done, job->cpu_from) and continues from job->iv_end (gpuaes_gpu.h). */
size_t offload_run(const gpuaes_prov *prov, gpuaes_job *job);
uint64_t offload_gpu_bytes(void);
uint64_t offload_cpu_share_bytes(void);   /* done by the callers' shares of GPU jobs */
uint64_t offload_gpu_errors(void);
/* GCM bytes of messages on gpuaes's engine run on the CPU in one stitched pass
 * (gcm_fused.c): the gcm-fused-bytes parameter. */
void offload_count_gcm_fused(size_t len);
uint64_t offload_gcm_fused_bytes(void);

/* dispatch.c: CPU or GPU per call, from estimates measured in the process
 * (docs/DESIGN.md, "Dispatch").  Asked for calls at or above the kind's
 * threshold only. */
#define DISPATCH_SAMPLE ((size_t)64 << 10)   /* CPU calls this long feed the estimate */
int dispatch_to_gpu(const gpuaes_prov *prov, offload_kind kind, size_t keylen, size_t len);
/* After dispatch_to_gpu on this thread: 1 when it chose the GPU by its
 * estimates (not to look again) with no other thread of large calls, here
 * or in another process, and no other job on the GPU.  A GCM message moves
 * from the default provider only then: it cannot move back. */
int dispatch_gpu_alone(void);
uint64_t dispatch_now_ns(void);
void dispatch_cpu_done(offload_kind kind, size_t keylen, size_t len, uint64_t ns);
/* Around one GPU job (offload_run): begin returns the jobs already in flight. */
int dispatch_gpu_begin(void);
void dispatch_gpu_end(offload_kind kind, size_t len, size_t done, int ok, int busy_at_start,
                      uint64_t ns);
uint64_t dispatch_backoffs(void);
/* 1 for the one caller that is to measure the CPU estimate of (kind, keylen)
 * now (none yet, none claimed): it times a sample and reports it with
 * dispatch_cpu_done. */
int dispatch_cpu_claim(offload_kind kind, size_t keylen);
/* offload.c: that sample, measured aside, so that no caller's large update
 * waits on the CPU to measure it: the fallback runs a scratch buffer in a
 * context of its own (enc, ivlen: as the variant's calls). */
void offload_measure_cpu(const gpuaes_prov *prov, const fallback_cipher *fb, offload_kind kind,
                          size_t keylen, size_t ivlen, int enc);
#ifdef GPUAES_TEST_HOOKS
/* Model tests (test/test_dispatch_model.c): nonzero, the time dispatch sees;
 * the usable cores in force (set > 0: replaced). */
extern _Atomic uint64_t dispatch_test_clock;
long dispatch_test_cores(long set);
#endif

/* in[0, inlen) and out[0, outlen) share bytes without starting at the same
 * address.  The GPU paths read and write in chunks, so such calls (which the
 * default provider serves in its own byte order) stay on the CPU; in-place
 * calls (out == in) do not overlap partially. */
static inline int gpuaes_overlap_partial(const void *in, size_t inlen, const void *out, size_t outlen)
{
    const uintptr_t i = (uintptr_t)in, o = (uintptr_t)out;
    if (in == NULL || out == NULL || i == o || inlen == 0 || outlen == 0) return 0;
    return i < o ? o - i < inlen : i - o < outlen;
}

/* A GPU keystream failure: error queue, debug log, gpu-errors (the bytes are done on the CPU). */
void offload_report_failure(const gpuaes_prov *prov, const char *what, const char *error);

/* keystream_xor.c: the vectorised XOR of keystream ahead. */
void ks_xor_init(void);
void ks_xor(unsigned char *out, const unsigned char *in, const unsigned char *ks, size_t n);
/* block_keystream.c: the keystream counters (provider parameters). */
uint64_t ks_bytes_made(void);
uint64_t ks_bytes_used(void);

/* debug.c: GPUAES_DEBUG=1 logs to stderr; compiled in always, free when off.
 * The switch is process-wide: settings_load sets it, the latest load wins. */
void gpuaes_debug_set(int on);
void gpuaes_debug(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int gpuaes_debug_enabled(void);

/* loaded_object.c: the loaded object holding addr (1), its load base and,
 * for a shared library, its path (NULL for the executable); 0 when none. */
int loaded_object(const void *addr, uintptr_t *base, const char **path);

/* The table in provider.c. */
extern const gpuaes_variant gpuaes_variants[];
extern const size_t gpuaes_variant_count;

/*
 * The two cipher families.  Everything but newctx, get_params and update is
 * shared by all variants of a family; provider.c puts these into each
 * variant's table, with the update of its mode: the block family has one for
 * ECB/CBC (block_update: counts what the fallback's block buffer holds), CFB
 * and CTR (block_update_cfb, block_update_ctr: nothing to mirror; CTR counts
 * down its keystream ramp).
 */
#define FAMILY_DECLARE(f)                                                     \
    void *f##_newctx(void *provctx, const gpuaes_variant *var);               \
    const gpuaes_prov *f##_prov_of(const void *vctx);                         \
    OSSL_FUNC_cipher_freectx_fn f##_freectx;                                  \
    OSSL_FUNC_cipher_dupctx_fn f##_dupctx;                                    \
    OSSL_FUNC_cipher_encrypt_init_fn f##_einit;                               \
    OSSL_FUNC_cipher_decrypt_init_fn f##_dinit;                               \
    OSSL_FUNC_cipher_update_fn f##_update;                                    \
    OSSL_FUNC_cipher_final_fn f##_final;                                      \
    OSSL_FUNC_cipher_cipher_fn f##_cipher;                                    \
    OSSL_FUNC_cipher_get_ctx_params_fn f##_get_ctx_params;                    \
    OSSL_FUNC_cipher_set_ctx_params_fn f##_set_ctx_params;                    \
    OSSL_FUNC_cipher_gettable_params_fn f##_gettable_params;                  \
    OSSL_FUNC_cipher_gettable_ctx_params_fn f##_gettable_ctx_params;          \
    OSSL_FUNC_cipher_settable_ctx_params_fn f##_settable_ctx_params;
FAMILY_DECLARE(block)
FAMILY_DECLARE(gcm)
OSSL_FUNC_cipher_update_fn block_update_cfb;
OSSL_FUNC_cipher_update_fn block_update_ctr;

#define FAMILY_DISPATCH(f)                                                    \
    { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))f##_freectx },                \
    { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))f##_dupctx },                  \
    { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))f##_einit },             \
    { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))f##_dinit },             \
    { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))f##_final },                    \
    { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))f##_cipher },                  \
    { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))f##_get_ctx_params },  \
    { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))f##_set_ctx_params },  \
    { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))f##_gettable_params },\
    { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_gettable_ctx_params },                              \
    { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_settable_ctx_params }

/* f##_einit and f##_dinit: the family's own f##_init(ctx, ..., enc). */
#define FAMILY_INITS(f)                                                       \
    int f##_einit(void *vctx, const unsigned char *key, size_t keylen,        \
                  const unsigned char *iv, size_t ivlen,                      \
                  const OSSL_PARAM params[])                                  \
    {                                                                         \
        return f##_init(vctx, key, keylen, iv, ivlen, params, 1);             \
    }                                                                         \
    int f##_dinit(void *vctx, const unsigned char *key, size_t keylen,        \
                  const unsigned char *iv, size_t ivlen,                      \
                  const OSSL_PARAM params[])                                  \
    {                                                                         \
        return f##_init(vctx, key, keylen, iv, ivlen, params, 0);             \
    }

/* The family's parameter lists: those of the default provider's cipher of
 * variant v, one of the family (ASSUME_SHARED_PARAM_TABLES); ctx_type is the
 * family's context, whose fbctx is the default provider's. */
#define FAMILY_PARAM_TABLES(f, ctx_type, v)                            \
    const OSSL_PARAM *f##_gettable_params(void *provctx)                      \
    {                                                                         \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].gettable_params(prov->fallback_provctx);               \
    }                                                                         \
    const OSSL_PARAM *f##_gettable_ctx_params(void *vctx, void *provctx)      \
    {                                                                         \
        const ctx_type *c = vctx;                                             \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].gettable_ctx_params(c != NULL ? c->fbctx : NULL,   \
                                               prov->fallback_provctx);       \
    }                                                                         \
    const OSSL_PARAM *f##_settable_ctx_params(void *vctx, void *provctx)      \
    {                                                                         \
        const ctx_type *c = vctx;                                             \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].settable_ctx_params(c != NULL ? c->fbctx : NULL,   \
                                               prov->fallback_provctx);       \
    }

#endif
