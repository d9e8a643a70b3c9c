// ghash.cuh - GCM's GHASH on the GPU: the GF(2^128) arithmetic and the
// per-thread steps of the parallel scheme, written once as __host__ __device__
// code so that a host-only test (test/unit/test_ghash_math.cpp) runs exactly what
// the kernels (ghash.cu) run, against OpenSSL.
//
// What is computed: for a chunk of n ciphertext blocks C_0..C_{n-1},
//   S = sum_i C_i * H^(n-i)
// i.e. GHASH from a zero state (Horner: X = (X ^ C_i) * H).
//
// The multiply (gf_mul and its pieces).  An element is 128 bits in GCM's
// reflected order; the carry-less 128 x 128 product is two levels of
// Karatsuba (9 products of 32-bit words), each 32 x 32 carry-less product
// made of 16 ordinary integer multiplies "with holes" (the technique of
// BearSSL's ghash_ctmul): each operand is split into its 4 bit classes
// x & 0x11111111 << r, so that in every partial product each result column
// collects at most 8 set bit-pairs; a count of 8 carries into the 3 bits above
// the column only, never into the next bit of the same class, so the class
// mask recovers the carry-less bits exactly.  Then one reduction modulo
// x^128 + x^7 + x^2 + x + 1 (shifts and XORs).  On sm_90: 144 IMAD.WIDE and
// ~240 LOP3 per product, ~400 instructions per block with the reduction
// shared by four blocks, against ~1500 for the bitwise shift-and-add this
// replaces.  The product is linear in each operand before the reduction, so
// several products are summed unreduced and reduced once (GAcc).  The bulk of
// the work, the chains' Horner steps, runs on the tensor cores instead
// (ghash_mma.cuh); gf_mul makes the powers and combines the chains.
//
// The parallel scheme (kernels in ghash.cu; every count is public):
//   - the blocks are padded at the FRONT with `pad` zero blocks to N = 2^levels
//     (leading zeros leave a GHASH from zero at zero); pw[L] = H^(2^L) come
//     precomputed from the host (ghash_powers with m = 1);
//   - CUDA block b of the kernel owns S = 32*W*k consecutive blocks
//     (W = 8 data warps, k "blocks per lane", 256 CUDA blocks for large
//     chunks: k = 8 for 8 MiB); warp w the 32*k blocks from 32*k*w, as 8
//     chains: chain n over blocks n, n+8, .., Horner with H^8 on the tensor
//     cores (ghash_mma.cuh), X_n = sum_j C_{8j+n} H^(8(4k-1-j));
//   - the warp's GHASH: S_w = sum_n X_n * H^(8-n) (lane powers 24..31), XORed over
//     the warp with shuffles; the CUDA block's: sum_w S_w * H^(32k(W-1-w))
//     (warp powers); the chunk's (the last CUDA block to finish): sum_b P_b * H^(S(B-1-b)),
//     as lane and warp powers of H^S again.  These powers are products of the
//     pw[], built in three rounds of one multiply per lane (gpow32_*, gpow8_*)
//     by a ninth "power" warp of each CUDA block while the data warps hash,
//     and (the combine's) by one extra CUDA block.
//
// Constant time: H and the data are secret.  The multiply has no table, no
// branch and no data-dependent shift or index: masks, integer multiplies
// (IMAD.WIDE has a fixed latency and issue rate whatever its operands, as
// 64-bit MUL has on the x86 and Arm cores the host test runs on), shifts by
// constants and XORs; the tensor cores' MMAs likewise (ghash_mma.cuh).  Every
// memory address (global loads of the chunk and of the matrices' fragments,
// shared-memory powers, the scratch) depends only on public values: block,
// warp and lane indices, n, pad, k.  Shared-memory reads are lane l reading
// entry l (its own 16 bytes: the lane powers) or one entry for the whole
// warp (a broadcast), so the bank pattern never depends on secrets.  The
// exponents of the powers are public; their bits choose among public slots.
// No table indexed by H or by the data exists, so there is nothing to
// replicate per bank.
#ifndef GPUAES_GHASH_CUH
#define GPUAES_GHASH_CUH

#include <cstdint>
#include <cstring>

#include "kernels/aes_block.cuh" // GPUAES_HD, bswap32

