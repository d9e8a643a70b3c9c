/*
 * test_gcm_ghash.c - GCM on gpuaes's engine with GHASH split between the GPU
 * (large whole-block pieces) and OpenSSL segments (AAD, pad, small updates,
 * partial heads and tails), against the default provider.
 *
 * Fixed update patterns that mix small and large updates, partial blocks
 * before and after GPU pieces, AAD of 0..5000 bytes (not multiples of 16,
 * across 256 bytes), 12-byte and other IVs, in place and not,
 * every key size; encryption must match default's ciphertext and tag,
 * decryption of default's output must verify, a flipped tag must not; a
 * context duplicated in the middle of a message must finish it the same way.
 * Run with GPUAES_OFFLOAD_MIN_BYTES=4096 and GPUAES_DISPATCH=force (and with
 * GPUAES_FAULT=copyout, where GPU jobs stop after a prefix and the CPU
 * completes them).  --gpu: the GPU must have taken GCM bytes; --no-gpu-gcm: a GPU is there but cannot run GCM
 * (the emulator with GPUAES_EMU_NO_GCM=1, like compute capability 7.5): no GCM
 * byte may reach it, and every message must still come out right.
 */
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define END ((size_t)-1)

static const size_t patterns[][10] = {
    { 3 * MiB, END },                                            /* one aligned GPU piece */
    { 5000, 3, 13, 3 * MiB + 5, 100, 2 * MiB, 7, END },           /* partial heads and tails around GPU pieces */
    { 4097, 3 * 4096 + 15, 1, 64 * KiB + 1, END },
    { 8192, 16, 4096 * 5, 33, 1 * MiB + 15, END },
    { 4 * MiB + 1, 4 * MiB + 15, END },
};
static const size_t aadlens[] = { 0, 1, 15, 16, 17, 255, 256, 257, 300, 5000 };

/*
 * GCM's inc32 wrap: with the all-zero key of each size, these 16-byte IVs
 * give a J0 whose low 32 bits are 2565 / 1415 / 443 blocks short of the
 * wrap (found by search with provider/gcm/gcm_math.c).  The patterns cross it
 * in CPU pieces (small updates after a first GPU piece) and in one GPU piece.
 */
static const unsigned char wrap_iv[3][16] = {
    { 0x0b, 0xc9, 0x01 }, { 0x7c, 0x58, 0x03 }, { 0x08, 0x11, 0x20 },
};
static const size_t wrap_patterns[][16] = {   /* 4000 < the 4096 threshold: CPU pieces */
    { 4096, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 4000, 7, END },
    { 3 * MiB, END },
};
static const unsigned char *fixed_key, *fixed_iv;   /* set: one() uses them */
static const size_t ivlens[] = { 12, 1, 60 };
static const char *const names[] = { "AES-128-GCM", "AES-192-GCM", "AES-256-GCM" };

static size_t pattern_len(const size_t *p)
{
    size_t n = 0;

    for (; *p != END; p++)
        n += *p;
    return n;
}

static EVP_CIPHER_CTX *start(const EVP_CIPHER *c, int enc, const unsigned char *key,
                             const unsigned char *iv, size_t ivlen, const unsigned char *aad,
                             size_t aadlen)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    OSSL_PARAM p[2] = { OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen),
                        OSSL_PARAM_END };
    int n, ok;
    size_t half = aadlen / 3;

    ok = x != NULL && EVP_CipherInit_ex2(x, c, NULL, NULL, enc, NULL)
        && EVP_CIPHER_CTX_set_params(x, p) && EVP_CipherInit_ex2(x, NULL, key, iv, enc, NULL)
        && (aadlen == 0 || (EVP_CipherUpdate(x, NULL, &n, aad, (int)half)
                            && EVP_CipherUpdate(x, NULL, &n, aad + half, (int)(aadlen - half))));
    if (!ok) {
        EVP_CIPHER_CTX_free(x);
        return NULL;
    }
    return x;
}

/* Updates of pattern p from piece `from` on, in[pos..] -> out[pos..]; returns 1 on success. */
static int run_updates(EVP_CIPHER_CTX *x, const size_t *p, size_t from, size_t pos,
                       const unsigned char *in, unsigned char *out)
{
    for (size_t k = from; p[k] != END; k++) {
        int n;

        if (!EVP_CipherUpdate(x, out + pos, &n, in + pos, (int)p[k]) || (size_t)n != p[k])
            return 0;
        pos += p[k];
    }
    return 1;
}

