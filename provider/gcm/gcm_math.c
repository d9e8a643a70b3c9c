/*
 * gcm_math.c - GF(2^128) arithmetic for the few host-side GHASH steps of the
 * GCM path (J0 of a non-96-bit IV, folding segments and GPU pieces into the
 * GHASH state, the length block at final).  The bulk GHASH runs in OpenSSL
 * or on the GPU (see gcm_engine.c).  These steps still add up: every GPU
 * piece of a GCM message through gpuaesd folds with H^blocks (a square and
 * multiply of ~20 products) and the load checks multiply ~50 times, so the
 * multiply is integer multiplies (~300 instructions), not the bitwise
 * algorithm of SP 800-38D (~1500; test_ghash_math keeps it as the
 * reference).  Constant time: no branch or index depends on secret data
 * (only on public lengths).
 */
#include <stdint.h>
#include <string.h>
#include <openssl/crypto.h>

#include "gcm_math.h"

static inline uint64_t load64(const unsigned char *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return v;
}

static inline void store64(unsigned char *p, uint64_t v)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    memcpy(p, &v, 8);
}

/*
 * The element's 16 bytes, read big-endian as the integer X = xh:xl, put the
 * coefficient of z^t at bit 127 - t (the reflected order).  The carry-less
 * product X (*) Y = v3:v2:v1:v0 then holds z^t at bit 254 - t; one left
 * shift gives the upper 128 bits z^0..z^127 in the element's own layout (U)
 * and the lower 128 bits z^(128+j) at bit 127 - j (L).  z^128 = 1 + z + z^2
 * + z^7, and multiplying by z^s is a right shift by s, so the result is
 * U ^ L ^ L>>1 ^ L>>2 ^ L>>7 -- except for the bits those shifts push past
 * z^127, which reduce once more: they are L << 127, << 126 and << 121 (only
 * L's low word reaches them), folded into L first.
 */
static inline void reduce_store(unsigned char x[16], uint64_t v3, uint64_t v2, uint64_t v1, uint64_t v0)
{
    uint64_t w1, w0;

    v3 = (v3 << 1) | (v2 >> 63);      /* << 1 */
    v2 = (v2 << 1) | (v1 >> 63);
    v1 = (v1 << 1) | (v0 >> 63);
    v0 <<= 1;
    w1 = v1 ^ (v0 << 63) ^ (v0 << 62) ^ (v0 << 57);
    w0 = v0;
    store64(x, v3 ^ w1 ^ (w1 >> 1) ^ (w1 >> 2) ^ (w1 >> 7));
    store64(x + 8, v2 ^ w0 ^ ((w0 >> 1) | (w1 << 63)) ^ ((w0 >> 2) | (w1 << 62)) ^ ((w0 >> 7) | (w1 << 57)));
}

/*
 * The carry-less product of two 64-bit words, low half: ordinary integer
 * multiplies "with holes" (the technique of BearSSL's ghash_ctmul64; the GPU's
 * cuda/kernels/ghash.cuh does the same with 32-bit words).  Each operand is split into
 * its 4 bit classes (every 4th bit); a product of two classes has its bits in
 * one class, and below bit 64 each of its columns sums at most 15 bit pairs,
 * whose carries land in the 3 bits above, of other classes: masking the class
 * recovers the XOR.  Multiplies take the same time whatever their operands.
 */
static inline uint64_t clmul_lo(uint64_t x, uint64_t y)
{
    const uint64_t m0 = 0x1111111111111111ULL, m1 = m0 << 1, m2 = m0 << 2, m3 = m0 << 3;
    uint64_t x0 = x & m0, x1 = x & m1, x2 = x & m2, x3 = x & m3;
    uint64_t y0 = y & m0, y1 = y & m1, y2 = y & m2, y3 = y & m3;
    uint64_t z0 = (x0 * y0) ^ (x1 * y3) ^ (x2 * y2) ^ (x3 * y1);
    uint64_t z1 = (x0 * y1) ^ (x1 * y0) ^ (x2 * y3) ^ (x3 * y2);
    uint64_t z2 = (x0 * y2) ^ (x1 * y1) ^ (x2 * y0) ^ (x3 * y3);
    uint64_t z3 = (x0 * y3) ^ (x1 * y2) ^ (x2 * y1) ^ (x3 * y0);

    return (z0 & m0) | (z1 & m1) | (z2 & m2) | (z3 & m3);
}

static inline uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ULL) | ((v & 0x5555555555555555ULL) << 1);
    v = ((v >> 2) & 0x3333333333333333ULL) | ((v & 0x3333333333333333ULL) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0fULL) | ((v & 0x0f0f0f0f0f0f0f0fULL) << 4);
    return __builtin_bswap64(v);      /* bits reversed in each byte, then the bytes */
}

