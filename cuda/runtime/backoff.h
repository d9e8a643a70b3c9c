// runtime/backoff.h - a back-off after failures in a row: 10 ms, doubling
// with each failure, at most 10 s; the next success ends it.  Lock-free and
// relaxed: it only keeps callers from retrying, it guards no data.
#ifndef GPUAES_RUNTIME_BACKOFF_H
#define GPUAES_RUNTIME_BACKOFF_H

#include <atomic>
#include <cstdint>

#include "runtime/clock.h"

namespace gpuaes {

class Backoff {
public:
    static constexpr int64_t kMinNs = 10 * 1000 * 1000;                  // 10 ms
    static constexpr int64_t kMaxNs = int64_t(10) * 1000 * 1000 * 1000; // 10 s

    // True while a back-off runs (the clock is read only then).
    bool on() const
    {
        const int64_t until = until_.load(std::memory_order_relaxed);
        return until != 0 && mono_ns() < until;
    }

    // One more failure: the back-off starts, or doubles.
    void failed()
    {
        int64_t b = ns_.load(std::memory_order_relaxed);
        b = b == 0 ? kMinNs : b * 2 > kMaxNs ? kMaxNs : b * 2;
        ns_.store(b, std::memory_order_relaxed);
        until_.store(mono_ns() + b, std::memory_order_relaxed);
    }

    // A success: no back-off (no store when none ran).
    void succeeded()
    {
        if (ns_.load(std::memory_order_relaxed) == 0) return;
        ns_.store(0, std::memory_order_relaxed);
        until_.store(0, std::memory_order_relaxed);
    }

private:
    std::atomic<int64_t> ns_{0};    // the current length, 0: none
    std::atomic<int64_t> until_{0}; // mono_ns() when it ends, 0: none
};

} // namespace gpuaes

#endif
