// register_stall.cu - what a cudaHostRegister / cudaHostUnregister of a client's
// segment costs the other jobs of the same process (gpuaesd), and whether
// registering in pieces avoids it.
//
//   nvcc -O3 -arch=sm_90 -std=c++17 register_stall.cu -o register_stall && ./register_stall [MIB]
//
// Thread A runs 1 MiB jobs back to back (pinned H2D, a kernel, D2H, sync) and
// records each one's latency.  Thread B, meanwhile, on a memfd mapping of MIB
// MiB (default 64), touched first as gpuaesd's are: register whole, unregister
// whole; register in 2 MiB pieces, unregister the pieces.  Per phase: B's call
// time, and A's worst and median job during it, against A alone.
// And a fresh memfd (no page yet, as a client's segment reaches gpuaesd)
// registered as it is, or after reading a byte a page.
// Then, whether a copy that spans two separately registered pieces runs as
// pinned memory (its rate, and how long cudaMemcpyAsync itself takes to
// return); on the H200 it fails ("invalid argument").
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "cuda_check.h"

using clk = std::chrono::steady_clock;
static double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

__global__ void touch(uint4 *p, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i].x ^= 1;
}

struct Job {
    double start, ms; // since the probe's t0
};

static std::atomic<bool> g_stop{false};
static std::vector<Job> g_jobs;

