#define _GNU_SOURCE              /* secure_getenv */
/*
 * settings.c - knobs: one table, one parser.  Every knob has an openssl.cnf
 * name (provider section) and an environment name (the variable wins).  A
 * bad value is refused with an error on the OpenSSL error queue naming the
 * knob (and the debug log); the provider still loads, with the value that
 * the other source gave or the default.  The GPU layer's knobs reach it
 * through gpu_inprocess_configure() (include/gpuaes_gpu.h holds their limits).
 */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "prov_ctx.h"
#include "gpu/offload.h"
#include "debug.h"
#include "gpu/gpu_backend.h"
#include "block/block_ctx.h"             /* KS_NWIN */

/*
 * Default offload thresholds, per operation: below them a GPU round trip
 * (staging copies, PCIe, ~6 us of synchronisation) loses to one AES-NI core.
 * Measured on an H200 with bench/crossover.sh (evp_bench, 1 thread, gpuaes
 * forced onto the GPU path (GPUAES_OFFLOAD_MIN_BYTES=0, today with
 * GPUAES_DISPATCH=force) against the default provider, update sizes
 * 256 KiB .. 64 MiB, bench/results/crossover-05c2a73, GCM at 8 MiB
 * from gcm-first-chunk.txt there): the smallest measured size from which the
 * GPU path was faster for every key size and direction.  docs/DESIGN.md
 * ("Offload thresholds") has the table.
 */
static const size_t offload_defaults[OFFLOAD_KINDS] = {
    [OFFLOAD_ECB_ENC] = (size_t)1 << 20,   /* 256 KiB: 0.68-0.90x, 1 MiB: 1.52-1.99x */
    [OFFLOAD_ECB_DEC] = (size_t)1 << 20,   /* 256 KiB: 0.64-0.76x, 1 MiB: 1.41-1.91x */
    [OFFLOAD_CBC_DEC] = (size_t)1 << 20,   /* 256 KiB: 0.61x, 1 MiB: 1.29x */
    [OFFLOAD_CFB_DEC] = (size_t)256 << 10, /* 256 KiB: 7.2-8.3x (CFB decryption is serial on a CPU) */
    [OFFLOAD_CTR]     = (size_t)1 << 20,   /* 256 KiB: 0.67-0.92x, 1 MiB: 1.47-2.14x */
    [OFFLOAD_GCM]     = (size_t)8 << 20,   /* 4 MiB: 0.91-1.34x (two runs), 8 MiB: 1.21-1.42x */
};

static const char *const offload_names[OFFLOAD_KINDS] = {
    "ecb-enc", "ecb-dec", "cbc-dec", "cfb-dec", "ctr", "gcm"
};

typedef enum { KNOB_SIZE, KNOB_BOOL, KNOB_COUNT, KNOB_ENUM } knob_kind;
/* Where a value goes: a field of the provider context, of the GPU layer's
 * settings (prov->gpu), or the process-wide debug switch. */
typedef enum { TO_PROV, TO_GPU, TO_DEBUG } knob_dest;

typedef struct knob {
    const char *cnf, *env;
    knob_kind kind;
    uint64_t min, max, def;
    const char *def_text;          /* the default in words, where its value would mislead */
    const char *const *names;      /* KNOB_ENUM: value i is spelt names[i] */
    knob_dest dest;
    size_t offset, size;           /* the field */
} knob;

/* gpu_cpu_share: which GPU jobs their calling threads work on (prov_ctx.h). */
static const char *const share_names[] = {
    [CPU_SHARE_OFF] = "off", [CPU_SHARE_CTR] = "ctr", [CPU_SHARE_ALL] = "all", NULL
};

static const char *const dispatch_names[] = {
    [DISPATCH_AUTO] = "auto", [DISPATCH_FORCE] = "force", NULL
};

static const char *const backend_names[] = {
    [GPU_BACKEND_INPROCESS] = "inprocess", [GPU_BACKEND_SERVICE] = "service", NULL
};

static const char *const fallback_names[] = {
    [FALLBACK_PRIVATE] = "private", [FALLBACK_APPLICATION] = "application", NULL
};

