// memory_cap.cpp - the process's budget of staging and keystream memory and
// the out-of-memory back-off (memory_cap.h).  Lock-free: a reservation is a
// compare-and-swap on the sum held (runtime/capped_count.h).
#include <atomic>
#include <cstdint>
#include <pthread.h>

#include "runtime/gpu_settings.h"
#include "gpuaes_gpu.h"
#include "runtime/memory_cap.h"
#include "runtime/backoff.h"
#include "runtime/capped_count.h"

namespace gpuaes {
namespace {

size_t g_cap = SIZE_MAX;
pthread_once_t g_cap_once = PTHREAD_ONCE_INIT;
CappedCount g_held;
std::atomic<unsigned long long> g_refused{0}, g_oom{0};
Backoff g_backoff;

void read_cap() { g_cap = gpu_settings().gpu_memory_max; }

} // namespace

bool mem_reserve(size_t bytes)
{
    pthread_once(&g_cap_once, read_cap);
    if (g_backoff.on() || !g_held.reserve(bytes, g_cap)) {
        g_refused.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    return true;
}

void mem_release(size_t bytes) { g_held.release(bytes); }

void mem_alloc_failed()
{
    g_oom.fetch_add(1, std::memory_order_relaxed);
    g_backoff.failed();
}

void mem_alloc_ok() { g_backoff.succeeded(); }

} // namespace gpuaes

extern "C" void gpuaes_gpu_memory(gpuaes_gpu_memory_stats *s)
{
    if (s == nullptr) return;
    s->held = gpuaes::g_held.held();
    s->refused = gpuaes::g_refused.load(std::memory_order_relaxed);
    s->oom = gpuaes::g_oom.load(std::memory_order_relaxed);
}
