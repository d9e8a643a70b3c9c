// copy_cpu.cpp - what the staging copy pool (cuda/copy/copy_pool.cpp) costs in
// CPU time, not just wall time: N concurrent "jobs", each a loop of staging-
// like chunks (copy-in, a gap while "the GPU" works, copy-out), optionally
// with every core kept busy by other processes.  No GPU needed.
//
//   g++ -O2 -std=c++17 -pthread -Icuda -Iinclude bench/probe/copy_cpu.cpp
//       cuda/copy/copy_pool.cpp cuda/copy/copy_part.cpp cuda/copy/copy_load.cpp cuda/runtime/gpu_settings.cpp -o copy_cpu [-DCOPY_AUTO]
// (-DOLD_POOL: built against an older copy_pool.cpp, for before/after.)
//   ./copy_cpu THREADS JOBS [BURNERS] [SECONDS] [GAP_US]
//
// THREADS: copy threads counting the owner (GPUAES_COPY_THREADS; with
// -DCOPY_AUTO the load rule decides how many of them copy).  JOBS: owner
// threads.  BURNERS: other processes spinning on arithmetic (their work rate
// against a run without copies shows what the pool takes from them).
// Prints one line: wall GB/s (bytes copied in and out), process CPU seconds
// per GB (getrusage, every thread of this process: what `openssl speed`
// divides by), and the burners' rate relative to running alone.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <csignal>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include "copy/copy_pool.h"
#include "gpuaes_gpu.h"

using clk = std::chrono::steady_clock;

namespace {

constexpr size_t kChunk = size_t(1) << 20; // one staging chunk
constexpr int kChunks = 8;                 // per job: an 8 MiB update

double cpu_s()
{
    rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           r.ru_stime.tv_usec * 1e-6;
}

// Burner processes: each counts rounds of arithmetic into count[i].
std::vector<pid_t> start_burners(int n, volatile unsigned long *count)
{
    std::vector<pid_t> pids;
    for (int i = 0; i < n; ++i) {
        const pid_t p = fork();
        if (p == 0) {
            unsigned long x = 1;
            for (;;) {
                for (int k = 0; k < 100000; ++k) x = x * 6364136223846793005ul + 1442695040888963407ul;
                count[i] += 1;
                if (x == 42) count[i] = 0; // keeps the loop
            }
        }
        pids.push_back(p);
    }
    return pids;
}

unsigned long total(volatile unsigned long *count, int n)
{
    unsigned long s = 0;
    for (int i = 0; i < n; ++i) s += count[i];
    return s;
}

void stop_burners(const std::vector<pid_t> &pids)
{
    for (pid_t p : pids) kill(p, SIGKILL);
    for (pid_t p : pids) waitpid(p, nullptr, 0);
}

} // namespace

int main(int argc, char **argv)
{
    if (argc < 3) {
        std::fprintf(stderr, "usage: %s THREADS JOBS [BURNERS] [SECONDS] [GAP_US]\n", argv[0]);
        return 2;
    }
    const int threads = std::atoi(argv[1]), jobs = std::atoi(argv[2]);
    const int burners = argc > 3 ? std::atoi(argv[3]) : 0;
    const double seconds = argc > 4 ? std::atof(argv[4]) : 2.0;
    const int gap_us = argc > 5 ? std::atoi(argv[5]) : 200;

    auto *count = static_cast<volatile unsigned long *>(
        mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
    double alone = 0;
    std::vector<pid_t> pids = start_burners(burners, count);
    if (burners > 0) { // the burners' rate with no copies
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const unsigned long a = total(count, burners);
        std::this_thread::sleep_for(std::chrono::milliseconds((long)(seconds * 500)));
        alone = (double)(total(count, burners) - a) / (seconds * 0.5);
    }

#ifdef COPY_AUTO
    gpuaes::copy_pool_test_auto_threads(threads);
#else
    gpuaes_gpu_settings s = GPUAES_GPU_SETTINGS_DEFAULT;
    s.copy_threads = threads;
    gpuaes_gpu_configure(&s);
#endif
    std::atomic<bool> quit{false};
    std::atomic<unsigned long long> bytes{0};
    std::vector<std::thread> th;
    const unsigned long b0 = total(count, burners);
    const double c0 = cpu_s();
    const auto t0 = clk::now();
    for (int j = 0; j < jobs; ++j)
        th.emplace_back([&] {
            std::vector<unsigned char> in(kChunk * kChunks, 1), out(kChunk * kChunks), pin(kChunk);
            while (!quit.load(std::memory_order_relaxed)) {
                gpuaes::copy_pool_enter();
                for (int c = 0; c < kChunks; ++c) {
                    gpuaes::CopyTask t;
                    gpuaes::copy_start(&t, pin.data(), in.data() + c * kChunk, kChunk, 0);
                    gpuaes::copy_wait(&t);
                    std::this_thread::sleep_for(std::chrono::microseconds(gap_us)); // "the GPU"
                    gpuaes::copy_start(&t, out.data() + c * kChunk, pin.data(), kChunk,
                                       gpuaes::kCopyUrgent | gpuaes::kCopyStream);
                    gpuaes::copy_wait(&t);
                }
                gpuaes::copy_pool_leave();
                bytes.fetch_add(2 * kChunk * kChunks, std::memory_order_relaxed);
            }
        });
    std::this_thread::sleep_for(std::chrono::milliseconds((long)(seconds * 1000)));
    quit = true;
    for (auto &x : th) x.join();
    const double wall = std::chrono::duration<double>(clk::now() - t0).count();
    const double cpu = cpu_s() - c0;
    const unsigned long b1 = total(count, burners);
#ifdef OLD_POOL // the pool before the load rule (for comparisons): every worker copies
    const int allowed = gpuaes::copy_pool_workers(), workers = allowed;
#else
    const int allowed = gpuaes::copy_pool_allowed(), workers = gpuaes::copy_pool_workers();
#endif
    gpuaes::copy_pool_stop(true);
    stop_burners(pids);
    const double gb = (double)bytes.load() / 1e9;
    std::printf("threads=%d jobs=%d burners=%d gap_us=%d: %.2f GB/s, cpu %.3f s in %.2f s wall = %.3f cpu s/GB"
                " (%.2f cores); workers %d, allowed at end %d",
                threads, jobs, burners, gap_us, gb / wall, cpu, wall, cpu / gb, cpu / wall, workers, allowed);
    if (burners > 0) std::printf("; burners at %.0f %% of their rate alone", 100.0 * (double)(b1 - b0) / wall / alone);
    std::printf("\n");
    return 0;
}
