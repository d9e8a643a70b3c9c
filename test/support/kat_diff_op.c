/* kat_diff_op.c - one EVP cipher operation fed in chunks; shared by test_kat and test_diff. */
#include "kat_diff_op.h"

#include <stdio.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>

const kd_cipher kd_ciphers[KD_NCIPHERS] = {
    { "AES-128-ECB", KD_ECB, 16 }, { "AES-192-ECB", KD_ECB, 24 }, { "AES-256-ECB", KD_ECB, 32 },
    { "AES-128-CBC", KD_CBC, 16 }, { "AES-192-CBC", KD_CBC, 24 }, { "AES-256-CBC", KD_CBC, 32 },
    { "AES-128-CFB", KD_CFB, 16 }, { "AES-192-CFB", KD_CFB, 24 }, { "AES-256-CFB", KD_CFB, 32 },
    { "AES-128-CTR", KD_CTR, 16 }, { "AES-192-CTR", KD_CTR, 24 }, { "AES-256-CTR", KD_CTR, 32 },
    { "AES-128-GCM", KD_GCM, 16 }, { "AES-192-GCM", KD_GCM, 24 }, { "AES-256-GCM", KD_GCM, 32 },
};

const kd_cipher *kd_find(kd_mode mode, size_t keylen)
{
    for (int i = 0; i < KD_NCIPHERS; i++)
        if (kd_ciphers[i].mode == mode && kd_ciphers[i].keylen == keylen)
            return &kd_ciphers[i];
    return NULL;
}

int kd_is_block_mode(kd_mode mode) { return mode == KD_ECB || mode == KD_CBC; }

kd_split kd_split_make(kd_split_style style, uint64_t seed)
{
    kd_split s = { style, rng_seeded(seed) };
    return s;
}

size_t kd_split_next(kd_split *s, size_t remaining)
{
    size_t n;
    uint64_t r = rng_next(&s->rng);

    switch (s->style) {
    case KD_ONE_SHOT:
        return remaining;
    case KD_TINY:
        n = 1 + r % 17;
        break;
    case KD_ODD:
        /* odd sizes across magnitudes: 1..2^k - 1 for k in 1..22 */
        n = ((r >> 8) % ((size_t)1 << (1 + r % 22))) | 1;
        break;
    case KD_BLOCKS:
        n = 16 * (1 + (r >> 8) % ((r & 1) ? 8 : 16384));
        break;
    case KD_MIXED:
    default:
        switch (r % 16) {
        case 0: n = 0; break;                                   /* empty update */
        case 1: case 2: case 3: case 4: case 5: n = 1 + (r >> 8) % 17; break;
        case 6: case 7: case 8: n = (r >> 8) % 9000; break;     /* around 4 KiB thresholds */
        case 9: case 10: case 11: n = 16 * ((r >> 8) % 8192); break;
        case 12: n = 65536 + (r >> 8) % 33 - 16; break;
        default: n = (r >> 8) % (4u << 20); break;              /* up to 4 MiB */
        }
    }
    return n < remaining ? n : remaining;
}

static int set_size_param(EVP_CIPHER_CTX *ctx, const char *key, size_t v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(key, &v), OSSL_PARAM_END };

    return EVP_CIPHER_CTX_set_params(ctx, p);
}

int kd_set_tag(EVP_CIPHER_CTX *ctx, const unsigned char *tag, size_t taglen)
{
    OSSL_PARAM p[2] = {
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, taglen), OSSL_PARAM_END
    };

    return EVP_CIPHER_CTX_set_params(ctx, p);
}

int kd_get_tag(EVP_CIPHER_CTX *ctx, unsigned char *tag, size_t taglen)
{
    OSSL_PARAM p[2] = {
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, taglen), OSSL_PARAM_END
    };

    return EVP_CIPHER_CTX_get_params(ctx, p);
}

int kd_init(EVP_CIPHER_CTX *ctx, EVP_CIPHER *c, kd_mode mode, const kd_op *op)
{
    /* The IV length must be known before the IV is given (it sizes the copy). */
    if (!EVP_CipherInit_ex2(ctx, c, NULL, NULL, op->enc, NULL))
        return 0;
    if (mode == KD_GCM && !set_size_param(ctx, OSSL_CIPHER_PARAM_AEAD_IVLEN, op->ivlen))
        return 0;
    if (op->key_then_iv) {
        if (!EVP_CipherInit_ex2(ctx, NULL, op->key, NULL, -1, NULL)
            || !EVP_CipherInit_ex2(ctx, NULL, NULL, op->iv, -1, NULL))
            return 0;
    } else if (!EVP_CipherInit_ex2(ctx, NULL, op->key, op->iv, -1, NULL)) {
        return 0;
    }
    if (kd_is_block_mode(mode) && !EVP_CIPHER_CTX_set_padding(ctx, op->padding))
        return 0;
    return 1;
}

static int feed_aad(EVP_CIPHER_CTX *ctx, kd_op *op)
{
    size_t pos = 0;

    while (pos < op->aadlen) {
        size_t n = kd_split_next(&op->aad_split, op->aadlen - pos);
        int outl = 0;

        if (!EVP_CipherUpdate(ctx, NULL, &outl, op->aad + pos, (int)n))
            return 0;
        pos += n;
    }
    return 1;
}

static int run_ctx(EVP_CIPHER_CTX *ctx, kd_mode mode, kd_op *op,
                   const unsigned char *in, size_t len, unsigned char *out, size_t *outlen)
{
    size_t ipos = 0, opos = 0;
    int outl = 0, aligned = op->in_place && kd_is_block_mode(mode);

    if (mode == KD_GCM) {
        if (!op->enc && op->tag_early && !kd_set_tag(ctx, op->tag, op->taglen))
            return KD_ERROR;
        if (!feed_aad(ctx, op))
            return KD_ERROR;
    }
    while (ipos < len) {
        size_t n = kd_split_next(&op->split, len - ipos);

        if (aligned)                 /* output must not lag input in place */
            n = (n + 15) / 16 * 16 < len - ipos ? (n + 15) / 16 * 16 : len - ipos;
        if (!EVP_CipherUpdate(ctx, out + opos, &outl, op->in_place ? out + ipos : in + ipos, (int)n))
            return KD_ERROR;
        opos += (size_t)outl;
        ipos += n;
    }
    if (mode == KD_GCM && !op->enc && !op->tag_early && !kd_set_tag(ctx, op->tag, op->taglen))
        return KD_ERROR;
    if (!EVP_CipherFinal_ex(ctx, out + opos, &outl)) {
        *outlen = opos;
        return KD_FINAL_FAILED;
    }
    opos += (size_t)outl;
    *outlen = opos;
    if (mode == KD_GCM && op->enc && !kd_get_tag(ctx, op->tag, op->taglen))
        return KD_ERROR;
    return KD_OK;
}

int kd_run(EVP_CIPHER *c, kd_mode mode, kd_op *op,
           const unsigned char *in, size_t len, unsigned char *out, size_t *outlen)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int rv = KD_ERROR;

    *outlen = 0;
    if (op->in_place && in != out)
        memmove(out, in, len);
    if (ctx != NULL && kd_init(ctx, c, mode, op))
        rv = run_ctx(ctx, mode, op, in, len, out, outlen);
    EVP_CIPHER_CTX_free(ctx);
    if (rv != KD_ERROR)
        ERR_clear_error();      /* a failed final leaves a queue entry; it is expected */
    return rv;
}