namespace gpuaes {

// A GF(2^128) element as GCM writes it: 16 bytes, here four big-endian
// 32-bit words (w[0] = bytes 0..3).  Bit 0 of the field (x^0) is the MSB of w[0].
struct G128 {
    uint32_t w[4];
};

constexpr int kGhashMaxLevels = 32; // N <= 2^32

// Everything the GHASH kernels need besides buffers; by value (constant bank).
// Secret: pw[0] is H, and each pw[L] alone gives H (squaring is a bijection
// of GF(2^128): H = pw[L]^(2^(128-L))), so leaving some out keeps nothing
// secret out.  The kernels need H^1..H^31 (lane powers), which they cannot
// derive from anything public.  The same job's CTR launch carries the AES
// round keys by value (KParams.rk), and H = E_K(0) follows from them: these
// powers add nothing to what the launch parameters already hold.  Keeping
// secrets out of parameters means device memory for the round keys and the
// powers together (wiped at release, as the matrices are): one change, to be
// measured on the GPU.
struct GParams {
    G128 pw[kGhashMaxLevels];    // pw[L] = H^(m * 2^L), L < levels
    uint32_t m;                  // unit of the powers: 1 (GhashPlan::m)
    uint32_t pad;                // zero blocks in front of the data
    uint32_t nb;                 // data blocks
};

// Launch shape for n data blocks: N = nb + pad = m * 2^levels = threads * per_lane * blocks.
struct GhashPlan {
    uint32_t m;        // unit of pw[]: always 1 (pw[L] = H^(2^L))
    uint32_t threads;  // data threads per CUDA block (32 * data warps)
    uint32_t blocks;   // CUDA blocks of data (B, a power of two, <= kGhashMaxPartials)
    uint32_t pad;      // N - n
    int levels;        // log2(N)
    int block_levels;  // log2(S), S = threads * per_lane blocks per CUDA block
    uint32_t per_lane; // k: blocks per lane (a power of two)
};

// Tuning (the defaults are what kernel_bench measured best on the H200).
#ifndef GPUAES_GHASH_TARGET_BLOCKS
#define GPUAES_GHASH_TARGET_BLOCKS 256
#endif
constexpr uint32_t kGhashWarps = 8;                  // data warps per CUDA block of the kernel
constexpr uint32_t kGhashThreads = 32 * kGhashWarps; // data threads per CUDA block (+ one power warp)
constexpr uint32_t kGhashTargetBlocks = GPUAES_GHASH_TARGET_BLOCKS; // CUDA blocks the plan aims at (2 per SM)
constexpr uint32_t kGhashMaxPartials = 256;          // B <= this
static_assert(kGhashTargetBlocks <= kGhashMaxPartials, "plan");
// Scratch entries (G128) of launch_ghash: partials at [0, B), the tensor
// cores' matrices at [kGhashFragAt, +512) (GhashFrags, upload_ghash_frags),
// the CUDA blocks' finish counter at kGhashCount (zero between launches), the
// combine's powers at [kGhashTab, kGhashTab + 64).
constexpr uint32_t kGhashMaxFinal = 1024;
constexpr uint32_t kGhashFragAt = kGhashMaxPartials;
constexpr uint32_t kGhashCount = kGhashFragAt + 512;
constexpr uint32_t kGhashTab = kGhashMaxFinal - 64;

// ---- field arithmetic ------------------------------------------------------

GPUAES_HD G128 g128_zero()
{
    G128 z = {{0, 0, 0, 0}};
    return z;
}

GPUAES_HD G128 g128_one()
{
    G128 o = {{0x80000000u, 0, 0, 0}}; // x^0
    return o;
}

GPUAES_HD G128 g128_xor(const G128 &a, const G128 &b)
{
    G128 r = {{a.w[0] ^ b.w[0], a.w[1] ^ b.w[1], a.w[2] ^ b.w[2], a.w[3] ^ b.w[3]}};
    return r;
}

// a if c, else b; c is public (a power's exponent bit, a lane test).
GPUAES_HD G128 g128_sel(bool c, const G128 &a, const G128 &b)
{
    G128 r;
    for (int i = 0; i < 4; ++i) r.w[i] = c ? a.w[i] : b.w[i];
    return r;
}

// Bit classes of a 32-bit word (every 4th bit from bit r).
constexpr uint32_t kClass0 = 0x11111111u;
constexpr uint64_t kClass64 = 0x1111111111111111ull;

// The 9 Karatsuba words of an element, from its 128-bit integer value
// a3:a2:a1:a0 (a0 = w[3] least significant): the 64-bit halves lo = a1:a0,
// hi = a3:a2 and mid = lo ^ hi, each as (low word, high word, low ^ high).
GPUAES_HD void g_kwords(const G128 &x, uint32_t k[9])
{
    const uint32_t a0 = x.w[3], a1 = x.w[2], a2 = x.w[1], a3 = x.w[0];
    k[0] = a0;
    k[1] = a1;
    k[2] = a0 ^ a1;
    k[3] = a2;
    k[4] = a3;
    k[5] = a2 ^ a3;
    k[6] = a0 ^ a2;
    k[7] = a1 ^ a3;
    k[8] = k[6] ^ k[7];
}

// An operand prepared for g_mul_acc: its Karatsuba words split into the 4 bit
// classes, v[i][r] = word_i & (0x11111111 << r).
struct alignas(16) GSplit {
    uint32_t v[9][4];
};

GPUAES_HD void g_split(const G128 &y, GSplit &s)
{
    uint32_t k[9];
    g_kwords(y, k);
    for (int i = 0; i < 9; ++i)
        for (int r = 0; r < 4; ++r) s.v[i][r] = k[i] & (kClass0 << r);
}

GPUAES_HD uint64_t g_mul64(uint32_t a, uint32_t b) { return (uint64_t)a * b; }

// Carry-less 32 x 32 -> 64 product of x and y (y given as its 4 bit classes).
// x_i * y_j has its carry-less bits in class (i + j) mod 4; each column sums
// at most 8 bit-pairs (8 set bits per class), which carries into bits c+1..c+3
// only, never into the next bit of the same class.  Same-class products are
// XORed, then each class is masked out.
GPUAES_HD uint64_t g_bmul32(uint32_t x, uint32_t y0, uint32_t y1, uint32_t y2, uint32_t y3)
{
    const uint32_t x0 = x & kClass0, x1 = x & (kClass0 << 1), x2 = x & (kClass0 << 2), x3 = x & (kClass0 << 3);
    const uint64_t z0 = g_mul64(x0, y0) ^ g_mul64(x1, y3) ^ g_mul64(x2, y2) ^ g_mul64(x3, y1);
    const uint64_t z1 = g_mul64(x0, y1) ^ g_mul64(x1, y0) ^ g_mul64(x2, y3) ^ g_mul64(x3, y2);
    const uint64_t z2 = g_mul64(x0, y2) ^ g_mul64(x1, y1) ^ g_mul64(x2, y0) ^ g_mul64(x3, y3);
    const uint64_t z3 = g_mul64(x0, y3) ^ g_mul64(x1, y2) ^ g_mul64(x2, y1) ^ g_mul64(x3, y0);
    return (z0 & kClass64) ^ (z1 & (kClass64 << 1)) ^ (z2 & (kClass64 << 2)) ^ (z3 & (kClass64 << 3));
}

// An unreduced product (or a sum of them): the 9 Karatsuba word products.
struct GAcc {
    uint64_t p[9];
};

GPUAES_HD void g_acc_zero(GAcc &a)
{
    for (int i = 0; i < 9; ++i) a.p[i] = 0;
}

// acc ^= x * y, unreduced (y prepared by g_split).
GPUAES_HD void g_mul_acc(GAcc &acc, const G128 &x, const GSplit &y)
{
    uint32_t k[9];
    g_kwords(x, k);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int i = 0; i < 9; ++i) acc.p[i] ^= g_bmul32(k[i], y.v[i][0], y.v[i][1], y.v[i][2], y.v[i][3]);
}