static void jobs_main(clk::time_point t0)
{
    const size_t n = size_t(1) << 20;
    void *h, *d;
    cudaStream_t s;
    CK(cudaMallocHost(&h, n));
    CK(cudaMalloc(&d, n));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    std::memset(h, 1, n);
    while (!g_stop.load()) {
        const auto t = clk::now();
        CK(cudaMemcpyAsync(d, h, n, cudaMemcpyHostToDevice, s));
        touch<<<132, 256, 0, s>>>((uint4 *)d, n / 16);
        CK(cudaMemcpyAsync(h, d, n, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        g_jobs.push_back({std::chrono::duration<double, std::milli>(t - t0).count(), ms_since(t)});
    }
    CK(cudaStreamDestroy(s));
    CK(cudaFree(d));
    CK(cudaFreeHost(h));
}

struct Phase {
    const char *what;
    double from, to; // since t0
};

static void report(const Phase &p)
{
    std::vector<double> v;
    for (const Job &j : g_jobs)
        if (j.start + j.ms >= p.from && j.start <= p.to) v.push_back(j.ms);
    std::sort(v.begin(), v.end());
    if (v.empty()) {
        std::printf("%-28s %9.2f ms   no job\n", p.what, p.to - p.from);
        return;
    }
    std::printf("%-28s %9.2f ms   jobs %4zu  median %6.3f  worst %7.3f ms\n", p.what, p.to - p.from, v.size(),
                v[v.size() / 2], v.back());
}

int main(int argc, char **argv)
{
    const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 64;
    const size_t len = mib << 20, piece = size_t(2) << 20;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    CK(cudaFree(nullptr));
    std::printf("# %s, register_stall, segment %zu MiB, pieces %zu MiB\n", prop.name, mib, piece >> 20);

    const int fd = memfd_create("seg", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0) return 1;
    auto *seg = (unsigned char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (seg == MAP_FAILED) return 1;
    for (size_t i = 0; i < len; i += 4096) seg[i] = 1;

    const auto t0 = clk::now();
    std::thread a(jobs_main, t0);
    std::vector<Phase> ph;
    auto idle = [&](const char *what, int ms) {
        const double f = ms_since(t0);
        std::this_thread::sleep_for(std::chrono::milliseconds(ms));
        ph.push_back({what, f, ms_since(t0)});
    };
    auto timed = [&](const char *what, auto fn) {
        const double f = ms_since(t0);
        fn();
        ph.push_back({what, f, ms_since(t0)});
    };
    idle("jobs alone", 200);
    for (int round = 0; round < 3; ++round) {
        timed("register whole", [&] { CK(cudaHostRegister(seg, len, cudaHostRegisterPortable)); });
        idle("  (between)", 50);
        timed("unregister whole", [&] { CK(cudaHostUnregister(seg)); });
        idle("  (between)", 50);
        timed("register 2 MiB pieces", [&] {
            for (size_t o = 0; o < len; o += piece) CK(cudaHostRegister(seg + o, piece, cudaHostRegisterPortable));
        });
        idle("  (between)", 50);
        timed("unregister pieces", [&] {
            for (size_t o = 0; o < len; o += piece) CK(cudaHostUnregister(seg + o));
        });
        idle("  (between)", 50);
        // A client's fresh memfd, as gpuaesd gets it: no page yet.
        const int fd2 = memfd_create("fresh", MFD_CLOEXEC);
        if (fd2 < 0 || ftruncate(fd2, (off_t)len) != 0) return 1;
        auto *fresh = (unsigned char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd2, 0);
        if (fresh == MAP_FAILED) return 1;
        timed("register fresh (no pages)", [&] { CK(cudaHostRegister(fresh, len, cudaHostRegisterPortable)); });
        idle("  (between)", 50);
        timed("unregister fresh", [&] { CK(cudaHostUnregister(fresh)); });
        munmap(fresh, len);
        close(fd2);
        idle("  (between)", 50);
        const int fd3 = memfd_create("read", MFD_CLOEXEC);
        if (fd3 < 0 || ftruncate(fd3, (off_t)len) != 0) return 1;
        auto *rd = (unsigned char *)mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd3, 0);
        if (rd == MAP_FAILED) return 1;
        timed("fault in by reading", [&] {
            const volatile unsigned char *v = rd;
            for (size_t i = 0; i < len; i += 4096) (void)v[i];
        });
        idle("  (between)", 50);
        timed("register after reading", [&] { CK(cudaHostRegister(rd, len, cudaHostRegisterPortable)); });
        idle("  (between)", 50);
        timed("unregister", [&] { CK(cudaHostUnregister(rd)); });
        munmap(rd, len);
        close(fd3);
        idle("  (between)", 50);
    }
    g_stop = true;
    a.join();
    for (const Phase &p : ph) report(p);

    // Copies across pieces: 8 MiB from an offset of 1 MiB (four pieces) against
    // the same range registered whole; the time the async call takes to return.
    void *d;
    cudaStream_t s;
    CK(cudaMalloc(&d, size_t(8) << 20));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int pieces = 0; pieces < 2; ++pieces) {
        if (pieces)
            for (size_t o = 0; o < len; o += piece) CK(cudaHostRegister(seg + o, piece, cudaHostRegisterPortable));
        else
            CK(cudaHostRegister(seg, len, cudaHostRegisterPortable));
        std::vector<double> rate, ret;
        for (int r = 0; r < 20; ++r) {
            const auto t = clk::now();
            const cudaError_t e = cudaMemcpyAsync(d, seg + (1 << 20), size_t(8) << 20, cudaMemcpyHostToDevice, s);
            if (e != cudaSuccess) {
                std::printf("8 MiB H2D over %s: %s\n", pieces ? "2 MiB pieces" : "one range", cudaGetErrorString(e));
                (void)cudaGetLastError();
                break;
            }
            ret.push_back(ms_since(t));
            CK(cudaMemcpyAsync(seg + (1 << 20), d, size_t(8) << 20, cudaMemcpyDeviceToHost, s));
            CK(cudaStreamSynchronize(s));
            rate.push_back(2.0 * (8 << 20) / (ms_since(t) / 1e3) / 1e9);
        }
        std::sort(rate.begin(), rate.end());
        std::sort(ret.begin(), ret.end());
        if (rate.size() == 20) std::printf("8 MiB H2D+D2H over %-13s %6.1f GB/s median, H2D call returns in %.3f ms median\n",
                    pieces ? "2 MiB pieces:" : "one range:", rate[10], ret[10]);
        if (pieces)
            for (size_t o = 0; o < len; o += piece) CK(cudaHostUnregister(seg + o));
        else
            CK(cudaHostUnregister(seg));
    }
    return 0;
}
