// ghash.cu - GHASH kernels (the math and the scheme: ghash.cuh).
//
// ghash_kernel, CUDA blocks 0..B-1: 8 data warps hash S = 256k consecutive
// blocks into one partial each.  A warp's 32k blocks go through 8 Horner
// chains on the tensor cores (ghash_mma.cuh: stride 8, H^8, four blocks a
// step), then the chains' values times H^(8-n) (lane powers) and the warps'
// times their warp powers are summed; a ninth "power" warp builds the lane
// and warp powers meanwhile.  CUDA block B (one more) builds the final
// combine's powers into the scratch.  The last CUDA block to finish (a
// counter in the scratch, the threadfence-reduction pattern) combines the
// partials, sum_b P_b * H^(S(B-1-b)), into *out: no second kernel, whose
// launch and wake-up cost more than the combine.
//
// Programmatic dependent launch (pdl.cuh): the kernel may start while the
// kernel before it on the stream (the CTR kernel, or the previous chunk's
// GHASH) drains.  Before its wait it only reads the matrices (uploaded
// before that kernel), computes powers from its parameters, and the extra
// block writes the final powers to the scratch; the kernel before never
// touches those, and a previous GHASH kernel lets its dependants start only
// once its combine is done (the last block triggers after it).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "kernels/ghash.cuh"
#include "kernels/ghash_launch.h"
#include "kernels/ghash_mma.cuh"
#include "runtime/device.h"
#include "kernels/pdl.cuh"


