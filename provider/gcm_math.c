/*
 * gcm_math.c - GF(2^128) arithmetic for the few host-side GHASH steps of the
 * GCM path (J0 of a non-96-bit IV, folding segments and GPU pieces into the
 * GHASH state, the length block at final).  The bulk GHASH runs in OpenSSL
 * or on the GPU (see gcm_engine.c); here speed matters little, constant time
 * does: no branch or index depends on secret data (only on public lengths).
 */
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>

#include "gcm_math.h"

static uint64_t load64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static void store64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

void gf128_mul(unsigned char x[16], const unsigned char y[16])
{
    uint64_t xh = load64(x), xl = load64(x + 8);
    uint64_t vh = load64(y), vl = load64(y + 8);
    uint64_t zh = 0, zl = 0;

    /* SP 800-38D algorithm 1: bit i of x (MSB first) selects V into Z. */
    for (int i = 0; i < 128; i++) {
        uint64_t bit = (i < 64 ? xh >> (63 - i) : xl >> (127 - i)) & 1;
        uint64_t mask = 0 - bit, lsb = 0 - (vl & 1);

        zh ^= vh & mask;
        zl ^= vl & mask;
        vl = (vl >> 1) | (vh << 63);
        vh = (vh >> 1) ^ (0xe100000000000000ULL & lsb);
    }
    store64(x, zh);
    store64(x + 8, zl);
}

void gf128_pow(unsigned char out[16], const unsigned char h[16], unsigned long long n)
{
    unsigned char b[16];

    memset(out, 0, 16);
    out[0] = 0x80;                    /* the field's 1 */
    memcpy(b, h, 16);
    while (n != 0) {                  /* n is public */
        if (n & 1)
            gf128_mul(out, b);
        n >>= 1;
        if (n != 0)
            gf128_mul(b, b);
    }
    OPENSSL_cleanse(b, sizeof(b));
}

static void ghash_blocks(unsigned char y[16], const unsigned char h[16],
                         const unsigned char *p, size_t len)
{
    while (len > 0) {
        size_t n = len < 16 ? len : 16;

        for (size_t i = 0; i < n; i++)
            y[i] ^= p[i];
        gf128_mul(y, h);
        p += n;
        len -= n;
    }
}

void gcm_j0_from_iv(unsigned char j0[16], const unsigned char h[16],
                    const unsigned char *iv, size_t ivlen)
{
    unsigned char len[16];

    memset(j0, 0, 16);
    ghash_blocks(j0, h, iv, ivlen);
    gcm_len_block(len, 0, (unsigned long long)ivlen * 8);
    ghash_blocks(j0, h, len, 16);
}

void gcm_len_block(unsigned char out[16], unsigned long long a, unsigned long long b)
{
    store64(out, a);
    store64(out + 8, b);
}