/*
 * Any 64-bit host.  Karatsuba: three 64 x 64 products, each's high half the
 * low half of the reversed operands' product, reversed (that puts bits
 * 63..126 at 0..63); the operands are reversed once each.
 */
void gf128_mul_portable(unsigned char x[16], const unsigned char y[16])
{
    uint64_t xh = load64(x), xl = load64(x + 8), yh = load64(y), yl = load64(y + 8);
    uint64_t xhr = rev64(xh), xlr = rev64(xl), yhr = rev64(yh), ylr = rev64(yl);
    uint64_t a0 = clmul_lo(xl, yl), a1 = rev64(clmul_lo(xlr, ylr)) >> 1;
    uint64_t b0 = clmul_lo(xh, yh), b1 = rev64(clmul_lo(xhr, yhr)) >> 1;
    uint64_t m0 = clmul_lo(xh ^ xl, yh ^ yl) ^ a0 ^ b0;
    uint64_t m1 = (rev64(clmul_lo(xhr ^ xlr, yhr ^ ylr)) >> 1) ^ a1 ^ b1;

    reduce_store(x, b1, b0 ^ m1, a1 ^ m0, a0);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define GF128_PCLMUL 1

/* The same with PCLMULQDQ (a fixed-latency instruction: constant time). */
__attribute__((target("pclmul,sse4.1"))) static void gf128_mul_pclmul(unsigned char x[16],
                                                                       const unsigned char y[16])
{
    uint64_t xh = load64(x), xl = load64(x + 8), yh = load64(y), yl = load64(y + 8);
    __m128i a = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)xl), _mm_set_epi64x(0, (long long)yl), 0);
    __m128i b = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)xh), _mm_set_epi64x(0, (long long)yh), 0);
    __m128i m = _mm_clmulepi64_si128(_mm_set_epi64x(0, (long long)(xh ^ xl)),
                                     _mm_set_epi64x(0, (long long)(yh ^ yl)), 0);

    m = _mm_xor_si128(m, _mm_xor_si128(a, b));
    reduce_store(x, (uint64_t)_mm_extract_epi64(b, 1),
                 (uint64_t)_mm_cvtsi128_si64(b) ^ (uint64_t)_mm_extract_epi64(m, 1),
                 (uint64_t)_mm_extract_epi64(a, 1) ^ (uint64_t)_mm_cvtsi128_si64(m),
                 (uint64_t)_mm_cvtsi128_si64(a));
}
#endif

/* PCLMULQDQ where the CPU has it (checked once; a race only checks twice). */
void gf128_mul(unsigned char x[16], const unsigned char y[16])
{
#ifdef GF128_PCLMUL
    static int have = -1;             /* -1: not checked yet */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);

    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    if (h) {
        gf128_mul_pclmul(x, y);
        return;
    }
#endif
    gf128_mul_portable(x, y);
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

/* x^(2^k) in place: k squarings. */
static void square_times(unsigned char x[16], int k)
{
    while (k-- > 0)
        gf128_mul(x, x);
}

/*
 * h^-1 = h^(2^128 - 2) (the multiplicative group has order 2^128 - 1), by the
 * addition chain of Itoh and Tsujii: a_k = h^(2^k - 1), a_2k = a_k^(2^k) * a_k,
 * a_(k+1) = a_k^2 * h, up to a_127; then one squaring.  127 squarings and
 * 12 products; the exponent is public.  0 when h is 0 (no inverse).
 */
int gf128_inv(unsigned char out[16], const unsigned char h[16])
{
    static const int chain[] = { 2, 3, 6, 7, 14, 15, 30, 31, 62, 63, 126, 127 };
    unsigned char a[16], t[16], nz = 0;
    int k = 1;

    for (int i = 0; i < 16; i++)
        nz |= h[i];
    if (nz == 0)
        return 0;
    memcpy(a, h, 16);                 /* a_1 */
    for (size_t i = 0; i < sizeof(chain) / sizeof(chain[0]); i++) {
        if (chain[i] == 2 * k) {      /* a_2k = a_k^(2^k) * a_k */
            memcpy(t, a, 16);
            square_times(a, k);
            gf128_mul(a, t);
        } else {                      /* a_(k+1) = a_k^2 * h */
            gf128_mul(a, a);
            gf128_mul(a, h);
        }
        k = chain[i];
    }
    gf128_mul(a, a);                  /* h^(2^128 - 2) */
    memcpy(out, a, 16);
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(t, sizeof(t));
    return 1;
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