// Karatsuba 64 x 64: p0 = lo*lo', p1 = hi*hi', pm = (lo^hi)*(lo'^hi') -> 128
// bits, little-endian words.
GPUAES_HD void g_kara64(uint64_t p0, uint64_t p1, uint64_t pm, uint32_t r[4])
{
    const uint64_t m = pm ^ p0 ^ p1;
    r[0] = (uint32_t)p0;
    r[1] = (uint32_t)(p0 >> 32) ^ (uint32_t)m;
    r[2] = (uint32_t)p1 ^ (uint32_t)(m >> 32);
    r[3] = (uint32_t)(p1 >> 32);
}

// (lo >> n) | (hi << (32 - n)), 0 < n < 32: a 64-bit right shift's low word.
GPUAES_HD uint32_t g_shr(uint32_t lo, uint32_t hi, int n) { return (lo >> n) | (hi << (32 - n)); }

// The element of an unreduced product.
GPUAES_HD G128 g_reduce(const GAcc &a)
{
    uint32_t lo[4], hi[4], mid[4];
    g_kara64(a.p[0], a.p[1], a.p[2], lo);
    g_kara64(a.p[3], a.p[4], a.p[5], hi);
    g_kara64(a.p[6], a.p[7], a.p[8], mid);
    // The 256-bit product lo ^ (mid ^ lo ^ hi) << 64 ^ hi << 128, little-endian words.
    uint32_t q[8];
    q[0] = lo[0];
    q[1] = lo[1];
    q[2] = lo[2] ^ mid[0] ^ lo[0] ^ hi[0];
    q[3] = lo[3] ^ mid[1] ^ lo[1] ^ hi[1];
    q[4] = hi[0] ^ mid[2] ^ lo[2] ^ hi[2];
    q[5] = hi[1] ^ mid[3] ^ lo[3] ^ hi[3];
    q[6] = hi[2];
    q[7] = hi[3];
    // In the reflected order the coefficient of x^t is at bit 254 - t; one
    // left shift puts x^0..x^127 in the upper half (bit 127 - t of it: the
    // element's own layout) and x^(128+j) at bit 127 - j of the lower half L.
    uint32_t s[8];
    s[0] = q[0] << 1;
    for (int i = 1; i < 8; ++i) s[i] = (q[i] << 1) | (q[i - 1] >> 31);
    // x^128 = 1 + x + x^2 + x^7: result = upper ^ L*(1 + x + x^2 + x^7), where
    // multiplying by x^t shifts right by t.  The bits pushed past x^127
    // (L's low 7 bits) are folded in first, at the top of L (L << (128 - t)):
    // they land at x^0..x^6 and their own multiples no longer overflow.
    const uint32_t l0 = s[0], l1 = s[1], l2 = s[2], l3 = s[3] ^ (s[0] << 31) ^ (s[0] << 30) ^ (s[0] << 25);
    G128 r;
    r.w[3] = s[4] ^ l0 ^ g_shr(l0, l1, 1) ^ g_shr(l0, l1, 2) ^ g_shr(l0, l1, 7);
    r.w[2] = s[5] ^ l1 ^ g_shr(l1, l2, 1) ^ g_shr(l1, l2, 2) ^ g_shr(l1, l2, 7);
    r.w[1] = s[6] ^ l2 ^ g_shr(l2, l3, 1) ^ g_shr(l2, l3, 2) ^ g_shr(l2, l3, 7);
    r.w[0] = s[7] ^ l3 ^ (l3 >> 1) ^ (l3 >> 2) ^ (l3 >> 7);
    return r;
}

