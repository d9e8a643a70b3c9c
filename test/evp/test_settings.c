/*
 * test_settings.c - the knobs (provider/settings.c): every syntax a value may
 * take, and bad values from the environment and from openssl.cnf.  A bad
 * value must not stop the provider from loading; it must leave an error on
 * the queue that names the knob and its value, and the default (or the other
 * source's value) in force, as the provider parameters show ("settings",
 * "offload-min-bytes", "offload-policy", "keystream", "gpu-available").
 * dispatch is apart from offload_min_bytes: a threshold alone does not force.
 *
 * Each case loads gpuaes (from GPUAES_MODULE_DIR; the emulated module is
 * enough) into a fresh library context with the environment it sets.
 */
#define _POSIX_C_SOURCE 200809L  /* setenv, mkstemp */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "testutil.h"

static const char *module_dir;

typedef struct {
    OSSL_LIB_CTX *libctx;
    OSSL_PROVIDER *prov;
    char errors[4096];          /* the error queue's data after the load, one line each */
    char settings[1024];        /* ",knob=value,...," */
    char policy[256];
    uint64_t offload_min;
    int keystream, gpu_available;
} loaded;

static void take_errors(char *buf, size_t len)
{
    const char *data;
    int flags;
    size_t n = 0;

    buf[0] = '\0';
    while (ERR_get_error_all(NULL, NULL, NULL, &data, &flags) != 0)
        if ((flags & ERR_TXT_STRING) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s\n", data);
}

/* Loads gpuaes with the environment as it is, or through the config file cnf. */
static int load(loaded *l, const char *cnf)
{
    OSSL_PARAM p[6] = {
        OSSL_PARAM_utf8_string("settings", l->settings + 1, sizeof(l->settings) - 2),
        OSSL_PARAM_utf8_string("offload-policy", l->policy, sizeof(l->policy)),
        OSSL_PARAM_uint64("offload-min-bytes", &l->offload_min),
        OSSL_PARAM_int("keystream", &l->keystream),
        OSSL_PARAM_int("gpu-available", &l->gpu_available),
        OSSL_PARAM_END
    };

    memset(l, 0, sizeof(*l));
    ERR_clear_error();
    if ((l->libctx = OSSL_LIB_CTX_new()) == NULL
        || !OSSL_PROVIDER_set_default_search_path(l->libctx, module_dir))
        return 0;
    if (cnf != NULL && !OSSL_LIB_CTX_load_config(l->libctx, cnf)) {
        take_errors(l->errors, sizeof(l->errors));
        fprintf(stderr, "cannot load %s:\n%s", cnf, l->errors);
        return 0;
    }
    l->prov = OSSL_PROVIDER_load(l->libctx, "gpuaes");
    take_errors(l->errors, sizeof(l->errors));
    if (l->prov == NULL) {
        fprintf(stderr, "gpuaes did not load:\n%s", l->errors);
        return 0;
    }
    /* settings: ",knob=value,...," so that has_setting() matches whole items */
    if (!OSSL_PROVIDER_get_params(l->prov, p))
        return 0;
    l->settings[0] = ',';
    strcat(l->settings, ",");
    return 1;
}

static void unload(loaded *l)
{
    OSSL_PROVIDER_unload(l->prov);
    OSSL_LIB_CTX_free(l->libctx);
}

/* "knob=value" is one of the settings in force. */
static int has_setting(const loaded *l, const char *knob, const char *value)
{
    char item[160];

    snprintf(item, sizeof(item), ",%s=%s,", knob, value);
    return strstr(l->settings, item) != NULL;
}

/* The error queue holds exactly one bad-value error, naming `name` and quoting `value`. */
static int refused(const loaded *l, const char *name, const char *value)
{
    char head[160], quoted[160];
    const char *e = strstr(l->errors, "bad value for ");

    snprintf(head, sizeof(head), "gpuaes: bad value for %s: ", name);
    snprintf(quoted, sizeof(quoted), "'%s'", value);
    return e != NULL && strstr(l->errors, head) != NULL && strstr(l->errors, quoted) != NULL
        && strstr(e + 1, "bad value for ") == NULL;
}

/* ---- Every knob refuses a bad value and keeps its default ---- */

static const struct {
    const char *cnf, *env, *bad, *def;
} knob_defaults[] = {
    { "debug", "GPUAES_DEBUG", "2", "off" },
    { "offload_min_bytes", "GPUAES_OFFLOAD_MIN_BYTES", "-1", "the per-operation thresholds" },
    { "dispatch", "GPUAES_DISPATCH", "always", "auto" },
    { "keystream", "GPUAES_KEYSTREAM", "maybe", "on" },
    { "keystream_ramp_bytes", "GPUAES_KEYSTREAM_RAMP_BYTES", "256KiB", "256K" },
    { "keystream_max_window", "GPUAES_KEYSTREAM_MAX_WINDOW", "64M", "4M" },   /* > the in-flight cap */
    { "keystream_total_bytes", "GPUAES_KEYSTREAM_TOTAL_BYTES", "99999999999G", "256M" },
    { "keystream_max_contexts", "GPUAES_KEYSTREAM_MAX_CONTEXTS", "2M", "2" },   /* no suffix on a count */
    { "keystream_max_contexts", "GPUAES_KEYSTREAM_MAX_STREAMS", "2M", "2" },    /* the old spelling */
    { "disable_gpu", "GPUAES_DISABLE_GPU", "y", "off" },
    { "gpu_cpu_share", "GPUAES_GPU_CPU_SHARE", "on", "ctr" },        /* a switch no more: off, ctr, all */
    { "device", "GPUAES_DEVICE", "4097", "0" },
    { "fault", "GPUAES_FAULT", "everything", "none" },
    { "staging_chunk", "GPUAES_STAGING_CHUNK", "32K", "4M" },
    { "staging_lanes", "GPUAES_STAGING_LANES", "17", "6" },
    { "staging_first", "GPUAES_STAGING_FIRST", "128M", "256K" },
    { "staging_zerocopy", "GPUAES_STAGING_ZEROCOPY", "1M ", "1M" },
    { "staging_trace", "GPUAES_STAGING_TRACE", "18446744073709551616", "0" },
    { "copy_threads", "GPUAES_COPY_THREADS", "0", "half the usable cores (at most 8)" },
    { "copy_part", "GPUAES_COPY_PART", "0x", "256K" },
    { "copy_stream", "GPUAES_COPY_STREAM", "+1", "on" },
    { "gpu_memory_max", "GPUAES_GPU_MEMORY_MAX", "1T", "unlimited" },     /* K, M or G only */
    { "gpu_backend", "GPUAES_GPU_BACKEND", "cuda", "service" },
    { "service_timeout_ms", "GPUAES_SERVICE_TIMEOUT_MS", "0", "100" },
};
#define NKNOBS (sizeof(knob_defaults) / sizeof(knob_defaults[0]))

static void test_env_bad_values(void)
{
    for (size_t i = 0; i < NKNOBS; i++) {
        loaded l;

        setenv(knob_defaults[i].env, knob_defaults[i].bad, 1);
        CHECKF(load(&l, NULL), "%s=%s: load failed", knob_defaults[i].env, knob_defaults[i].bad);
        if (l.prov != NULL) {
            CHECKF(refused(&l, knob_defaults[i].env, knob_defaults[i].bad),
                   "%s=%s: no error naming it; the queue:\n%s", knob_defaults[i].env,
                   knob_defaults[i].bad, l.errors);
            CHECKF(has_setting(&l, knob_defaults[i].cnf, knob_defaults[i].def),
                   "%s=%s: %s is not the default %s: %s", knob_defaults[i].env, knob_defaults[i].bad,
                   knob_defaults[i].cnf, knob_defaults[i].def, l.settings);
        }
        unload(&l);
        unsetenv(knob_defaults[i].env);
    }
    printf("ok  every knob refuses a bad value from the environment and keeps its default\n");
}

/* The defaults the parameters show, besides "settings". */
static const char default_policy[] = "ecb-enc=1M,ecb-dec=1M,cbc-dec=1M,cfb-dec=256K,ctr=1M,gcm=8M";

/* Sizes: the syntax of every size knob, seen through offload-min-bytes. */
static void test_sizes(void)
{
    static const struct { const char *s; uint64_t v; } good[] = {
        { "0", 0 }, { "4M", 4 << 20 }, { "4m", 4 << 20 }, { "64K", 64 << 10 }, { "64k", 64 << 10 },
        { "1G", 1ULL << 30 }, { "2g", 2ULL << 30 }, { "0x10", 16 }, { "0X1f", 31 }, { "0x10K", 16 << 10 },
        { "010", 10 }, { "1048577", 1048577 }, { "17179869183G", 17179869183ULL << 30 },
    };
    static const char *const bad[] = {
        "-1", "99999999999G", "18446744073709551616", "4Mx", "4MB", "4 M", " 4M", "+4", "4.5M",
        "0x", "x10", "K", "M4", "1T", "ten", "18446744073709551615",   /* the last: reserved */
    };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        loaded l;

        setenv("GPUAES_OFFLOAD_MIN_BYTES", good[i].s, 1);
        if (load(&l, NULL)) {
            CHECKF(l.offload_min == good[i].v && l.errors[0] == '\0',
                   "GPUAES_OFFLOAD_MIN_BYTES=%s: %llu, want %llu; errors: %s", good[i].s,
                   (unsigned long long)l.offload_min, (unsigned long long)good[i].v, l.errors);
        } else {
            CHECKF(0, "GPUAES_OFFLOAD_MIN_BYTES=%s: load failed", good[i].s);
        }
        unload(&l);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        loaded l;

        setenv("GPUAES_OFFLOAD_MIN_BYTES", bad[i], 1);
        if (load(&l, NULL)) {
            CHECKF(refused(&l, "GPUAES_OFFLOAD_MIN_BYTES", bad[i]),
                   "GPUAES_OFFLOAD_MIN_BYTES='%s' was not refused: %s", bad[i], l.errors);
            CHECKF(l.offload_min == UINT64_MAX && strcmp(l.policy, default_policy) == 0,
                   "GPUAES_OFFLOAD_MIN_BYTES='%s': offload-min-bytes %llu, policy %s", bad[i],
                   (unsigned long long)l.offload_min, l.policy);
        } else {
            CHECKF(0, "GPUAES_OFFLOAD_MIN_BYTES='%s': load failed", bad[i]);
        }
        unload(&l);
    }
    /* Empty is "not given": no error, the default. */
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "", 1);
    {
        loaded l;

        if (load(&l, NULL))
            CHECKF(l.errors[0] == '\0' && l.offload_min == UINT64_MAX, "empty: %s", l.errors);
        unload(&l);
    }
    unsetenv("GPUAES_OFFLOAD_MIN_BYTES");
    printf("ok  sizes: decimal, 0x, K/M/G in either case; sign, overflow, junk refused\n");
}

