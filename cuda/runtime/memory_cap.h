// memory_cap.h - what gpuaes may hold in a process: the pinned + device
// bytes of staging slots and keystream windows against gpu_memory_max
// (GPUAES_GPU_MEMORY_MAX), and a back-off after an allocation that found the
// device (or pinned memory) full, e.g. another process holding it.  (cuda/
// internal; gpuaes_gpu_memory() in gpuaes_gpu.h reports it.)
#ifndef GPUAES_MEMORY_CAP_H
#define GPUAES_MEMORY_CAP_H

#include <cstddef>

namespace gpuaes {

// Before allocating `bytes` (pinned and device together): false, and counted
// as a refusal, when the sum held would pass the cap or an out-of-memory
// back-off is on.  The caller then makes nothing (the work goes to the CPU).
bool mem_reserve(size_t bytes);

// Gives a reservation back: its memory was freed, or its allocation failed.
void mem_release(size_t bytes);

// The outcome of the allocations of one reservation.  A failure for lack of
// memory starts a back-off (10 ms, doubling with each failure in a row, at
// most 10 s) during which mem_reserve() refuses, so that no call retries
// the allocation; the next success ends it.
void mem_alloc_failed();
void mem_alloc_ok();

} // namespace gpuaes

#endif
