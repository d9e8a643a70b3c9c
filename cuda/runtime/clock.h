// runtime/clock.h - the GPU layer's one clock: CLOCK_MONOTONIC in
// nanoseconds (idle times, deadlines, back-offs, traces), its deadlines for
// condition variables, and a plain sleep.  clock_gettime, not std::chrono's
// clocks: gpuaes.so links the copy pool without libstdc++.
#ifndef GPUAES_RUNTIME_CLOCK_H
#define GPUAES_RUNTIME_CLOCK_H

#include <cstdint>
#include <ctime>

namespace gpuaes {

inline int64_t mono_ns()
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

// The CLOCK_MONOTONIC time `ns` from now, for a condition variable made
// with that clock (pthread_condattr_setclock).
inline timespec mono_deadline(int64_t ns)
{
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    const int64_t sum = (int64_t)t.tv_nsec + ns % 1000000000;
    t.tv_sec += (time_t)(ns / 1000000000 + sum / 1000000000);
    t.tv_nsec = (long)(sum % 1000000000);
    return t;
}

// Sleeps about `ns` (0 <= ns < 1 s; a signal may end it early: callers loop
// on a deadline).
inline void sleep_ns(int64_t ns)
{
    const timespec t{0, (long)ns};
    nanosleep(&t, nullptr);
}

} // namespace gpuaes

#endif