static const char *const fault_names[] = {
    [GPUAES_FAULT_NONE] = "none", [GPUAES_FAULT_ALLOC] = "alloc", [GPUAES_FAULT_COPYIN] = "copyin",
    [GPUAES_FAULT_LAUNCH] = "launch", [GPUAES_FAULT_COPYOUT] = "copyout", [GPUAES_FAULT_SYNC] = "sync",
    NULL
};

#define K_ 1024ULL
#define FIELD(type, f) offsetof(type, f), sizeof(((type *)0)->f)
#define PROV(f) TO_PROV, FIELD(gpuaes_prov, f)
#define GPU(f) TO_GPU, FIELD(gpuaes_gpu_settings, f)
#define DEBUG_SWITCH TO_DEBUG, 0, 0
#define SIZE_KNOB(cnf, env, lo, hi, def, dest) { cnf, env, KNOB_SIZE, lo, hi, def, NULL, NULL, dest }
#define COUNT_KNOB(cnf, env, lo, hi, def, dest) { cnf, env, KNOB_COUNT, lo, hi, def, NULL, NULL, dest }
#define BOOL_KNOB(cnf, env, def, dest) { cnf, env, KNOB_BOOL, 0, 1, def, NULL, NULL, dest }

/*
 * The knobs (README, "Knobs").  Keystream defaults (docs/DESIGN.md,
 * "Keystream ahead"): a CTR context gets windows once it has passed 256 KiB;
 * windows grow from 1 MiB to 4 MiB (a 4 MiB window lands in the last-level
 * cache as it arrives: the fastest XOR measured), at most the keystream the
 * GPU layer lets be in flight at once (a larger window's fill would always be
 * refused); 256 MiB of pinned memory in all; 2 keystream contexts at once
 * (one GPU's D2H, ~55 GB/s, feeds two at XOR speed, ~20-25 GB/s each;
 * bench/NOTES.md, section 10).  The GPU layer's defaults are measured too
 * (docs/DESIGN.md, "Staging pipeline").  debug comes first, so that what the
 * others report reaches the debug log.
 */