namespace gpuaes {
namespace {

constexpr uint32_t kPartialThreads = kGhashThreads + 32; // data warps + the power warp
static_assert(kGhashWarps <= 8 && (kGhashWarps & (kGhashWarps - 1)) == 0, "warp powers use an 8-entry table");

// Kernel arguments besides GParams and buffers.
struct GhashArgs {
    uint32_t k;       // blocks per lane
    int log2k;
    int levels;       // log2(N)
    int block_levels; // log2(S)
};

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

__device__ __forceinline__ G128 to_g128(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3)
{
    G128 g = {{bswap32(w0), bswap32(w1), bswap32(w2), bswap32(w3)}};
    return g;
}

// Word t of padded block q (zero in the padding; q, pad public).
__device__ __forceinline__ uint32_t load_word(const uint32_t *__restrict__ data, uint32_t pad, uint64_t q, uint32_t t)
{
    return q >= pad ? data[4 * (q - pad) + t] : 0u;
}

// A warp's 32k padded blocks from q0, as 8 chains (ghash_mma.cuh): lane
// (g, t) runs word t of chain g over blocks q0 + g + 8j, j < 4k, one step of
// four ahead in its loads.  Returns, in lanes 0..7, chain `lane`'s value
// sum_j C_{g+8j} H^(8(4k-1-j)) (the other lanes: don't care).
__device__ __forceinline__ G128 warp_chains(const uint32_t *__restrict__ data, uint32_t pad, uint64_t q0, uint32_t k,
                                            const uint4 (&a)[kMmaPairs][kMmaTiles], uint32_t lane)
{
    const uint32_t g = lane >> 2, t = lane & 3;
    const uint64_t q = q0 + g;
    uint32_t next[kMmaStep], c[kMmaStep];
#pragma unroll
    for (int i = 0; i < kMmaStep; ++i) next[i] = load_word(data, pad, q + 8 * i, t);
    uint32_t x = 0;
    for (uint32_t s = 0; s < k; ++s) {
#pragma unroll
        for (int i = 0; i < kMmaStep; ++i) c[i] = next[i];
        if (s + 1 < k) {
#pragma unroll
            for (int i = 0; i < kMmaStep; ++i) next[i] = load_word(data, pad, q + 32 * (uint64_t)(s + 1) + 8 * i, t);
        }
        x = mma_step(x, c, a, lane);
    }
    // Chain g's four words, from lanes 4g..4g+3, into lane g.
    const uint32_t src = 4 * (lane & 7);
    return to_g128(__shfl_sync(0xffffffffu, x, src), __shfl_sync(0xffffffffu, x, src + 1),
                   __shfl_sync(0xffffffffu, x, src + 2), __shfl_sync(0xffffffffu, x, src + 3));
}

// One warp builds the 32-table of Q = pw[base] (ghash.cuh) and returns entry
// e of it in each lane: three multiplies per lane.  s_r1: 4 entries of this
// warp's shared scratch.
__device__ __forceinline__ G128 warp_pow32(const G128 *pw, int base, int levels, uint32_t e, G128 *s_r1)
{
    const uint32_t lane = threadIdx.x & 31;
    G128 a, b;
    gpow32_r1(pw, base, levels, lane & 3, a, b);
    const G128 r1 = gf_mul(a, b);
    if (lane < 4) s_r1[lane] = r1;
    __syncwarp();
    gpow32_r2(pw, base, levels, s_r1, a, b);
    const G128 q28 = gf_mul(a, b);
    gpow32_r3(pw, base, levels, s_r1, q28, e, a, b);
    return gf_mul(a, b);
}

// Another CUDA block's entry of the scratch, from L2 (ld.cg: not a stale L1 line).
__device__ __forceinline__ G128 load_cg(const G128 *p)
{
    const uint4 c = __ldcg(reinterpret_cast<const uint4 *>(p));
    G128 g = {{c.x, c.y, c.z, c.w}};
    return g;
}

// The partials' sum, sum_t P_t * H^(S(B-1-t)) (t < B): thread t takes
// partial t times H^(32S(nw-1-w)) * H^(S(31-l)) (B > 32) or H^(S(B-1-t)).
// Needs max(32, B) threads; all of the CUDA block call it.  The partials come
// from other CUDA blocks: read from L2 (ld.cg), after the fence of the count.
__device__ __forceinline__ void combine_partials(const G128 *scratch, uint32_t nparts, G128 *out, G128 *s)
{
    const uint32_t t = threadIdx.x, lane = t & 31, warp = t >> 5;
    const G128 *tab = scratch + kGhashTab;
    const G128 v = t < nparts ? load_cg(scratch + t) : g128_zero();
    const G128 pe = load_cg(tab + (nparts <= 32 ? (nparts - 1 - t) & 31 : 31 - lane));
    G128 y = g128_zero();
    if (warp < kGhashMaxPartials / 32) y = warp_xor(gf_mul(v, pe));
    if (nparts <= 32) {
        if (t == 0) *out = y;
        return;
    }
    if (lane == 0 && warp < kGhashMaxPartials / 32) s[warp] = y;
    __syncthreads();
    if (warp == 0) {
        const uint32_t nw = nparts / 32, w = lane & (kGhashMaxPartials / 32 - 1);
        const G128 pw = load_cg(tab + 32 + ((nw - 1 - w) & 31));
        const G128 r = warp_xor(g128_sel(lane < nw, gf_mul(s[w], pw), g128_zero()));
        if (lane == 0) *out = r;
    }
}

// A data CUDA block's partial: the GHASH from zero of its S blocks from
// padded index seg, into scratch[blockIdx.x].  Warps 0..7 hash; warp 8 builds
// the lane powers (the 32-table of H) and warp powers (the 8-table of
// H^(32k)) meanwhile, three rounds of one multiply per lane.
__device__ __forceinline__ void hash_segment(const GParams &p, const GhashArgs &g, const uint32_t *__restrict__ data,
                                             G128 *__restrict__ scratch, uint64_t seg, uint32_t warp, uint32_t lane,
                                             G128 *s_lane, G128 *s_wpow, G128 *s_wsum, G128 (*s_r1)[4])
{
    G128 x = g128_zero();
    if (warp < kGhashWarps) {
        // This lane's A fragments (secret: registers only, indexed by lane),
        // uploaded before the kernel before: readable before the wait.
        const uint4 *frag = reinterpret_cast<const uint4 *>(scratch + kGhashFragAt);
        uint4 a[kMmaPairs][kMmaTiles];
#pragma unroll
        for (int pr = 0; pr < kMmaPairs; ++pr)
#pragma unroll
            for (int m = 0; m < kMmaTiles; ++m) a[pr][m] = frag[(pr * kMmaTiles + m) * 32 + lane];
        grid_dep_wait(); // the data comes from the kernel before
        const uint64_t q0 = seg + ((uint64_t)warp << (5 + g.log2k));
        x = warp_chains(data, p.pad, q0, g.k, a, lane);
    } else {
        const int wbase = 5 + g.log2k;
        G128 a, b;
        if (lane < 4) gpow32_r1(p.pw, 0, g.levels, lane, a, b);
        else gpow8_r1(p.pw, wbase, g.levels, (lane - 4) % 3, a, b);
        const G128 r1 = gf_mul(a, b);
        if (lane < 4) s_r1[0][lane] = r1;
        else if (lane < 7) s_r1[1][lane - 4] = r1;
        __syncwarp();
        if (lane == 0) gpow32_r2(p.pw, 0, g.levels, s_r1[0], a, b);
        else gpow8_r2(p.pw, wbase, g.levels, s_r1[1], a, b);
        const G128 r2 = gf_mul(a, b); // lane 0: H^28; the others: the 8-table's q^7
        G128 q28, q7;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            q28.w[i] = __shfl_sync(0xffffffffu, r2.w[i], 0);
            q7.w[i] = __shfl_sync(0xffffffffu, r2.w[i], 1);
        }
        gpow32_r3(p.pw, 0, g.levels, s_r1[0], q28, (32 - lane) & 31, a, b);
        const G128 lp = gf_mul(a, b);
        s_lane[lane] = lane == 0 ? p.pw[5] : lp;
        if (lane < kGhashWarps)
            s_wpow[lane] = gpow8_entry(p.pw, wbase, g.levels, s_r1[1], q7, kGhashWarps - 1 - lane);
    }
    __syncthreads();
    if (warp < kGhashWarps) {
        // Chain n (lane n < 8) times H^(8-n) = s_lane[24 + n].
        const G128 y = warp_xor(g128_sel(lane < kMmaCols, gf_mul(x, s_lane[24 + (lane & 7)]), g128_zero()));
        if (lane == 0) s_wsum[warp] = y;
    }
    __syncthreads();
    if (warp == 0) {
        const uint32_t w = lane & (kGhashWarps - 1);
        const G128 z = warp_xor(g128_sel(lane < kGhashWarps, gf_mul(s_wsum[w], s_wpow[w]), g128_zero()));
        if (lane == 0) scratch[blockIdx.x] = z;
    }
}

__global__ void __launch_bounds__(kPartialThreads, 2)
ghash_kernel(const __grid_constant__ GParams p, const __grid_constant__ GhashArgs g, const uint32_t *__restrict__ data,
             G128 *__restrict__ scratch, G128 *__restrict__ out)
{
    __shared__ G128 s_lane[32];           // H^(32 - l)
    __shared__ G128 s_wpow[kGhashWarps];  // H^(32k(W-1-w))
    __shared__ G128 s_wsum[kGhashWarps];  // the warps' GHASH
    __shared__ G128 s_r1[2][4];           // power tables' first round
    __shared__ bool s_last;
    const uint32_t warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const uint64_t seg = (uint64_t)blockIdx.x << g.block_levels; // padded index of the CUDA block's first block

    if (blockIdx.x == gridDim.x - 1) {
        // The extra CUDA block: the combine's powers H^(S t), H^(32 S t),
        // t < 32, two warps.
        if (warp < 2) {
            const G128 v = warp_pow32(p.pw, g.block_levels + 5 * (int)warp, g.levels, lane, s_r1[warp]);
            scratch[kGhashTab + threadIdx.x] = v;
        }
    } else if (seg + (1ull << g.block_levels) <= p.pad) {
        // Only zero padding (public): the partial is zero.
        if (threadIdx.x == 0) scratch[blockIdx.x] = g128_zero();
    } else {
        hash_segment(p, g, data, scratch, seg, warp, lane, s_lane, s_wpow, s_wsum, s_r1);
    }

    // The last CUDA block to get here combines.  Every writer fences its
    // writes before the count; the count's order decides who is last.
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int *count = reinterpret_cast<unsigned int *>(scratch + kGhashCount);
        s_last = atomicAdd(count, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (!s_last) {
        grid_dep_launch(); // the next kernel may start: nothing of ours it could disturb remains
        return;
    }
    __threadfence();
    combine_partials(scratch, gridDim.x - 1, out, s_wsum);
    if (threadIdx.x == 0) *reinterpret_cast<volatile unsigned int *>(scratch + kGhashCount) = 0; // for the next launch
    __threadfence();
    __syncthreads();
    grid_dep_launch();
}

} // namespace

cudaError_t upload_ghash_frags(const GhashFrags *f, G128 *scratch, cudaStream_t stream)
{
    return cudaMemcpyAsync(scratch + kGhashFragAt, f, sizeof *f, cudaMemcpyHostToDevice, stream);
}

cudaError_t launch_ghash(const GParams &p, const GhashPlan &pl, const void *data, G128 *scratch, G128 *out,
                         cudaStream_t stream)
{
    if (pl.threads != kGhashThreads || pl.m != 1 || pl.blocks == 0 || pl.blocks > kGhashMaxPartials ||
        (pl.blocks & (pl.blocks - 1)) != 0 || pl.per_lane == 0 || (pl.per_lane & (pl.per_lane - 1)) != 0 ||
        pl.levels < 8 || pl.levels > kGhashMaxLevels || (1ull << pl.block_levels) != (uint64_t)pl.threads * pl.per_lane)
        return cudaErrorInvalidValue;
    if (current_device_cc() < 80) return cudaErrorNotSupported; // ghash_mma.cuh needs sm_80
    GhashArgs g;
    g.k = pl.per_lane;
    g.log2k = 0;
    while ((1u << g.log2k) < pl.per_lane) ++g.log2k;
    g.levels = pl.levels;
    g.block_levels = pl.block_levels;
    const bool pdl = pdl_ok();
    return launch_pdl(ghash_kernel, dim3(pl.blocks + 1), dim3(kPartialThreads), 0, stream, pdl, p, g,
                      static_cast<const uint32_t *>(data), scratch, out);
}

} // namespace gpuaes
