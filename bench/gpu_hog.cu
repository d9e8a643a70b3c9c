// gpu_hog.cu - "another process holds most of the GPU's device memory"
// (issue 13): allocates and touches device memory until cudaMemGetInfo
// reports at most --free-mib MiB free, says so on stdout, and holds it until
// its stdin closes, it gets SIGTERM/SIGINT, or --max-seconds pass (so that a
// hog whose driver died never keeps the GPU for long).
// bench/mem_pressure.sh drives it.
//
//   gpu_hog [--free-mib N] [--device D] [--max-seconds S]   (559, 0, 900)
//
// stdout: one line, "gpu_hog: ready free_mib=<free now> held_mib=<held>",
// flushed; everything else goes to stderr.  Exit status: 0 after a normal
// release, 1 if the target cannot be reached or a CUDA call fails, 2 if there
// is no CUDA device (or a usage error).
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <poll.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime.h>

#include "probe/cuda_check.h"

namespace {

constexpr size_t kMiB = size_t(1) << 20;
// Big chunks first (few calls), then smaller ones to land just under the target.
constexpr size_t kChunks[] = {1024 * kMiB, 256 * kMiB, 64 * kMiB, 16 * kMiB, 4 * kMiB, 1 * kMiB};

volatile sig_atomic_t g_stop = 0;

void on_signal(int) { g_stop = 1; }

constexpr const char kUsage[] = "usage: gpu_hog [--free-mib N] [--device D] [--max-seconds S]\n";

[[noreturn]] void usage_exit(const char *why)
{
    std::fprintf(stderr, "gpu_hog: %s\n%s", why, kUsage);
    std::exit(2);
}

double now_s()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

long parse_nonneg(const char *opt, const char *s)
{
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0 || v > INT_MAX) {
        std::fprintf(stderr, "gpu_hog: %s: bad value '%s'\n", opt, s);
        std::exit(2);
    }
    return v;
}

size_t free_bytes()
{
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    return f;
}

// Blocks until stdin reaches EOF (or errors), a signal asks us to stop, or
// max_s pass.  poll with a timeout, so a signal between the check and the
// wait is seen.
void wait_for_release(double max_s)
{
    char buf[256];
    const double end = now_s() + max_s;
    while (!g_stop) {
        if (now_s() >= end) {
            std::fprintf(stderr, "gpu_hog: --max-seconds %.0f passed: releasing\n", max_s);
            return;
        }
        struct pollfd p = {STDIN_FILENO, POLLIN, 0};
        int n = poll(&p, 1, 200);
        if (n < 0) {
            if (errno == EINTR) continue;
            std::perror("gpu_hog: poll(stdin)");
            return;
        }
        if (n == 0) continue;
        ssize_t r = read(STDIN_FILENO, buf, sizeof buf); // input is ignored; EOF releases
        if (r == 0) return;
        if (r < 0 && errno != EINTR && errno != EAGAIN) {
            std::perror("gpu_hog: read(stdin)");
            return;
        }
    }
}

} // namespace

int main(int argc, char **argv)
{
    long target_mib = 559, device = 0, max_s = 900;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help") == 0) {
            std::fputs(kUsage, stdout);
            return 0;
        }
        if (i + 1 >= argc) usage_exit("missing value or unknown option");
        if (std::strcmp(argv[i], "--free-mib") == 0)
            target_mib = parse_nonneg(argv[i], argv[i + 1]);
        else if (std::strcmp(argv[i], "--device") == 0)
            device = parse_nonneg(argv[i], argv[i + 1]);
        else if (std::strcmp(argv[i], "--max-seconds") == 0)
            max_s = parse_nonneg(argv[i], argv[i + 1]);
        else
            usage_exit("unknown option");
        i++;
    }

    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, nullptr) != 0 || sigaction(SIGINT, &sa, nullptr) != 0) {
        std::perror("gpu_hog: sigaction");
        return 1;
    }

    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0) {
        std::fprintf(stderr, "gpu_hog: no CUDA device (%s): nothing to hold\n",
                     e != cudaSuccess ? cudaGetErrorString(e) : "device count 0");
        return 2;
    }
    if (device >= ndev) {
        std::fprintf(stderr, "gpu_hog: --device %ld: only %d device(s)\n", device, ndev);
        return 2;
    }
    CK(cudaSetDevice(static_cast<int>(device)));
    CK(cudaFree(nullptr)); // the context first: its own memory counts as taken

    const size_t target = static_cast<size_t>(target_mib) * kMiB;
    std::vector<void *> held;
    size_t held_bytes = 0;
    size_t ci = 0; // index into kChunks: only ever moves to smaller chunks
    for (size_t f = free_bytes(); f > target && !g_stop; f = free_bytes()) {
        // The largest chunk that keeps free >= target; the 1 MiB chunk is the
        // last step across it (the driver's granularity may take up to 2 MiB).
        while (ci + 1 < sizeof kChunks / sizeof kChunks[0] && kChunks[ci] > f - target) ci++;
        void *p = nullptr;
        e = cudaMalloc(&p, kChunks[ci]);
        if (e == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError(); // not sticky: clear it and try a smaller chunk
            if (ci + 1 < sizeof kChunks / sizeof kChunks[0]) {
                ci++;
                continue;
            }
            std::fprintf(stderr,
                         "gpu_hog: cannot reach free <= %ld MiB: a 1 MiB cudaMalloc failed with %zu MiB "
                         "still free (%zu MiB held)\n",
                         target_mib, f / kMiB, held_bytes / kMiB);
            for (void *q : held) CK(cudaFree(q));
            return 1;
        }
        CK(e);
        held.push_back(p);
        held_bytes += kChunks[ci];
        CK(cudaMemset(p, 0xa5, kChunks[ci])); // touched: backed by real pages
    }
    CK(cudaDeviceSynchronize());
    if (g_stop) {
        std::fprintf(stderr, "gpu_hog: stopped before reaching the target\n");
        for (void *q : held) CK(cudaFree(q));
        return 1;
    }

    const size_t f = free_bytes();
    if (held.empty())
        std::fprintf(stderr, "gpu_hog: note: free memory was already <= %ld MiB; holding nothing\n", target_mib);
    std::printf("gpu_hog: ready free_mib=%zu held_mib=%zu\n", f / kMiB, held_bytes / kMiB);
    std::fflush(stdout);

    wait_for_release(double(max_s));
    for (void *q : held) CK(cudaFree(q));
    std::fprintf(stderr, "gpu_hog: released %zu MiB\n", held_bytes / kMiB);
    return 0;
}
