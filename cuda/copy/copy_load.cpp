// copy_load.cpp - the copy pool's load rule and its samples of /proc/stat
// (see copy_load.h).
#include "copy/copy_load.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sched.h>
#include <unistd.h>

namespace gpuaes {
namespace {

// /proc/stat's ticks, summed over the CPUs in `set`: idle (idle + iowait)
// and all (user nice system idle iowait irq softirq steal).  False when
// unreadable (no /proc): no load rule then.
bool read_cpu_ticks(const cpu_set_t &set, uint64_t *idle, uint64_t *total)
{
    FILE *f = std::fopen("/proc/stat", "re");
    if (f == nullptr) return false;
    char line[512];
    uint64_t id = 0, all = 0;
    bool any = false;
    while (std::fgets(line, sizeof line, f) != nullptr) {
        if (std::strncmp(line, "cpu", 3) != 0) break; // the cpu lines come first
        if (line[3] < '0' || line[3] > '9') continue; // the all-CPU line
        char *p = line + 3;
        const unsigned long cpu = std::strtoul(p, &p, 10);
        if (cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &set)) continue;
        uint64_t v[8];
        for (uint64_t &x : v) x = std::strtoull(p, &p, 10);
        id += v[3] + v[4];
        for (uint64_t x : v) all += x;
        any = true;
    }
    std::fclose(f);
    *idle = id;
    *total = all;
    return any;
}


LoadSample g_last; // the previous sample (g_sampling); none yet: since boot

} // namespace

double copy_load_idle(LoadSample *last, const LoadSample &cur)
{
    // A CPU gone offline or a shrunk cpuset lowers the sums (and a changed
    // set makes them incomparable): judging against the old baseline would
    // wait until the new sums catch up (hours), so start again from here.
    if ((last->cpus != 0 && cur.cpus != last->cpus) || cur.total < last->total || cur.idle < last->idle) {
        *last = cur;
        return -1;
    }
    // Less than a tick per CPU since the last sample: too little to judge.
    if (cur.total < last->total + (uint64_t)cur.cpus) return -1;
    double idle = cur.cpus * (double)(cur.idle - last->idle) / (double)(cur.total - last->total);
    // Our own workers' time shows as busy; it is theirs to use.
    if (last->at != 0 && cur.at > last->at && cur.ours >= last->ours)
        idle += (double)(cur.ours - last->ours) / (double)(cur.at - last->at);
    *last = cur;
    return idle;
}

int copy_load_sample(int64_t now, int64_t ours, int workers, const std::atomic<int> &jobs)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
    if (cpus <= 0) {
        const long c = sysconf(_SC_NPROCESSORS_ONLN);
        cpus = c > 0 && c < CPU_SETSIZE ? (int)c : 1;
        CPU_ZERO(&set);
        for (int i = 0; i < cpus; ++i) CPU_SET(i, &set);
    }
    LoadSample cur;
    cur.at = now;
    cur.ours = ours;
    cur.cpus = cpus;
    if (!read_cpu_ticks(set, &cur.idle, &cur.total)) return workers;
    CopyLoad l;
    l.cpus = cpus;
    l.idle = copy_load_idle(&g_last, cur);
    if (l.idle < 0) return -1;
    l.jobs = jobs.load(std::memory_order_relaxed);
    l.workers = workers;
    return copy_workers_for(l);
}


int copy_workers_for(const CopyLoad &l)
{
    const double spare = std::min(l.idle, (double)l.cpus) - kCopyHeadroom;
    int n = spare > 0 ? (int)spare : 0;
    n = std::min(n, kCopiers - std::max(l.jobs, 1)); // each job's owner copies too
    n = std::min(n, l.workers);
    return n > 0 ? n : 0;
}

} // namespace gpuaes
