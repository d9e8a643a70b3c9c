// copy_load.h - the copy pool's load rule: how many of its workers may copy
// now, from the idle cores this process may use (cuda/ internal; plain C++).
#ifndef GPUAES_COPY_LOAD_H
#define GPUAES_COPY_LOAD_H

#include <atomic>
#include <cstdint>

namespace gpuaes {

// The load rule: how many workers may copy now, besides the job owners.
//
// Copiers in all: 8.  One thread copies ~12 GB/s; PCIe and the GPU move
// ~50 GB/s each way, so a job's copy-in and copy-out together keep ~8
// threads busy, and more only contend for DRAM.  Each job in flight has its
// owner copying, so the workers fill 8 - jobs.  Only idle cores are used:
// idle time of the CPUs this process may run on (sched_getaffinity), from
// /proc/stat over the last sample (every other process's load included, and
// this process's own threads; our workers' own time counts as idle, it is
// theirs), less half a core: /proc/stat counts 10 ms ticks, so over 50 ms a
// fully busy machine can read up to ~0.4 idle cores.  With every core busy
// the owners copy alone: extra workers would only add context switches and
// take cores from the application.  GPUAES_COPY_THREADS set: that many
// threads always copy (no load rule).
constexpr int kCopiers = 8;
constexpr double kCopyHeadroom = 0.5;
struct CopyLoad {
    int cpus = 1;       // CPUs this process may run on
    double idle = 0;    // of those, cores idle over the last sample (our workers' time included)
    int jobs = 1;       // GPU jobs in flight in this process
    int workers = 0;    // worker threads that exist
};
int copy_workers_for(const CopyLoad &l);

// /proc/stat ticks summed over our CPUs, and our workers' awake ns, at one time.
struct LoadSample {
    uint64_t idle = 0, total = 0; // ticks: idle (idle + iowait), all
    int64_t ours = 0, at = 0;     // workers' awake ns, and when (steady ns)
    int cpus = 0;                 // CPUs the sums cover (0: no sample yet, i.e. boot)
};
// Cores idle between *last and cur (our workers' time counted idle), and
// cur becomes *last; -1 when less than a tick per CPU has passed (*last kept)
// or when the sums went down or the CPU count changed (a CPU offline, a
// cpuset changed: cur is the new baseline).
double copy_load_idle(LoadSample *last, const LoadSample &cur);

// One sample of the load since the previous one (the first: since boot),
// run by one thread at a time: the workers copy_workers_for() allows now, or
// -1 when less than a tick per CPU has passed (too little to judge) or the
// sums went down (copy_load_idle: a new baseline).  now:
// steady ns; ours: the workers' awake ns so far; workers: how many exist;
// jobs: the GPU jobs in flight.  Without /proc/stat: all the workers.
int copy_load_sample(int64_t now, int64_t ours, int workers, const std::atomic<int> &jobs);

} // namespace gpuaes

#endif
