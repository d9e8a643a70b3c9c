// copy_pool.h - a small pool of host threads that runs the staging copies
// (pageable <-> pinned memcpy) of a job's pipeline (pipeline.cu; cuda/ internal; plain C++, no
// CUDA headers).
//
// One host thread copies at ~12 GB/s; the GPU and PCIe move 50+ GB/s each
// way, so a job whose staging copies run on the calling thread alone is
// limited by them.  A copy is split into parts that the caller and up to
// GPUAES_COPY_THREADS - 1 workers copy at once, and several copies may be in
// flight at once (copy-in of one chunk while another is copied out).
//
// Threads: the workers are created at the first GPU job (copy_pool_enter),
// never at load.  They copy only while there is work and the load rule
// (copy_workers_for) allows them: a worker polls for 50 us after its last
// part, then sleeps until an owner that queues a copy wakes it, so an idle
// pool costs no CPU.  Every function here is thread-safe.  No copy ever waits
// for a part that nobody has begun: copy_help() / copy_wait() let the owner
// copy every part that no worker has claimed, so a copy completes (on the
// owner alone, at worst) whatever the other owners, the workers or
// copy_pool_stop() do meanwhile.
//
// Fork: copy_pool_atfork_child() (called from the pthread_atfork child
// handler) re-creates the lock and forgets the parent's workers; the child's
// next copy_pool_enter() starts its own.
#ifndef GPUAES_COPY_POOL_H
#define GPUAES_COPY_POOL_H

#include <atomic>
#include <cstddef>
#include <pthread.h>

#include "copy/copy_load.h" // the load rule (copy_workers_for)

namespace gpuaes {

// An owner begins / ends: a thread that copies its own copies' parts while
// it waits for them (a GPU job's caller; gpuaes_host_copy's while it copies
// or ends a copy).  The load rule counts owners, so that the workers fill
// the copiers up to kCopiers; a copy begun and not waited for yet has no
// owner copying (copy_pool_ready).  The first enter starts the workers
// (number from GPUAES_COPY_THREADS, read then); an enter also re-samples the
// load (at most every 50 ms).  Pair every enter with a leave.
void copy_pool_enter();
void copy_pool_leave();

// What an enter does besides counting an owner: starts the workers if they
// are not running, and re-samples the load when due.
void copy_pool_ready();

// One copy in flight: memcpy(dst, src, n), ranges not overlapping; or, with
// ks, dst = src ^ ks (dst may equal src: in place).  Owned by
// the thread that started it; it must stay alive (and not move) until
// copy_wait() returned.  The fields are the pool's.
struct CopyTask {
    unsigned char *dst = nullptr;
    const unsigned char *src = nullptr;
    const unsigned char *ks = nullptr; // XOR source (copy_start_xor), or none
    unsigned char *wipe = nullptr;     // kCopyWipe: the pinned operand (src, or ks), zeroed once read
    unsigned char *wipe_also = nullptr; // zeroed too, at the same offsets
    size_t n = 0;
    size_t part = 0;             // nominal part length (multiple of 64)
    int nparts = 0;
    int next = 0;                // first unclaimed part (the pool's lock)
    std::atomic<int> left{0};    // parts not yet copied
    bool stream = false;         // non-temporal stores (dst is not read soon)
    bool urgent = false;         // workers take urgent copies first
    bool queued = false;         // offered to the workers
    CopyTask *prev = nullptr, *succ = nullptr; // the pool's queue links
    pthread_cond_t done;         // signalled when left drops to 0 (queued only)
};

// copy_start() flags.
// kCopyStream: write dst with non-temporal stores where the CPU has them (dst
// goes to DRAM, not to a cache another copy would need).
// kCopyUrgent: workers take it before every non-urgent copy.
// kCopyWipe: the staging operand (src of a copy, ks of an XOR) is zeroed as
// it is read, 64 bytes at a time while they are in L1 (one extra store per
// line, no extra pass over memory), and `wipe_also`, if given, is zeroed at
// the same offsets: when the copy is finished, so is the wipe.
constexpr unsigned kCopyStream = 1, kCopyUrgent = 2, kCopyWipe = 4;

// Starts a copy: parts are offered to the workers (when it is large and
// workers run), in FIFO order with the other copies of its urgency.
// Nothing may be copied yet when it returns.  n == 0: finished at once.
void copy_start(CopyTask *t, void *dst, const void *src, size_t n, unsigned flags, void *wipe_also = nullptr);

// The same for dst = src ^ ks (CTR: the data against keystream from the GPU).
void copy_start_xor(CopyTask *t, void *dst, const void *src, const void *ks, size_t n, unsigned flags,
                    void *wipe_also = nullptr);

// The owner copies one part of t that nobody has claimed; false when none
// was left to claim (the rest is done or being copied by workers).
bool copy_help(CopyTask *t);

// All of t is copied (and visible to this thread, and to DMA it starts afterwards).
inline bool copy_finished(const CopyTask *t) { return t->left.load(std::memory_order_acquire) == 0; }

// Copies what nobody has claimed, then waits for the workers' parts.  Every
// started copy must be waited for, once.
void copy_wait(CopyTask *t);

// copy_start() + copy_wait().
void parallel_memcpy(void *dst, const void *src, size_t n);

// Stops the workers and joins them (each finishes the part it is copying).
// final: never start them again (process exit).  Otherwise the next
// copy_pool_enter() starts a new set.  Idempotent.
void copy_pool_stop(bool final);

// The fork handler's part (runtime/fork_child.h): re-creates the lock and
// forgets the parent's workers (the child's next enter starts its own).
// Installed by the first enter, and by the GPU layer at load.
void copy_pool_atfork_child();
void copy_pool_atfork_install();

// Worker threads now running (0: the owners copy alone).  For tests and logs.
int copy_pool_workers();

// Owners between enter and leave.  For tests.
int copy_pool_owners();


// Workers the load rule lets copy now (all of them with GPUAES_COPY_THREADS).
int copy_pool_allowed();

// Tests and benches: the next start creates threads - 1 workers and keeps
// the load rule (as the default does, with another count); 0: the default.
void copy_pool_test_auto_threads(int threads);

} // namespace gpuaes

#endif
