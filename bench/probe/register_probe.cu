// register_probe.cu - copy threads vs registering the caller's buffers in
// place (issue 5): what one large job costs when, instead of being copied
// through pinned staging buffers, the caller's pageable in[] and out[] are
// pinned with cudaHostRegister for the call and DMA'd directly.
//
//   nvcc -O3 -arch=sm_90 register_probe.cu -o register_probe && ./register_probe
//
// Per size (buffers malloc'd and touched, as a caller's would be):
//   reg+unreg  cudaHostRegister(in) + (out), cudaHostUnregister both: the fixed price
//   per-call   register, chunked H2D + copy kernel + D2H on 4 streams, unregister
//   cached     the same DMA with buffers registered beforehand (what a registration
//              cache would give; unsafe in a provider: a freed and re-mapped
//              buffer would keep its old pinned pages)
// Median of 5; GB/s of job bytes.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

static double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

__global__ void xor_kernel(const uint4 *in, uint4 *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = in[i];
        v.x ^= 0x5a5a5a5a;
        out[i] = v;
    }
}

constexpr size_t kChunk = size_t(8) << 20;
constexpr int kStreams = 4;

static void dma_job(unsigned char *in, unsigned char *out, size_t n, void *din[], void *dout[], cudaStream_t st[])
{
    for (size_t off = 0, i = 0; off < n; off += kChunk, ++i) {
        const size_t c = std::min(kChunk, n - off);
        const int s = (int)(i % kStreams);
        CK(cudaMemcpyAsync(din[s], in + off, c, cudaMemcpyHostToDevice, st[s]));
        xor_kernel<<<264, 256, 0, st[s]>>>((const uint4 *)din[s], (uint4 *)dout[s], c / 16);
        CK(cudaMemcpyAsync(out + off, dout[s], c, cudaMemcpyDeviceToHost, st[s]));
    }
    for (int s = 0; s < kStreams; ++s) CK(cudaStreamSynchronize(st[s]));
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main()
{
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# %s, register_probe\n", prop.name);
    void *din[kStreams], *dout[kStreams];
    cudaStream_t st[kStreams];
    for (int s = 0; s < kStreams; ++s) {
        CK(cudaMalloc(&din[s], kChunk));
        CK(cudaMalloc(&dout[s], kChunk));
        CK(cudaStreamCreateWithFlags(&st[s], cudaStreamNonBlocking));
    }
    std::printf("%-8s %12s %12s %12s %12s\n", "size", "reg+unreg_ms", "percall_GBs", "cached_GBs", "pageable_GBs");
    for (size_t mib : {1, 4, 16, 64, 256, 1024}) {
        const size_t n = mib << 20;
        unsigned char *in = (unsigned char *)std::aligned_alloc(4096, n);
        unsigned char *out = (unsigned char *)std::aligned_alloc(4096, n);
        std::memset(in, 1, n);
        std::memset(out, 2, n);
        std::vector<double> reg, percall, cached, pageable;
        for (int r = 0; r < 5; ++r) {
            double t0 = now();
            CK(cudaHostRegister(in, n, cudaHostRegisterDefault));
            CK(cudaHostRegister(out, n, cudaHostRegisterDefault));
            CK(cudaHostUnregister(in));
            CK(cudaHostUnregister(out));
            reg.push_back((now() - t0) * 1e3);

            t0 = now();
            CK(cudaHostRegister(in, n, cudaHostRegisterDefault));
            CK(cudaHostRegister(out, n, cudaHostRegisterDefault));
            dma_job(in, out, n, din, dout, st);
            CK(cudaHostUnregister(in));
            CK(cudaHostUnregister(out));
            percall.push_back(n / (now() - t0) / 1e9);

            t0 = now();
            dma_job(in, out, n, din, dout, st); // pageable: the driver stages it
            pageable.push_back(n / (now() - t0) / 1e9);
        }
        CK(cudaHostRegister(in, n, cudaHostRegisterDefault));
        CK(cudaHostRegister(out, n, cudaHostRegisterDefault));
        for (int r = 0; r < 5; ++r) {
            const double t0 = now();
            dma_job(in, out, n, din, dout, st);
            cached.push_back(n / (now() - t0) / 1e9);
        }
        CK(cudaHostUnregister(in));
        CK(cudaHostUnregister(out));
        std::printf("%-5zuMiB %12.2f %12.1f %12.1f %12.1f\n", mib, median(reg), median(percall), median(cached),
                    median(pageable));
        std::free(in);
        std::free(out);
    }
    return 0;
}
