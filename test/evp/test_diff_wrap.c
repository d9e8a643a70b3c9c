/*
 * test_diff_wrap.c - counter wrap-around with long messages, gpuaes against default.
 *
 * CTR: initial counters a few blocks below a 2^32, 2^64 or 2^128 boundary (the
 * GPU's CTR128 must carry through all 128 bits).  GCM: inc32 wraps modulo 2^32;
 * J0 = GHASH(IV) for IVs that are not 12 bytes, so random IVs almost never get
 * near the wrap.  Wycheproof's "CounterWrap" vectors (aes_gcm_test.json, tcId
 * 241-249, also in test/vectors/gcm_extra.txt) give 16-byte IVs whose J0 under
 * their AES-256 key is known; here they carry long random messages instead of
 * 40 bytes, so that the wrap happens inside a large (GPU-sized) update.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_diff.h"

static const char wrap_key[] =
    "00112233445566778899aabbccddeeff102132435465768798a9bacbdcedfe0f";
static const struct { const char *iv, *j0; } wrap_ivs[] = {
    { "57b3a81f2c36b6b06577ca0fbab8fa8e", "00000000000000000000000000000000" },
    { "ce20a7e870696a5e68533c465bad2ba1", "ffffffffffffffffffffffffffffffff" },
    { "918e3c19dbdfee2db18156c5b93f3d75", "fffffffffffffffffffffffffffffffe" },
    { "717d900b270462b9dbf7e9419e890609", "fffffffffffffffffffffffffffffffd" },
    { "ecd52120af240e9b4bf3b9d1eeb49434", "000102030405060708090a0bffffffff" },
    { "b37bbad104928ae89221d3520c2682e0", "000102030405060708090a0bfffffffe" },
    { "538816c3f849067cf8576cd62b90b99c", "000102030405060708090a0bfffffffd" },
    { "d10e631943cd3bdababab2bbd13951c0", "000102030405060708090a0b7fffffff" },
    { "8ea0f8e8e87bbfa96368d83833ab4714", "000102030405060708090a0b7ffffffe" },
};

/* Encrypts len random bytes with op on both providers (gpuaes with random cuts),
 * compares; then gpuaes decrypts default's output with the tag. */
static void one(diff_ctx *dc, rng_state *r, int i, kd_op *op, size_t len, const char *desc)
{
    kd_mode m = kd_ciphers[i].mode;
    unsigned char *pt = malloc(len + 1), *c1 = malloc(len + 32), *c2 = malloc(len + 32);
    unsigned char tag1[16], tag2[16];
    size_t l1 = 0, l2 = 0;
    int rv1, rv2;

    rng_bytes(r, pt, len);
    op->enc = 1;
    op->taglen = 16;
    op->tag = tag1;
    op->split = op->aad_split = kd_split_make(KD_ONE_SHOT, 0);
    rv1 = kd_run(dc->ref[i], m, op, pt, len, c1, &l1);
    op->tag = tag2;
    op->split = kd_split_make((rng_next(r) & 1) ? KD_MIXED : KD_ODD, rng_next(r));
    op->in_place = (int)(rng_next(r) & 1);
    rv2 = kd_run(dc->sub[i], m, op, pt, len, c2, &l2);
    CHECKF(rv1 == KD_OK && rv2 == KD_OK && l1 == len && l2 == len, "case: %s", desc);
    CHECKF(memcmp(c1, c2, len) == 0 && (m != KD_GCM || memcmp(tag1, tag2, 16) == 0), "case: %s", desc);
    op->enc = 0;
    op->tag = tag1;
    op->split = kd_split_make(KD_MIXED, rng_next(r));
    rv2 = kd_run(dc->sub[i], m, op, c1, len, c2, &l2);
    CHECKF(rv2 == KD_OK && l2 == len && memcmp(c2, pt, len) == 0, "case: %s", desc);
    free(pt);
    free(c1);
    free(c2);
}

void diff_wrap(diff_ctx *dc, rng_state *r)
{
    size_t cap = dc->max_bytes > (64u << 10) ? dc->max_bytes : (64u << 10);
    unsigned char key[32], iv[16];
    char desc[160];
    size_t n;

    for (size_t w = 0; w < sizeof(wrap_ivs) / sizeof(wrap_ivs[0]); w++) {
        unsigned char *k = test_unhex(wrap_key, &n), *v = test_unhex(wrap_ivs[w].iv, &n);
        kd_op op = { .key = k, .iv = v, .ivlen = 16 };
        size_t len = 16 * 1024 + rng_below(r, cap - 16 * 1024);

        snprintf(desc, sizeof(desc), "GCM wrap J0=%s len=%zu", wrap_ivs[w].j0, len);
        one(dc, r, (int)(kd_find(KD_GCM, 32) - kd_ciphers), &op, len, desc);
        OPENSSL_free(k);
        OPENSSL_free(v);
    }
    for (size_t keylen = 16; keylen <= 32; keylen += 8)
        for (size_t bits = 32; bits <= 128; bits *= 2) {
            kd_op op = { .key = key, .iv = iv, .ivlen = 16 };
            size_t len = 16 * 1024 + rng_below(r, cap - 16 * 1024);

            rng_bytes(r, key, sizeof(key));
            rng_bytes(r, iv, sizeof(iv));
            memset(iv + 16 - bits / 8, 0xff, bits / 8);
            iv[15] = (unsigned char)(0xff - rng_below(r, 8));
            snprintf(desc, sizeof(desc), "CTR-%zu wrap at 2^%zu, len=%zu", keylen * 8, bits, len);
            one(dc, r, (int)(kd_find(KD_CTR, keylen) - kd_ciphers), &op, len, desc);
        }
}
