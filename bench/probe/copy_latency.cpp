// copy_latency.cpp - how long one staging-sized copy takes on the copy pool
// (cuda/copy/copy_pool.cpp), against one thread's memcpy: the latency that small
// GPU jobs pay twice (copy-in, copy-out).  No GPU needed.
//
//   g++ -O2 -std=c++17 -pthread -Icuda bench/probe/copy_latency.cpp cuda/copy/copy_pool.cpp cuda/copy/copy_part.cpp cuda/copy/copy_load.cpp -o copy_latency
//   ./copy_latency [reps]
//
// Per size, median microseconds over `reps` copies of the same (cache-warm)
// buffers, as back-to-back jobs see them:
//   memcpy      one thread, plain memcpy
//   pool        parallel_memcpy between copy_pool_enter/leave (workers spinning)
//   pool+nt     the same with non-temporal stores (kCopyStream, as copy-outs use)
//   pool cold   after 2 ms idle (workers asleep: a wake-up per copy)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "copy/copy_pool.h"

using clk = std::chrono::steady_clock;

static double us_since(clk::time_point t0)
{
    return std::chrono::duration<double, std::micro>(clk::now() - t0).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F> static double time_median(int reps, F &&f)
{
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = clk::now();
        f();
        t.push_back(us_since(t0));
    }
    return median(t);
}

int main(int argc, char **argv)
{
    const int reps = argc > 1 ? std::atoi(argv[1]) : 300;
    const size_t sizes[] = {size_t(64) << 10, size_t(256) << 10, size_t(512) << 10, size_t(1) << 20,
                            size_t(4) << 20};
    const size_t maxn = size_t(4) << 20;
    std::vector<unsigned char> src(maxn, 0x5a), dst(maxn, 0);
    gpuaes::copy_pool_enter();
    std::printf("copy pool: %d workers + the caller; median of %d\n", gpuaes::copy_pool_workers(), reps);
    std::printf("%8s %10s %10s %10s %10s   (us; GB/s of the pool copy)\n", "size", "memcpy", "pool", "pool+nt",
                "pool cold");
    for (size_t n : sizes) {
        const double m1 = time_median(reps, [&] { std::memcpy(dst.data(), src.data(), n); });
        const double p = time_median(reps, [&] { gpuaes::parallel_memcpy(dst.data(), src.data(), n); });
        const double pn = time_median(reps, [&] {
            gpuaes::CopyTask t;
            gpuaes::copy_start(&t, dst.data(), src.data(), n, gpuaes::kCopyStream);
            gpuaes::copy_wait(&t);
        });
        gpuaes::copy_pool_leave();
        std::vector<double> tc;
        for (int r = 0; r < reps / 10 + 3; ++r) {
            std::this_thread::sleep_for(std::chrono::milliseconds(2)); // not timed: workers fall asleep
            gpuaes::copy_pool_enter();
            const auto t0 = clk::now();
            gpuaes::parallel_memcpy(dst.data(), src.data(), n);
            tc.push_back(us_since(t0));
            gpuaes::copy_pool_leave();
        }
        gpuaes::copy_pool_enter();
        std::printf("%7zuK %10.1f %10.1f %10.1f %10.1f   (%.1f GB/s)\n", n >> 10, m1, p, pn, median(tc),
                    (double)n / p / 1e3);
    }
    gpuaes::copy_pool_leave();
    gpuaes::copy_pool_stop(true);
    return 0;
}