static int finish(EVP_CIPHER_CTX *x, int enc, unsigned char tag[16])
{
    unsigned char dummy[16];
    int n, ok;

    if (!enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) <= 0)
        return 0;
    ok = EVP_CipherFinal_ex(x, dummy, &n) && n == 0;
    if (ok && enc)
        ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;
    return ok;
}

static void one(test_env *env, int ci, size_t pi, size_t ai, size_t ii, int inplace)
{
    EVP_CIPHER *g = api_fetch(env, names[ci], "gpuaes"), *d = api_fetch(env, names[ci], "default");
    const size_t *p = fixed_iv != NULL ? wrap_patterns[pi] : patterns[pi];
    size_t len = pattern_len(p), ivlen = fixed_iv != NULL ? 16 : ivlens[ii], aadlen = aadlens[ai];
    unsigned char key[32], iv[60], aad[5000], tag_ref[16], tag[16], tag2[16];
    unsigned char *pt = malloc(len), *ct_ref = malloc(len), *buf = malloc(len), *buf2 = malloc(len);
    EVP_CIPHER_CTX *x, *y;
    int ok;
    char desc[160];

    snprintf(desc, sizeof(desc), "%s pattern %zu aad %zu iv %zu %s", names[ci], pi, aadlen, ivlen,
             inplace ? "in place" : "out of place");
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(aad, sizeof(aad));
    if (fixed_iv != NULL) {
        memcpy(key, fixed_key, sizeof(key));
        memcpy(iv, fixed_iv, 16);
    }
    test_rand_bytes(pt, len);

    /* default: one update */
    x = start(d, 1, key, iv, ivlen, aad, aadlen);
    ok = x != NULL && run_updates(x, (const size_t[]){ len, END }, 0, 0, pt, ct_ref)
        && finish(x, 1, tag_ref);
    EVP_CIPHER_CTX_free(x);
    CHECKF(ok, "%s: default encrypt", desc);

    /* gpuaes encrypt by the pattern; duplicated after its second piece when it has one */
    memcpy(buf, pt, len);
    x = start(g, 1, key, iv, ivlen, aad, aadlen);
    ok = x != NULL;
    y = NULL;
    if (ok && p[1] != END) {
        ok = run_updates(x, (const size_t[]){ p[0], p[1], END }, 0, 0, inplace ? buf : pt, buf);
        y = EVP_CIPHER_CTX_new();
        ok = ok && y != NULL && EVP_CIPHER_CTX_copy(y, x);
        memcpy(buf2, buf, p[0] + p[1]);
        ok = ok && run_updates(x, p, 2, p[0] + p[1], inplace ? buf : pt, buf)
            && run_updates(y, p, 2, p[0] + p[1], pt, buf2) && finish(y, 1, tag2);
        CHECKF(!ok || (memcmp(buf2, ct_ref, len) == 0 && memcmp(tag2, tag_ref, 16) == 0),
               "%s: encrypt, duplicated context", desc);
    } else if (ok) {
        ok = run_updates(x, p, 0, 0, inplace ? buf : pt, buf);
    }
    ok = ok && finish(x, 1, tag);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_CTX_free(y);
    CHECKF(ok && memcmp(buf, ct_ref, len) == 0, "%s: encrypt, ciphertext", desc);
    CHECKF(ok && memcmp(tag, tag_ref, 16) == 0, "%s: encrypt, tag", desc);

    /* gpuaes decrypt of default's output: verifies, gives the plaintext */
    memcpy(buf, ct_ref, len);
    x = start(g, 0, key, iv, ivlen, aad, aadlen);
    ok = x != NULL && run_updates(x, p, 0, 0, inplace ? buf : ct_ref, buf) && finish(x, 0, tag_ref);
    EVP_CIPHER_CTX_free(x);
    CHECKF(ok && memcmp(buf, pt, len) == 0, "%s: decrypt", desc);

    /* a flipped tag bit: final must fail */
    tag[0] = tag_ref[0] ^ 0x80;
    memcpy(tag + 1, tag_ref + 1, 15);
    x = start(g, 0, key, iv, ivlen, aad, aadlen);
    ok = x != NULL && run_updates(x, p, 0, 0, ct_ref, buf) && finish(x, 0, tag);
    EVP_CIPHER_CTX_free(x);
    CHECKF(!ok, "%s: decrypt with a wrong tag succeeded", desc);
    ERR_clear_error();

    free(pt);
    free(ct_ref);
    free(buf);
    free(buf2);
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
}

