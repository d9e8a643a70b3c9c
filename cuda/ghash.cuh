// ghash.cuh - GCM's GHASH on the GPU: the GF(2^128) arithmetic and the
// per-thread steps of the parallel Horner scheme, written once as
// __host__ __device__ code so that a host-only test (test/test_ghash_math.cpp)
// runs exactly what the kernels (ghash.cu) run, against OpenSSL.
//
// What is computed: for a chunk of n ciphertext blocks C_0..C_{n-1},
//   S = sum_i C_i * H^(n-i)
// i.e. GHASH from a zero state (Horner: X = (X ^ C_i) * H).
//
// How (parallel Horner): the block sequence is padded at the FRONT with
// `pad` zero blocks to P*m blocks (P threads, a power of two, m blocks each);
// leading zeros leave a Horner GHASH from a zero state at zero, so nothing
// changes.  Thread t does Horner over its m consecutive blocks; then a tree
// combines neighbours, left * H^(len(right)) ^ right, where at level L both
// halves cover m*2^L blocks: the powers pw[L] = H^(m*2^L) come precomputed
// from the host.  Levels below log2(threads per CUDA block) run in shared
// memory (ghash_partial_kernel), the rest in one more block (ghash_final_kernel).
//
// Constant time: H and the data are secret.  gf_mul() is the bitwise
// shift-and-add of SP 800-38D (algorithm 1) in 32-bit words: 128 fixed
// iterations, each bit of x turned into an all-ones/all-zeros mask that
// selects V, and the reduction applied through a mask of V's low bit.  No
// branch, no memory index and no shift amount depends on x, y or the data;
// loops and loads depend only on public counts (n, m, thread and block
// indices).  No table is indexed by anything secret.
#ifndef GPUAES_GHASH_CUH
#define GPUAES_GHASH_CUH

#include <cstdint>
#include <cstring>

#include "aes_block.cuh" // GPUAES_HD, bswap32

namespace gpuaes {

// A GF(2^128) element as GCM writes it: 16 bytes, here four big-endian
// 32-bit words (w[0] = bytes 0..3).  Bit 0 of the field (x^0) is the MSB of w[0].
struct G128 {
    uint32_t w[4];
};

constexpr int kGhashMaxLevels = 32; // tree levels: P <= 2^32

// Everything the GHASH kernels need besides buffers; by value (constant bank).
struct GParams {
    G128 h;                      // H
    G128 pw[kGhashMaxLevels];    // pw[L] = H^(m * 2^L)
    uint32_t m;                  // blocks per thread
    uint32_t pad;                // zero blocks in front of the data
    uint32_t nb;                 // data blocks
};

// Launch shape for n data blocks.
struct GhashPlan {
    uint32_t m;       // blocks per thread
    uint32_t threads; // per CUDA block, power of two
    uint32_t blocks;  // CUDA blocks of the partial kernel, power of two (<= kGhashMaxFinal)
    uint32_t pad;     // P*m - n
    int levels;       // log2(P), P = threads * blocks
    int block_levels; // log2(threads)
};

constexpr uint32_t kGhashThreads = 256; // per CUDA block of the partial kernel
constexpr uint32_t kGhashM = 8;         // blocks per thread (at least)
constexpr uint32_t kGhashMaxFinal = 1024;

GPUAES_HD G128 g128_zero()
{
    G128 z = {{0, 0, 0, 0}};
    return z;
}

GPUAES_HD G128 g128_xor(const G128 &a, const G128 &b)
{
    G128 r = {{a.w[0] ^ b.w[0], a.w[1] ^ b.w[1], a.w[2] ^ b.w[2], a.w[3] ^ b.w[3]}};
    return r;
}

// x * y in GCM's field.  Constant time (see the top of this file).
GPUAES_HD G128 gf_mul(const G128 &x, const G128 &y)
{
    uint32_t z0 = 0, z1 = 0, z2 = 0, z3 = 0;
    uint32_t v0 = y.w[0], v1 = y.w[1], v2 = y.w[2], v3 = y.w[3];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int k = 0; k < 4; ++k) {
        const uint32_t xw = x.w[k];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (int b = 31; b >= 0; --b) {
            const uint32_t m = 0u - ((xw >> b) & 1u); // bit (32k + 31 - b) of x, as a mask
            z0 ^= v0 & m;
            z1 ^= v1 & m;
            z2 ^= v2 & m;
            z3 ^= v3 & m;
            const uint32_t r = 0u - (v3 & 1u); // V * x overflows: reduce by R = 0xe1 || 0^120
            v3 = (v3 >> 1) | (v2 << 31);
            v2 = (v2 >> 1) | (v1 << 31);
            v1 = (v1 >> 1) | (v0 << 31);
            v0 = (v0 >> 1) ^ (0xe1000000u & r);
        }
    }
    G128 z = {{z0, z1, z2, z3}};
    return z;
}

