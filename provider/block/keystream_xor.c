/*
 * keystream_xor.c - the XOR of data against keystream that the GPU computed
 * ahead (block_keystream.c): AVX-512 where the CPU has it, chosen once at
 * load; a portable 64-bit loop otherwise.
 */
#include <stdint.h>
#include <string.h>

#include "keystream_xor.h"

static void xor_portable(unsigned char *out, const unsigned char *in, const unsigned char *ks, size_t n)
{
    size_t i = 0;

    for (; i + 32 <= n; i += 32) {
        uint64_t a[4], b[4];

        memcpy(a, in + i, 32);
        memcpy(b, ks + i, 32);
        a[0] ^= b[0]; a[1] ^= b[1]; a[2] ^= b[2]; a[3] ^= b[3];
        memcpy(out + i, a, 32);
    }
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;

        memcpy(&a, in + i, 8);
        memcpy(&b, ks + i, 8);
        a ^= b;
        memcpy(out + i, &a, 8);
    }
    for (; i < n; i++)
        out[i] = in[i] ^ ks[i];
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx512f,avx512bw")))
static void xor_avx512(unsigned char *out, const unsigned char *in, const unsigned char *ks, size_t n)
{
    size_t i = 0;

    for (; i + 256 <= n; i += 256) {
        __m512i a0 = _mm512_loadu_si512(in + i), a1 = _mm512_loadu_si512(in + i + 64);
        __m512i a2 = _mm512_loadu_si512(in + i + 128), a3 = _mm512_loadu_si512(in + i + 192);

        a0 = _mm512_xor_si512(a0, _mm512_loadu_si512(ks + i));
        a1 = _mm512_xor_si512(a1, _mm512_loadu_si512(ks + i + 64));
        a2 = _mm512_xor_si512(a2, _mm512_loadu_si512(ks + i + 128));
        a3 = _mm512_xor_si512(a3, _mm512_loadu_si512(ks + i + 192));
        _mm512_storeu_si512(out + i, a0);
        _mm512_storeu_si512(out + i + 64, a1);
        _mm512_storeu_si512(out + i + 128, a2);
        _mm512_storeu_si512(out + i + 192, a3);
    }
    for (; i + 64 <= n; i += 64)
        _mm512_storeu_si512(out + i, _mm512_xor_si512(_mm512_loadu_si512(in + i),
                                                      _mm512_loadu_si512(ks + i)));
    if (i < n) {
        __mmask64 m = _cvtu64_mask64((~0ULL) >> (64 - (n - i)));

        _mm512_mask_storeu_epi8(out + i, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, in + i),
                                                             _mm512_maskz_loadu_epi8(m, ks + i)));
    }
}
#endif

static void (*xor_fn)(unsigned char *, const unsigned char *, const unsigned char *, size_t)
    = xor_portable;

void ks_xor_init(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        xor_fn = xor_avx512;
#endif
}

void ks_xor(unsigned char *out, const unsigned char *in, const unsigned char *ks, size_t n)
{
    xor_fn(out, in, ks, n);
}
