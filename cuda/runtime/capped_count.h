// runtime/capped_count.h - a sum reserved against a cap and given back
// later (bytes of GPU memory, bytes of keystream in flight).  Lock-free: a
// reservation is a compare-and-swap on the sum, and a refused one leaves it
// as it was.  Relaxed: the sum is a budget, it publishes no data.
#ifndef GPUAES_RUNTIME_CAPPED_COUNT_H
#define GPUAES_RUNTIME_CAPPED_COUNT_H

#include <atomic>
#include <cstddef>

namespace gpuaes {

class CappedCount {
public:
    // Adds n unless the sum would pass cap (false: nothing taken).
    bool reserve(size_t n, size_t cap)
    {
        size_t held = held_.load(std::memory_order_relaxed);
        do {
            if (n > cap || held > cap - n) return false; // no overflow: held + n > cap
        } while (!held_.compare_exchange_weak(held, held + n, std::memory_order_relaxed));
        return true;
    }

    // Gives back n bytes that reserve() took.
    void release(size_t n) { held_.fetch_sub(n, std::memory_order_relaxed); }

    size_t held() const { return held_.load(std::memory_order_relaxed); }

private:
    std::atomic<size_t> held_{0};
};

} // namespace gpuaes

#endif
