/*
 * evp_bench.c - side-by-side EVP throughput of gpuaes and OpenSSL's default
 * provider, loaded into one process and one library context.
 *
 * One measurement: every thread owns a cipher context (initialised once with
 * a random key and IV) and its buffers; the threads start together (barrier)
 * and repeat EVP_CipherUpdate(update_bytes) until the main thread, after
 * --min-time seconds, asks them to stop (each finishes the update it is in,
 * so every thread does at least one).  Throughput = bytes of all threads /
 * wall time (CLOCK_MONOTONIC); host CPU = process CPU time
 * (CLOCK_PROCESS_CPUTIME_ID, every thread of the process, the provider's
 * helper threads included) per 10^9 bytes.
 *
 * Fairness: random data, never zeros; the providers alternate A B A B ...
 * over the repeats (so drift of the machine hits both alike); one warm-up
 * measurement per provider is excluded; the median of the repeats is
 * reported.  Update sizes up to 16 KiB work in place on one cache-warm
 * buffer (as `openssl speed` does); larger ones read an input buffer and
 * write a separate output buffer, both of the full size, per thread.
 *
 * C11 + POSIX threads, libcrypto only.  Every EVP call is checked; a failed
 * measurement is reported on stderr and its row is left out (no number is
 * ever printed that was not measured).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "rng.h"           /* test/support: the seeded generator */
#include "size.h"          /* test/support: sizes as "64M" */
#include "bench_stats.h"

#ifndef GPUAES_DEFAULT_MODULE_DIR
#define GPUAES_DEFAULT_MODULE_DIR ""
#endif

#define MAX_PROV 2
#define MAX_LIST 64
#define MAX_THREADS 1024
#define INPLACE_MAX ((size_t)16 << 10) /* up to this size: one cache-warm buffer, in place */
#define GCM_REKEY_BYTES ((uint64_t)1 << 35) /* new IV well before GCM's 2^36-32 byte message limit */

/* ---------------------------------------------------------------- ciphers */

typedef struct {
    const char *name;
    const char *mode; /* ECB CBC CFB CTR GCM */
    int keylen;
    int ivlen;
} cipher_info;

static const cipher_info CIPHERS[] = {
    { "AES-128-ECB", "ECB", 16, 0 },  { "AES-192-ECB", "ECB", 24, 0 },  { "AES-256-ECB", "ECB", 32, 0 },
    { "AES-128-CBC", "CBC", 16, 16 }, { "AES-192-CBC", "CBC", 24, 16 }, { "AES-256-CBC", "CBC", 32, 16 },
    { "AES-128-CFB", "CFB", 16, 16 }, { "AES-192-CFB", "CFB", 24, 16 }, { "AES-256-CFB", "CFB", 32, 16 },
    { "AES-128-CTR", "CTR", 16, 16 }, { "AES-192-CTR", "CTR", 24, 16 }, { "AES-256-CTR", "CTR", 32, 16 },
    { "AES-128-GCM", "GCM", 16, 12 }, { "AES-192-GCM", "GCM", 24, 12 }, { "AES-256-GCM", "GCM", 32, 12 },
};
#define NCIPHERS (sizeof(CIPHERS) / sizeof(CIPHERS[0]))

static const size_t ALL_SIZES[] = {
    16, 64, 256, (size_t)1 << 10, (size_t)4 << 10, (size_t)16 << 10, (size_t)64 << 10, (size_t)256 << 10,
    (size_t)1 << 20, (size_t)4 << 20, (size_t)16 << 20, (size_t)64 << 20, (size_t)256 << 20,
};
static const size_t QUICK_SIZES[] = { (size_t)16 << 10, (size_t)1 << 20, (size_t)64 << 20 };

/* ---------------------------------------------------------------- options */

typedef struct {
    int cipher[NCIPHERS];
    int ncipher;
    int dirs[2]; /* 1 = enc, 0 = dec */
    int ndir;
    size_t sizes[MAX_LIST];
    int nsize;
    int threads[MAX_LIST];
    int nthreads;
    char prov[MAX_PROV][16];
    int nprov;
    int repeats;
    double min_time;
    double warmup;
    double max_mem_gib;
    const char *out_dir;
    const char *csv_path;
    const char *provider_path;
    unsigned long long seed;
    int plan_only;
    int require_gpu;
    int counters;
} options;

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("evp_bench: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(2);
}

static void usage(FILE *f)
{
    fputs(
        "usage: evp_bench [options]\n"
        "  --quick              preset: every cipher, enc+dec, sizes 16K,1M,64M, 1 thread,\n"
        "                       --repeats 5 --min-time 0.1 (the default selection, faster)\n"
        "  --full               preset: every cipher, enc+dec, all 13 sizes 16..256M,\n"
        "                       threads 1,4,16, --repeats 5 --min-time 0.2\n"
        "  --ciphers LIST       comma list of names (AES-128-CTR, aes-256-gcm, ...) or 'all'\n"
        "  --dir LIST           enc,dec (default both)\n"
        "  --sizes LIST         update sizes, e.g. 16,64,256,1K,16K,1M,64M (K/M/G = 2^10/2^20/2^30);\n"
        "                       'all' = 16 B..256 MiB in steps of 4x; multiples of 16\n"
        "  --threads LIST       e.g. 1,4,16 (each thread its own context and buffers)\n"
        "  --providers LIST     default,gpuaes (the order is the alternation order A B A B);\n"
        "                       default,default2: an A/A control, the default provider in both columns\n"
        "  --repeats N          measurements per provider, median reported (default 5)\n"
        "  --min-time SEC       length of one measurement (default 0.2; >= 1 update per thread)\n"
        "  --warmup SEC         excluded warm-up measurement per provider (default 0.05)\n"
        "  --max-mem GIB        skip combinations whose buffers exceed this (default 48)\n"
        "  --out DIR            write DIR/throughput.csv (created fresh; DIR is created)\n"
        "  --csv FILE           write the CSV to FILE instead\n"
        "  --provider-path DIR  where gpuaes.so is (default: $GPUAES_MODULE_DIR, else the build dir)\n"
        "  --seed N             PRNG seed for keys, IVs and data (default: from the clock)\n"
        "  --require-gpu        exit 1 unless gpuaes reports a usable GPU (gpu-available = 1)\n"
        "  --counters           per row, gpuaes's counters over the row on stdout ('# counters' lines)\n"
        "  --plan               print the plan and a lower bound of the run time, then exit\n"
        "  --list               print the cipher names and exit\n"
        "Presets set defaults; explicit options win whatever their position.\n"
        "Progress goes to stderr, the result table to stdout.\n",
        f);
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        die("out of memory");
    return d;
}