/* Booleans, through keystream (off used to be "malformed" and leave it on). */
static void test_bools(void)
{
    static const struct { const char *s; int v; } good[] = {
        { "0", 0 }, { "1", 1 }, { "off", 0 }, { "on", 1 }, { "no", 0 }, { "yes", 1 }, { "false", 0 },
        { "true", 1 }, { "OFF", 0 }, { "On", 1 }, { "NO", 0 }, { "Yes", 1 }, { "FALSE", 0 }, { "True", 1 },
    };
    static const char *const bad[] = { "2", "-1", "onn", "y", "n", "of", "0x1", "enable", "1 " };

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        loaded l;

        setenv("GPUAES_KEYSTREAM", good[i].s, 1);
        if (load(&l, NULL))
            CHECKF(l.keystream == good[i].v && l.errors[0] == '\0',
                   "GPUAES_KEYSTREAM=%s: keystream %d, want %d; errors: %s", good[i].s, l.keystream,
                   good[i].v, l.errors);
        else
            CHECKF(0, "GPUAES_KEYSTREAM=%s: load failed", good[i].s);
        unload(&l);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        loaded l;

        setenv("GPUAES_KEYSTREAM", bad[i], 1);
        if (load(&l, NULL))
            CHECKF(refused(&l, "GPUAES_KEYSTREAM", bad[i]) && l.keystream == 1,
                   "GPUAES_KEYSTREAM='%s': keystream %d; errors: %s", bad[i], l.keystream, l.errors);
        else
            CHECKF(0, "GPUAES_KEYSTREAM='%s': load failed", bad[i]);
        unload(&l);
    }
    unsetenv("GPUAES_KEYSTREAM");

    /* The GPU layer's share reaches it: the emulator (in process) honours disable_gpu. */
    {
        loaded l;

        setenv("GPUAES_GPU_BACKEND", "inprocess", 1);
        setenv("GPUAES_DISABLE_GPU", "Yes", 1);
        if (load(&l, NULL))
            CHECKF(l.gpu_available == 0 && has_setting(&l, "disable_gpu", "on"),
                   "GPUAES_DISABLE_GPU=Yes: gpu-available %d", l.gpu_available);
        unload(&l);
        setenv("GPUAES_DISABLE_GPU", "nope", 1);
        if (load(&l, NULL))
            CHECKF(l.gpu_available == 1 && refused(&l, "GPUAES_DISABLE_GPU", "nope"),
                   "GPUAES_DISABLE_GPU=nope: gpu-available %d, errors %s", l.gpu_available, l.errors);
        unload(&l);
        unsetenv("GPUAES_DISABLE_GPU");
        unsetenv("GPUAES_GPU_BACKEND");
    }
    printf("ok  booleans: 0/1, off/on, no/yes, false/true in any case; others refused\n");
}

