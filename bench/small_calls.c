/*
 * small_calls.c - what a small call costs through gpuaes and through
 * OpenSSL's default provider, both loaded into one process (issue 21).
 *
 * Patterns (each per size):
 *   tls13      a TLS 1.3-style AES-128-GCM record: a new IV (EVP_CipherInit_ex2
 *              without key), 5 bytes of AAD, the data, final, get the tag
 *   tls12      a TLS 1.2 AES-128-GCM record as libssl's EVP_Cipher path makes it:
 *              EVP_CTRL_AEAD_TLS1_AAD (the AAD set, the pad got), then one EVP_Cipher over
 *              explicit nonce | data | tag (fixed IV set once)
 *   ecb        AES-256-ECB encrypt update on a long-lived context
 *   cbc-dec    AES-128-CBC decrypt update
 *   ctr        AES-128-CTR update
 *   gcm        AES-128-GCM encrypt update (one long message)
 *   gcm-msg    an AES-128-GCM message whose init names the cipher
 *              (EVP_EncryptInit_ex(ctx, cipher, NULL, key, iv), as many programs
 *              write it: OpenSSL 3.0 frees and makes the provider's context on
 *              every such init), the data, final, get the tag
 *   cbc-msg    the same for AES-128-CBC encryption with padding (no tag)
 *   drbg       a CTR-DRBG (AES-256-CTR, the default DRBG's kind) generating
 *              `size` bytes: what every RAND_bytes of a program costs when
 *              its default properties prefer gpuaes (re-keys and a new IV
 *              per call)
 *
 * Method: one context per provider and pattern, set up once.  A round runs
 * each provider for --slice-ms (5) in turn, the first one alternating, in
 * batches calibrated to ~50 us so the clock is read rarely; a slice gives
 * ns per operation.  The median over --rounds (40) is reported per provider,
 * and default/gpuaes (above 1: gpuaes is faster).  Every call is checked.
 *
 * --count N: no timing; each provider runs N operations per pattern and size
 * inside count_default / count_gpuaes, for an instruction counter, e.g.
 *   valgrind --tool=callgrind --collect-atstart=no --toggle-collect='count_*' \
 *     small_calls --count 1000 --patterns tls13 --sizes 16
 * then callgrind_annotate --inclusive=yes: each function's Ir / N.
 */
#define _ISOC11_SOURCE
#define _POSIX_C_SOURCE 200809L

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>
#include <openssl/rand.h>

#include "size.h"          /* test/support: sizes as "64M" */
#include "bench_stats.h"

#ifndef GPUAES_DEFAULT_MODULE_DIR
#define GPUAES_DEFAULT_MODULE_DIR ""
#endif

#define MAX_SIZE ((size_t)16 << 10)
#define MAX_ROUNDS 1000
#define MAX_SIZES 16

enum { P_TLS13, P_TLS12, P_ECB, P_CBC_DEC, P_CTR, P_GCM, P_DRBG, P_GCM_MSG, P_CBC_MSG, P_COUNT };

static const struct {
    const char *name, *cipher;
    int enc;
} PATTERNS[P_COUNT] = {
    [P_TLS13] = { "tls13", "AES-128-GCM", 1 },  [P_TLS12] = { "tls12", "AES-128-GCM", 1 },
    [P_ECB] = { "ecb", "AES-256-ECB", 1 },      [P_CBC_DEC] = { "cbc-dec", "AES-128-CBC", 0 },
    [P_CTR] = { "ctr", "AES-128-CTR", 1 },      [P_GCM] = { "gcm", "AES-128-GCM", 1 },
    [P_DRBG] = { "drbg", "AES-256-CTR", 1 },
    [P_GCM_MSG] = { "gcm-msg", "AES-128-GCM", 1 }, [P_CBC_MSG] = { "cbc-msg", "AES-128-CBC", 1 },
};

/* --aa: the second column is the default provider too (an A/A control: the
 * ratio a run reads when both sides are the same code, i.e. its noise and bias). */
static const char *PROVS[2] = { "default", "gpuaes" };