/*
 * Partly overlapping input and output (issue 19 item 4), layout as given:
 * in = buf + base; p0 > 0: a first update of p0 bytes in place; then p1 bytes
 * from in + p0 to in + p0 + off (copy: from a copy of them, the bytes of a
 * memmove-like call); final (decrypting: with tag), encrypting: tag out.
 * Returns the final's result, -1 if an earlier call failed.  *gpu: GPU bytes
 * the first update made.
 */
static int overlap_run(test_env *env, const EVP_CIPHER *c, int enc, const unsigned char *key,
                       const unsigned char *iv, unsigned char *buf, size_t base, size_t p0,
                       size_t p1, long off, int copy, unsigned char tag[16], uint64_t *gpu)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned char *in = buf + base, *src = in + p0, *tmp = NULL, dummy[16];
    uint64_t before = test_gpu_bytes(env);
    int n, ok;

    ok = x != NULL && EVP_CipherInit_ex2(x, c, key, iv, enc, NULL)
        && (p0 == 0 || EVP_CipherUpdate(x, in, &n, in, (int)p0));
    *gpu = test_gpu_bytes(env) - before;
    if (ok && copy && (tmp = malloc(p1)) != NULL)
        src = memcpy(tmp, src, p1);
    ok = ok && (!copy || tmp != NULL)
        && EVP_CipherUpdate(x, in + p0 + off, &n, src, (int)p1) && (size_t)n == p1
        && (enc || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0);
    if (ok) {
        ok = EVP_CipherFinal_ex(x, dummy, &n) > 0;
        if (ok && enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag) <= 0)
            ok = -1;
    } else {
        ok = -1;
    }
    ERR_clear_error();
    free(tmp);
    EVP_CIPHER_CTX_free(x);
    return ok;
}

/* gpuaes against default for one layout.  The first update alone overlapping
 * goes to default: its bytes, whatever they are.  A later one on gpuaes's
 * engine gives the memmove-like bytes, which are default's when out is below
 * in (checked) and are the right encryption either way.  engine: 1 the
 * message is on gpuaes's engine after p0 bytes, 0 on default's, -1 unknown
 * (the dispatcher decides); gpu: the GPU must have taken the first update. */
static void overlap_case(test_env *env, int ci, int enc, size_t p0, size_t p1, long off, int engine,
                         int gpu_req)
{
    EVP_CIPHER *c[2] = { api_fetch(env, names[ci], "default"), api_fetch(env, names[ci], "gpuaes") };
    size_t len = p0 + p1, base = (size_t)(off < 0 ? -off : off) + 64, size = 2 * base + len;
    unsigned char key[32], iv[12], tag0[16], *data = malloc(len), *start = malloc(size);
    unsigned char *b[3] = { malloc(size), malloc(size), malloc(size) }, t[3][16];
    int r[3];
    uint64_t gpu[3];
    size_t outl;

    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(start, size);
    test_rand_bytes(data, len);
    if (!enc)                         /* default's encryption of data, and its tag */
        CHECK(api_crypt(c[0], 1, key, iv, NULL, 0, data, len, start + base, &outl, tag0, 1));
    else
        memcpy(start + base, data, len);
    for (int k = 0; k < 3; k++) {     /* default same layout, default memmove-like, gpuaes */
        memcpy(b[k], start, size);
        memcpy(t[k], tag0, 16);
        r[k] = overlap_run(env, c[k == 2], enc, key, iv, b[k], base, p0, p1, off, k == 1, t[k], &gpu[k]);
    }
    {
        /* which default result gpuaes owes: the memmove-like one once the
         * message is on its engine */
        int want = p0 > 0 && engine == 1;

        if (p0 > 0 && engine == -1 && (r[2] != r[0] || memcmp(b[2], b[0], size) != 0))
            want = 1;
        CHECKF(!gpu_req || p0 == 0 || gpu[2] > 0, "%s overlap: the first update did not reach the GPU",
               names[ci]);
        CHECKF(r[2] == r[want] && memcmp(b[2], b[want], size) == 0
                   && (!enc || r[2] != 1 || memcmp(t[2], t[want], 16) == 0),
               "%s %s p0 %zu p1 %zu out = in %+ld: gpuaes (final %d) differs from default%s (final %d)",
               names[ci], enc ? "enc" : "dec", p0, p1, off, r[2], want ? ", memmove-like," : "",
               r[want]);
        if (p0 > 0 && off < 0)        /* out below in: default's bytes are the memmove-like ones */
            CHECKF(r[0] == r[1] && r[0] == 1 && memcmp(b[0], b[1], size) == 0,
                   "%s p0 %zu p1 %zu out = in %+ld: default not memmove-like", names[ci], p0, p1, off);
    }
    for (int k = 0; k < 3; k++)
        free(b[k]);
    free(data);
    free(start);
    EVP_CIPHER_free(c[0]);
    EVP_CIPHER_free(c[1]);
}

