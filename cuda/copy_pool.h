// copy_pool.h - a small pool of host threads that splits the staging copies
// (pageable <-> pinned memcpy) of staging.cu (cuda/ internal; plain C++, no
// CUDA headers).
//
// One host thread copies at ~12 GB/s; the GPU and PCIe move 50+ GB/s, so a
// job whose staging copies run on the calling thread alone is limited by
// them.  parallel_memcpy() splits a large copy into parts and copies them on
// the caller and up to GPUAES_COPY_THREADS - 1 workers at once.
//
// Threads: the workers are created at the first GPU job (copy_pool_enter),
// never at load.  Every function here is thread-safe.  parallel_memcpy()
// never waits for a part that nobody has begun: the caller copies every part
// that no worker has claimed, so it completes (alone, at worst) whatever the
// other callers, the workers or copy_pool_stop() do meanwhile.
//
// Fork: copy_pool_atfork_child() (called from the pthread_atfork child
// handler) makes the pool unusable in a child of a process that had started
// it, and re-creates its lock; such a child never runs a GPU job anyway.
#ifndef GPUAES_COPY_POOL_H
#define GPUAES_COPY_POOL_H

#include <cstddef>

namespace gpuaes {

// A GPU job begins / ends.  The first enter starts the workers (number from
// GPUAES_COPY_THREADS, read then).  While a job is active, idle workers
// poll for work for a short while before they sleep, so that the copies of
// consecutive chunks do not each pay a thread wake-up.  Pair every enter
// with a leave.
void copy_pool_enter();
void copy_pool_leave();

// memcpy(dst, src, n) (the ranges must not overlap), on several threads when
// n is large (>= 1 MiB) and workers exist; returns when all of it is copied.
// All of dst is written before it returns, and the writes of the workers
// are visible to the caller (and to DMA it starts afterwards).
void parallel_memcpy(void *dst, const void *src, size_t n);

// Stops the workers and joins them (each finishes the part it is copying).
// final: never start them again (process exit).  Otherwise the next
// copy_pool_enter() starts a new set.  Idempotent.
void copy_pool_stop(bool final);

// pthread_atfork child handler part: re-creates the lock; a pool that the
// parent had started is closed for good in the child.
void copy_pool_atfork_child();

// Worker threads now running (0: the callers copy alone).  For tests and logs.
int copy_pool_workers();

} // namespace gpuaes

#endif