typedef struct {
    int pattern;
    size_t size;
    EVP_CIPHER_CTX *ctx;
    EVP_RAND_CTX *drbg;               /* P_DRBG */
    EVP_CIPHER *cipher;               /* P_GCM_MSG, P_CBC_MSG: given to every init */
    /* Both providers' buffers on the same cache-line offsets: with malloc's
     * 16-byte alignment one runner's buffers straddled lines the other's did
     * not, and at 256 B whichever provider ran second looked 10-30% slower. */
    _Alignas(64) unsigned char buf[MAX_SIZE + 64];
    _Alignas(64) unsigned char out[MAX_SIZE + 64];
    unsigned char iv[12];
    uint64_t seq;
} runner;

static OSSL_LIB_CTX *libctx;

static void die(const char *what)
{
    fprintf(stderr, "small_calls: %s failed\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static double now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static const unsigned char key[32] = "small-calls-bench-key-0123456789";

static void setup(runner *r, int pattern, size_t size, const char *prov)
{
    unsigned char fixed[4] = { 1, 2, 3, 4 };
    char propq[32];
    EVP_CIPHER *c;

    memset(r, 0, sizeof(*r));
    r->pattern = pattern;
    r->size = size;
    memset(r->iv, 0x5a, sizeof(r->iv));
    for (size_t i = 0; i < sizeof(r->buf); i++)
        r->buf[i] = (unsigned char)(i * 131 + 7);
    snprintf(propq, sizeof(propq), "provider=%s", prov);
    if (pattern == P_DRBG) {
        EVP_RAND *rand = EVP_RAND_fetch(libctx, "CTR-DRBG", NULL);
        /* (the lengths: OpenSSL 3.0's CTR-DRBG reads the cipher name's suffix by data_size) */
        OSSL_PARAM p[3] = {
            OSSL_PARAM_utf8_string(OSSL_DRBG_PARAM_CIPHER, (char *)PATTERNS[pattern].cipher,
                                   strlen(PATTERNS[pattern].cipher)),
            OSSL_PARAM_utf8_string(OSSL_DRBG_PARAM_PROPERTIES, propq, strlen(propq)), OSSL_PARAM_END
        };

        if (rand == NULL || (r->drbg = EVP_RAND_CTX_new(rand, RAND_get0_primary(libctx))) == NULL
            || !EVP_RAND_instantiate(r->drbg, 0, 0, NULL, 0, p))
            die("CTR-DRBG");
        EVP_RAND_free(rand);
        return;
    }
    c = EVP_CIPHER_fetch(libctx, PATTERNS[pattern].cipher, propq);
    if (c == NULL || (r->ctx = EVP_CIPHER_CTX_new()) == NULL
        || !EVP_CipherInit_ex2(r->ctx, c, key, r->iv, PATTERNS[pattern].enc, NULL))
        die(PATTERNS[pattern].cipher);
    if (pattern == P_GCM_MSG || pattern == P_CBC_MSG)
        r->cipher = c;
    else
        EVP_CIPHER_free(c);
    if (pattern == P_TLS12) {
        OSSL_PARAM p[2] = {
            OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed, sizeof(fixed)),
            OSSL_PARAM_END
        };

        if (!EVP_CIPHER_CTX_set_params(r->ctx, p))
            die("the TLS 1.2 fixed IV");
    }
}

/* One operation; 0 on failure. */
static int op(runner *r)
{
    int outl = 0, fl = 0;

    switch (r->pattern) {
    case P_TLS13: {
        unsigned char aad[5] = { 23, 3, 3, 0, 0 }, tag[16];

        r->seq++;
        memcpy(r->iv + 4, &r->seq, sizeof(r->seq));
        aad[3] = (unsigned char)((r->size + 17) >> 8);
        aad[4] = (unsigned char)(r->size + 17);
        return EVP_CipherInit_ex2(r->ctx, NULL, NULL, r->iv, 1, NULL)
            && EVP_CipherUpdate(r->ctx, NULL, &outl, aad, sizeof(aad))
            && EVP_CipherUpdate(r->ctx, r->out, &outl, r->buf, (int)r->size)
            && EVP_CipherFinal_ex(r->ctx, r->out + outl, &fl)
            && EVP_CIPHER_CTX_ctrl(r->ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;
    }
    case P_TLS12: {
        unsigned char aad[13] = { 0 };
        unsigned int len = (unsigned int)(8 + r->size + 16);

        r->seq++;
        memcpy(aad, &r->seq, sizeof(r->seq));
        aad[8] = 23, aad[9] = 3, aad[10] = 3;
        aad[11] = (unsigned char)(r->size >> 8);
        aad[12] = (unsigned char)r->size;
        /* libssl's tls1_enc: the ctrl sets the AAD, then gets the pad (the tag's length) */
        return EVP_CIPHER_CTX_ctrl(r->ctx, EVP_CTRL_AEAD_TLS1_AAD, sizeof(aad), aad) == 16
            && EVP_Cipher(r->ctx, r->buf, r->buf, len) > 0;    /* TLS: in place only */
    }
    case P_DRBG:
        return EVP_RAND_generate(r->drbg, r->out, r->size, 0, 0, NULL, 0);
    case P_GCM_MSG: {
        unsigned char tag[16];

        return EVP_EncryptInit_ex(r->ctx, r->cipher, NULL, key, r->iv)
            && EVP_EncryptUpdate(r->ctx, r->out, &outl, r->buf, (int)r->size)
            && EVP_EncryptFinal_ex(r->ctx, r->out + outl, &fl)
            && EVP_CIPHER_CTX_ctrl(r->ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;
    }
    case P_CBC_MSG:
        return EVP_EncryptInit_ex(r->ctx, r->cipher, NULL, key, r->iv)
            && EVP_EncryptUpdate(r->ctx, r->out, &outl, r->buf, (int)r->size)
            && EVP_EncryptFinal_ex(r->ctx, r->out + outl, &fl);
    default:
        /* Long-lived contexts: the same input again (in a cache-warm buffer). */
        return EVP_CipherUpdate(r->ctx, r->out, &outl, r->buf, (int)r->size);
    }
}

/* ns per op over a slice of `slice_ns`, in batches of `batch`. */
static double slice(runner *r, long batch, double slice_ns)
{
    double t0 = now_ns(), t;
    long n = 0;

    do {
        for (long i = 0; i < batch; i++)
            if (!op(r))
                die(PATTERNS[r->pattern].name);
        n += batch;
        t = now_ns();
    } while (t - t0 < slice_ns);
    return (t - t0) / (double)n;
}

/* --count: the counted loops, one per provider (separate symbols). */
static __attribute__((noinline)) void count_default(runner *r, long n)
{
    for (long i = 0; i < n; i++)
        if (!op(r))
            die(PATTERNS[r->pattern].name);
}

static __attribute__((noinline)) void count_gpuaes(runner *r, long n)
{
    for (long i = 0; i < n; i++)
        if (!op(r))
            die(PATTERNS[r->pattern].name);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: small_calls [--rounds N] [--slice-ms MS] [--sizes 16,64,256,1K,16K]\n"
            "                   [--patterns tls13,tls12,ecb,cbc-dec,ctr,gcm,drbg,gcm-msg,cbc-msg] [--provider-path DIR]\n"
            "                   [--count N] [--aa]\n"
            "Both providers in one process, interleaved; median ns per operation.\n"
            "--count N: N operations each in count_default/count_gpuaes, untimed (callgrind).\n"
            "--aa: the default provider in both columns (the run's noise floor).\n"
            "gpuaes.so is looked for in --provider-path, GPUAES_MODULE_DIR, then the build dir.\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *dir = getenv("GPUAES_MODULE_DIR"), *patterns = "tls13,tls12,ecb,cbc-dec,ctr,gcm,drbg,gcm-msg,cbc-msg";
    size_t sizes[MAX_SIZES] = { 16, 64, 256, 1024, 16384 };
    int nsizes = 5, rounds = 40;
    long count = 0;
    double slice_ms = 5;
    static double ns[2][MAX_ROUNDS];
    OSSL_PROVIDER *prov[2];

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--aa") == 0) {
            PROVS[1] = "default";
            continue;
        }
        if (i + 1 >= argc)
            usage();
        if (strcmp(argv[i], "--rounds") == 0) {
            rounds = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--count") == 0) {
            count = atol(argv[++i]);
            if (count < 1)
                usage();
        } else if (strcmp(argv[i], "--slice-ms") == 0) {
            slice_ms = atof(argv[++i]);
        } else if (strcmp(argv[i], "--provider-path") == 0) {
            dir = argv[++i];
        } else if (strcmp(argv[i], "--patterns") == 0) {
            patterns = argv[++i];
        } else if (strcmp(argv[i], "--sizes") == 0) {
            char *list = argv[++i], *s;

            for (nsizes = 0; (s = strtok(list, ",")) != NULL && nsizes < MAX_SIZES; list = NULL) {
                if (!size_parse(s, &sizes[nsizes]) || sizes[nsizes] == 0 || sizes[nsizes] > MAX_SIZE || sizes[nsizes] % 16 != 0)
                    usage();
                nsizes++;
            }
        } else {
            usage();
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || slice_ms <= 0 || nsizes == 0)
        usage();
    if (dir == NULL || *dir == '\0')
        dir = GPUAES_DEFAULT_MODULE_DIR;
    if ((libctx = OSSL_LIB_CTX_new()) == NULL
        || (*dir != '\0' && !OSSL_PROVIDER_set_default_search_path(libctx, dir))
        || (prov[0] = OSSL_PROVIDER_load(libctx, "default")) == NULL
        || (prov[1] = OSSL_PROVIDER_load(libctx, "gpuaes")) == NULL)
        die("loading the providers");

    printf("# small_calls: %s; rounds %d, slice %.1f ms, providers interleaved%s\n",
           OpenSSL_version(OPENSSL_VERSION), rounds, slice_ms,
           strcmp(PROVS[1], "default") == 0 ? "; A/A: the 'gpuaes' column is the default provider" : "");
    printf("%-8s %6s %12s %12s %15s\n", "pattern", "size", "default ns", "gpuaes ns", "default/gpuaes");
    for (int p = 0; p < P_COUNT; p++) {
        if (strstr(patterns, PATTERNS[p].name) == NULL)
            continue;
        for (int s = 0; s < nsizes; s++) {
            runner *r[2];
            long batch[2];
            double med[2];

            if (count > 0) {
                for (int k = 0; k < 2; k++) {
                    if ((r[k] = aligned_alloc(64, sizeof(runner))) == NULL)
                        die("malloc");
                    setup(r[k], p, sizes[s], PROVS[k]);
                    for (int i = 0; i < 64; i++)          /* warm: first-call work uncounted */
                        if (!op(r[k]))
                            die(PATTERNS[p].name);
                    (k == 0 ? count_default : count_gpuaes)(r[k], count);
                    EVP_CIPHER_CTX_free(r[k]->ctx);
                    EVP_RAND_CTX_free(r[k]->drbg);
                    EVP_CIPHER_free(r[k]->cipher);
                    free(r[k]);
                }
                printf("%-8s %6zu counted %ld ops per provider\n", PATTERNS[p].name, sizes[s], count);
                continue;
            }
            /* Two halves, the contexts made in the opposite order in the second:
             * where each lands in memory biased an A/A run by up to 4 % (ECB 16 B
             * on the CPU machine); so does what ran just before, hence the
             * alternation inside a half. */
            for (int half = 0; half < 2; half++) {
                for (int j = 0; j < 2; j++) {
                    int k = j ^ half;
                    double t;

                    r[k] = aligned_alloc(64, sizeof(runner));
                    if (r[k] == NULL)
                        die("malloc");
                    setup(r[k], p, sizes[s], PROVS[k]);
                    (void)slice(r[k], 1, 2e6);            /* warm-up: 2 ms */
                    t = slice(r[k], 16, 1e6);
                    batch[k] = (long)(50e3 / t) + 1;      /* ~50 us per batch */
                }
                for (int i = half * rounds / 2; i < (half + 1) * rounds / 2 + (half ? rounds % 2 : 0); i++)
                    for (int j = 0; j < 2; j++) {
                        int k = (i + j) % 2;              /* who goes first alternates */

                        ns[k][i] = slice(r[k], batch[k], slice_ms * 1e6);
                    }
                for (int k = 0; k < 2; k++) {
                    EVP_CIPHER_CTX_free(r[k]->ctx);
                    EVP_RAND_CTX_free(r[k]->drbg);
                    EVP_CIPHER_free(r[k]->cipher);
                    free(r[k]);
                }
            }
            for (int k = 0; k < 2; k++)
                med[k] = bench_median(ns[k], rounds);
            printf("%-8s %6zu %12.1f %12.1f %15.3f\n", PATTERNS[p].name, sizes[s], med[0], med[1],
                   med[0] / med[1]);
            fflush(stdout);
        }
    }
    OSSL_PROVIDER_unload(prov[1]);
    OSSL_PROVIDER_unload(prov[0]);
    OSSL_LIB_CTX_free(libctx);
    return 0;
}
