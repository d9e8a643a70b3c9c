/*
 * prov_ctx.h - the provider context (one per load of the module), the
 * cipher variants it registers and the default provider behind them.
 *
 * Design: each gpuaes cipher context owns a context of OpenSSL's default
 * provider (the application's, or one loaded privately: fallback.c; called through its own
 * dispatch functions).  That "fallback" context owns the mode semantics
 * (padding, num, chaining IV, parameters, TLS).  The GPU only ever takes
 * whole, aligned blocks from the middle of an update; afterwards the fallback
 * context is re-synchronised (new IV / counter), so a context can switch
 * between the paths on every update.
 */
#ifndef GPUAES_PROV_CTX_H
#define GPUAES_PROV_CTX_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>

#include "gpuaes_gpu.h"                /* gpuaes_gpu_settings */
#include "gpu/offload.h"               /* offload_kind */
#include "prov_err.h"

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
    /* The ECB and CTR variants of its key size (indices into the table): GCM's
     * engine runs them too. */
    unsigned char ecb_variant, ctr_variant;
} gpuaes_variant;

/*
 * gpu_cpu_share: the GPU jobs whose calling thread takes pieces from the
 * job's end on the CPU.  Default CTR only: on the H200 at 64 MiB, one thread,
 * the share took CTR from 42.0 to 45.6 GB/s but cost ECB 34.2 -> 33.4, CBC
 * 33.9 -> 32.1 and CFB 31.8 -> 26.3 (the default provider's CFB decryption is
 * serial, 0.8 GB/s: a piece stalls the pipeline); there the caller's core
 * does more good helping the copies (bench/results/README.md, earlier runs:
 * 2026-11-23-h200/mid-c92e9eb).
 */
enum { CPU_SHARE_OFF, CPU_SHARE_CTR, CPU_SHARE_ALL };

/* fallback: whose default provider does the CPU work (docs/DESIGN.md, "Which OpenSSL
 * does the CPU work"): the application's (the default), through a child library
 * context, where it has one loaded that passes the load checks, else one loaded
 * privately into the libcrypto gpuaes links. */
enum { FALLBACK_PRIVATE, FALLBACK_APPLICATION };

/* dispatch: at or above its operation's threshold, a call goes to the GPU
 * when the dispatcher predicts it finishes sooner there (auto, dispatch.c),
 * or always (force: no dispatcher, no back-off, the GPU started at the first
 * such call; for tests and measurements of the GPU path). */
enum { DISPATCH_AUTO, DISPATCH_FORCE };

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
    /* Updates at least this long may go to the GPU, as `dispatch` decides
     * (SIZE_MAX: never).  From offload_min_bytes when set, else the measured
     * per-operation defaults. */
    size_t offload_min[OFFLOAD_KINDS];
    size_t offload_min_bytes;              /* the knob: SIZE_MAX when not given */
    int dispatch;                          /* dispatch: DISPATCH_AUTO or DISPATCH_FORCE */
    /* The default provider failed an assumption at load (assumptions.c):
     * no GPU path, whatever the settings say (offload_threshold), and every
     * parameter is the fallback's to answer (length_params.h). */
    int gpu_path_off;
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
/* "ecb-enc=4M,ecb-dec=...": the thresholds in force, then ",dispatch=force" when
 * forced, for the provider parameter. */
const char *settings_policy(const gpuaes_prov *prov);

/* The table in provider.c. */
extern const gpuaes_variant gpuaes_variants[];
extern const size_t gpuaes_variant_count;

#endif