/* Counts, enums and the ranges' edges. */
static void test_ranges(void)
{
    static const struct { const char *env, *s, *knob, *shown; int ok; } cases[] = {
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "32M", "keystream_max_window", "32M", 1 },  /* the cap itself */
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "0x2000001", "keystream_max_window", "4M", 0 },
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "16", "keystream_max_window", "16", 1 },
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "15", "keystream_max_window", "4M", 0 },
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "4112", "keystream_max_window", "4112", 1 },
        { "GPUAES_KEYSTREAM_MAX_WINDOW", "4113", "keystream_max_window", "4112", 1 }, /* whole blocks */
        { "GPUAES_STAGING_LANES", "16", "staging_lanes", "16", 1 },
        { "GPUAES_STAGING_LANES", "0x2", "staging_lanes", "2", 1 },
        { "GPUAES_STAGING_LANES", "1", "staging_lanes", "6", 0 },
        { "GPUAES_STAGING_CHUNK", "64K", "staging_chunk", "64K", 1 },
        { "GPUAES_STAGING_CHUNK", "64M", "staging_chunk", "64M", 1 },
        { "GPUAES_STAGING_CHUNK", "0x4000001", "staging_chunk", "4M", 0 },
        { "GPUAES_COPY_THREADS", "64", "copy_threads", "64", 1 },
        { "GPUAES_COPY_THREADS", "65", "copy_threads", "half the usable cores (at most 8)", 0 },
        { "GPUAES_DEVICE", "4096", "device", "4096", 1 },
        { "GPUAES_DEVICE", "-0", "device", "0", 0 },
        { "GPUAES_FAULT", "SYNC", "fault", "sync", 1 },
        { "GPUAES_FAULT", "copyOut", "fault", "copyout", 1 },
        { "GPUAES_FAULT", "none", "fault", "none", 1 },
        { "GPUAES_FAULT", "sync,alloc", "fault", "none", 0 },
        { "GPUAES_DISPATCH", "force", "dispatch", "force", 1 },
        { "GPUAES_DISPATCH", "Auto", "dispatch", "auto", 1 },
        { "GPUAES_DISPATCH", "FORCE", "dispatch", "force", 1 },
        { "GPUAES_DISPATCH", "on", "dispatch", "auto", 0 },
        { "GPUAES_DISPATCH", "force ", "dispatch", "auto", 0 },
        { "GPUAES_KEYSTREAM_MAX_CONTEXTS", "65536", "keystream_max_contexts", "65536", 1 },
        { "GPUAES_KEYSTREAM_MAX_CONTEXTS", "65537", "keystream_max_contexts", "2", 0 },
        { "GPUAES_KEYSTREAM_MAX_STREAMS", "7", "keystream_max_contexts", "7", 1 },   /* old spelling */
        { "GPUAES_KEYSTREAM_MAX_STREAMS", "65537", "keystream_max_contexts", "2", 0 },
        { "GPUAES_GPU_MEMORY_MAX", "0", "gpu_memory_max", "0", 1 },     /* no slot, no window */
        { "GPUAES_GPU_MEMORY_MAX", "1G", "gpu_memory_max", "1024M", 1 },
        { "GPUAES_GPU_MEMORY_MAX", "100000", "gpu_memory_max", "100000", 1 },
        { "GPUAES_GPU_MEMORY_MAX", "-1", "gpu_memory_max", "unlimited", 0 },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        loaded l;

        setenv(cases[i].env, cases[i].s, 1);
        if (load(&l, NULL)) {
            CHECKF(cases[i].ok ? l.errors[0] == '\0' : refused(&l, cases[i].env, cases[i].s),
                   "%s=%s: want %s; errors: %s", cases[i].env, cases[i].s,
                   cases[i].ok ? "no error" : "refused", l.errors);
            CHECKF(has_setting(&l, cases[i].knob, cases[i].shown), "%s=%s: want %s=%s in %s",
                   cases[i].env, cases[i].s, cases[i].knob, cases[i].shown, l.settings);
        } else {
            CHECKF(0, "%s=%s: load failed", cases[i].env, cases[i].s);
        }
        unload(&l);
        unsetenv(cases[i].env);
    }

    /* Less keystream memory than one window: said so, and keystream off. */
    {
        loaded l;

        setenv("GPUAES_KEYSTREAM_TOTAL_BYTES", "1M", 1);
        if (load(&l, NULL))
            CHECKF(l.keystream == 0 && strstr(l.errors, "keystream_total_bytes (1M) is less than")
                   != NULL, "total 1M, window 4M: keystream %d; errors: %s", l.keystream, l.errors);
        unload(&l);
        unsetenv("GPUAES_KEYSTREAM_TOTAL_BYTES");
    }
    printf("ok  counts, names and range edges\n");
}

