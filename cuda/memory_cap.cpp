// memory_cap.cpp - the process's budget of staging and keystream memory and
// the out-of-memory back-off (memory_cap.h).  Lock-free: a reservation is a
// compare-and-swap on the sum held.
#include <atomic>
#include <cstdint>
#include <ctime>
#include <pthread.h>

#include "gpu_settings.h"
#include "gpuaes_gpu.h"
#include "memory_cap.h"

namespace gpuaes {
namespace {

constexpr int64_t kBackoffMinNs = 10 * 1000 * 1000;            // 10 ms
constexpr int64_t kBackoffMaxNs = int64_t(10) * 1000 * 1000 * 1000; // 10 s

size_t g_cap = SIZE_MAX;
pthread_once_t g_cap_once = PTHREAD_ONCE_INIT;
std::atomic<size_t> g_held{0};
std::atomic<unsigned long long> g_refused{0}, g_oom{0};
std::atomic<int64_t> g_backoff_ns{0}, g_backoff_until{0};

void read_cap() { g_cap = gpu_settings().gpu_memory_max; }

// Not lifecycle.cu's mono_ns(): this file also links without CUDA.
int64_t now_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

} // namespace

bool mem_reserve(size_t bytes)
{
    pthread_once(&g_cap_once, read_cap);
    const int64_t until = g_backoff_until.load(std::memory_order_relaxed);
    if (until != 0 && now_ns() < until) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    size_t held = g_held.load(std::memory_order_relaxed);
    do {
        if (bytes > g_cap || held > g_cap - bytes) {
            g_refused.fetch_add(1, std::memory_order_relaxed);
            return false;
        }
    } while (!g_held.compare_exchange_weak(held, held + bytes, std::memory_order_relaxed));
    return true;
}

void mem_release(size_t bytes) { g_held.fetch_sub(bytes, std::memory_order_relaxed); }

void mem_alloc_failed()
{
    g_oom.fetch_add(1, std::memory_order_relaxed);
    int64_t b = g_backoff_ns.load(std::memory_order_relaxed);
    b = b == 0 ? kBackoffMinNs : b * 2 > kBackoffMaxNs ? kBackoffMaxNs : b * 2;
    g_backoff_ns.store(b, std::memory_order_relaxed);
    g_backoff_until.store(now_ns() + b, std::memory_order_relaxed);
}

void mem_alloc_ok()
{
    if (g_backoff_ns.load(std::memory_order_relaxed) == 0) return;
    g_backoff_ns.store(0, std::memory_order_relaxed);
    g_backoff_until.store(0, std::memory_order_relaxed);
}

} // namespace gpuaes

extern "C" void gpuaes_gpu_memory(gpuaes_gpu_memory_stats *s)
{
    if (s == nullptr) return;
    s->held = gpuaes::g_held.load(std::memory_order_relaxed);
    s->refused = gpuaes::g_refused.load(std::memory_order_relaxed);
    s->oom = gpuaes::g_oom.load(std::memory_order_relaxed);
}
