/*
 * gf128_ref.h - the reference multiply in GCM's field, independent of every
 * fast one (provider/gcm/gcm_math.c, cuda/kernels/ghash.cuh): SP 800-38D algorithm 1 on
 * bytes (x^0 is the most significant bit of byte 0), slow and obviously
 * right.  For the tests and benches that hold the fast ones to it (C and C++).
 */
#ifndef GPUAES_GF128_REF_H
#define GPUAES_GF128_REF_H

#include <string.h>

static inline void gf128_ref_mul(unsigned char x[16], const unsigned char y[16])
{
    unsigned char z[16] = { 0 }, v[16];

    memcpy(v, y, 16);
    for (int i = 0; i < 128; ++i) {
        int lsb = v[15] & 1;

        if ((x[i / 8] >> (7 - i % 8)) & 1)
            for (int j = 0; j < 16; ++j)
                z[j] ^= v[j];
        for (int j = 15; j > 0; --j)
            v[j] = (unsigned char)((v[j] >> 1) | (v[j - 1] << 7));
        v[0] >>= 1;
        if (lsb)
            v[0] ^= 0xe1;
    }
    memcpy(x, z, 16);
}

#endif