static int find_cipher(const char *name)
{
    for (size_t i = 0; i < NCIPHERS; i++)
        if (strcasecmp(CIPHERS[i].name, name) == 0)
            return (int)i;
    return -1;
}

/* Splits a comma list in place; returns the count. */
static int split_list(char *s, char **items, int max)
{
    int n = 0;
    for (char *tok = strtok(s, ","); tok != NULL; tok = strtok(NULL, ",")) {
        while (*tok == ' ')
            tok++;
        if (*tok == '\0')
            continue;
        if (n == max)
            die("too many items in a list (max %d)", max);
        items[n++] = tok;
    }
    return n;
}

static double parse_double(const char *opt, const char *s, double lo, double hi)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= lo && v <= hi))
        die("%s: bad value '%s' (expected %g..%g)", opt, s, lo, hi);
    return v;
}

static long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        die("%s: bad value '%s' (expected %ld..%ld)", opt, s, lo, hi);
    return v;
}

static void set_ciphers(options *o, const char *arg)
{
    char *s = xstrdup(arg), *items[MAX_LIST];
    int n = split_list(s, items, MAX_LIST);

    o->ncipher = 0;
    for (int i = 0; i < n; i++) {
        if (strcasecmp(items[i], "all") == 0) {
            o->ncipher = 0;
            for (size_t c = 0; c < NCIPHERS; c++)
                o->cipher[o->ncipher++] = (int)c;
            break;
        }
        int c = find_cipher(items[i]);
        if (c < 0)
            die("--ciphers: unknown cipher '%s' (try --list)", items[i]);
        int dup = 0;
        for (int j = 0; j < o->ncipher; j++)
            dup |= o->cipher[j] == c;
        if (!dup)
            o->cipher[o->ncipher++] = c;
    }
    free(s);
    if (o->ncipher == 0)
        die("--ciphers: empty list");
}

static void set_dirs(options *o, const char *arg)
{
    char *s = xstrdup(arg), *items[MAX_LIST];
    int n = split_list(s, items, MAX_LIST);

    o->ndir = 0;
    for (int i = 0; i < n; i++) {
        int d;
        if (strcasecmp(items[i], "enc") == 0 || strcasecmp(items[i], "encrypt") == 0)
            d = 1;
        else if (strcasecmp(items[i], "dec") == 0 || strcasecmp(items[i], "decrypt") == 0)
            d = 0;
        else
            die("--dir: '%s' is neither enc nor dec", items[i]);
        if (o->ndir == 0 || o->dirs[0] != d)
            o->dirs[o->ndir++] = d;
        if (o->ndir == 2)
            break;
    }
    free(s);
    if (o->ndir == 0)
        die("--dir: empty list");
}

static void set_sizes(options *o, const char *arg)
{
    char *s = xstrdup(arg), *items[MAX_LIST];
    int n = split_list(s, items, MAX_LIST);

    o->nsize = 0;
    for (int i = 0; i < n; i++) {
        if (strcasecmp(items[i], "all") == 0) {
            o->nsize = 0;
            for (size_t k = 0; k < sizeof(ALL_SIZES) / sizeof(ALL_SIZES[0]); k++)
                o->sizes[o->nsize++] = ALL_SIZES[k];
            break;
        }
        size_t v = 0;
        if (!size_parse(items[i], &v) || v == 0 || v % 16 != 0 || v > ((size_t)1 << 30))
            die("--sizes: bad size '%s' (a multiple of 16, at most 1G)", items[i]);
        o->sizes[o->nsize++] = v;
    }
    free(s);
    if (o->nsize == 0)
        die("--sizes: empty list");
}

static void set_threads(options *o, const char *arg)
{
    char *s = xstrdup(arg), *items[MAX_LIST];
    int n = split_list(s, items, MAX_LIST);

    o->nthreads = 0;
    for (int i = 0; i < n; i++)
        o->threads[o->nthreads++] = (int)parse_long("--threads", items[i], 1, MAX_THREADS);
    free(s);
    if (o->nthreads == 0)
        die("--threads: empty list");
}

static void set_providers(options *o, const char *arg)
{
    char *s = xstrdup(arg), *items[MAX_LIST];
    int n = split_list(s, items, MAX_LIST);

    o->nprov = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(items[i], "default") != 0 && strcmp(items[i], "gpuaes") != 0
            && strcmp(items[i], "default2") != 0)
            die("--providers: '%s' is none of default, gpuaes, default2", items[i]);
        if (o->nprov == 1 && strcmp(o->prov[0], items[i]) == 0)
            continue;
        if (o->nprov == MAX_PROV)
            break;
        snprintf(o->prov[o->nprov++], sizeof(o->prov[0]), "%s", items[i]);
    }
    free(s);
    if (o->nprov == 0)
        die("--providers: empty list");
}

