// aes_block.cuh - the AES rounds and the per-block work of each mode, written
// once as __host__ __device__ code: the kernels run it on the GPU and the
// CPU self-test runs the very same code against reference vectors.
//
// State convention (as OpenSSL's aes_core.c): a 16-byte block is four
// big-endian 32-bit columns s0..s3.  Memory is read as little-endian words
// ("raw" words), hence the byte swaps at the edges.
//
// Table access goes through an accessor object Tab with, for byte K (0 = least
// significant) of a state column s, x = (s >> 8K) & 0xff:
//   uint32_t w<K>(uint32_t s)  : Te0[x] (encryption) or Td0[x] (decryption)
//   uint32_t ib<K>(uint32_t s) : InvSbox[x] as 0..255 (decryption last round)
// The kernels' accessor, SharedTab (aes_tables.cuh), reads the
// bank-conflict-free replicated shared-memory copies.
#ifndef GPUAES_AES_BLOCK_CUH
#define GPUAES_AES_BLOCK_CUH

#include <cstdint>

#include "gpuaes_counter.h"

#if defined(__CUDACC__)
#define GPUAES_HD __host__ __device__ __forceinline__
#define GPUAES_HDC __host__ __device__ constexpr
#else
#define GPUAES_HD inline
#define GPUAES_HDC constexpr
#endif

namespace gpuaes {

// Modes as the kernels see them (one kernel instantiation each).
enum KMode : int { KM_ECB_ENC = 0, KM_ECB_DEC, KM_CTR128, KM_CTR32, KM_CBC_DEC, KM_CFB_DEC, KM_COUNT };

GPUAES_HDC bool kmode_decrypts(int m) { return m == KM_ECB_DEC || m == KM_CBC_DEC; }

// Everything a kernel needs besides its buffers; passed by value so every
// round-key read is a uniform constant-bank operand.
struct KParams {
    uint32_t rk[60];    // round keys, 4*(rounds+1) used (enc or equivalent-inverse dec)
    uint32_t iv_be[4];  // CTR: counter of block 0 of this launch, as 4 big-endian columns
    uint32_t iv_raw[4]; // CBC/CFB: ciphertext block preceding block 0, raw words
};

GPUAES_HD uint32_t ror32(uint32_t x, int n)
{
#if defined(__CUDA_ARCH__)
    return __funnelshift_r(x, x, n);
#else
    return (x >> n) | (x << ((32 - n) & 31));
#endif
}

GPUAES_HD uint32_t bswap32(uint32_t x)
{
#if defined(__CUDA_ARCH__)
    return __byte_perm(x, 0, 0x0123);
#else
    return __builtin_bswap32(x);
#endif
}

// One output column of a middle round: T0[a3] ^ T1[b2] ^ T2[c1] ^ T3[d0] ^ *k,
// where x<K> is byte K of column x and Te1..Te3 (Td1..Td3) are Te0 (Td0)
// rotated right by 8, 16, 24 bits.  The caller picks a..d by ShiftRows.
template <class Tab>
GPUAES_HD uint32_t round_col(const Tab &T, uint32_t a, uint32_t b, uint32_t c, uint32_t d, const uint32_t *k)
{
    return T.template w<3>(a) ^ ror32(T.template w<2>(b), 8) ^ ror32(T.template w<1>(c), 16) ^
           ror32(T.template w<0>(d), 24) ^ *k;
}

// One output column of the encryption's last round.  Te0[x] = {2s, s, s, 3s},
// so the S-box byte s is bits 8..15 and 16..23 of Te0[x]: taken from there
// instead of a separate table.
template <class Tab>
GPUAES_HD uint32_t enc_last_col(const Tab &T, uint32_t a, uint32_t b, uint32_t c, uint32_t d, const uint32_t *k)
{
    return ((T.template w<3>(a) << 8) & 0xff000000u) ^ (T.template w<2>(b) & 0x00ff0000u) ^
           (T.template w<1>(c) & 0x0000ff00u) ^ ((T.template w<0>(d) >> 8) & 0xffu) ^ *k;
}

// One output column of the decryption's last round (InvSbox bytes).
template <class Tab>
GPUAES_HD uint32_t dec_last_col(const Tab &T, uint32_t a, uint32_t b, uint32_t c, uint32_t d, const uint32_t *k)
{
    return (T.template ib<3>(a) << 24) ^ (T.template ib<2>(b) << 16) ^ (T.template ib<1>(c) << 8) ^
           T.template ib<0>(d) ^ *k;
}

// Output column of input columns (a, n1, n2, n3) = (i, i+1, i+2, i+3):
// row r comes from column i + r (ShiftRows) or i - r (InvShiftRows, kDec),
// so rows 1 and 3 swap their sources.  kLast: the last round's form.
template <bool kDec, bool kLast, class Tab>
GPUAES_HD uint32_t out_col(const Tab &T, uint32_t a, uint32_t n1, uint32_t n2, uint32_t n3, const uint32_t *k)
{
    const uint32_t b = kDec ? n3 : n1, d = kDec ? n1 : n3;
    if constexpr (!kLast) return round_col(T, a, b, n2, d, k);
    else if constexpr (kDec) return dec_last_col(T, a, b, n2, d, k);
    else return enc_last_col(T, a, b, n2, d, k);
}

// One round on the state columns, round key k.
template <bool kDec, bool kLast, class Tab>
GPUAES_HD void round_cols(uint32_t &s0, uint32_t &s1, uint32_t &s2, uint32_t &s3, const uint32_t *k, const Tab &T)
{
    const uint32_t t0 = out_col<kDec, kLast>(T, s0, s1, s2, s3, k + 0);
    const uint32_t t1 = out_col<kDec, kLast>(T, s1, s2, s3, s0, k + 1);
    const uint32_t t2 = out_col<kDec, kLast>(T, s2, s3, s0, s1, k + 2);
    const uint32_t t3 = out_col<kDec, kLast>(T, s3, s0, s1, s2, k + 3);
    s0 = t0; s1 = t1; s2 = t2; s3 = t3;
}

// All rounds: encryption (Te0, the encryption schedule) or, kDec, the
// equivalent inverse cipher (Td0, the decryption schedule: enc round keys in
// reverse order, InvMixColumns applied to rounds 1..NR-1), as OpenSSL.
template <int NR, bool kDec, class Tab>
GPUAES_HD void cipher_cols(uint32_t &s0, uint32_t &s1, uint32_t &s2, uint32_t &s3, const uint32_t *rk,
                           const Tab &T)
{
    s0 ^= rk[0]; s1 ^= rk[1]; s2 ^= rk[2]; s3 ^= rk[3];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int r = 1; r < NR; ++r) round_cols<kDec, false>(s0, s1, s2, s3, rk + 4 * r, T);
    round_cols<kDec, true>(s0, s1, s2, s3, rk + 4 * NR, T);
}

