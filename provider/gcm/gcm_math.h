/* gcm_math.h - the little GF(2^128) arithmetic the GCM path needs on the host. */
#ifndef GPUAES_GCM_MATH_H
#define GPUAES_GCM_MATH_H

#include <stddef.h>

/* x = x * y in GCM's GF(2^128) (bit-reflected, as in SP 800-38D).  Constant time. */
void gf128_mul(unsigned char x[16], const unsigned char y[16]);
/* The same without PCLMULQDQ (what gf128_mul runs where the CPU lacks it; tests). */
void gf128_mul_portable(unsigned char x[16], const unsigned char y[16]);

/* out = h^n (n is public: a block count).  Square-and-multiply; constant time in h. */
void gf128_pow(unsigned char out[16], const unsigned char h[16], unsigned long long n);

/* out = h^-1; 0 (out untouched) when h is 0.  Constant time in h but for that. */
int gf128_inv(unsigned char out[16], const unsigned char h[16]);

/* J0 for an IV that is not 96 bits: GHASH_H(IV || 0-pad || 0^64 || [len(IV)]_64). */
void gcm_j0_from_iv(unsigned char j0[16], const unsigned char h[16],
                    const unsigned char *iv, size_t ivlen);

/* Writes [a]_64 || [b]_64, big-endian. */
void gcm_len_block(unsigned char out[16], unsigned long long a, unsigned long long b);

#endif