// One tree step: left * H^(len(right)) ^ right.
GPUAES_HD G128 ghash_combine(const G128 &left, const G128 &pw, const G128 &right)
{
    return g128_xor(gf_mul(left, pw), right);
}

// Block i of a chunk as a field element.  `raw` holds the chunk as 32-bit
// little-endian words, four per block (what a uint4 load gives).
GPUAES_HD G128 ghash_load(const uint32_t *raw, uint32_t i)
{
#if defined(__CUDA_ARCH__)
    const uint4 c = reinterpret_cast<const uint4 *>(raw)[i];
    G128 g = {{bswap32(c.x), bswap32(c.y), bswap32(c.z), bswap32(c.w)}};
#else
    G128 g = {{bswap32(raw[4 * i]), bswap32(raw[4 * i + 1]), bswap32(raw[4 * i + 2]), bswap32(raw[4 * i + 3])}};
#endif
    return g;
}

// Thread t's Horner over padded blocks t*m .. t*m+m-1 (those below `pad`
// are the zero padding).  The condition depends on public indices only.
GPUAES_HD G128 ghash_thread(const GParams &p, const uint32_t *raw, uint64_t t)
{
    G128 x = g128_zero();
    const uint64_t q0 = t * p.m;
    for (uint32_t j = 0; j < p.m; ++j) {
        const uint64_t q = q0 + j;
        if (q < p.pad) continue; // x is still zero: a zero block changes nothing
        x = gf_mul(g128_xor(x, ghash_load(raw, (uint32_t)(q - p.pad))), p.h);
    }
    return x;
}

// ---- host-side helpers (also used by the host test) ----

// x^n by square-and-multiply (n is public: a length), 64 squarings at most.
inline G128 gf_pow(const G128 &x, uint64_t n)
{
    G128 r = {{0x80000000u, 0, 0, 0}}; // the field's 1
    G128 b = x;
    while (n != 0) {
        if (n & 1) r = gf_mul(r, b);
        n >>= 1;
        if (n != 0) b = gf_mul(b, b);
    }
    return r;
}

inline G128 g128_from_bytes(const unsigned char b[16])
{
    G128 g;
    for (int i = 0; i < 4; ++i)
        g.w[i] = ((uint32_t)b[4 * i] << 24) | ((uint32_t)b[4 * i + 1] << 16) | ((uint32_t)b[4 * i + 2] << 8) |
                 b[4 * i + 3];
    return g;
}

inline void g128_to_bytes(const G128 &g, unsigned char b[16])
{
    for (int i = 0; i < 4; ++i) {
        b[4 * i] = (unsigned char)(g.w[i] >> 24);
        b[4 * i + 1] = (unsigned char)(g.w[i] >> 16);
        b[4 * i + 2] = (unsigned char)(g.w[i] >> 8);
        b[4 * i + 3] = (unsigned char)g.w[i];
    }
}

// Launch shape for n >= 1 blocks: `threads` per CUDA block (a power of two),
// at least m_min blocks per thread, more if the final kernel's one block
// would otherwise need more than kGhashMaxFinal threads.
inline GhashPlan ghash_plan(uint32_t n, uint32_t threads = kGhashThreads, uint32_t m_min = kGhashM)
{
    GhashPlan pl{};
    uint64_t m = m_min;
    while ((n + m - 1) / m > (uint64_t)threads * kGhashMaxFinal) m *= 2;
    uint64_t P = threads;
    int levels = 0;
    for (uint32_t t = threads; t > 1; t >>= 1) ++levels;
    pl.block_levels = levels;
    while (P * m < n) { P *= 2; ++levels; }
    pl.m = (uint32_t)m;
    pl.threads = threads;
    pl.blocks = (uint32_t)(P / threads);
    pl.pad = (uint32_t)(P * m - n);
    pl.levels = levels;
    return pl;
}

// pw[L] = H^(m * 2^L) for L < levels (levels + 1 entries: pw[levels] =
// H^(m*P), handy as the power for a whole chunk of m*P blocks).
inline void ghash_powers(G128 *pw, const G128 &h, uint32_t m, int levels)
{
    pw[0] = gf_pow(h, m);
    for (int L = 1; L <= levels && L < kGhashMaxLevels; ++L) pw[L] = gf_mul(pw[L - 1], pw[L - 1]);
}

// The host combines chunk results in order: S = S * H^(n_chunk) ^ S_chunk.
inline G128 ghash_append(const G128 &s, const G128 &h_pow_n, const G128 &s_chunk)
{
    return ghash_combine(s, h_pow_n, s_chunk);
}

} // namespace gpuaes

#endif
