// layer_gate.cpp - see layer_gate.h.  One counter, touched twice per job
// (jobs are megabytes: the cost does not show).
#include "runtime/layer_gate.h"

#include <atomic>

#include "runtime/clock.h"
#include "runtime/poll_wait.h"

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
    const int64_t until = mono_ns() + wait_ns;
    for (;;) {
        if (g_inside.load() == 0) return true;
        if (mono_ns() >= until) return false;
        sleep_ns(kExitWaitStepNs); // a job's chunk is shorter
    }
}

void layer_atfork_child() { g_inside.store(0); }

} // namespace gpuaes
