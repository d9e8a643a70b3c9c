// bmma_probe.cu - can the tensor cores do GHASH's GF(2) products?
//
// GHASH multiplies by fixed powers of H: a linear map over GF(2), so a
// 128 x 128 bit matrix.  mma.sync m16n8k256 .b1 with AND + POPC gives
// popc(row & column) per output; its parity (bit 0) is the GF(2) dot product.
// This probe checks (1) the fragment layout we rely on, against a host
// reference on random bits, and (2) how many such MMAs an SM issues per clock
// on this GPU (b1, and s8 m16n8k32 for comparison).
//
// Build: nvcc -O3 -std=c++17 -arch=sm_90 -o bmma_probe bmma_probe.cu
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "cuda_check.h"

__device__ __forceinline__ void bmma(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void imma(int (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Layout check: A 16 x 256 bits as 16 rows x 8 words, B 8 columns x 8 words
// (column-major: column n, k = 32*w + bit), D 16 x 8.
// Assumed (PTX ISA, m16n8k256 .b1): g = lane >> 2, t = lane & 3;
//   a0: row g, word t; a1: row g+8, word t; a2: row g, word t+4; a3: row g+8, word t+4
//   b0: column g, word t; b1: column g, word t+4
//   d0/d1: row g, columns 2t, 2t+1; d2/d3: row g+8, columns 2t, 2t+1
__global__ void layout_kernel(const uint32_t *A, const uint32_t *B, int *D)
{
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const uint32_t a[4] = {A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4]};
    const uint32_t b[2] = {B[g * 8 + t], B[g * 8 + t + 4]};
    int d[4] = {0, 0, 0, 0};
    bmma(d, a, b);
    D[g * 8 + 2 * t] = d[0];
    D[g * 8 + 2 * t + 1] = d[1];
    D[(g + 8) * 8 + 2 * t] = d[2];
    D[(g + 8) * 8 + 2 * t + 1] = d[3];
}

template <bool kBinary>
__global__ void rate_kernel(int iters, uint32_t seed, int *sink)
{
    uint32_t a[4], b[2];
    for (int i = 0; i < 4; ++i) a[i] = seed * (threadIdx.x + 7 * i + 1);
    for (int i = 0; i < 2; ++i) b[i] = seed ^ (threadIdx.x * 13 + i);
    int d[8][4] = {};
    for (int it = 0; it < iters; ++it) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            if (kBinary) bmma(d[c], a, b);
            else imma(d[c], a, b);
        }
    }
    int s = 0;
#pragma unroll
    for (int c = 0; c < 8; ++c) s += d[c][0] ^ d[c][1] ^ d[c][2] ^ d[c][3];
    if (s == 0x12345678) sink[0] = s;
}

template <bool kBinary>
double rate(int sms, int warps_per_block, int blocks_per_sm, int iters)
{
    int *sink;
    CK(cudaMalloc(&sink, 4));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const int grid = sms * blocks_per_sm;
    rate_kernel<kBinary><<<grid, 32 * warps_per_block>>>(iters / 10, 12345u, sink);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    float best = 1e30f;
    for (int r = 0; r < 5; ++r) {
        CK(cudaEventRecord(e0));
        rate_kernel<kBinary><<<grid, 32 * warps_per_block>>>(iters, 12345u + r, sink);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CK(cudaFree(sink));
    const double mmas = (double)grid * warps_per_block * iters * 8;
    return mmas / (best * 1e-3); // warp-level MMAs per second
}

int main()
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    std::printf("device %s, %d SMs, clock attr %d MHz\n", prop.name, prop.multiProcessorCount, clock_khz / 1000);

    // (1) layout
    std::mt19937 rng(1);
    int bad = 0;
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<uint32_t> A(16 * 8), B(8 * 8);
        for (auto &x : A) x = rng();
        for (auto &x : B) x = rng();
        if (trial == 0) { // one sparse case: a single bit
            std::fill(A.begin(), A.end(), 0u);
            std::fill(B.begin(), B.end(), 0u);
            A[3 * 8 + 5] = 1u << 17;
            B[6 * 8 + 5] = 1u << 17;
        }
        uint32_t *dA, *dB;
        int *dD;
        CK(cudaMalloc(&dA, A.size() * 4));
        CK(cudaMalloc(&dB, B.size() * 4));
        CK(cudaMalloc(&dD, 128 * 4));
        CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
        CK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
        layout_kernel<<<1, 32>>>(dA, dB, dD);
        CK(cudaGetLastError());
        std::vector<int> D(128);
        CK(cudaMemcpy(D.data(), dD, 128 * 4, cudaMemcpyDeviceToHost));
        for (int r = 0; r < 16; ++r)
            for (int n = 0; n < 8; ++n) {
                int ref = 0;
                for (int w = 0; w < 8; ++w) ref += __builtin_popcount(A[r * 8 + w] & B[n * 8 + w]);
                if (ref != D[r * 8 + n]) {
                    if (bad < 10) std::printf("trial %d D[%d][%d] = %d, want %d\n", trial, r, n, D[r * 8 + n], ref);
                    ++bad;
                }
            }
        CK(cudaFree(dA));
        CK(cudaFree(dB));
        CK(cudaFree(dD));
    }
    std::printf("layout: %s (%d mismatches)\n", bad ? "WRONG" : "as assumed", bad);

    // (2) rates
    const int sms = prop.multiProcessorCount;
    const double clk = clock_khz * 1e3;
    for (int wpb : {4, 8, 16}) {
        const double b1 = rate<true>(sms, wpb, 2, 4096);
        const double s8 = rate<false>(sms, wpb, 2, 4096);
        std::printf("warps/block %2d x 2 blocks/SM: b1 m16n8k256 %.3g MMA/s = %.2f per SM-clock (%.0f bit-MAC/clk/SM); "
                    "s8 m16n8k32 %.3g MMA/s = %.2f per SM-clock (%.0f MAC/clk/SM)\n",
                    wpb, b1, b1 / sms / clk, b1 / sms / clk * 16 * 8 * 256, s8, s8 / sms / clk,
                    s8 / sms / clk * 16 * 8 * 32);
    }
    return bad ? 1 : 0;
}