/* openssl.cnf: bad values named by their openssl.cnf names; the environment wins. */
static void test_cnf(void)
{
    char path[] = "/tmp/gpuaes_settings_XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    loaded l;

    if (f == NULL) {
        CHECKF(0, "cannot write a temporary openssl.cnf");
        return;
    }
    /* Not activated by the file: OpenSSL would load gpuaes inside
     * OSSL_LIB_CTX_load_config, which drops the error queue of a load that
     * succeeds (CONF_modules_load_file_ex pops to its mark); OSSL_PROVIDER_load
     * below takes the section's parameters all the same. */
    fprintf(f, "openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\n"
               "[provider_sect]\ngpuaes = gpuaes_sect\n[gpuaes_sect]\nmodule = %s/gpuaes.so\n"
               "keystream = perhaps\noffload_min_bytes = -1\n"
               "keystream_max_window = 64M\nstaging_lanes = 3\nkeystream_ramp_bytes = 0x100K\n"
               "copy_threads = 4x\nfault = Launch\nkeystream_max_streams = 5\n", module_dir);
    fclose(f);

    if (load(&l, path)) {
        CHECKF(strstr(l.errors, "bad value for keystream: 'perhaps'") != NULL
               && strstr(l.errors, "bad value for offload_min_bytes: '-1'") != NULL
               && strstr(l.errors, "bad value for keystream_max_window: '64M'") != NULL
               && strstr(l.errors, "bad value for copy_threads: '4x'") != NULL,
               "openssl.cnf: the bad values are not all named; errors:\n%s", l.errors);
        CHECKF(l.keystream == 1 && l.offload_min == UINT64_MAX && strcmp(l.policy, default_policy) == 0
               && has_setting(&l, "keystream_max_window", "4M"),
               "openssl.cnf: defaults not in force: keystream %d, policy %s, settings %s",
               l.keystream, l.policy, l.settings);
        CHECKF(has_setting(&l, "staging_lanes", "3") && has_setting(&l, "keystream_ramp_bytes", "256K")
               && has_setting(&l, "fault", "launch")
               && has_setting(&l, "keystream_max_contexts", "5"),   /* the old spelling */
               "openssl.cnf: good values not taken: %s",
               l.settings);
    } else {
        CHECKF(0, "openssl.cnf with bad values: load failed");
    }
    unload(&l);

    /* The environment wins; a bad one falls back to openssl.cnf's value. */
    setenv("GPUAES_STAGING_LANES", "5", 1);
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "2M", 1);
    setenv("GPUAES_FAULT", "bogus", 1);
    setenv("GPUAES_KEYSTREAM_MAX_STREAMS", "9", 1);       /* the old spelling loses to the new */
    setenv("GPUAES_KEYSTREAM_MAX_CONTEXTS", "3", 1);
    if (load(&l, path)) {
        CHECKF(has_setting(&l, "keystream_max_contexts", "3"),
               "GPUAES_KEYSTREAM_MAX_CONTEXTS does not win over the old spelling: %s", l.settings);
        CHECKF(has_setting(&l, "staging_lanes", "5") && l.offload_min == (2 << 20),
               "environment does not win: %s", l.settings);
        CHECKF(strstr(l.errors, "bad value for offload_min_bytes: '-1' (not a number") != NULL
               && strstr(l.errors, "using 2M") != NULL,
               "openssl.cnf's bad value with the environment's good one: %s", l.errors);
        CHECKF(strstr(l.errors, "bad value for GPUAES_FAULT: 'bogus'") != NULL
               && strstr(l.errors, "using launch") != NULL && has_setting(&l, "fault", "launch"),
               "a bad environment value does not fall back to openssl.cnf's: %s / %s", l.errors,
               l.settings);
    } else {
        CHECKF(0, "openssl.cnf and environment: load failed");
    }
    unload(&l);
    unsetenv("GPUAES_STAGING_LANES");
    unsetenv("GPUAES_OFFLOAD_MIN_BYTES");
    unsetenv("GPUAES_FAULT");
    unsetenv("GPUAES_KEYSTREAM_MAX_STREAMS");
    unsetenv("GPUAES_KEYSTREAM_MAX_CONTEXTS");
    unlink(path);
    printf("ok  openssl.cnf: bad values named, defaults kept, the environment wins\n");
}

