/*
 * test_overlap.c - partially overlapping input and output: the default
 * provider serves them (in its own byte order), so gpuaes must give its
 * bytes; in-place calls still go to the GPU.  Both providers run the same
 * calls on identical buffers: in = buf + IN_AT, out = in + d; the whole
 * buffers, return values and lengths must agree.
 *   (default)    ECB, CBC, CFB, CTR both ways, AES-128 and AES-256, 69 B to
 *                3 MiB, d in {0, +1, +5, +16, +4080, +1 MiB + 16, -1, -16},
 *                the data in one update or after a 5-byte one (ECB/CBC then
 *                hold 5 bytes: there out + 5 == in is in place, out == in is not)
 *                Also: 5 bytes partially overlapping (the default provider's
 *                bytes), a whole block out of place, then 1 MiB + 48 in place:
 *                the GPU must see the bytes held after the first call.
 *   --keystream  CTR streams in keystream mode (small updates) meet such calls
 * --gpu: exit 77 without a GPU; in-place calls of >= 1 MiB on a GPU operation
 * must reach the GPU (gpu-bytes grows), partially overlapping ones must not.
 */
#define _POSIX_C_SOURCE 200809L          /* nanosleep */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <openssl/err.h>
#include <openssl/params.h>

#include "api_util.h"

#define IN_AT 64                           /* room for d < 0 */
#define FAR (((size_t)1 << 20) + 16)       /* the largest d */
#define MAXLEN (((size_t)3 << 20) + 37)
#define CAP (IN_AT + FAR + MAXLEN + 64)

static test_env env;
static unsigned char *src, *buf[2];        /* buf[0]: default, buf[1]: gpuaes */
static int gpu;

static uint64_t u64_param(const char *key)
{
    uint64_t v = 0;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint64(key, &v), OSSL_PARAM_END };

    OSSL_PROVIDER_get_params(env.gpuaes, p);
    return v;
}

/* One update on both contexts at in = buf + at, out = in + d; their results must agree. */
static void both_update(EVP_CIPHER_CTX *x[2], size_t at, long d, size_t n, size_t *outl,
                        const char *what)
{
    int r[2], l[2] = { 0, 0 };

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherUpdate(x[j], buf[j] + at + d, &l[j], buf[j] + at, (int)n);
    CHECKF(r[0] == r[1] && l[0] == l[1], "%s: update of %zu at d=%ld: default %d/%d, gpuaes %d/%d",
           what, n, d, r[0], l[0], r[1], l[1]);
    *outl = (size_t)l[0];
    ERR_clear_error();
}

static void both_final(EVP_CIPHER_CTX *x[2], size_t at, const char *what)
{
    int r[2], l[2] = { 0, 0 };

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherFinal_ex(x[j], buf[j] + at, &l[j]);
    CHECKF(r[0] == r[1] && l[0] == l[1], "%s: final: default %d/%d, gpuaes %d/%d", what, r[0], l[0],
           r[1], l[1]);
    ERR_clear_error();
}

static void check_bufs(const char *what)
{
    CHECKF(memcmp(buf[0], buf[1], CAP) == 0, "%s: the buffers differ", what);
}

static int init_pair(EVP_CIPHER_CTX *x[2], const char *name, int enc, const unsigned char *key,
                     const unsigned char *iv)
{
    EVP_CIPHER *c[2] = { api_fetch(&env, name, "default"), api_fetch(&env, name, "gpuaes") };
    int ok = 1;

    for (int j = 0; j < 2; j++) {
        x[j] = EVP_CIPHER_CTX_new();
        ok = ok && x[j] != NULL && EVP_CipherInit_ex2(x[j], c[j], key, iv, enc, NULL);
        EVP_CIPHER_free(c[j]);
    }
    return ok;
}

/* Both buffers from src, a random key and IV, both contexts made: 1, or 0
 * (reported against `what`). */
static int start_pair(EVP_CIPHER_CTX *x[2], const char *name, int enc, const char *what)
{
    unsigned char key[32], iv[16];

    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    memcpy(buf[0], src, CAP);
    memcpy(buf[1], src, CAP);
    if (!init_pair(x, name, enc, key, iv)) {
        CHECKF(0, "%s: init", what);
        return 0;
    }
    return 1;
}