static void parse_options(options *o, int argc, char **argv)
{
    int preset_full = 0;

    /* Pass 1: presets (so explicit options win whatever their position). */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--full") == 0)
            preset_full = 1;
        else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(argv[i], "--list") == 0) {
            for (size_t c = 0; c < NCIPHERS; c++)
                printf("%s\n", CIPHERS[c].name);
            exit(0);
        }
    }
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0 && preset_full)
            die("--quick and --full exclude each other");

    memset(o, 0, sizeof(*o));
    set_ciphers(o, "all");
    set_dirs(o, "enc,dec");
    for (size_t k = 0; k < sizeof(QUICK_SIZES) / sizeof(QUICK_SIZES[0]); k++)
        o->sizes[o->nsize++] = QUICK_SIZES[k];
    set_threads(o, "1");
    set_providers(o, "default,gpuaes");
    o->repeats = 5;
    o->min_time = 0.2;
    o->warmup = 0.05;
    o->max_mem_gib = 48.0;
    o->seed = 0;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--quick") == 0)
            o->min_time = 0.1;
    if (preset_full) {
        set_sizes(o, "all");
        set_threads(o, "1,4,16");
        o->min_time = 0.2;
    }

    /* Pass 2: everything else. */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0 || strcmp(a, "--full") == 0)
            continue;
        if (strcmp(a, "--plan") == 0) {
            o->plan_only = 1;
            continue;
        }
        if (strcmp(a, "--require-gpu") == 0) {
            o->require_gpu = 1;
            continue;
        }
        if (strcmp(a, "--counters") == 0) {
            o->counters = 1;
            continue;
        }
        if (i + 1 >= argc)
            die("unknown option or missing value: %s (see --help)", a);
        const char *v = argv[++i];
        if (strcmp(a, "--ciphers") == 0)
            set_ciphers(o, v);
        else if (strcmp(a, "--dir") == 0 || strcmp(a, "--dirs") == 0)
            set_dirs(o, v);
        else if (strcmp(a, "--sizes") == 0)
            set_sizes(o, v);
        else if (strcmp(a, "--threads") == 0)
            set_threads(o, v);
        else if (strcmp(a, "--providers") == 0)
            set_providers(o, v);
        else if (strcmp(a, "--repeats") == 0)
            o->repeats = (int)parse_long(a, v, 1, 1000);
        else if (strcmp(a, "--min-time") == 0)
            o->min_time = parse_double(a, v, 0.001, 3600);
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = parse_double(a, v, 0, 3600);
        else if (strcmp(a, "--max-mem") == 0)
            o->max_mem_gib = parse_double(a, v, 0.001, 1e6);
        else if (strcmp(a, "--out") == 0)
            o->out_dir = v;
        else if (strcmp(a, "--csv") == 0)
            o->csv_path = v;
        else if (strcmp(a, "--provider-path") == 0)
            o->provider_path = v;
        else if (strcmp(a, "--seed") == 0)
            o->seed = (unsigned long long)parse_long(a, v, 0, 0x7fffffffL);
        else {
            i--;
            die("unknown option: %s (see --help)", a);
        }
    }
}

/* ---------------------------------------------------------------- utils */

static double now_mono(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        die("clock_gettime(CLOCK_MONOTONIC) failed");
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double now_cpu(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        die("clock_gettime(CLOCK_PROCESS_CPUTIME_ID) failed");
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_until(double t)
{
    for (;;) {
        double left = t - now_mono();
        if (left <= 0)
            return;
        struct timespec ts = { (time_t)left, (long)((left - (double)(time_t)left) * 1e9) };
        nanosleep(&ts, NULL); /* EINTR: loop */
    }
}

static void print_ossl_errors(const char *what)
{
    unsigned long e;
    char buf[256];
    fprintf(stderr, "evp_bench: %s failed\n", what);
    while ((e = ERR_get_error()) != 0) {
        ERR_error_string_n(e, buf, sizeof(buf));
        fprintf(stderr, "  %s\n", buf);
    }
}

/* ---------------------------------------------------------------- providers */

static OSSL_LIB_CTX *g_libctx;
static OSSL_PROVIDER *g_prov_default, *g_prov_gpuaes;

/* gpuaes's counters (0 / unavailable -> ok = 0). */
static int gpuaes_counter(const char *key, uint64_t *v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, v), OSSL_PARAM_END };
    *v = 0;
    if (g_prov_gpuaes == NULL)
        return 0;
    if (!OSSL_PROVIDER_get_params(g_prov_gpuaes, p) || !OSSL_PARAM_modified(&p[0])) {
        ERR_clear_error();
        return 0;
    }
    return 1;
}

/* --counters: gpuaes's counters around one row.  All but gpu-memory (bytes
 * held now: a level) are totals, so the row's figure is the difference. */
static const char *const ROW_COUNTERS[] = {
    "gpu-bytes", "gpu-errors", "gpu-backoffs", "gpu-memory-refusals", "gpu-memory-oom", "gpu-memory",
};
#define NROW_COUNTERS (sizeof(ROW_COUNTERS) / sizeof(ROW_COUNTERS[0]))

typedef struct {
    uint64_t v[NROW_COUNTERS];
    int ok[NROW_COUNTERS];
} counter_snap;

static void counters_snap(counter_snap *c)
{
    for (size_t i = 0; i < NROW_COUNTERS; i++)
        c->ok[i] = gpuaes_counter(ROW_COUNTERS[i], &c->v[i]);
}

/* One line: "# counters CIPHER DIR UPDATE_BYTES THREADS: key=value ..." ('-': not reported). */
static void counters_print(const counter_snap *c0, const counter_snap *c1, const char *cipher, int enc,
                           size_t size, int nthreads)
{
    printf("# counters %s %s %zu %d:", cipher, enc ? "enc" : "dec", size, nthreads);
    for (size_t i = 0; i < NROW_COUNTERS; i++) {
        const int level = strcmp(ROW_COUNTERS[i], "gpu-memory") == 0;
        if (!c0->ok[i] || !c1->ok[i])
            printf(" %s=-", ROW_COUNTERS[i]);
        else
            printf(" %s=%llu", ROW_COUNTERS[i],
                   (unsigned long long)(level ? c1->v[i] : c1->v[i] - c0->v[i]));
    }
    printf("\n");
    fflush(stdout);
}

