// enqueue_cost.cu - what enqueuing one staging chunk costs the calling thread:
// each CUDA call of a chunk (H2D, kernel launch, D2H, event record) timed on
// the host, with 1, 2 and 4 threads enqueuing at once (gpuaesd runs up to 4
// jobs), from pinned memory (cudaMallocHost, the in-process lanes) and from a
// registered memfd mapping (cudaHostRegister, gpuaesd's client segments).
// Inside gpuaesd a chunk's enqueue took 13-30 us and a 2 MiB piece alone
// 194-436 us in 5 chunks (bench/results/README.md, earlier runs: final-checks-426f6d5, call A): is it
// the calls themselves, the driver's lock between threads, or the
// registered memory's lookup?  None of them (H200, bench/results/
// final-checks-aacff00 call A): an enqueue's four calls take 7-15 us
// (medians, 1-4 threads), from registered memory as from pinned.
//
//   nvcc -O3 -std=c++17 -arch=sm_90 enqueue_cost.cu -o enqueue_cost && ./enqueue_cost [ITERS]
//
// Per (memory, threads, chunk): the median and 90th percentile over every
// thread's iterations of each call, of the four together (the enqueue), and of
// the chunk's round trip (enqueue to its event complete, polled), in us.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <thread>
#include <vector>

#include <cuda_runtime.h>

#include "cuda_check.h"

static double now_us()
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

__global__ void xor_kernel(const uint4 *in, uint4 *out, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = in[i];
        v.x ^= 0x5a5a5a5a;
        out[i] = v;
    }
}

enum { kH2D, kLaunch, kD2H, kRecord, kEnqueue, kRoundTrip, kKinds };
static const char *const kNames[kKinds] = { "H2D", "launch", "D2H", "record", "enqueue", "round trip" };

struct Worker {
    unsigned char *host = nullptr; // this thread's slice of the host buffer
    size_t chunk = 0;
    int iters = 0;
    pthread_barrier_t *start = nullptr;
    std::vector<double> t[kKinds];
};

static void run(Worker *w)
{
    cudaStream_t st;
    cudaEvent_t ev;
    void *din, *dout;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    CK(cudaMalloc(&din, w->chunk));
    CK(cudaMalloc(&dout, w->chunk));
    pthread_barrier_wait(w->start);
    const size_t n16 = w->chunk / 16;
    for (int i = 0; i < w->iters; i++) {
        const double t0 = now_us();
        CK(cudaMemcpyAsync(din, w->host, w->chunk, cudaMemcpyHostToDevice, st));
        const double t1 = now_us();
        xor_kernel<<<264, 256, 0, st>>>(static_cast<const uint4 *>(din), static_cast<uint4 *>(dout), n16);
        CK(cudaGetLastError());
        const double t2 = now_us();
        CK(cudaMemcpyAsync(w->host, dout, w->chunk, cudaMemcpyDeviceToHost, st));
        const double t3 = now_us();
        CK(cudaEventRecord(ev, st));
        const double t4 = now_us();
        cudaError_t e;
        while ((e = cudaEventQuery(ev)) == cudaErrorNotReady) {
        }
        CK(e);
        const double t5 = now_us();
        if (i == 0) continue; // the first of each thread pays one-time costs
        w->t[kH2D].push_back(t1 - t0);
        w->t[kLaunch].push_back(t2 - t1);
        w->t[kD2H].push_back(t3 - t2);
        w->t[kRecord].push_back(t4 - t3);
        w->t[kEnqueue].push_back(t4 - t0);
        w->t[kRoundTrip].push_back(t5 - t0);
    }
    CK(cudaFree(din));
    CK(cudaFree(dout));
    CK(cudaEventDestroy(ev));
    CK(cudaStreamDestroy(st));
}

static double pct(std::vector<double> &v, double p)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[std::min(v.size() - 1, (size_t)(p * (v.size() - 1) + 0.5))];
}

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? std::atoi(argv[1]) : 200;
    const size_t chunks[] = { size_t(256) << 10, size_t(1) << 20, size_t(4) << 20 };
    const int threads[] = { 1, 2, 4 };
    const size_t max_chunk = size_t(4) << 20, total = 4 * max_chunk;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    std::printf("# enqueue_cost: %s, %d iterations a thread (the first left out), us\n", prop.name, iters);
    std::printf("%-10s %3s %6s", "memory", "thr", "chunk");
    for (const char *n : kNames) std::printf(" %17s", n);
    std::printf("\n%-10s %3s %6s", "", "", "");
    for (int k = 0; k < kKinds; k++) std::printf(" %17s", "median / p90");
    std::printf("\n");
    for (int registered = 0; registered < 2; registered++) {
        unsigned char *host;
        int fd = -1;
        if (registered) { // as gpuaesd maps a client's segment
            fd = memfd_create("enqueue_cost", MFD_CLOEXEC);
            if (fd < 0 || ftruncate(fd, (off_t)total) != 0) { std::perror("memfd"); return 1; }
            void *p = mmap(nullptr, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (p == MAP_FAILED) { std::perror("mmap"); return 1; }
            host = static_cast<unsigned char *>(p);
            std::memset(host, 1, total);
            CK(cudaHostRegister(host, total, cudaHostRegisterDefault));
        } else {
            CK(cudaMallocHost(&host, total));
            std::memset(host, 1, total);
        }
        for (int nt : threads) {
            for (size_t chunk : chunks) {
                pthread_barrier_t bar;
                pthread_barrier_init(&bar, nullptr, (unsigned)nt);
                std::vector<Worker> w(nt);
                std::vector<std::thread> th;
                for (int i = 0; i < nt; i++) {
                    w[i].host = host + i * max_chunk;
                    w[i].chunk = chunk;
                    w[i].iters = iters;
                    w[i].start = &bar;
                    th.emplace_back(run, &w[i]);
                }
                for (auto &t : th) t.join();
                pthread_barrier_destroy(&bar);
                std::printf("%-10s %3d %5zuK", registered ? "registered" : "pinned", nt, chunk >> 10);
                for (int k = 0; k < kKinds; k++) {
                    std::vector<double> all;
                    for (auto &x : w) all.insert(all.end(), x.t[k].begin(), x.t[k].end());
                    std::printf(" %8.1f / %6.1f", pct(all, 0.5), pct(all, 0.9));
                }
                std::printf("\n");
            }
        }
        if (registered) {
            CK(cudaHostUnregister(host));
            munmap(host, total);
            close(fd);
        } else {
            CK(cudaFreeHost(host));
        }
    }
    return 0;
}
