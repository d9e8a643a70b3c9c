// runtime/poll_wait.h - how a gpuaes host thread waits: poll briefly, then
// sleep.  Every such wait of the GPU layer takes its lengths from here.
#ifndef GPUAES_RUNTIME_POLL_WAIT_H
#define GPUAES_RUNTIME_POLL_WAIT_H

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "runtime/clock.h"

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
constexpr int64_t kPollBeforeSleepNs = std::chrono::nanoseconds(kPollBeforeSleep).count();

// Waiting for the GPU in a job's pipeline (pipeline.cu idle), after the
// poll above: naps of kGpuNap for up to kGpuNapFor, then a blocking sync.
// A blocking sync woke ~150 us late on the H200 host (gpuaesd's lone 1 MiB
// keystream pieces: 77-143 us when the poll caught the end, 272-586 when it
// did not; bench/results/service-waits-db8f23f call D); a nap is woken by a timer
// (gpuaesd's workers set a 1 us timer slack; an application's thread keeps
// its own, ~50 us by default).  A chunk's D2H takes at most ~0.6 ms.
constexpr std::chrono::microseconds kGpuNap(10), kGpuNapFor(1000);
constexpr int64_t kGpuNapNs = std::chrono::nanoseconds(kGpuNap).count();
constexpr int64_t kGpuNapForNs = std::chrono::nanoseconds(kGpuNapFor).count();

// Waiting for a keystream fill, or for a window's owner to leave its call
// (ks_launcher.cu): poll this long (about a thread wake-up), then sleep in
// naps from kNapMin doubling to kNapMax (a fill's D2H is at most ~0.6 ms:
// GPUAES_KS_INFLIGHT_MAX).
constexpr std::chrono::microseconds kPollBeforeNap(20), kNapMin(20), kNapMax(1000);
constexpr int64_t kPollBeforeNapNs = std::chrono::nanoseconds(kPollBeforeNap).count();

// Sleeps d, then doubles it up to kNapMax.
inline void nap(std::chrono::microseconds &d)
{
    sleep_ns(std::chrono::nanoseconds(d).count());
    d = std::min(d * 2, std::chrono::microseconds(kNapMax));
}

// The exit-time waits (the start-up thread's end, jobs leaving the layer:
// device.cu, layer_gate.cpp) sleep in steps of this: shorter than a job's
// chunk, long enough to cost no core over their bound.
constexpr int64_t kExitWaitStepNs = 1000 * 1000; // 1 ms

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