static void describe_provider(OSSL_PROVIDER *prov, const char *label)
{
    const char *name = NULL, *version = NULL, *build = NULL, *gpu = NULL;
    uint64_t minb = 0;
    OSSL_PARAM p[] = {
        OSSL_PARAM_utf8_ptr("name", (char **)&name, 0),
        OSSL_PARAM_utf8_ptr("version", (char **)&version, 0),
        OSSL_PARAM_utf8_ptr("buildinfo", (char **)&build, 0),
        OSSL_PARAM_END
    };
    if (!OSSL_PROVIDER_get_params(prov, p))
        ERR_clear_error();
    printf("# provider %s: %s, version %s (%s)\n", label, name ? name : "?", version ? version : "?",
           build ? build : "?");
    if (prov == g_prov_gpuaes) {
        char policy[256] = "";
        OSSL_PARAM q[] = { OSSL_PARAM_utf8_ptr("gpu", (char **)&gpu, 0),
                           OSSL_PARAM_utf8_string("offload-policy", policy, sizeof(policy)),
                           OSSL_PARAM_END };
        if (!OSSL_PROVIDER_get_params(prov, q))
            ERR_clear_error();
        printf("# gpuaes gpu: %s\n", gpu ? gpu : "(not reported)");
        if (gpuaes_counter("offload-min-bytes", &minb))
            printf("# gpuaes offload-min-bytes: %llu\n", (unsigned long long)minb);
        /* the thresholds, and dispatch=force when the dispatcher is out of the way */
        if (policy[0] != '\0')
            printf("# gpuaes offload-policy: %s\n", policy);
        fprintf(stderr, "evp_bench: gpuaes GPU: %s\n", gpu ? gpu : "(not reported)");
    }
}

static void load_providers(const options *o)
{
    const char *dir = o->provider_path;
    int want_gpuaes = 0;

    for (int p = 0; p < o->nprov; p++)
        want_gpuaes |= strcmp(o->prov[p], "gpuaes") == 0;
    if (dir == NULL || *dir == '\0')
        dir = getenv("GPUAES_MODULE_DIR");
    if (dir == NULL || *dir == '\0')
        dir = GPUAES_DEFAULT_MODULE_DIR;

    g_libctx = OSSL_LIB_CTX_new();
    if (g_libctx == NULL) {
        print_ossl_errors("OSSL_LIB_CTX_new");
        exit(1);
    }
    if (dir != NULL && *dir != '\0' && !OSSL_PROVIDER_set_default_search_path(g_libctx, dir)) {
        print_ossl_errors("OSSL_PROVIDER_set_default_search_path");
        exit(1);
    }
    g_prov_default = OSSL_PROVIDER_load(g_libctx, "default");
    if (g_prov_default == NULL) {
        print_ossl_errors("loading the default provider");
        exit(1);
    }
    if (want_gpuaes) {
        g_prov_gpuaes = OSSL_PROVIDER_load(g_libctx, "gpuaes");
        if (g_prov_gpuaes == NULL) {
            print_ossl_errors("loading gpuaes");
            fprintf(stderr, "evp_bench: gpuaes.so not found in '%s' (use --provider-path DIR or GPUAES_MODULE_DIR)\n",
                    dir && *dir ? dir : "OpenSSL's MODULESDIR");
            exit(1);
        }
    }
    printf("# OpenSSL %s\n", OpenSSL_version(OPENSSL_VERSION));
    printf("# module search path: %s\n", dir && *dir ? dir : "(OpenSSL's MODULESDIR)");
    describe_provider(g_prov_default, "default");
    if (g_prov_gpuaes != NULL) {
        int avail = 0;
        OSSL_PARAM q[] = { OSSL_PARAM_int("gpu-available", &avail), OSSL_PARAM_END };

        describe_provider(g_prov_gpuaes, "gpuaes");
        if (!OSSL_PROVIDER_get_params(g_prov_gpuaes, q) || !OSSL_PARAM_modified(&q[0])) {
            ERR_clear_error();
            avail = -1;
        }
        printf("# gpuaes gpu-available: %d\n", avail);
        if (avail != 1) {
            fprintf(stderr, "evp_bench: WARNING: gpuaes reports no usable GPU: its rows measure its CPU fallback\n");
            if (o->require_gpu) {
                fprintf(stderr, "evp_bench: --require-gpu: stopping\n");
                exit(1);
            }
        }
    }
}

/* ---------------------------------------------------------------- one row */

typedef struct row row;

typedef struct {
    row *r;
    int id;
    unsigned char *in, *out;
    EVP_CIPHER_CTX *ctx[MAX_PROV];
    unsigned char key[32], iv[16];
    uint64_t msg_bytes[MAX_PROV]; /* GCM: bytes since the last IV */
    rng_state rng;
    uint64_t bytes;               /* of the last measurement */
    int setup_ok[MAX_PROV];
    int setup_buf_ok;
    int failed;                   /* of the last measurement */
    pthread_t th;
} worker;

struct row {
    const cipher_info *ci;
    int enc;
    size_t size;
    int nthreads;
    int nprov;
    EVP_CIPHER *cipher[MAX_PROV];
    pthread_barrier_t bar;
    int cmd;                      /* provider index, or -1: exit (read after a barrier) */
    atomic_int stop;
    uint64_t seed;
    worker *w;
};