// x * y in GCM's field.  Constant time (see the top of this file).
GPUAES_HD G128 gf_mul(const G128 &x, const G128 &y)
{
    GSplit s;
    g_split(y, s);
    GAcc a;
    g_acc_zero(a);
    g_mul_acc(a, x, s);
    return g_reduce(a);
}

// ---- powers of H for the combine ---------------------------------------------
//
// All are products of the pw[L] = H^(2^L) with public exponents, built in
// rounds of independent multiplies so that a warp computes a whole table in
// three multiplies per lane (the kernels give each lane one product per round;
// the host test runs the same functions in loops).  pw[L] at or beyond
// `levels` is not passed to the kernel and reads as 1; callers only use
// entries whose factors lie below it.

GPUAES_HD G128 g_pw(const G128 *pw, int L, int levels)
{
    return g128_sel(L < levels, pw[L < kGhashMaxLevels ? L : kGhashMaxLevels - 1], g128_one());
}

// A 32-entry table T[e] = Q^e (e < 32) of Q = pw[base]:
//   round 1: R1 = {Q^3 = Q*Q^2, Q^12 = Q^4*Q^8, Q^20 = Q^4*Q^16, Q^24 = Q^8*Q^16}
//   round 2: Q^28 = Q^12*Q^16
//   round 3: T[4a + b] = Q^(4a) * Q^b.
// Each function gives the two operands of its multiply.
GPUAES_HD void gpow32_r1(const G128 *pw, int base, int levels, uint32_t i, G128 &a, G128 &b)
{
    const int la = i == 0 ? 0 : i == 3 ? 3 : 2, lb = i == 0 ? 1 : i == 1 ? 3 : 4;
    a = g_pw(pw, base + la, levels);
    b = g_pw(pw, base + lb, levels);
}

GPUAES_HD void gpow32_r2(const G128 *pw, int base, int levels, const G128 r1[4], G128 &a, G128 &b)
{
    a = r1[1];
    b = g_pw(pw, base + 4, levels);
}