template <int NR, class Tab>
GPUAES_HD void encrypt_cols(uint32_t &s0, uint32_t &s1, uint32_t &s2, uint32_t &s3, const uint32_t *rk,
                            const Tab &T)
{
    cipher_cols<NR, false>(s0, s1, s2, s3, rk, T);
}

template <int NR, class Tab>
GPUAES_HD void decrypt_cols(uint32_t &s0, uint32_t &s1, uint32_t &s2, uint32_t &s3, const uint32_t *rk,
                            const Tab &T)
{
    cipher_cols<NR, true>(s0, s1, s2, s3, rk, T);
}

// One 16-byte block j of a launch.  cur = raw words of in[j]; prev = raw
// words of in[j-1] (CBC/CFB only; the caller passes p.iv_raw for j == 0).
// Writes the raw words of out[j].
template <int NR, int MODE, class Tab>
GPUAES_HD void process_block(uint32_t j, const uint32_t cur[4], const uint32_t prev[4],
                             const KParams &p, const Tab &T, uint32_t out[4])
{
    uint32_t s0, s1, s2, s3;
    if (MODE == KM_ECB_ENC || MODE == KM_ECB_DEC || MODE == KM_CBC_DEC) {
        s0 = bswap32(cur[0]); s1 = bswap32(cur[1]); s2 = bswap32(cur[2]); s3 = bswap32(cur[3]);
    } else if (MODE == KM_CFB_DEC) {
        s0 = bswap32(prev[0]); s1 = bswap32(prev[1]); s2 = bswap32(prev[2]); s3 = bswap32(prev[3]);
    } else if (MODE == KM_CTR128) {
        gpuaes_ctr128_cols(p.iv_be, j, &s0, &s1, &s2, &s3);
    } else { // KM_CTR32
        gpuaes_ctr32_cols(p.iv_be, j, &s0, &s1, &s2, &s3);
    }

    if (kmode_decrypts(MODE)) decrypt_cols<NR>(s0, s1, s2, s3, p.rk, T);
    else                      encrypt_cols<NR>(s0, s1, s2, s3, p.rk, T);

    s0 = bswap32(s0); s1 = bswap32(s1); s2 = bswap32(s2); s3 = bswap32(s3);
    if (MODE == KM_ECB_ENC || MODE == KM_ECB_DEC) {
        out[0] = s0; out[1] = s1; out[2] = s2; out[3] = s3;
    } else if (MODE == KM_CBC_DEC) {
        out[0] = s0 ^ prev[0]; out[1] = s1 ^ prev[1]; out[2] = s2 ^ prev[2]; out[3] = s3 ^ prev[3];
    } else { // CTR and CFB decrypt: keystream xor input
        out[0] = s0 ^ cur[0]; out[1] = s1 ^ cur[1]; out[2] = s2 ^ cur[2]; out[3] = s3 ^ cur[3];
    }
}

} // namespace gpuaes

#endif