static const knob knobs[] = {
    BOOL_KNOB("debug", "GPUAES_DEBUG", 0, DEBUG_SWITCH),
    { "offload_min_bytes", "GPUAES_OFFLOAD_MIN_BYTES", KNOB_SIZE, 0, SIZE_MAX - 1, SIZE_MAX,
      "the per-operation thresholds", NULL, PROV(offload_min_bytes) },
    /* Above the thresholds: the dispatcher decides, or every call goes to the GPU. */
    { "dispatch", "GPUAES_DISPATCH", KNOB_ENUM, DISPATCH_AUTO, DISPATCH_FORCE, DISPATCH_AUTO,
      NULL, dispatch_names, PROV(dispatch) },
    /* Unset (SIZE_MAX): per backend, settings_load. */
    { "gpu_start_bytes", "GPUAES_GPU_START_BYTES", KNOB_SIZE, 0, SIZE_MAX - 1, SIZE_MAX,
      "the backend's default", NULL, PROV(gpu_start_bytes) },
    BOOL_KNOB("keystream", "GPUAES_KEYSTREAM", 1, PROV(ks_enabled)),
    SIZE_KNOB("keystream_ramp_bytes", "GPUAES_KEYSTREAM_RAMP_BYTES", 0, SIZE_MAX, 256 * K_,
              PROV(ks_ramp)),
    SIZE_KNOB("keystream_max_window", "GPUAES_KEYSTREAM_MAX_WINDOW", 16, GPUAES_KS_INFLIGHT_MAX,
              4 * K_ * K_, PROV(ks_max_window)),
    SIZE_KNOB("keystream_total_bytes", "GPUAES_KEYSTREAM_TOTAL_BYTES", 0, SIZE_MAX, 256 * K_ * K_,
              PROV(ks_total)),
    COUNT_KNOB("keystream_max_contexts", "GPUAES_KEYSTREAM_MAX_CONTEXTS", 0, 65536, 2,
               PROV(ks_max_contexts)),
    BOOL_KNOB("disable_gpu", "GPUAES_DISABLE_GPU", 0, GPU(disable_gpu)),
    { "gpu_cpu_share", "GPUAES_GPU_CPU_SHARE", KNOB_ENUM, CPU_SHARE_OFF, CPU_SHARE_ALL,
      CPU_SHARE_CTR, NULL, share_names, PROV(cpu_share) },
    /* docs/SERVICE.md: jobs through gpuaesd (the default: no CUDA in
     * applications), or CUDA in the process.  A job the service does not
     * answer within service_timeout_ms plus 1 ms per MB (1 GB/s, far below the
     * GPU's rate) completes on the CPU. */
    { "gpu_backend", "GPUAES_GPU_BACKEND", KNOB_ENUM, GPU_BACKEND_INPROCESS, GPU_BACKEND_SERVICE,
      GPU_BACKEND_SERVICE, NULL, backend_names, PROV(gpu_backend) },
    COUNT_KNOB("service_timeout_ms", "GPUAES_SERVICE_TIMEOUT_MS", 1, 600000, 100,
               PROV(service_timeout_ms)),
    /* A job goes to the service in pieces of this size, pipelined
     * (gpu_remote.c): copy-in, service and copy-out of different pieces overlap. */
    SIZE_KNOB("service_chunk", "GPUAES_SERVICE_CHUNK", 64 * K_, 64 * K_ * K_, 8 * K_ * K_,
              PROV(service_chunk)),
    /* The call that starts the connection to a running service waits this
     * long for it (gpu_remote.c, remote_start). */
    COUNT_KNOB("service_connect_wait_ms", "GPUAES_SERVICE_CONNECT_WAIT_MS", 0, 1000, 3,
               PROV(service_connect_wait_ms)),
    /* CTR jobs through the service as keystream, XORed on the copy out: one
     * host pass instead of a copy in and a copy out (gpu_remote.c). */
    BOOL_KNOB("service_ctr_keystream", "GPUAES_SERVICE_CTR_KEYSTREAM", 1, PROV(service_ctr_keystream)),
    /* Whose default provider does the CPU work (fallback.c). */
    { "fallback", "GPUAES_FALLBACK", KNOB_ENUM, FALLBACK_PRIVATE, FALLBACK_APPLICATION,
      FALLBACK_APPLICATION, NULL, fallback_names, PROV(fallback_want) },
    COUNT_KNOB("device", "GPUAES_DEVICE", 0, GPUAES_DEVICE_MAX, 0, GPU(device)),
    { "fault", "GPUAES_FAULT", KNOB_ENUM, GPUAES_FAULT_NONE, GPUAES_FAULT_SYNC, GPUAES_FAULT_NONE,
      NULL, fault_names, GPU(fault) },
    SIZE_KNOB("staging_chunk", "GPUAES_STAGING_CHUNK", GPUAES_STAGING_CHUNK_MIN,
              GPUAES_STAGING_CHUNK_MAX, GPUAES_STAGING_CHUNK_DEFAULT, GPU(staging_chunk)),
    COUNT_KNOB("staging_lanes", "GPUAES_STAGING_LANES", GPUAES_STAGING_LANES_MIN,
               GPUAES_STAGING_LANES_MAX, GPUAES_STAGING_LANES_DEFAULT, GPU(staging_lanes)),
    SIZE_KNOB("staging_first", "GPUAES_STAGING_FIRST", GPUAES_STAGING_FIRST_MIN,
              GPUAES_STAGING_CHUNK_MAX, GPUAES_STAGING_FIRST_DEFAULT, GPU(staging_first)),
    SIZE_KNOB("staging_zerocopy", "GPUAES_STAGING_ZEROCOPY", 0, GPUAES_STAGING_CHUNK_MAX,
              GPUAES_STAGING_ZEROCOPY_DEFAULT, GPU(staging_zerocopy)),
    COUNT_KNOB("staging_trace", "GPUAES_STAGING_TRACE", 0, GPUAES_STAGING_TRACE_MAX, 0,
               GPU(staging_trace)),
    { "copy_threads", "GPUAES_COPY_THREADS", KNOB_COUNT, 1, GPUAES_COPY_THREADS_MAX, 0,
      "half the usable cores (at most 8)", NULL, GPU(copy_threads) },
    SIZE_KNOB("copy_part", "GPUAES_COPY_PART", GPUAES_COPY_PART_MIN, GPUAES_COPY_PART_MAX,
              GPUAES_COPY_PART_DEFAULT, GPU(copy_part)),
    BOOL_KNOB("copy_stream", "GPUAES_COPY_STREAM", 1, GPU(copy_stream)),
    /* Pinned + device memory of staging slots and keystream windows (README,
     * "Device memory"); the CUDA context's own ~0.5 GiB is the driver's. */
    { "gpu_memory_max", "GPUAES_GPU_MEMORY_MAX", KNOB_SIZE, 0, SIZE_MAX, SIZE_MAX, "unlimited",
      NULL, GPU(gpu_memory_max) },
};