static int ctx_init(worker *w, int p)
{
    row *r = w->r;
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();

    if (ctx == NULL)
        return 0;
    if (!EVP_CipherInit_ex2(ctx, r->cipher[p], w->key, r->ci->ivlen ? w->iv : NULL, r->enc, NULL)) {
        EVP_CIPHER_CTX_free(ctx);
        return 0;
    }
    /* ECB/CBC: no padding, so every update of whole blocks passes straight through. */
    if ((strcmp(r->ci->mode, "ECB") == 0 || strcmp(r->ci->mode, "CBC") == 0)
        && !EVP_CIPHER_CTX_set_padding(ctx, 0)) {
        EVP_CIPHER_CTX_free(ctx);
        return 0;
    }
    w->ctx[p] = ctx;
    w->msg_bytes[p] = 0;
    return 1;
}

static void worker_measure(worker *w, int p)
{
    row *r = w->r;
    EVP_CIPHER_CTX *ctx = w->ctx[p];
    const int gcm = strcmp(r->ci->mode, "GCM") == 0;
    const int n = (int)r->size;
    unsigned char *in = w->in, *out = w->out;
    uint64_t bytes = 0;
    int outl;

    w->failed = 0;
    do {
        if (gcm && w->msg_bytes[p] + (uint64_t)n > GCM_REKEY_BYTES) {
            /* A new message (fresh IV) long before GCM's 2^36-32 byte limit. */
            rng_bytes(&w->rng, w->iv, sizeof(w->iv));
            if (!EVP_CipherInit_ex2(ctx, NULL, NULL, w->iv, -1, NULL)) {
                print_ossl_errors("EVP_CipherInit_ex2 (new GCM IV)");
                w->failed = 1;
                break;
            }
            w->msg_bytes[p] = 0;
        }
        if (!EVP_CipherUpdate(ctx, out, &outl, in, n)) {
            print_ossl_errors("EVP_CipherUpdate");
            w->failed = 1;
            break;
        }
        if (outl != n) {
            fprintf(stderr, "evp_bench: EVP_CipherUpdate returned %d bytes for %d\n", outl, n);
            w->failed = 1;
            break;
        }
        bytes += (uint64_t)n;
        w->msg_bytes[p] += (uint64_t)n;
    } while (!atomic_load_explicit(&r->stop, memory_order_relaxed));
    w->bytes = bytes;
}

static void barrier_wait(pthread_barrier_t *b)
{
    int rc = pthread_barrier_wait(b);
    if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD)
        die("pthread_barrier_wait: %s", strerror(rc));
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    row *r = w->r;
    size_t bufsz = r->size;

    /* Setup: buffers (random, pre-faulted), then one context per provider. */
    w->rng = rng_seeded(r->seed * 1000003ULL + (uint64_t)w->id + 1);
    w->setup_buf_ok = 1;
    if (posix_memalign((void **)&w->in, 4096, bufsz) != 0) {
        w->in = NULL;
        w->setup_buf_ok = 0;
    } else {
        rng_bytes(&w->rng, w->in, bufsz);
        if (r->size <= INPLACE_MAX) {
            w->out = w->in; /* in place on one cache-warm buffer, as `openssl speed` */
        } else if (posix_memalign((void **)&w->out, 4096, bufsz) != 0) {
            w->out = NULL;
            w->setup_buf_ok = 0;
        } else {
            rng_bytes(&w->rng, w->out, bufsz);
        }
    }
    rng_bytes(&w->rng, w->key, sizeof(w->key));
    rng_bytes(&w->rng, w->iv, sizeof(w->iv));
    for (int p = 0; p < r->nprov; p++) {
        w->setup_ok[p] = w->setup_buf_ok && ctx_init(w, p);
        if (w->setup_buf_ok && !w->setup_ok[p])
            print_ossl_errors("cipher context setup");
    }
    barrier_wait(&r->bar); /* setup done */

    for (;;) {
        barrier_wait(&r->bar); /* start */
        int cmd = r->cmd;
        if (cmd < 0)
            break;
        if (w->setup_ok[cmd])
            worker_measure(w, cmd);
        else
            w->failed = 1, w->bytes = 0;
        barrier_wait(&r->bar); /* done */
    }

    for (int p = 0; p < r->nprov; p++)
        EVP_CIPHER_CTX_free(w->ctx[p]);
    if (w->out != w->in)
        free(w->out);
    free(w->in);
    return NULL;
}

typedef struct {
    double gbps, cpu_s_per_gb;
    uint64_t bytes, gpu_bytes, gpu_errors;
    uint64_t ks_made, ks_used;    /* keystream ahead: bytes made / XORed during it */
    int ok;
} measurement;

/* One measurement of provider p: all threads together for `secs`. */
static measurement measure(row *r, int p, double secs)
{
    measurement m = { 0 };
    uint64_t gb0 = 0, gb1 = 0, ge0 = 0, ge1 = 0, km0 = 0, km1 = 0, ku0 = 0, ku1 = 0;
    int have = 0, have_ks = 0;

    if (g_prov_gpuaes != NULL) {
        have = gpuaes_counter("gpu-bytes", &gb0) & gpuaes_counter("gpu-errors", &ge0);
        have_ks = gpuaes_counter("keystream-made", &km0) & gpuaes_counter("keystream-used", &ku0);
    }
    atomic_store(&r->stop, 0);
    r->cmd = p;
    const double c0 = now_cpu();
    const double t0 = now_mono();
    barrier_wait(&r->bar);
    sleep_until(t0 + secs);
    atomic_store(&r->stop, 1);
    barrier_wait(&r->bar);
    const double t1 = now_mono();
    const double c1 = now_cpu();
    if (have)
        have = gpuaes_counter("gpu-bytes", &gb1) & gpuaes_counter("gpu-errors", &ge1);
    if (have_ks)
        have_ks = gpuaes_counter("keystream-made", &km1) & gpuaes_counter("keystream-used", &ku1);

    m.ok = 1;
    for (int i = 0; i < r->nthreads; i++) {
        m.bytes += r->w[i].bytes;
        if (r->w[i].failed)
            m.ok = 0;
    }
    if (m.bytes == 0 || t1 <= t0)
        m.ok = 0;
    if (m.ok) {
        m.gbps = (double)m.bytes / (t1 - t0) / 1e9;
        m.cpu_s_per_gb = (c1 - c0) / ((double)m.bytes / 1e9);
    }
    if (have) {
        m.gpu_bytes = gb1 - gb0;
        m.gpu_errors = ge1 - ge0;
    }
    /* Windows retired during this measurement may have been made before it:
     * over a row's repeats the sums are what counts. */
    if (have_ks) {
        m.ks_made = km1 - km0;
        m.ks_used = ku1 - ku0;
    }
    return m;
}

