// poll_wait.h - how a gpuaes host thread waits: poll briefly, then sleep.
#ifndef GPUAES_POLL_WAIT_H
#define GPUAES_POLL_WAIT_H

#include <chrono>

namespace gpuaes {

// With nothing to do, poll this long before sleeping (a job's owner in
// pipeline.cu, copy workers and copy_wait in copy_pool.cpp).  A chunk's stage
// takes tens to hundreds of microseconds and a sleeper wakes tens of
// microseconds late: about one wake-up is spin-then-block's usual bound.
// Measured at 64 MiB, 1 thread (H200, share off): sleeping after 10 us lost
// 4-15 % against polling (ECB 38.9 -> 35.9 GB/s), after 50 us 0-6 % (CTR
// 48.8, ECB 37.9).  The old 500 us after every copy part was charged to
// gpuaes by `openssl speed`'s CPU-time figure (H200, 64 MiB CTR: 0.313 CPU
// s/GB against the default provider's 0.187).
constexpr std::chrono::microseconds kPollBeforeSleep(50);

// One iteration of a polling loop: tells the core (and its hyperthread
// sibling) that this thread is spinning.
inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

} // namespace gpuaes

#endif