/* Old spellings, still read where the knob's own names are not given (deprecated). */
static const struct {
    const char *cnf, *old_cnf, *old_env;
} aliases[] = {
    { "keystream_max_contexts", "keystream_max_streams", "GPUAES_KEYSTREAM_MAX_STREAMS" },
};

/*
 * A number: decimal, or hexadecimal after 0x; with `suffix`, K, M or G
 * (binary) may follow.  No sign, no spaces, nothing after it.
 */
static int parse_number(const char *s, int suffix, uint64_t *out, const char **why)
{
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *p = hex ? s + 2 : s;
    uint64_t v = 0;
    int digits = 0, shift = 0;

    for (; *p != '\0'; p++, digits++) {
        unsigned d;

        if (isdigit((unsigned char)*p))
            d = (unsigned)(*p - '0');
        else if (hex && isxdigit((unsigned char)*p))
            d = (unsigned)(tolower((unsigned char)*p) - 'a' + 10);
        else
            break;
        if (v > (UINT64_MAX - d) / (hex ? 16 : 10)) {
            *why = "too large";
            return 0;
        }
        v = v * (hex ? 16 : 10) + d;
    }
    if (digits == 0) {
        *why = "not a number";
        return 0;
    }
    if (suffix && *p != '\0' && p[1] == '\0') {
        switch (*p) {
        case 'k': case 'K': shift = 10; p++; break;
        case 'm': case 'M': shift = 20; p++; break;
        case 'g': case 'G': shift = 30; p++; break;
        default: break;
        }
    }
    if (*p != '\0') {
        *why = suffix ? "not a number with an optional K, M or G" : "not a number";
        return 0;
    }
    if (shift != 0 && v > (UINT64_MAX >> shift)) {
        *why = "too large";
        return 0;
    }
    *out = v << shift;
    return 1;
}

static void format_bytes(char *buf, size_t len, size_t v);

/* The value v of knob k in words ("4M", "on", "sync"). */
static void format_value(char *buf, size_t len, const knob *k, uint64_t v)
{
    if (v == k->def && k->def_text != NULL)
        snprintf(buf, len, "%s", k->def_text);
    else if (k->kind == KNOB_SIZE)
        format_bytes(buf, len, (size_t)v);
    else if (k->kind == KNOB_BOOL)
        snprintf(buf, len, "%s", v ? "on" : "off");
    else if (k->kind == KNOB_ENUM)
        snprintf(buf, len, "%s", k->names[v]);
    else
        snprintf(buf, len, "%llu", (unsigned long long)v);
}

/* Parses s as a value of k; 0 with why (a static string or written into buf) if it is none. */
static int knob_parse(const knob *k, const char *s, uint64_t *v, const char **why,
                      char *buf, size_t len)
{
    static const char *const bools[] = { "0", "off", "no", "false", "1", "on", "yes", "true" };

    switch (k->kind) {
    case KNOB_BOOL:
        for (size_t i = 0; i < sizeof(bools) / sizeof(bools[0]); i++)
            if (strcasecmp(s, bools[i]) == 0) {
                *v = i >= 4;
                return 1;
            }
        *why = "not one of 0/1, off/on, no/yes, false/true";
        return 0;
    case KNOB_ENUM:
        for (uint64_t i = k->min; i <= k->max; i++)
            if (strcasecmp(s, k->names[i]) == 0) {
                *v = i;
                return 1;
            }
        *why = "not a known name";
        return 0;
    case KNOB_SIZE:
    case KNOB_COUNT:
        if (!parse_number(s, k->kind == KNOB_SIZE, v, why))
            return 0;
        if (*v < k->min || *v > k->max) {
            char lo[32], hi[32];

            format_value(lo, sizeof(lo), k, k->min);
            format_value(hi, sizeof(hi), k, k->max);
            snprintf(buf, len, "outside %s..%s", lo, hi);
            *why = buf;
            return 0;
        }
        return 1;
    }
    return 0;
}