typedef struct {
    int ok[MAX_PROV];
    double gbps[MAX_PROV], cpu[MAX_PROV];
    double gpu_frac[MAX_PROV]; /* fraction of the bytes that went through the GPU, -1 unknown */
    uint64_t gpu_errors;
    uint64_t ks_made, ks_used; /* gpuaes's keystream ahead over the repeats (0: none made) */
    int capped;                /* skipped by --max-mem (not a failure) */
    char skip[128];
} row_result;

static void run_row(const options *o, row *r, row_result *res)
{
    double gbps[MAX_PROV][1000], cpu[MAX_PROV][1000];
    uint64_t tot_bytes[MAX_PROV] = { 0 }, tot_gpu[MAX_PROV] = { 0 };
    int n_ok[MAX_PROV] = { 0 }, failed[MAX_PROV] = { 0 };
    int rc;

    memset(res, 0, sizeof(*res));
    r->w = calloc((size_t)r->nthreads, sizeof(worker));
    if (r->w == NULL) {
        snprintf(res->skip, sizeof(res->skip), "out of memory");
        return;
    }
    if ((rc = pthread_barrier_init(&r->bar, NULL, (unsigned)r->nthreads + 1)) != 0)
        die("pthread_barrier_init: %s", strerror(rc));
    atomic_init(&r->stop, 0);
    int started = 0;
    for (int i = 0; i < r->nthreads; i++) {
        r->w[i].r = r;
        r->w[i].id = i;
        if ((rc = pthread_create(&r->w[i].th, NULL, worker_main, &r->w[i])) != 0)
            die("pthread_create: %s", strerror(rc)); /* the barrier would hang otherwise */
        started++;
    }
    barrier_wait(&r->bar); /* setup done */

    for (int p = 0; p < r->nprov; p++)
        for (int i = 0; i < r->nthreads; i++)
            if (!r->w[i].setup_ok[p])
                failed[p] = 1;
    for (int i = 0; i < r->nthreads; i++)
        if (!r->w[i].setup_buf_ok)
            snprintf(res->skip, sizeof(res->skip), "buffer allocation failed");

    /* Warm-up (excluded), then the repeats, alternating A B A B ... */
    for (int p = 0; p < r->nprov; p++)
        if (!failed[p] && !measure(r, p, o->warmup).ok)
            failed[p] = 1;
    for (int rep = 0; rep < o->repeats; rep++) {
        for (int p = 0; p < r->nprov; p++) {
            if (failed[p])
                continue;
            measurement m = measure(r, p, o->min_time);
            if (!m.ok) {
                failed[p] = 1;
                continue;
            }
            gbps[p][n_ok[p]] = m.gbps;
            cpu[p][n_ok[p]] = m.cpu_s_per_gb;
            n_ok[p]++;
            tot_bytes[p] += m.bytes;
            tot_gpu[p] += m.gpu_bytes;
            res->gpu_errors += m.gpu_errors;
            res->ks_made += m.ks_made;
            res->ks_used += m.ks_used;
        }
    }

    r->cmd = -1;
    barrier_wait(&r->bar);
    for (int i = 0; i < started; i++)
        pthread_join(r->w[i].th, NULL);
    pthread_barrier_destroy(&r->bar);
    free(r->w);
    r->w = NULL;

    for (int p = 0; p < r->nprov; p++) {
        res->ok[p] = !failed[p] && n_ok[p] == o->repeats;
        res->gpu_frac[p] = -1;
        if (!res->ok[p])
            continue;
        res->gbps[p] = bench_median(gbps[p], n_ok[p]);
        res->cpu[p] = bench_median(cpu[p], n_ok[p]);
        if (strcmp(o->prov[p], "gpuaes") == 0 && g_prov_gpuaes != NULL && tot_bytes[p] > 0) {
            uint64_t dummy;
            if (gpuaes_counter("gpu-bytes", &dummy))
                res->gpu_frac[p] = (double)tot_gpu[p] / (double)tot_bytes[p];
        }
    }
}

/* Keystream made and never XORed, in % of what was made (rows where some was made). */
static double ks_waste(const row_result *r)
{
    return r->ks_made > r->ks_used ? 100.0 * (double)(r->ks_made - r->ks_used) / (double)r->ks_made : 0.0;
}

/* ---------------------------------------------------------------- main */

typedef struct {
    int cipher, enc, nthreads;
    size_t size;
    row_result res;
} table_row;

static int mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(buf))
        return 0;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return 0;
            buf[i] = c;
        }
    }
    return 1;
}

