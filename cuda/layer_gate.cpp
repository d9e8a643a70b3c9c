// layer_gate.cpp - see layer_gate.h.  One counter, touched twice per job
// (jobs are megabytes: the cost does not show).
#include "layer_gate.h"

#include <atomic>
#include <chrono>
#include <thread>

namespace gpuaes {
namespace {

std::atomic<int> g_inside{0};
std::atomic<bool> g_closed{false};

} // namespace

// Increment, then look at the flag (both seq_cst), against close's store of
// the flag and then its loads of the count: either close sees this thread
// inside, or this thread sees the layer closed and leaves without CUDA.
bool layer_enter()
{
    g_inside.fetch_add(1);
    if (!g_closed.load()) return true;
    g_inside.fetch_sub(1);
    return false;
}

void layer_leave() { g_inside.fetch_sub(1); }

bool layer_close(int64_t wait_ns)
{
    g_closed.store(true);
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(wait_ns);
    for (;;) {
        if (g_inside.load() == 0) return true;
        if (std::chrono::steady_clock::now() >= until) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(1)); // a job's chunk is shorter
    }
}

void layer_atfork_child() { g_inside.store(0); }

} // namespace gpuaes