static void knob_store(gpuaes_prov *prov, const knob *k, uint64_t v)
{
    unsigned char *base = k->dest == TO_GPU ? (unsigned char *)&prov->gpu : (unsigned char *)prov;
    uint32_t v32 = (uint32_t)v;

    if (k->dest == TO_DEBUG)
        gpuaes_debug_set((int)v);
    else if (k->size == sizeof(v32))       /* int, enum: every value fits (ranges above) */
        memcpy(base + k->offset, &v32, sizeof(v32));
    else                                   /* size_t, long */
        memcpy(base + k->offset, &v, sizeof(v));
}

static uint64_t knob_load(const gpuaes_prov *prov, const knob *k)
{
    const unsigned char *base = k->dest == TO_GPU ? (const unsigned char *)&prov->gpu
                                                  : (const unsigned char *)prov;
    uint32_t v32;
    uint64_t v;

    if (k->dest == TO_DEBUG)
        return (uint64_t)gpuaes_debug_enabled();
    if (k->size == sizeof(v32)) {
        memcpy(&v32, base + k->offset, sizeof(v32));
        return v32;
    }
    memcpy(&v, base + k->offset, sizeof(v));
    return v;
}

static void report_bad(const gpuaes_prov *prov, const knob *k, const char *name,
                       const char *value, const char *why, uint64_t used)
{
    char u[64];

    format_value(u, sizeof(u), k, used);
    GPUAES_RAISE_DATA(prov, PROV_R_INVALID_CONFIG_DATA,
                      "gpuaes: bad value for %s: '%.64s' (%s); using %s", name, value, why, u);
    gpuaes_debug("bad value for %s: '%.64s' (%s); using %s", name, value, why, u);
}

/* The openssl.cnf value of `name`; NULL when not given (or empty). */
static char *cnf_value(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params,
                       const char *name)
{
    char *cnf = NULL;
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr(name, &cnf, 0), OSSL_PARAM_END };

    if (core_get_params == NULL || !core_get_params(prov->handle, p) || cnf == NULL || *cnf == '\0')
        return NULL;
    return cnf;
}

/* One knob: openssl.cnf, then the environment (wins); empty means not given.
 * A knob's own name wins over its old spelling (aliases). */
static void knob_load_one(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params,
                          const knob *k)
{
    char *cnf = cnf_value(prov, core_get_params, k->cnf), bc[96], be[96];
    const char *env = secure_getenv(k->env), *why_c = NULL, *why_e = NULL;
    const char *cnf_name = k->cnf, *env_name = k->env;
    uint64_t vc = 0, ve = 0, v = k->def;
    int cnf_ok = 0, env_ok = 0;

    if (env != NULL && *env == '\0')
        env = NULL;
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        if (strcmp(aliases[i].cnf, k->cnf) != 0)
            continue;
        if (cnf == NULL && (cnf = cnf_value(prov, core_get_params, aliases[i].old_cnf)) != NULL)
            cnf_name = aliases[i].old_cnf;
        if (env == NULL && (env = secure_getenv(aliases[i].old_env)) != NULL) {
            if (*env == '\0')
                env = NULL;
            else
                env_name = aliases[i].old_env;
        }
        if (cnf_name != k->cnf)
            gpuaes_debug("%s is deprecated: use %s", cnf_name, k->cnf);
        if (env_name != k->env)
            gpuaes_debug("%s is deprecated: use %s", env_name, k->env);
    }
    if (cnf != NULL && (cnf_ok = knob_parse(k, cnf, &vc, &why_c, bc, sizeof(bc))))
        v = vc;
    if (env != NULL && (env_ok = knob_parse(k, env, &ve, &why_e, be, sizeof(be))))
        v = ve;
    knob_store(prov, k, v);
    if (cnf != NULL && !cnf_ok)
        report_bad(prov, k, cnf_name, cnf, why_c, v);
    if (env != NULL && !env_ok)
        report_bad(prov, k, env_name, env, why_e, v);
}

