// ghash_mma.cuh - the Horner part of GHASH on the tensor cores.
//
// Multiplying by a fixed element y is linear over GF(2): x*y = M(y) x, M(y) a
// 128 x 128 bit matrix.  mma.sync m16n8k256 .b1 with AND and POPC computes
// D[r][n] = C[r][n] + popc(A row r AND B column n) for a 16 x 256 bit A and a
// 256 x 8 bit B: bit 0 of D is the GF(2) dot product, and since D accumulates,
// the parity of a sum of counts is the XOR of the products.  A warp runs 8
// Horner chains ("columns") at once, column n over blocks n, n+8, n+16, ...
// with multiplier H^8, four blocks a step:
//   X' = X*H^32 ^ c0*H^24 ^ c1*H^16 ^ c2*H^8 ^ c3
//      = parity(A1 [X; c0] + A2 [c1; c2]) ^ c3,
//   A1 = [M(H^32) | M(H^24)], A2 = [M(H^16) | M(H^8)],
// each A as 8 tiles of 16 output rows: 16 MMAs per step of 32 blocks.  On the
// H200 the SMs issue 0.6 such MMAs per clock (bench/probe/bmma_probe.cu), a
// ceiling of ~5 TB/s of GHASH, so the loads decide; the integer-multiply
// Horner this replaces ran at 368 GB/s.
//
// Layouts (PTX ISA, m16n8k256 .b1, checked by bmma_probe): lane = 4g + t,
//   A: a0 row g, k = 32t..32t+31; a1 row g+8, same k; a2, a3 the same at k+128;
//   B: b0 column g, k = 32t..32t+31; b1 column g, k = 128+32t..;
//   D: d0, d1 row g, columns 2t, 2t+1; d2, d3 row g+8, columns 2t, 2t+1.
// Element k of a register is bit k mod 32, in A and B alike.
//
// Coordinates.  A 128-bit value is four raw words (the block loaded as
// little-endian 32-bit words, as it lies in memory); coordinate (w, b) is bit
// b of word w.  Lane (g, t) holds word t of column g: exactly what B wants,
// so data goes from the load into the MMA untouched.  After a step's MMAs,
// lane (g, t) has the parities of rows g and g+8 of every tile for columns 2t
// and 2t+1, 32 bits: it packs them as bit 16c + 2m + h = row g+8h of tile m,
// column 2t+c (register 2h+c).  The next step needs word w of column n in
// lane (n, w): its low 16 bits come from lane (2w, n/2) and its high 16 bits
// from lane (2w+1, n/2), half n&1 of each: two shuffles and a byte permute.
// So output coordinate (w, 16s + 2m + h) is row g+8h of tile m with g = 2w+s,
// and the host lays out A's rows accordingly (ghash_frags).
//
// Constant time: the MMAs, shuffles, permutes and masks have fixed latency
// and no data-dependent address; the fragments of A (secret, derived from H)
// are loaded by lane index only.
#ifndef GPUAES_GHASH_MMA_CUH
#define GPUAES_GHASH_MMA_CUH

#include <cstdint>
#include <cstring>

#include "kernels/aes_key.h" // secure_wipe
#include "kernels/ghash.cuh"

