// test_memory_cap.cpp - cuda/runtime/memory_cap.cpp on the CPU (no GPU needed): the
// cap holds under concurrent reservations, a refusal counts, and an
// out-of-memory failure refuses everything for a back-off that doubles and
// ends with the next allocation that fits.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "check.h"
#include "gpuaes_gpu.h"
#include "runtime/memory_cap.h"

using namespace gpuaes;

static gpuaes_gpu_memory_stats stats()
{
    gpuaes_gpu_memory_stats s{};
    gpuaes_gpu_memory(&s);
    return s;
}

int main()
{
    constexpr size_t kCap = size_t(100) << 20, kUnit = size_t(7) << 20;
    gpuaes_gpu_settings s = GPUAES_GPU_SETTINGS_DEFAULT;
    s.gpu_memory_max = kCap;
    gpuaes_gpu_configure(&s); // read at the first reservation

    // 1. One thread: up to the cap, not one byte more.
    CHECK(mem_reserve(kCap - 1));
    CHECK(!mem_reserve(2));
    CHECK(mem_reserve(1));
    CHECK(stats().held == kCap && stats().refused == 1);
    mem_release(kCap);
    CHECK(!mem_reserve(kCap + 1) && stats().held == 0);
    CHECK(!mem_reserve(SIZE_MAX)); // no overflow

    // 2. Eight threads racing: the sum held never passes the cap.
    std::atomic<size_t> peak{0};
    std::atomic<long> granted{0};
    std::vector<std::thread> th;
    for (int t = 0; t < 8; ++t)
        th.emplace_back([&] {
            for (int i = 0; i < 20000; ++i) {
                if (!mem_reserve(kUnit)) continue;
                granted.fetch_add(1);
                const size_t h = stats().held;
                size_t p = peak.load();
                while (h > p && !peak.compare_exchange_weak(p, h)) {}
                mem_release(kUnit);
            }
        });
    for (auto &x : th) x.join();
    CHECK(peak.load() <= kCap && granted.load() > 0 && stats().held == 0);

    // 3. Out of memory: refused for ~10 ms, then allowed; a second failure in
    // a row doubles the back-off; a success ends it.  A refusal is required
    // only while the back-off certainly runs: a loaded host may deschedule
    // this thread past it (then that run proves less, never fails).
    using clk = std::chrono::steady_clock;
    const auto within = [](clk::time_point t0, int ms) { return clk::now() - t0 < std::chrono::milliseconds(ms); };
    const unsigned long long r0 = stats().refused;
    clk::time_point t0 = clk::now();
    mem_alloc_failed();
    CHECK(stats().oom == 1);
    bool refused = !mem_reserve(1);
    CHECK((refused && stats().refused == r0 + 1) || !within(t0, 10));
    if (!refused) mem_release(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    CHECK(mem_reserve(1)); // the back-off is over: one attempt
    mem_release(1);
    t0 = clk::now();
    mem_alloc_failed();    // it failed again: 20 ms now
    std::this_thread::sleep_for(std::chrono::milliseconds(12));
    refused = !mem_reserve(1);
    CHECK(refused || !within(t0, 20));
    if (!refused) mem_release(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(12));
    CHECK(mem_reserve(1));
    mem_release(1);
    mem_alloc_ok();        // fitted: no back-off any more
    mem_alloc_failed();    // and the next failure starts again at 10 ms
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    CHECK(mem_reserve(1));
    mem_release(1);
    mem_alloc_ok();

    if (test_failures != 0) return 1;
    std::printf("memory cap: held <= cap under 8 threads (peak %zu MiB of %zu), refusals counted, "
                "out-of-memory back-off 10 ms doubling\n", peak.load() >> 20, kCap >> 20);
    return 0;
}
