/*
 * gpuaes_counter.h - the counter arithmetic of CTR and GCM, written once for
 * the provider (C11), the GPU layer (C++17) and the kernels (CUDA device code).
 *
 * A counter block is 16 bytes read as one big-endian integer.  AES-CTR (as
 * OpenSSL's) adds with full carry and wraps mod 2^128; GCM's inc32 adds to
 * the low 32 bits only, mod 2^32, and never touches the upper 96.  Kernels
 * keep the counter as four big-endian 32-bit columns (the AES state columns,
 * aes_block.cuh) and derive block j's counter from block 0's.  Counters are
 * public, so nothing here needs to be constant time.
 */
#ifndef GPUAES_COUNTER_H
#define GPUAES_COUNTER_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GPUAES_CTR_FN static __host__ __device__ __forceinline__
#else
#define GPUAES_CTR_FN static inline
#endif

/* c += n, 128-bit big-endian with full carry, mod 2^128 (AES-CTR). */
GPUAES_CTR_FN void gpuaes_ctr128_add(unsigned char c[16], uint64_t n)
{
    unsigned int carry = 0;

    for (int i = 15; i >= 0 && (n | carry) != 0; --i) {   /* stops once nothing is left to add */
        const unsigned int v = c[i] + (unsigned int)(n & 0xff) + carry;

        c[i] = (unsigned char)v;
        carry = v >> 8;
        n >>= 8;
    }
}

/* c -= 1, 128-bit big-endian with borrow, mod 2^128. */
GPUAES_CTR_FN void gpuaes_ctr128_sub1(unsigned char c[16])
{
    for (int i = 15; i >= 0; --i)
        if (c[i]-- != 0)
            break;
}

/* The low 32 bits of c (bytes 12..15, big-endian): what inc32 counts. */
GPUAES_CTR_FN uint32_t gpuaes_ctr32_get(const unsigned char c[16])
{
    return ((uint32_t)c[12] << 24) | ((uint32_t)c[13] << 16) | ((uint32_t)c[14] << 8) | c[15];
}

/* GCM's inc32 applied n times: the low 32 bits += n mod 2^32, bytes 0..11 kept. */
GPUAES_CTR_FN void gpuaes_ctr32_add(unsigned char c[16], uint64_t n)
{
    const uint32_t v = gpuaes_ctr32_get(c) + (uint32_t)n;

    c[12] = (unsigned char)(v >> 24);
    c[13] = (unsigned char)(v >> 16);
    c[14] = (unsigned char)(v >> 8);
    c[15] = (unsigned char)v;
}

/* Blocks inc32 can count from c before its low 32 bits wrap (1 .. 2^32). */
GPUAES_CTR_FN uint64_t gpuaes_ctr32_to_wrap(const unsigned char c[16])
{
    return ((uint64_t)1 << 32) - gpuaes_ctr32_get(c);
}

/* w = c as four big-endian 32-bit columns (w[0] = bytes 0..3), the kernels' form. */
GPUAES_CTR_FN void gpuaes_ctr_columns(const unsigned char c[16], uint32_t w[4])
{
    for (int i = 0; i < 4; ++i)
        w[i] = ((uint32_t)c[4 * i] << 24) | ((uint32_t)c[4 * i + 1] << 16) | ((uint32_t)c[4 * i + 2] << 8)
               | c[4 * i + 3];
}

/* Block j's counter from block 0's columns b, 128-bit with full carry:
 * (s0,s1,s2,s3) = b + j.  Word carries, four adds: a kernel's per-block cost. */
GPUAES_CTR_FN void gpuaes_ctr128_cols(const uint32_t b[4], uint32_t j, uint32_t *s0, uint32_t *s1, uint32_t *s2,
                                      uint32_t *s3)
{
    uint32_t c;

    *s3 = b[3] + j;
    c = *s3 < j;
    *s2 = b[2] + c;
    c = *s2 < c;
    *s1 = b[1] + c;
    c = *s1 < c;
    *s0 = b[0] + c;
}

/* Block j's counter from block 0's columns b, GCM inc32: only s3 counts, mod 2^32. */
GPUAES_CTR_FN void gpuaes_ctr32_cols(const uint32_t b[4], uint32_t j, uint32_t *s0, uint32_t *s1, uint32_t *s2,
                                     uint32_t *s3)
{
    *s0 = b[0];
    *s1 = b[1];
    *s2 = b[2];
    *s3 = b[3] + j;
}

#endif
