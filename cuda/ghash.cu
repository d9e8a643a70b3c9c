// ghash.cu - GHASH kernels (the math and the scheme: ghash.cuh).
//
// ghash_partial_kernel, CUDA blocks 0..B-1: 8 data warps hash S = 256k
// consecutive blocks (lane Horner with H^32, lane powers, warp powers) into
// one partial each; a ninth "power" warp computes the lane and warp powers
// meanwhile.  CUDA block B (one more) computes the final kernel's powers.
// ghash_final_kernel: one CUDA block, sum_b P_b * H^(S(B-1-b)) -> S.
// Both are enqueued on the caller's stream, so they are ordered after the
// kernel that produced the ciphertext and before the D2H of the result.
#include <cuda_runtime.h>

#include "ghash.cuh"
#include "ghash_launch.h"

namespace gpuaes {
namespace {

constexpr uint32_t kPartialThreads = kGhashThreads + 32; // data warps + the power warp

__device__ __forceinline__ G128 shfl_xor_g(G128 v, int m)
{
    G128 r;
#pragma unroll
    for (int i = 0; i < 4; ++i) r.w[i] = __shfl_xor_sync(0xffffffffu, v.w[i], m);
    return r;
}

// XOR of v over the 32 lanes, in every lane.
__device__ __forceinline__ G128 warp_xor(G128 v)
{
#pragma unroll
    for (int m = 16; m >= 1; m >>= 1) v = g128_xor(v, shfl_xor_g(v, m));
    return v;
}

__device__ __forceinline__ uint4 load_block(const uint4 *__restrict__ data, uint32_t pad, uint64_t q)
{
    return q >= pad ? data[q - pad] : make_uint4(0, 0, 0, 0); // q, pad public
}

__device__ __forceinline__ G128 to_g128(const uint4 c)
{
    G128 g = {{bswap32(c.x), bswap32(c.y), bswap32(c.z), bswap32(c.w)}};
    return g;
}

// A split operand in shared memory, read row by row where it is used (a
// broadcast: every lane reads the same 16 bytes).  The volatile asm keeps the
// compiler from hoisting all 36 words into registers for the whole loop.
struct SharedSplit {
    const GSplit *s;
    __device__ __forceinline__ void row(int i, uint32_t &y0, uint32_t &y1, uint32_t &y2, uint32_t &y3) const
    {
        const unsigned a = (unsigned)__cvta_generic_to_shared(&s->v[i][0]);
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(y0), "=r"(y1), "=r"(y2), "=r"(y3) : "r"(a));
    }
};

// A lane's Horner over its k blocks (k a power of two), q0 = padded index of
// its first block, stride 32: sum_j C_j H^(32(k-1-j)).  Loads run one pair
// ahead of the arithmetic.
__device__ __forceinline__ G128 lane_horner(const uint4 *__restrict__ data, uint32_t pad, uint64_t q0, uint32_t k,
                                            const SharedSplit &h32, const SharedSplit &h64)
{
    if (k == 1) return to_g128(load_block(data, pad, q0));
    uint4 n0 = load_block(data, pad, q0), n1 = load_block(data, pad, q0 + 32);
    uint4 c0 = n0, c1 = n1;
    if (k > 2) {
        n0 = load_block(data, pad, q0 + 64);
        n1 = load_block(data, pad, q0 + 96);
    }
    G128 x = ghash_first2(to_g128(c0), to_g128(c1), h32);
    for (uint32_t j = 2; j < k; j += 2) {
        c0 = n0;
        c1 = n1;
        if (j + 2 < k) {
            n0 = load_block(data, pad, q0 + 32 * (uint64_t)(j + 2));
            n1 = load_block(data, pad, q0 + 32 * (uint64_t)(j + 3));
        }
        x = ghash_step2(x, to_g128(c0), to_g128(c1), h32, h64);
    }
    return x;
}

__global__ void __launch_bounds__(kPartialThreads, 2)
ghash_partial_kernel(const __grid_constant__ GParams p, const uint4 *__restrict__ data, G128 *__restrict__ scratch,
                     uint32_t k, int log2k, int levels, int block_levels)
{
    __shared__ GSplit s_h[2];                 // H^32, H^64
    __shared__ G128 s_lane[32];               // H^(32 - l)
    __shared__ G128 s_wpow[kGhashWarps];      // H^(32k(W-1-w))
    __shared__ G128 s_wsum[kGhashWarps];      // the warps' GHASH
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    if (blockIdx.x == gridDim.x - 1) {
        // The extra CUDA block: the final kernel's powers, 2 warps x 32 lanes.
        if (warp < 2) scratch[kGhashTab + threadIdx.x] = ghash_final_power(p, levels, block_levels, threadIdx.x);
        return;
    }
    const uint64_t seg = (uint64_t)blockIdx.x << block_levels; // padded index of the CUDA block's first block
    if (seg + (1ull << block_levels) <= p.pad) {
        // Only zero padding (public): the partial is zero.
        if (threadIdx.x == 0) scratch[blockIdx.x] = g128_zero();
        return;
    }
    if (threadIdx.x < 2) g_split(p.pw[5 + threadIdx.x], s_h[threadIdx.x]);
    __syncthreads();

    G128 x = g128_zero();
    if (warp < kGhashWarps) {
        const uint64_t q0 = seg + ((uint64_t)warp << (5 + log2k)) + lane;
        x = lane_horner(data, p.pad, q0, k, SharedSplit{&s_h[0]}, SharedSplit{&s_h[1]});
    } else {
        s_lane[lane] = ghash_lane_power(p, levels, lane);
        if (lane < kGhashWarps) s_wpow[lane] = ghash_warp_power(p, levels, log2k, kGhashWarps, lane);
    }
    __syncthreads();
    if (warp < kGhashWarps) {
        const G128 y = warp_xor(gf_mul(x, s_lane[lane]));
        if (lane == 0) s_wsum[warp] = y;
    }
    __syncthreads();
    if (warp == 0) {
        const uint32_t w = lane & (kGhashWarps - 1);
        const G128 z = warp_xor(g128_sel(lane < kGhashWarps, gf_mul(s_wsum[w], s_wpow[w]), g128_zero()));
        if (lane == 0) scratch[blockIdx.x] = z;
    }
}

// One CUDA block of max(32, B) threads: thread t takes partial t times
// H^(S(B-1-t)) = H^(32S(nw-1-w)) * H^(S(31-l)) (B > 32) or H^(S(B-1-t)).
__global__ void __launch_bounds__(kGhashMaxPartials)
ghash_final_kernel(const G128 *__restrict__ scratch, uint32_t nparts, G128 *__restrict__ out)
{
    __shared__ G128 s[kGhashMaxPartials / 32];
    const uint32_t t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const G128 *tab = scratch + kGhashTab;
    const G128 v = t < nparts ? scratch[t] : g128_zero();
    const uint32_t e = nparts <= 32 ? (nparts - 1 - t) & 31 : 31 - lane;
    const G128 y = warp_xor(gf_mul(v, tab[e]));
    if (nparts <= 32) {
        if (t == 0) *out = y;
        return;
    }
    if (lane == 0) s[warp] = y;
    __syncthreads();
    if (warp == 0) {
        const uint32_t nw = nparts / 32, w = lane & (kGhashMaxPartials / 32 - 1);
        const G128 z = gf_mul(s[w], tab[32 + ((nw - 1 - w) & 31)]);
        const G128 r = warp_xor(g128_sel(lane < nw, z, g128_zero()));
        if (lane == 0) *out = r;
    }
}

} // namespace