/* dispatch is its own knob: offload_min_bytes moves the thresholds only
 * (the dispatcher still decides above them), force shows in offload-policy,
 * and openssl.cnf's bad value is named by its openssl.cnf name. */
static void test_dispatch(void)
{
    char forced[sizeof(default_policy) + 32], path[] = "/tmp/gpuaes_dispatch_XXXXXX";
    int fd;
    FILE *f;
    loaded l;

    snprintf(forced, sizeof(forced), "%s,dispatch=force", default_policy);
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "0", 1);
    if (load(&l, NULL))
        CHECKF(has_setting(&l, "dispatch", "auto") && l.offload_min == 0
               && strstr(l.policy, "dispatch") == NULL && l.errors[0] == '\0',
               "GPUAES_OFFLOAD_MIN_BYTES=0 alone: want dispatch=auto; policy %s, settings %s",
               l.policy, l.settings);
    unload(&l);
    unsetenv("GPUAES_OFFLOAD_MIN_BYTES");

    setenv("GPUAES_DISPATCH", "force", 1);
    if (load(&l, NULL))
        CHECKF(strcmp(l.policy, forced) == 0 && l.offload_min == UINT64_MAX,
               "GPUAES_DISPATCH=force: policy %s, want %s; offload-min-bytes %llu", l.policy,
               forced, (unsigned long long)l.offload_min);
    unload(&l);
    unsetenv("GPUAES_DISPATCH");

    fd = mkstemp(path);
    f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (f == NULL) {
        CHECKF(0, "cannot write a temporary openssl.cnf");
        return;
    }
    fprintf(f, "openssl_conf = openssl_init\n[openssl_init]\nproviders = provider_sect\n"
               "[provider_sect]\ngpuaes = gpuaes_sect\n[gpuaes_sect]\nmodule = %s/gpuaes.so\n"
               "dispatch = always\n", module_dir);
    fclose(f);
    if (load(&l, path))
        CHECKF(refused(&l, "dispatch", "always") && has_setting(&l, "dispatch", "auto")
               && strcmp(l.policy, default_policy) == 0,
               "openssl.cnf dispatch = always: errors %s, settings %s", l.errors, l.settings);
    unload(&l);
    setenv("GPUAES_DISPATCH", "Force", 1);       /* the environment wins */
    if (load(&l, path))
        CHECKF(has_setting(&l, "dispatch", "force") && strcmp(l.policy, forced) == 0
               && strstr(l.errors, "using force") != NULL,
               "openssl.cnf's bad dispatch, GPUAES_DISPATCH=Force: errors %s, policy %s",
               l.errors, l.policy);
    unload(&l);
    unsetenv("GPUAES_DISPATCH");
    unlink(path);
    printf("ok  dispatch: auto/force, apart from offload_min_bytes, shown in offload-policy\n");
}