void settings_load(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params)
{
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]); i++)
        knob_load_one(prov, core_get_params, &knobs[i]);
    /* A process with privileges its caller lacks (setuid, setgid, file
     * capabilities: AT_SECURE) has an environment its caller wrote: it takes
     * no knob from it (secure_getenv, as OpenSSL treats its own variables)
     * and starts nothing, neither a gpuaesd with its privileges nor CUDA in
     * it.  Everything runs on the default provider. */
    if (getauxval(AT_SECURE) != 0)
        prov->gpu.disable_gpu = 1;

    /* In process, 2 GiB: a quarter of a second of one AES-NI core, about the
     * GPU start-up's own length: a process that ends sooner would only wait
     * for it (DESIGN).  With the service nothing waits and the process owns
     * no CUDA: 8 MiB (H200, a fresh process of 1 GiB in 64 MiB calls with a
     * cold service: 1.13-1.22x the default provider, its longest call 14-22
     * ms against the default's 22-45: bench/results/README.md, earlier runs:
     * 2026-11-24-h200/service-step3). */
    if (prov->gpu_start_bytes == SIZE_MAX)
        prov->gpu_start_bytes = prov->gpu_backend == GPU_BACKEND_SERVICE ? 8 * K_ * K_ : 2 * K_ * K_ * K_;
    for (int k = 0; k < OFFLOAD_KINDS; k++)
        prov->offload_min[k] = prov->offload_min_bytes != SIZE_MAX ? prov->offload_min_bytes
                                                                   : offload_defaults[k];

    prov->ks_max_window &= ~(size_t)15;    /* whole blocks; at least 16 (range above) */
    if (prov->ks_max_contexts == 0)
        prov->ks_enabled = 0;
    if (prov->ks_enabled && prov->ks_total < prov->ks_max_window) {
        char t[32], w[32];

        format_bytes(t, sizeof(t), prov->ks_total);
        format_bytes(w, sizeof(w), prov->ks_max_window);
        GPUAES_RAISE_DATA(prov, PROV_R_INVALID_CONFIG_DATA,
                          "gpuaes: keystream_total_bytes (%s) is less than one "
                          "keystream_max_window (%s); keystream ahead off", t, w);
        gpuaes_debug("keystream_total_bytes (%s) is less than one keystream_max_window (%s); "
                     "keystream ahead off", t, w);
        prov->ks_enabled = 0;
    }
    gpu_inprocess_ks_limit(prov->ks_total);
    gpu_remote_ks_limit(prov->ks_total, (size_t)prov->ks_max_contexts * KS_NWIN);
}

static void format_bytes(char *buf, size_t len, size_t v)
{
    if (v == SIZE_MAX)
        snprintf(buf, len, "never");
    else if (v >= ((size_t)1 << 20) && v % ((size_t)1 << 20) == 0)
        snprintf(buf, len, "%zuM", v >> 20);
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(buf, len, "%zuK", v >> 10);
    else
        snprintf(buf, len, "%zu", v);
}

const char *settings_policy(const gpuaes_prov *prov)
{
    static _Thread_local char buf[160];
    size_t n = 0;

    buf[0] = '\0';
    for (int k = 0; k < OFFLOAD_KINDS && n < sizeof(buf); k++) {
        char v[32];

        format_bytes(v, sizeof(v), offload_threshold(prov, (offload_kind)k));
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s=%s", k ? "," : "",
                              offload_names[k], v);
    }
    if (prov->dispatch == DISPATCH_FORCE && n < sizeof(buf))
        snprintf(buf + n, sizeof(buf) - n, ",dispatch=force");
    return buf;
}

const char *settings_describe(const gpuaes_prov *prov)
{
    static _Thread_local char buf[768];
    size_t n = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(knobs) / sizeof(knobs[0]) && n < sizeof(buf); i++) {
        char v[64];

        format_value(v, sizeof(v), &knobs[i], knob_load(prov, &knobs[i]));
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s=%s", i ? "," : "", knobs[i].cnf, v);
    }
    return buf;
}