cudaError_t launch_ghash(const GParams &p, const GhashPlan &pl, const void *data, G128 *scratch, G128 *out,
                         cudaStream_t stream)
{
    if (pl.threads != kGhashThreads || pl.m != 1 || pl.blocks == 0 || pl.blocks > kGhashMaxPartials ||
        (pl.blocks & (pl.blocks - 1)) != 0 || pl.per_lane == 0 || (pl.per_lane & (pl.per_lane - 1)) != 0 ||
        pl.levels < 8 || pl.levels > kGhashMaxLevels || (1ull << pl.block_levels) != (uint64_t)pl.threads * pl.per_lane)
        return cudaErrorInvalidValue;
    int log2k = 0;
    while ((1u << log2k) < pl.per_lane) ++log2k;
    (void)cudaGetLastError();
    ghash_partial_kernel<<<pl.blocks + 1, kPartialThreads, 0, stream>>>(
        p, static_cast<const uint4 *>(data), scratch, pl.per_lane, log2k, pl.levels, pl.block_levels);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    const uint32_t threads = pl.blocks < 32 ? 32 : pl.blocks;
    ghash_final_kernel<<<1, threads, 0, stream>>>(scratch, pl.blocks, out);
    return cudaGetLastError();
}

} // namespace gpuaes