/* gpu_start_bytes: its default depends on the backend (in process 2 GiB, with
 * the service, the default backend, 8 MiB); a value set wins with either. */
static void test_start_bytes(void)
{
    static const struct { const char *backend, *set, *want; } cases[] = {
        { NULL, NULL, "8M" }, { "inprocess", NULL, "2048M" }, { "service", NULL, "8M" },
        { "service", "1M", "1M" }, { "inprocess", "1M", "1M" }, { "service", "4G", "4096M" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        loaded l;

        if (cases[i].backend != NULL)
            setenv("GPUAES_GPU_BACKEND", cases[i].backend, 1);
        if (cases[i].set != NULL)
            setenv("GPUAES_GPU_START_BYTES", cases[i].set, 1);
        if (load(&l, NULL))
            CHECKF(has_setting(&l, "gpu_start_bytes", cases[i].want) && l.errors[0] == '\0',
                   "backend %s, GPUAES_GPU_START_BYTES=%s: want gpu_start_bytes=%s in %s (errors: %s)",
                   cases[i].backend ? cases[i].backend : "(unset)", cases[i].set ? cases[i].set : "(unset)",
                   cases[i].want, l.settings, l.errors);
        else
            CHECKF(0, "load failed");
        unload(&l);
        unsetenv("GPUAES_GPU_BACKEND");
        unsetenv("GPUAES_GPU_START_BYTES");
    }
    printf("ok  gpu_start_bytes defaults per backend\n");
}

/* Last: with the module kept mapped between loads (as ThreadSanitizer's
 * -z nodelete keeps it), each load still chooses its own backend once the
 * previous instance is gone: a service load, then an in-process one that
 * reaches the emulated layer (the service's wait would answer 0). */
static void test_backend_per_load(void)
{
    char path[4096];
    void *pin;

    snprintf(path, sizeof(path), "%s/gpuaes.so", module_dir);
    if ((pin = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE)) == NULL) {
        CHECKF(0, "dlopen %s: %s", path, dlerror());
        return;
    }
    for (int round = 0; round < 2; round++) {
        loaded l;

        setenv("GPUAES_GPU_BACKEND", "service", 1);
        setenv("GPUAES_SERVICE_CONNECT_WAIT_MS", "0", 1);
        if (load(&l, NULL))
            CHECKF(has_setting(&l, "gpu_backend", "service"), "service load: %s", l.settings);
        unload(&l);
        unsetenv("GPUAES_SERVICE_CONNECT_WAIT_MS");
        setenv("GPUAES_GPU_BACKEND", "inprocess", 1);
        if (load(&l, NULL))
            CHECKF(l.gpu_available == 1, "in-process load after a service load (module kept mapped): "
                   "gpu-available %d", l.gpu_available);
        unload(&l);
    }
    unsetenv("GPUAES_GPU_BACKEND");
    dlclose(pin);                      /* stays mapped (RTLD_NODELETE) */
    printf("ok  the backend: each load's own, the module kept mapped between loads\n");
}

int main(void)
{
    module_dir = getenv("GPUAES_MODULE_DIR");
    if (module_dir == NULL) {
        fprintf(stderr, "GPUAES_MODULE_DIR is not set\n");
        return 1;
    }
    /* No knob from the caller's environment may leak into the cases. */
    for (size_t i = 0; i < NKNOBS; i++)
        unsetenv(knob_defaults[i].env);
    test_env_bad_values();
    test_sizes();
    test_bools();
    test_ranges();
    test_cnf();
    test_dispatch();
    test_start_bytes();
    test_backend_per_load();
    return test_report("settings");
}