static void overlap_tests(test_env *env, int engine, int gpu_req)
{
    static const size_t shapes[][2] = {   /* p0, p1 */
        { 0, 100 }, { 0, 4096 + 5 }, { 0, MiB + 16 }, { 0, 3 * MiB + 5 },
        { MiB + 16, 100 }, { MiB + 5, 4096 + 5 }, { MiB + 16, MiB + 16 }, { MiB + 5, 2 * MiB + 7 },
    };
    static const long offs[] = { 1, 16, 4080, (long)MiB + 16, -1, -16, -4080 };

    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        for (size_t o = 0; o < sizeof(offs) / sizeof(offs[0]); o++) {
            size_t p1 = shapes[s][1], d = (size_t)(offs[o] < 0 ? -offs[o] : offs[o]);

            if (d >= p1)              /* no overlap */
                continue;
            for (int enc = 1; enc >= 0; enc--)
                overlap_case(env, (int)((s + o) % 3), enc, shapes[s][0], p1, offs[o], engine,
                             gpu_req);
        }
}

int main(int argc, char **argv)
{
    test_env env;
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    int no_gcm = argc > 1 && strcmp(argv[1], "--no-gpu-gcm") == 0;
    uint64_t before = 0;

    test_seed(0x6768617368);
    if (!test_env_open(&env))
        return 1;
    if (gpu || no_gcm) {
        test_require_gpu(&env);
        before = test_gpu_bytes(&env);
    }
    for (int ci = 0; ci < 3; ci++)
        for (size_t pi = 0; pi < sizeof(patterns) / sizeof(patterns[0]); pi++)
            for (size_t ai = 0; ai < sizeof(aadlens) / sizeof(aadlens[0]); ai++) {
                /* every IV length and both buffer layouts, spread over the AAD lengths */
                size_t ii = (ai + pi + (size_t)ci) % (sizeof(ivlens) / sizeof(ivlens[0]));

                one(&env, ci, pi, ai, ii, (int)((ai + pi) & 1));
            }
    for (int ci = 0; ci < 3; ci++)
        for (size_t pi = 0; pi < sizeof(wrap_patterns) / sizeof(wrap_patterns[0]); pi++) {
            static const unsigned char zero_key[32];

            fixed_key = zero_key;
            fixed_iv = wrap_iv[ci];
            one(&env, ci, pi, pi % 2 ? 4 : 0, 0, (int)pi);   /* AAD 0 or 17 bytes */
            fixed_key = fixed_iv = NULL;
        }
    /* GPU-sized first updates: on gpuaes's engine when the threshold is set
     * and forced and the GPU runs GCM, on default's without a GPU for GCM;
     * the dispatcher's choice (either) otherwise */
    overlap_tests(&env, !test_gpu_available(&env) || no_gcm ? 0
                        : getenv("GPUAES_OFFLOAD_MIN_BYTES") != NULL && test_dispatch_forced(&env)
                        ? 1 : -1, gpu);
    if (gpu)
        CHECK(test_gpu_bytes(&env) > before);   /* the GPU path really ran */
    if (no_gcm)
        CHECK(test_gpu_bytes(&env) == before);  /* and here it must not have */
    ERR_clear_error();
    test_env_close(&env);
    return test_report("gcm_ghash");
}