GPUAES_HD void gpow32_r3(const G128 *pw, int base, int levels, const G128 r1[4], const G128 &q28, uint32_t e,
                         G128 &a, G128 &b)
{
    const uint32_t hi = (e >> 2) & 7, lo = e & 3;
    // Q^(4 hi): 1, Q^4, Q^8, Q^12, Q^16, Q^20, Q^24, Q^28
    a = hi == 0 ? g128_one() : hi == 1 ? g_pw(pw, base + 2, levels) : hi == 2 ? g_pw(pw, base + 3, levels)
      : hi == 3 ? r1[1] : hi == 4 ? g_pw(pw, base + 4, levels) : hi == 5 ? r1[2] : hi == 6 ? r1[3] : q28;
    // Q^lo: 1, Q, Q^2, Q^3
    b = lo == 0 ? g128_one() : lo == 1 ? g_pw(pw, base, levels) : lo == 2 ? g_pw(pw, base + 1, levels) : r1[0];
}

// An 8-entry table t[e] = q^e (e < 8) of q = pw[base], with no third round:
//   round 1: r1 = {q^3 = q*q^2, q^5 = q*q^4, q^6 = q^2*q^4}
//   round 2: q^7 = q^3*q^4
GPUAES_HD void gpow8_r1(const G128 *pw, int base, int levels, uint32_t i, G128 &a, G128 &b)
{
    a = g_pw(pw, base + (i == 2 ? 1 : 0), levels);
    b = g_pw(pw, base + (i == 0 ? 1 : 2), levels);
}

GPUAES_HD void gpow8_r2(const G128 *pw, int base, int levels, const G128 r1[3], G128 &a, G128 &b)
{
    a = r1[0];
    b = g_pw(pw, base + 2, levels);
}

GPUAES_HD G128 gpow8_entry(const G128 *pw, int base, int levels, const G128 r1[3], const G128 &q7, uint32_t e)
{
    return e == 0 ? g128_one() : e == 1 ? g_pw(pw, base, levels) : e == 2 ? g_pw(pw, base + 1, levels)
         : e == 3 ? r1[0] : e == 4 ? g_pw(pw, base + 2, levels) : e == 5 ? r1[1] : e == 6 ? r1[2] : q7;
}

// What each power is (W data warps, k = 2^log2k blocks per lane, S = 2^block_levels):
//   lane l's power H^(32 - l): l = 0: pw[5]; else the 32-table of H (base 0), e = 32 - l;
//   warp w's power H^(32k(W-1-w)): the 8-table of H^(32k) (base 5 + log2k), e = W-1-w (W <= 8);
//   the combine's H^(S t) (t < 32) and H^(32 S t): 32-tables of H^S and H^(32S)
//   (bases block_levels and block_levels + 5).

// ---- host-side helpers (also used by the host test) ----

// x^n by square-and-multiply (n is public: a length), 64 squarings at most.
inline G128 gf_pow(const G128 &x, uint64_t n)
{
    G128 r = g128_one();
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

// Launch shape for n >= 1 blocks: `warps` data warps per CUDA block (a power
// of two), at least k_min blocks per lane; N = n rounded up to a power of two
// (at least one CUDA block's worth, and 256); k grows until the plan has at
// most kGhashTargetBlocks CUDA blocks.
inline GhashPlan ghash_plan(uint32_t n, uint32_t warps = kGhashWarps, uint32_t k_min = 1)
{
    GhashPlan pl{};
    const uint64_t threads = 32ull * warps;
    uint64_t k = k_min;
    uint64_t N = 1;
    int levels = 0;
    while (N < n || N < threads * k || N < 256) { N *= 2; ++levels; } // levels >= 8: pw[0..6] exist
    while (N / (threads * k) > kGhashTargetBlocks) k *= 2;
    int bl = 0;
    while ((1ull << bl) < threads * k) ++bl;
    pl.m = 1;
    pl.threads = (uint32_t)threads;
    pl.per_lane = (uint32_t)k;
    pl.blocks = (uint32_t)(N / (threads * k));
    pl.pad = (uint32_t)(N - n);
    pl.levels = levels;
    pl.block_levels = bl;
    return pl;
}

// pw[L] = H^(m * 2^L) for L <= levels (pw[levels] = H^(m*2^levels), the power
// for a whole chunk without padding).
inline void ghash_powers(G128 *pw, const G128 &h, uint32_t m, int levels)
{
    pw[0] = gf_pow(h, m);
    for (int L = 1; L <= levels && L < kGhashMaxLevels; ++L) pw[L] = gf_mul(pw[L - 1], pw[L - 1]);
}

// The host combines chunk results in order: S = S * H^(n_chunk) ^ S_chunk.
inline G128 ghash_append(const G128 &s, const G128 &h_pow_n, const G128 &s_chunk)
{
    return g128_xor(gf_mul(s, h_pow_n), s_chunk);
}

} // namespace gpuaes

#endif
