/*
 * settings.c - knobs: openssl.cnf provider-section parameters, overridden by
 * environment variables (the variable wins).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/params.h>

#include "gpuaes.h"

/*
 * Default offload thresholds, per operation: below them a GPU round trip
 * (staging copies, PCIe, ~6 us of synchronisation) loses to one AES-NI core.
 * Measured on an H200 with bench/crossover.sh (evp_bench, 1 thread, gpuaes
 * with GPUAES_OFFLOAD_MIN_BYTES=0 against the default provider, update sizes
 * 256 KiB .. 64 MiB, bench/results/2026-11-22-h200-crossover-3, GCM at 8 MiB
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

/* Parses a byte count ("1048576", "4M", "64K"); returns 0 if malformed. */
static int parse_bytes(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;

    if (s == NULL || *s == '\0')
        return 0;
    errno = 0;
    v = strtoull(s, &end, 0);
    if (errno != 0 || end == s)
        return 0;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (*end != '\0')
        return 0;
    *out = (size_t)v;
    return 1;
}

/* ---- Keystream ahead knobs ---- */

/* One byte-count knob: openssl.cnf `cnf`, then environment `env` (wins). */
static size_t knob_bytes(const gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params,
                         const char *cnf_name, const char *env_name, size_t def)
{
    char *cnf = NULL;
    const char *env = getenv(env_name);
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr(cnf_name, &cnf, 0), OSSL_PARAM_END };
    size_t v = def, x;

    if (core_get_params != NULL && core_get_params(prov->handle, p) && cnf != NULL) {
        if (parse_bytes(cnf, &x))
            v = x;
        else
            gpuaes_debug("ignoring malformed %s = %s", cnf_name, cnf);
    }
    if (env != NULL) {
        if (parse_bytes(env, &x))
            v = x;
        else
            gpuaes_debug("ignoring malformed %s=%s", env_name, env);
    }
    return v;
}

/*
 * Defaults (docs/DESIGN.md, "Keystream ahead"): a CTR stream gets keystream
 * windows once it has passed 256 KiB; windows grow from 1 MiB to 4 MiB (4 MiB
 * windows land in the last-level cache as they arrive: the fastest XOR
 * measured); 256 MiB of pinned memory in all (16 streams x 3 windows x 4 MiB
 * fit with room to spare).
 */
static void settings_load_keystream(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params)
{
    prov->ks_enabled = knob_bytes(prov, core_get_params, "keystream", "GPUAES_KEYSTREAM", 1) != 0;
    prov->ks_ramp = knob_bytes(prov, core_get_params, "keystream_ramp_bytes",
                               "GPUAES_KEYSTREAM_RAMP_BYTES", (size_t)256 << 10);
    prov->ks_max_window = knob_bytes(prov, core_get_params, "keystream_max_window",
                                     "GPUAES_KEYSTREAM_MAX_WINDOW", (size_t)4 << 20) & ~(size_t)15;
    prov->ks_total = knob_bytes(prov, core_get_params, "keystream_total_bytes",
                                "GPUAES_KEYSTREAM_TOTAL_BYTES", (size_t)256 << 20);
    /* One GPU's D2H (~55 GB/s) feeds two streams at XOR speed (~20-25 GB/s
     * each); more streams in keystream mode share the same keystream and
     * waste more of it, while the rest do as well on their own cores
     * (bench/NOTES.md, section 10: 2 beat 1 at 2, 4 and 8 threads). */
    prov->ks_max_streams = knob_bytes(prov, core_get_params, "keystream_max_streams",
                                      "GPUAES_KEYSTREAM_MAX_STREAMS", 2);
    if (prov->ks_max_streams == 0)
        prov->ks_enabled = 0;
    if (prov->ks_max_window < 16 || prov->ks_total < prov->ks_max_window)
        prov->ks_enabled = 0;
    if (prov->ks_max_window > ((size_t)1 << 30))
        prov->ks_max_window = (size_t)1 << 30;
    gpuaes_ks_set_limit(prov->ks_total);
}

void settings_load(gpuaes_prov *prov, OSSL_FUNC_core_get_params_fn *core_get_params)
{
    const char *env = getenv("GPUAES_OFFLOAD_MIN_BYTES");
    char *cnf = NULL;
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_ptr("offload_min_bytes", &cnf, 0), OSSL_PARAM_END };
    size_t v;

    prov->offload_min_set = 0;
    if (core_get_params != NULL && core_get_params(prov->handle, p) && cnf != NULL) {
        if (parse_bytes(cnf, &v)) {
            prov->offload_min_bytes = v;
            prov->offload_min_set = 1;
        } else {
            gpuaes_debug("ignoring malformed offload_min_bytes = %s", cnf);
        }
    }
    if (env != NULL) {
        if (parse_bytes(env, &v)) {
            prov->offload_min_bytes = v;
            prov->offload_min_set = 1;
        } else {
            gpuaes_debug("ignoring malformed GPUAES_OFFLOAD_MIN_BYTES=%s", env);
        }
    }
    for (int k = 0; k < OFFLOAD_KINDS; k++)
        prov->offload_min[k] = prov->offload_min_set ? prov->offload_min_bytes : offload_defaults[k];
    /* 2 GiB: a quarter of a second of one AES-NI core, about the start-up's
     * own length (../shared/GPU_FACTS.md): a process that ends sooner would
     * only wait for it. */
    prov->gpu_start_bytes = knob_bytes(prov, core_get_params, "gpu_start_bytes",
                                       "GPUAES_GPU_START_BYTES", (size_t)2 << 30);
    settings_load_keystream(prov, core_get_params);
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

        format_bytes(v, sizeof(v), prov->offload_min[k]);
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s=%s", k ? "," : "",
                              offload_names[k], v);
    }
    return buf;
}