/* Does ECB/CBC/CFB/CTR in this direction have a GPU operation? */
static int gpu_op(const char *name, int enc)
{
    return strstr(name, "ECB") || strstr(name, "CTR") || !enc;
}

/* [first bytes,] the rest, final: one layout, one cipher, one direction. */
static void layout_case(const char *name, int enc, size_t len, long d, size_t first)
{
    EVP_CIPHER_CTX *x[2];
    size_t o1 = 0, o2 = 0, rest = len - first;
    uintptr_t in2, out2;
    uint64_t g0, g1;
    int buffered = strstr(name, "ECB") || strstr(name, "CBC");
    char what[160];

    snprintf(what, sizeof(what), "%s %s len=%zu d=%ld first=%zu", name, enc ? "enc" : "dec", len,
             d, first);
    if (!start_pair(x, name, enc, what))
        return;
    if (first > 0)
        both_update(x, IN_AT, d, first, &o1, what);
    g0 = u64_param("gpu-bytes") + u64_param("cpu-share-bytes");
    /* the second call's in and out: out + held lines up with in when in place */
    both_update(x, IN_AT + first, d + (long)o1 - (long)first, rest, &o2, what);
    g1 = u64_param("gpu-bytes") + u64_param("cpu-share-bytes");
    both_final(x, IN_AT + d + o1 + o2, what);
    check_bufs(what);
    in2 = (uintptr_t)(IN_AT + first);
    out2 = (uintptr_t)(IN_AT + d + (long)o1) + (buffered ? first - o1 : 0);
    if (gpu && out2 != in2 && (out2 < in2 ? in2 - out2 : out2 - in2) < rest)
        CHECKF(g1 == g0, "%s: a partially overlapping call reached the GPU", what);
    if (gpu && out2 == in2 && rest >= FAR && gpu_op(name, enc))
        CHECKF(g1 > g0, "%s: an in-place call did not reach the GPU", what);
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
}

/* A partially overlapping call, then one the hot path takes (whole blocks
 * after whole blocks: it must know that the fallback holds a partial one
 * since), then one for the GPU, in place (out + held == in).  The hot path
 * needs a GPU threshold above 16 B: the --keystream run's 1 MiB. */
static void held_after_overlap(const char *name, int enc)
{
    EVP_CIPHER_CTX *x[2];
    size_t o, held = strstr(name, "ECB") || strstr(name, "CBC") ? 5 : 0, len = FAR + 32;
    uint64_t g0;
    char what[120];

    snprintf(what, sizeof(what), "%s %s: 5 B at d=1, 16 B out of place, %zu in place", name,
             enc ? "enc" : "dec", len);
    if (!start_pair(x, name, enc, what))
        return;
    both_update(x, IN_AT, 1, 5, &o, what);
    both_update(x, IN_AT + 5, (long)(CAP / 2), 16, &o, what);
    g0 = u64_param("gpu-bytes") + u64_param("cpu-share-bytes");
    both_update(x, IN_AT + 21, -(long)held, len, &o, what);
    if (gpu && gpu_op(name, enc))
        CHECKF(u64_param("gpu-bytes") + u64_param("cpu-share-bytes") > g0,
               "%s: the in-place call did not reach the GPU", what);
    both_final(x, IN_AT + 21 - held + o, what);
    check_bufs(what);
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
}

static const char *const BLOCK_NAMES[] = { "AES-128-ECB", "AES-256-ECB", "AES-128-CBC",
                                           "AES-256-CBC", "AES-128-CFB", "AES-256-CFB",
                                           "AES-128-CTR", "AES-256-CTR" };