int main(int argc, char **argv)
{
    options o;
    char csv_path[4096] = "";
    FILE *csv = NULL;

    parse_options(&o, argc, argv);
    if (o.seed == 0)
        o.seed = (unsigned long long)time(NULL) ^ ((unsigned long long)now_mono() * 1000003ULL);

    const long nrows = (long)o.ncipher * o.ndir * o.nsize * o.nthreads;
    const double est = (double)nrows * o.nprov * (o.repeats * o.min_time + o.warmup);
    fprintf(stderr, "evp_bench: %ld rows x %d providers, %d repeats of %.3g s + %.3g s warm-up: "
                    "at least %.0f s (%.1f min), more where one update takes longer\n",
            nrows, o.nprov, o.repeats, o.min_time, o.warmup, est, est / 60);
    if (o.plan_only) {
        char lbl[32];
        printf("ciphers:");
        for (int i = 0; i < o.ncipher; i++)
            printf(" %s", CIPHERS[o.cipher[i]].name);
        printf("\ndirections:");
        for (int i = 0; i < o.ndir; i++)
            printf(" %s", o.dirs[i] ? "enc" : "dec");
        printf("\nsizes:");
        for (int i = 0; i < o.nsize; i++) {
            size_format(o.sizes[i], lbl, sizeof(lbl));
            printf(" %s", lbl);
        }
        printf("\nthreads:");
        for (int i = 0; i < o.nthreads; i++)
            printf(" %d", o.threads[i]);
        printf("\nproviders:");
        for (int i = 0; i < o.nprov; i++)
            printf(" %s", o.prov[i]);
        printf("\nrepeats %d, min-time %g s, warm-up %g s, rows %ld, lower bound %.0f s\n", o.repeats,
               o.min_time, o.warmup, nrows, est);
        return 0;
    }

    if (o.csv_path != NULL) {
        snprintf(csv_path, sizeof(csv_path), "%s", o.csv_path);
    } else if (o.out_dir != NULL) {
        if (!mkdir_p(o.out_dir))
            die("cannot create directory %s: %s", o.out_dir, strerror(errno));
        if (snprintf(csv_path, sizeof(csv_path), "%s/throughput.csv", o.out_dir) >= (int)sizeof(csv_path))
            die("--out path too long");
    }
    if (csv_path[0] != '\0') {
        csv = fopen(csv_path, "w");
        if (csv == NULL)
            die("cannot write %s: %s", csv_path, strerror(errno));
        fprintf(csv, "cipher,direction,update_bytes,threads,path,gbps,cpu_core_s_per_gb\n");
        fflush(csv);
    }

    printf("# evp_bench:");
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\n# seed %llu, repeats %d, min-time %g s, warm-up %g s\n", o.seed, o.repeats, o.min_time, o.warmup);
    load_providers(&o);
    fflush(stdout);

    EVP_CIPHER *fetched[NCIPHERS][MAX_PROV];
    memset(fetched, 0, sizeof(fetched));
    for (int c = 0; c < o.ncipher; c++) {
        for (int p = 0; p < o.nprov; p++) {
            char propq[64];
            snprintf(propq, sizeof(propq), "provider=%s",
                     strcmp(o.prov[p], "default2") == 0 ? "default" : o.prov[p]);
            fetched[o.cipher[c]][p] = EVP_CIPHER_fetch(g_libctx, CIPHERS[o.cipher[c]].name, propq);
            if (fetched[o.cipher[c]][p] == NULL) {
                print_ossl_errors("EVP_CIPHER_fetch");
                fprintf(stderr, "evp_bench: %s is not available from %s: its rows are left out\n",
                        CIPHERS[o.cipher[c]].name, o.prov[p]);
            }
        }
    }

    table_row *rows = calloc((size_t)nrows, sizeof(table_row));
    if (rows == NULL)
        die("out of memory");
    long done = 0;
    int any_fail = 0, any_skip = 0;
    const double t_start = now_mono();

    for (int c = 0; c < o.ncipher; c++) {
        const cipher_info *ci = &CIPHERS[o.cipher[c]];
        for (int d = 0; d < o.ndir; d++) {
            for (int t = 0; t < o.nthreads; t++) {
                for (int s = 0; s < o.nsize; s++) {
                    table_row *tr = &rows[done++];
                    row r;
                    char lbl[32];

                    memset(&r, 0, sizeof(r));
                    tr->cipher = o.cipher[c];
                    tr->enc = o.dirs[d];
                    tr->nthreads = o.threads[t];
                    tr->size = o.sizes[s];
                    r.ci = ci;
                    r.enc = o.dirs[d];
                    r.size = o.sizes[s];
                    r.nthreads = o.threads[t];
                    r.nprov = o.nprov;
                    r.seed = o.seed + (uint64_t)done * 7919;
                    size_format(r.size, lbl, sizeof(lbl));

                    const double need = (double)r.nthreads * (double)r.size * (r.size > INPLACE_MAX ? 2 : 1);
                    int have_cipher = 1;
                    for (int p = 0; p < o.nprov; p++) {
                        r.cipher[p] = fetched[o.cipher[c]][p];
                        if (r.cipher[p] == NULL)
                            have_cipher = 0;
                    }
                    if (need > o.max_mem_gib * 1073741824.0) {
                        tr->res.capped = 1;
                        snprintf(tr->res.skip, sizeof(tr->res.skip), "needs %.1f GiB of buffers > --max-mem %g",
                                 need / 1073741824.0, o.max_mem_gib);
                    } else if (!have_cipher) {
                        snprintf(tr->res.skip, sizeof(tr->res.skip), "cipher not fetched from every provider");
                    } else if (o.counters && g_prov_gpuaes != NULL) {
                        counter_snap c0, c1;
                        counters_snap(&c0);
                        run_row(&o, &r, &tr->res);
                        counters_snap(&c1);
                        counters_print(&c0, &c1, ci->name, r.enc, r.size, r.nthreads);
                    } else {
                        run_row(&o, &r, &tr->res);
                    }

                    fprintf(stderr, "[%ld/%ld %4.0fs] %s %s %s t=%d:", done, nrows, now_mono() - t_start, ci->name,
                            r.enc ? "enc" : "dec", lbl, r.nthreads);
                    if (tr->res.skip[0] != '\0') {
                        fprintf(stderr, " skipped (%s)\n", tr->res.skip);
                        if (tr->res.capped)
                            any_skip = 1;
                        else
                            any_fail = 1;
                        continue;
                    }
                    for (int p = 0; p < o.nprov; p++) {
                        if (!tr->res.ok[p]) {
                            fprintf(stderr, "  %s FAILED", o.prov[p]);
                            any_fail = 1;
                            continue;
                        }
                        fprintf(stderr, "  %s %.3f GB/s (%.3f cpu s/GB", o.prov[p], tr->res.gbps[p], tr->res.cpu[p]);
                        if (tr->res.gpu_frac[p] >= 0)
                            fprintf(stderr, ", %.0f%% on GPU", 100 * tr->res.gpu_frac[p]);
                        fprintf(stderr, ")");
                        if (csv != NULL)
                            fprintf(csv, "%s,%s,%zu,%d,%s,%.4f,%.5f\n", ci->name, r.enc ? "enc" : "dec", r.size,
                                    r.nthreads, o.prov[p], tr->res.gbps[p], tr->res.cpu[p]);
                    }
                    if (tr->res.gpu_errors)
                        fprintf(stderr, "  WARNING: %llu GPU errors (completed on the CPU)",
                                (unsigned long long)tr->res.gpu_errors);
                    if (tr->res.ks_made > 0)
                        fprintf(stderr, "  keystream made %.1f MB, used %.1f MB, waste %.1f%%",
                                tr->res.ks_made / 1e6, tr->res.ks_used / 1e6, ks_waste(&tr->res));
                    fprintf(stderr, "\n");
                    if (csv != NULL && fflush(csv) != 0)
                        die("writing %s: %s", csv_path, strerror(errno));
                }
            }
        }
    }

    /* The table. */
    int pd = -1, pg = -1;
    for (int p = 0; p < o.nprov; p++) {
        if (strcmp(o.prov[p], "default") == 0)
            pd = p;
        else
            pg = p;
    }
    printf("\n%-12s %-3s %6s %3s %10s %10s %7s %11s %11s %6s\n", "cipher", "dir", "size", "thr", "default",
           "gpuaes", "ratio", "cpu_s/GB", "cpu_s/GB", "GPU");
    printf("%-12s %-3s %6s %3s %10s %10s %7s %11s %11s %6s\n", "", "", "", "", "GB/s", "GB/s", "gp/def",
           "default", "gpuaes", "share");
    for (long i = 0; i < done; i++) {
        table_row *tr = &rows[i];
        char lbl[32], a[32] = "-", b[32] = "-", ra[32] = "-", ca[32] = "-", cb[32] = "-", gs[32] = "-";
        size_format(tr->size, lbl, sizeof(lbl));
        if (tr->res.skip[0] != '\0') {
            printf("%-12s %-3s %6s %3d skipped: %s\n", CIPHERS[tr->cipher].name, tr->enc ? "enc" : "dec", lbl,
                   tr->nthreads, tr->res.skip);
            continue;
        }
        if (pd >= 0 && tr->res.ok[pd]) {
            snprintf(a, sizeof(a), "%.3f", tr->res.gbps[pd]);
            snprintf(ca, sizeof(ca), "%.4f", tr->res.cpu[pd]);
        } else if (pd >= 0) {
            snprintf(a, sizeof(a), "FAILED");
        }
        if (pg >= 0 && tr->res.ok[pg]) {
            snprintf(b, sizeof(b), "%.3f", tr->res.gbps[pg]);
            snprintf(cb, sizeof(cb), "%.4f", tr->res.cpu[pg]);
            if (tr->res.gpu_frac[pg] >= 0)
                snprintf(gs, sizeof(gs), "%.0f%%", 100 * tr->res.gpu_frac[pg]);
        } else if (pg >= 0) {
            snprintf(b, sizeof(b), "FAILED");
        }
        if (pd >= 0 && pg >= 0 && tr->res.ok[pd] && tr->res.ok[pg] && tr->res.gbps[pd] > 0)
            snprintf(ra, sizeof(ra), "%.2f", tr->res.gbps[pg] / tr->res.gbps[pd]);
        printf("%-12s %-3s %6s %3d %10s %10s %7s %11s %11s %6s\n", CIPHERS[tr->cipher].name,
               tr->enc ? "enc" : "dec", lbl, tr->nthreads, a, b, ra, ca, cb, gs);
        if (tr->res.ks_made > 0)
            printf("#   keystream ahead: made %llu, used %llu bytes, waste %.1f%%\n",
                   (unsigned long long)tr->res.ks_made, (unsigned long long)tr->res.ks_used,
                   ks_waste(&tr->res));
    }
    printf("# GB/s = 10^9 bytes/s, median of %d; cpu_s/GB = process CPU seconds per 10^9 bytes; "
           "GPU share = bytes gpuaes sent to the GPU\n", o.repeats);
    fflush(stdout);

    if (csv != NULL && fclose(csv) != 0)
        die("closing %s: %s", csv_path, strerror(errno));
    if (csv_path[0] != '\0')
        fprintf(stderr, "evp_bench: wrote %s\n", csv_path);
    fprintf(stderr, "evp_bench: done in %.0f s%s%s\n", now_mono() - t_start,
            any_fail ? "; some measurements FAILED (see above)" : "",
            any_skip ? "; some rows were skipped (see above)" : "");

    for (size_t c = 0; c < NCIPHERS; c++)
        for (int p = 0; p < MAX_PROV; p++)
            EVP_CIPHER_free(fetched[c][p]);
    free(rows);
    if (g_prov_gpuaes != NULL)
        OSSL_PROVIDER_unload(g_prov_gpuaes);
    OSSL_PROVIDER_unload(g_prov_default);
    OSSL_LIB_CTX_free(g_libctx);
    return any_fail ? 1 : 0;
}