namespace gpuaes {

constexpr int kMmaTiles = 8;  // 16-row tiles of a 128-row matrix
constexpr int kMmaPairs = 2;  // A1, A2
constexpr int kMmaCols = 8;   // Horner chains per warp (B's columns)
constexpr int kMmaStep = 4;   // blocks per chain per step

// The A fragments of both pairs, as the lanes load them: a[pair][tile][lane]
// = registers a0..a3 of that lane.  8 KiB; secret (derived from H).
struct alignas(16) GhashFrags {
    uint32_t a[kMmaPairs][kMmaTiles][32][4];
};
static_assert(kGhashFragAt + sizeof(GhashFrags) / sizeof(G128) <= kGhashCount && kGhashCount < kGhashTab,
              "scratch layout (ghash.cuh)");

// Bit of the packed parities for register j (= 2h + c) of tile m.
GPUAES_HD uint32_t mma_pack_bit(int m, int j) { return 16u * (uint32_t)(j & 1) + 2u * (uint32_t)m + (uint32_t)(j >> 1); }

// The two lanes lane (g, t) takes its next word from (low, high halves).
GPUAES_HD uint32_t mma_src_lane(uint32_t lane, uint32_t s) { return 8u * (lane & 3u) + 4u * s + ((lane >> 2) >> 1); }

// __byte_perm selector: the low halves (even column) or high halves (odd).
GPUAES_HD uint32_t mma_half_sel(uint32_t lane) { return ((lane >> 2) & 1u) ? 0x7632u : 0x5410u; }

// Field degree of raw coordinate (w, b): the raw word is bswap of GCM's
// big-endian word w, whose MSB is x^(32w).
GPUAES_HD int raw_degree(int w, int b) { return 32 * w + 31 - (8 * (3 - (b >> 3)) + (b & 7)); }

// ---- host: the fragments for H ---------------------------------------------

// x * X in GCM's reflected order: shift towards higher degree (right), fold
// x^128 = 1 + x + x^2 + x^7 (0xE1 in the top byte) without a branch.
inline G128 g_mulx(const G128 &v)
{
    const uint32_t carry = 0u - (v.w[3] & 1u);
    G128 r;
    r.w[3] = (v.w[3] >> 1) | (v.w[2] << 31);
    r.w[2] = (v.w[2] >> 1) | (v.w[1] << 31);
    r.w[1] = (v.w[1] >> 1) | (v.w[0] << 31);
    r.w[0] = (v.w[0] >> 1) ^ (carry & 0xE1000000u);
    return r;
}

// In place: a[j] bit i := a[i] bit j (bit 0 = least significant).
inline void transpose32(uint32_t a[32])
{
    uint32_t m = 0x0000FFFFu;
    for (int j = 16; j != 0; j >>= 1, m ^= m << j)
        for (int k = 0; k < 32; k = ((k | j) + 1) & ~j) {
            const uint32_t t = ((a[k] >> j) ^ a[k | j]) & m;
            a[k] ^= t << j;
            a[k | j] ^= t;
        }
}

// The fragments of A1 = [M(H^32) | M(H^24)] and A2 = [M(H^16) | M(H^8)].
// h8 = H^8, h16 = H^16, h32 = H^32.  About 10 us; secret scratch is wiped.
inline void ghash_frags(const G128 &h8, const G128 &h16, const G128 &h32, GhashFrags &f)
{
    const G128 ys[4] = {h32, gf_mul(h8, h16), h16, h8}; // k-halves in order: A1 left, A1 right, A2 left, A2 right
    // col[d] = y * x^d as raw words; rows[wi][wo][b] bit i = bit b of raw word wo of y * e(wi, i).
    G128 col[128];
    uint32_t rows[4][4][32];
    for (int q = 0; q < 4; ++q) {
        col[0] = ys[q];
        for (int d = 1; d < 128; ++d) col[d] = g_mulx(col[d - 1]);
        for (int wi = 0; wi < 4; ++wi)
            for (int wo = 0; wo < 4; ++wo) {
                uint32_t *r = rows[wi][wo];
                for (int i = 0; i < 32; ++i) r[i] = bswap32(col[raw_degree(wi, i)].w[wo]); // r[i] bit b: (wo, b) of y*e(wi, i)
                transpose32(r);                                                           // r[b] bit i
            }
        const int pair = q >> 1, khalf = q & 1; // registers a0/a1 (k < 128) or a2/a3
        for (int m = 0; m < kMmaTiles; ++m)
            for (uint32_t lane = 0; lane < 32; ++lane) {
                const uint32_t g = lane >> 2, t = lane & 3;
                for (int h = 0; h < 2; ++h) {
                    // Row g + 8h of tile m is output coordinate (g >> 1, 16 (g & 1) + 2m + h).
                    const uint32_t wo = g >> 1, bo = 16u * (g & 1u) + 2u * (uint32_t)m + (uint32_t)h;
                    f.a[pair][m][lane][2 * khalf + h] = rows[t][wo][bo];
                }
            }
    }
    secure_wipe(col, sizeof col);
    secure_wipe(rows, sizeof rows);
}

// ---- device: a warp's 8 chains ----------------------------------------------
#if defined(__CUDACC__)

// sm_80 and newer: launch_ghash refuses older devices (gpuaes_gpu_supports
// keeps GCM on the CPU there), so the code for them is never run.
__device__ __forceinline__ void bmma_and_popc(int (&d)[4], const uint4 &a, uint32_t b0, uint32_t b1)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    asm("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
        : "r"(a.x), "r"(a.y), "r"(a.z), "r"(a.w), "r"(b0), "r"(b1));
#else
    (void)d, (void)a, (void)b0, (void)b1;
    __trap();
#endif
}

// One step: x (this lane's word of its column's value) and c[] (this lane's
// word of the column's next four blocks) -> the new word.
__device__ __forceinline__ uint32_t mma_step(uint32_t x, const uint32_t (&c)[kMmaStep],
                                             const uint4 (&a)[kMmaPairs][kMmaTiles], uint32_t lane)
{
    uint32_t packed = 0;
#pragma unroll
    for (int m = 0; m < kMmaTiles; ++m) {
        int d[4] = {0, 0, 0, 0};
        bmma_and_popc(d, a[0][m], x, c[0]);
        bmma_and_popc(d, a[1][m], c[1], c[2]);
#pragma unroll
        for (int j = 0; j < 4; ++j) packed |= ((uint32_t)d[j] & 1u) << mma_pack_bit(m, j);
    }
    const uint32_t lo = __shfl_sync(0xffffffffu, packed, mma_src_lane(lane, 0));
    const uint32_t hi = __shfl_sync(0xffffffffu, packed, mma_src_lane(lane, 1));
    return __byte_perm(lo, hi, mma_half_sel(lane)) ^ c[3];
}

#endif

} // namespace gpuaes

#endif