static void layouts(void)
{
    static const size_t lens[] = { 69, 4133, ((size_t)1 << 20) + 48, MAXLEN };
    static const long ds[] = { 0, 1, 5, 16, 4080, (long)FAR, -1, -16 };

    for (size_t i = 0; i < sizeof(BLOCK_NAMES) / sizeof(BLOCK_NAMES[0]); i++) {
        for (int enc = 1; enc >= 0; enc--)
            for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
                for (size_t k = 0; k < sizeof(ds) / sizeof(ds[0]); k++) {
                    layout_case(BLOCK_NAMES[i], enc, lens[l], ds[k], 0);
                    layout_case(BLOCK_NAMES[i], enc, lens[l], ds[k], 5);
                }
        printf("%s done, %d failures so far\n", BLOCK_NAMES[i], test_failures);
        fflush(stdout);
    }
}

/* CTR streams that ramp into keystream mode, then overlapping and in-place
 * calls (small: keystream; 2 MiB: the whole-job path from keystream mode). */
static void keystream(void)
{
    static const long ds[] = { 1, 16, -1, -16, 0, 4080 };
    static const size_t ns[] = { 1000, 20000, (size_t)2 << 20 };
    uint64_t used_at_start = u64_param("keystream-used");
    int cases_with_keystream = 0;

    for (size_t k = 0; k < sizeof(ds) / sizeof(ds[0]); k++)
        for (size_t m = 0; m < sizeof(ns) / sizeof(ns[0]); m++) {
            EVP_CIPHER_CTX *x[2];
            uint64_t used = u64_param("keystream-used");
            size_t o;
            char what[120];

            snprintf(what, sizeof(what), "AES-128-CTR keystream d=%ld n=%zu", ds[k], ns[m]);
            if (!start_pair(x, "AES-128-CTR", 1, what))
                continue;
            /* out of place, 3 bytes off the block grid: ramp, then keystream
             * windows.  The CPU runs these 4 KiB updates in microseconds, far
             * faster than a fill comes back, so the stream pauses now and then
             * (as an application between records would): the windows it asked
             * for are ready when it gets there, whatever the GPU's pace. */
            for (int i = 0; i < 48; i++) {
                both_update(x, IN_AT + (size_t)i * 4099 % 65536, (long)(CAP / 2), 4099, &o, what);
                if (gpu && i % 4 == 3)
                    nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
            }
            for (int i = 0; i < 4; i++) {
                both_update(x, IN_AT, ds[k], ns[m], &o, what);
                both_update(x, IN_AT, (long)(CAP / 2), 777, &o, what);   /* and on */
            }
            both_final(x, IN_AT, what);
            check_bufs(what);
            /* Whether a given stream gets windows is still the GPU's pace and
             * the dispatcher's call: counted, and the run as a whole must have
             * used keystream. */
            cases_with_keystream += u64_param("keystream-used") > used;
            EVP_CIPHER_CTX_free(x[0]);
            EVP_CIPHER_CTX_free(x[1]);
        }
    printf("keystream used in %d of %zu streams\n", cases_with_keystream,
           sizeof(ds) / sizeof(ds[0]) * (sizeof(ns) / sizeof(ns[0])));
    if (gpu)
        CHECKF(u64_param("keystream-used") > used_at_start, "%s", "no keystream used at all");
}

int main(int argc, char **argv)
{
    int ks = 0;

    for (int a = 1; a < argc; a++) {
        if (strcmp(argv[a], "--gpu") == 0)
            gpu = 1;
        else if (strcmp(argv[a], "--keystream") == 0)
            ks = 1;
    }
    if (!test_env_open(&env))
        return 1;
    if (gpu)
        test_require_gpu(&env);
    test_seed(0x6f7665726c6170ULL);
    src = malloc(CAP);
    buf[0] = malloc(CAP);
    buf[1] = malloc(CAP);
    if (src == NULL || buf[0] == NULL || buf[1] == NULL)
        return 1;
    test_rand_bytes(src, CAP);
    if (ks)
        keystream();
    else
        layouts();
    for (size_t i = 0; i < sizeof(BLOCK_NAMES) / sizeof(BLOCK_NAMES[0]); i++)
        for (int enc = 1; enc >= 0; enc--)
            held_after_overlap(BLOCK_NAMES[i], enc);
    free(src);
    free(buf[0]);
    free(buf[1]);
    test_env_close(&env);
    return test_report(ks ? "overlap keystream" : "overlap");
}
