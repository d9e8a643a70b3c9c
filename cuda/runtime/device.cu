// device.cu - choosing the GPU: lazy initialisation in the background,
// environment switches, fork safety, and the description string.
//
// Start-up: CUDA initialisation and context creation cost 0.2-0.9 s and
// ~0.5 GiB of device memory.  They run on a gpuaes-owned thread, started by
// the first call to gpuaes_gpu_available() or gpuaes_gpu_wait(), neither of
// which the layer makes on its own.  gpuaes_gpu_available() never blocks.
// The provider (provider/gpu/offload.c, offload_gpu_up) starts the GPU only once
// the process has done gpu_start_bytes of work the GPU could take, and the
// call that crosses that mark waits for the start-up (gpuaes_gpu_wait).  A
// process that never crosses it never touches CUDA.
//
// Exit: quiesce_at_exit() below, run by module_exit.h before any other exit
// handler of the module (the CUDA runtime's teardown among them).
//
// Fork: CUDA cannot be used in a child forked after the parent initialised
// it (the driver state is not duplicated; calls may fail or hang).  Our
// part of the module's pthread_atfork child handler (runtime/fork_child.h),
// registered when the library is loaded, records whether this process had
// touched CUDA (or begun to, on the init thread); if so the child never
// makes another CUDA call and reports no GPU.
// If not, the child may initialise on its own.  The handler also re-creates
// our locks, since a parent thread may have held one at fork() time and no
// such thread exists in the child.
#include <atomic>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>

#include <cuda_runtime.h>

#include "kernels/aes_kernels.cuh"
#include "copy/copy_pool.h"
#include "runtime/cuda_guest.h"
#include "runtime/fault.h"
#include "runtime/gpu_settings.h"
#include "runtime/device.h"
#include "keystream/ks_windows.h"
#include "runtime/lifecycle.h"
#include "staging/slot_pool.h"
#include "gpuaes_gpu.h"
#include "staging/host_register.h"
#include "runtime/layer_gate.h"
#include "runtime/module_exit.h"
#include "kernels/pdl.cuh"
#include "runtime/clock.h"
#include "runtime/fork_child.h"
#include "runtime/poll_wait.h"
#include "runtime/quiet_thread.h"

namespace gpuaes {
namespace {

constexpr const char kForkMsg[] = "CUDA was initialised before fork(); this child process uses the CPU";

// Initialisation: none -> running (the init thread) -> done.
enum InitState : int { kInitNone, kInitRunning, kInitDone };
pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_init_cv = PTHREAD_COND_INITIALIZER; // broadcast when done
std::atomic<int> g_init_state{kInitNone};
pthread_t g_init_thread;
bool g_init_joinable = false; // under g_init_lock
std::atomic<bool> g_cuda_touched{false};     // a CUDA call was made (or begun) in this process
std::atomic<bool> g_child_after_cuda{false}; // we are a child forked after that
std::atomic<bool> g_closed_at_exit{false};   // the exit-time release closed the layer: no new job
std::atomic<bool> g_atfork_registered{false};
std::atomic<bool> g_broken_claimed{false};
std::atomic<const char *> g_broken_desc{nullptr};

// Written by do_init() on the init thread before g_init_state is kInitDone
// (release); read after seeing it (acquire).
bool g_usable = false;
int g_device = 0;
std::atomic<int> g_device_count{0}; // cudaGetDeviceCount's answer at the start-up
int g_cc = 0; // compute capability, 10 * major + minor
Fault g_fault = Fault::none;
char g_desc[256] = "no usable GPU: not initialised";
char g_broken_buf[256];

void on_fork_child()
{
    // The init thread does not exist in the child: if it had begun, CUDA
    // was touched, and the child stays on the CPU.
    if (g_init_state.load() == kInitRunning) g_cuda_touched.store(true);
    if (g_cuda_touched.load()) g_child_after_cuda.store(true);
    pthread_mutex_init(&g_init_lock, nullptr);
    pthread_cond_init(&g_init_cv, nullptr);
    g_init_joinable = false;
    if (g_init_state.load() == kInitRunning) g_init_state.store(kInitDone);
    // Then each part of the layer re-creates its own locks (independent of
    // each other); the copy pool's reset follows (runtime/fork_child.h).
    staging_atfork_child();
    idle_release_atfork_child();
    keystream_atfork_child();
    layer_atfork_child();
    host_ranges_atfork_child();
}

// The module's one fork handler (runtime/fork_child.h) runs the layer's
// resets, then the copy pool's: in every child, whether or not the pool
// was started (a release may hold its locks at fork() time).
void register_atfork_once()
{
    bool expected = false;
    if (g_atfork_registered.compare_exchange_strong(expected, true)) {
        fork_child_add(ForkReset::gpu_layer, on_fork_child);
        copy_pool_atfork_install();
    }
}

std::atomic<bool> g_exit_began{false}; // exit or dlclose began: nothing starts any more

bool exit_began() { return g_exit_began.load(std::memory_order_relaxed); }

// How long exit waits for CUDA calls under way (the init thread's, jobs'):
// the call in progress is at most a cold cuInit or a context creation
// (0.2-0.9 s, GPU_FACTS.md), a job's chunk far less.
constexpr int64_t kExitWaitNs = int64_t(2) * 1000 * 1000 * 1000;

// Joins t unless the monotonic clock passes `until` first.
bool join_until(pthread_t t, int64_t until)
{
    for (;;) {
        if (pthread_tryjoin_np(t, nullptr) == 0) return true;
        if (mono_ns() >= until) return false;
        sleep_ns(kExitWaitStepNs);
    }
}

// The module's first exit handler (module_exit.h), at exit or dlclose,
// whatever the order in which the CUDA runtime and OpenSSL registered
// theirs.  Stops the start-up at its next step (do_init checks between CUDA
// calls) and waits for it, closes the layer to new jobs and waits for those
// under way, then gives back what the layer holds.  Every wait is bounded:
// a thread still inside CUDA after kExitWaitNs makes the answer false, and
// module_exit then skips the runtime's teardown (run under a thread inside
// the runtime, it hung or crashed the process on the H200) and keeps the
// module mapped.  True: nothing of CUDA is under way or to come.
bool quiesce_at_exit()
{
    g_exit_began.store(true); // start_init starts nothing from now on
    if (g_child_after_cuda.load()) return false; // the parent's CUDA: not one call, no teardown
    const int64_t until = mono_ns() + kExitWaitNs;
    pthread_mutex_lock(&g_init_lock);
    const bool join = g_init_joinable;
    g_init_joinable = false;
    pthread_mutex_unlock(&g_init_lock);
    if (join && !join_until(g_init_thread, until)) return false;
    if (!g_cuda_touched.load()) {
        copy_pool_stop(true); // the service backend's copy threads (gpuaes_host_copy), if any
        return true;
    }
    g_closed_at_exit.store(true); // gpuaes_gpu_available() answers 0: new jobs get BUSY
    const bool quiet = layer_close(until - mono_ns());
    // Threads joined, slots and windows wiped and freed except those other
    // threads still use (lifecycle.h).
    gpu_resources_release(true);
    return quiet && !keystream_in_use();
}

// At load: fork() before the first use is covered too, and the module's
// exit order is in place before the CUDA runtime registers anything.
struct AtLoad {
    AtLoad()
    {
        register_atfork_once();
        module_exit_install(quiesce_at_exit);
    }
} g_at_load;

void do_init()
{
    const gpuaes_gpu_settings s = gpu_settings(); // parsed and range-checked by the provider
    if (s.disable_gpu) {
        std::snprintf(g_desc, sizeof g_desc, "disabled by GPUAES_DISABLE_GPU");
        return;
    }
    static_assert((int)GPUAES_FAULT_SYNC == (int)Fault::sync && (int)GPUAES_FAULT_ALLOC == (int)Fault::alloc,
                  "gpuaes_fault and Fault disagree");
    g_fault = static_cast<Fault>(s.fault);
    const int dev = s.device;

    g_cuda_touched.store(true); // from here on a forked child must keep off CUDA
    if (exit_began()) return;
    CudaInitGuest guest; // context and error state as found at every return (harmless on our own thread)
    // libcuda registers exit handlers of its own when it is loaded and when
    // it initialises: the module's must stay newer, to run first (the
    // runtime's dlopen of it later only counts a reference).
    (void)dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    module_exit_register_again();
    if (exit_began()) return;
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    module_exit_register_again();
    if (e == cudaSuccess) g_device_count.store(count);
    if (e != cudaSuccess) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: %s", cudaGetErrorString(e));
        return;
    }
    if (count <= 0) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: no CUDA device");
        return;
    }
    if (dev >= count) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: GPUAES_DEVICE=%d but there %s %d CUDA device%s", dev,
                      count == 1 ? "is" : "are", count, count == 1 ? "" : "s");
        return;
    }
    if (exit_began()) return;
    cudaDeviceProp prop;
    e = cudaGetDeviceProperties(&prop, dev);
    if (e != cudaSuccess) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: cudaGetDeviceProperties: %s", cudaGetErrorString(e));
        return;
    }
    prop.name[sizeof prop.name - 1] = '\0';
    if (prop.major * 10 + prop.minor < 75) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: %.96s (sm_%d%d), device %d: compute capability 7.5 or newer needed",
                      prop.name, prop.major, prop.minor, dev);
        return;
    }
    if (exit_began()) return;
    e = cudaSetDevice(dev);
    if (e == cudaSuccess) e = cudaFree(nullptr); // creates the context now, not in the first job
    if (e != cudaSuccess) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: device %d: %s", dev, cudaGetErrorString(e));
        return;
    }
    if (!guest.adopt_primary()) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: device %d: cuCtxGetCurrent/cuCtxSetCurrent not available", dev);
        return;
    }
    if (exit_began()) return;
    e = kernels_init(prop.multiProcessorCount);
    if (e != cudaSuccess) {
        std::snprintf(g_desc, sizeof g_desc, "no usable GPU: %.96s (sm_%d%d), device %d: kernel setup: %.96s", prop.name,
                      prop.major, prop.minor, dev, cudaGetErrorString(e));
        return;
    }
    const double gib = (double)prop.totalGlobalMem / (1024.0 * 1024.0 * 1024.0);
    std::snprintf(g_desc, sizeof g_desc, "%.96s (sm_%d%d, %d SMs, %.0f GiB), device %d", prop.name, prop.major, prop.minor,
                  prop.multiProcessorCount, gib, dev);
    g_device = dev;
    g_cc = prop.major * 10 + prop.minor;
    g_usable = true;
}

void finish_init()
{
    pthread_mutex_lock(&g_init_lock);
    g_init_state.store(kInitDone, std::memory_order_release);
    pthread_cond_broadcast(&g_init_cv);
    pthread_mutex_unlock(&g_init_lock);
}

void *init_thread_main(void *)
{
    const int64_t t0 = mono_ns();
    do_init();
    module_exit_register_again(); // after every library the start-up loaded
    if (g_usable) { // how long the start-up took, for the description
        const double s = (double)(mono_ns() - t0) / 1e9;
        const size_t n = std::strlen(g_desc);
        std::snprintf(g_desc + n, sizeof g_desc - n, ", started in %.2f s", s);
    }
    finish_init();
    return nullptr;
}

// Starts the initialisation once, in the background; never waits for it.
void start_init()
{
    if (g_init_state.load(std::memory_order_acquire) != kInitNone) return;
    register_atfork_once();
    pthread_mutex_lock(&g_init_lock);
    if (g_init_state.load(std::memory_order_relaxed) == kInitNone && !exit_began()) {
        g_init_state.store(kInitRunning, std::memory_order_relaxed);
        // The init thread takes no signals: they are the application's.
        g_init_joinable = start_quiet_thread(&g_init_thread, init_thread_main, nullptr, nullptr);
        if (!g_init_joinable) {
            std::snprintf(g_desc, sizeof g_desc, "no usable GPU: could not start the initialisation thread");
            g_init_state.store(kInitDone, std::memory_order_release);
            pthread_cond_broadcast(&g_init_cv);
        }
    }
    pthread_mutex_unlock(&g_init_lock);
}

// Starts the initialisation if needed and waits until it is over.
void wait_init()
{
    start_init();
    if (g_init_state.load(std::memory_order_acquire) == kInitDone) return;
    pthread_mutex_lock(&g_init_lock);
    while (g_init_state.load(std::memory_order_relaxed) != kInitDone) pthread_cond_wait(&g_init_cv, &g_init_lock);
    pthread_mutex_unlock(&g_init_lock);
}

bool ready() { return g_init_state.load(std::memory_order_acquire) == kInitDone; }

} // namespace

int gpu_device() { return g_device; }
Fault gpu_fault() { return g_fault; }
bool cuda_forbidden() { return g_child_after_cuda.load(); }
bool gpu_broken() { return g_broken_desc.load(std::memory_order_acquire) != nullptr; }

bool error_is_fatal(cudaError_t e)
{
    switch (e) {
    case cudaSuccess:
    case cudaErrorMemoryAllocation:     // out of (pinned or device) memory: try again later
    case cudaErrorInvalidValue:
    case cudaErrorLaunchOutOfResources:
    case cudaErrorInvalidConfiguration:
    case cudaErrorNotReady:
        return false;
    default:
        return true; // sticky (illegal address, launch failure, ...) or unknown: stop using the GPU
    }
}

int current_device_cc()
{
    static std::atomic<int> cache[16]; // per device: 0 unknown, else 10 * major + minor
    int dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 16) return 0; // error cleared by the CudaGuest
    int c = cache[dev].load(std::memory_order_relaxed);
    if (c == 0) {
        int major = 0, minor = 0;
        if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
            cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess)
            c = major * 10 + minor;
        cache[dev].store(c, std::memory_order_relaxed);
    }
    return c;
}

bool pdl_ok()
{
    return GPUAES_PDL && current_device_cc() >= 90;
}

void mark_gpu_broken(const char *why)
{
    bool expected = false;
    if (!g_broken_claimed.compare_exchange_strong(expected, true)) return;
    std::snprintf(g_broken_buf, sizeof g_broken_buf, "GPU disabled after a CUDA error: %s", why);
    g_broken_desc.store(g_broken_buf, std::memory_order_release);
}

} // namespace gpuaes

extern "C" int gpuaes_gpu_available(void)
{
    using namespace gpuaes;
    if (g_child_after_cuda.load()) return 0;
    if (!ready()) {
        start_init(); // the CPU serves this call; the GPU, once it is up
        return 0;
    }
    return g_usable && !gpu_broken() && !g_closed_at_exit.load() ? 1 : 0;
}

extern "C" int gpuaes_gpu_wait(void)
{
    using namespace gpuaes;
    if (g_child_after_cuda.load()) return 0;
    wait_init();
    return gpuaes_gpu_available();
}

extern "C" int gpuaes_gpu_supports(gpuaes_op op)
{
    using namespace gpuaes;
    if (!gpuaes_gpu_available()) return 0;
    const bool gcm = op == GPUAES_GCM_ENCRYPT || op == GPUAES_GCM_DECRYPT;
    return !gcm || g_cc >= 80 ? 1 : 0; // ghash_mma.cuh: mma .b1 .and.popc m16n8k256 needs sm_80
}

extern "C" const char *gpuaes_gpu_description(void)
{
    using namespace gpuaes;
    if (g_child_after_cuda.load()) return kForkMsg;
    wait_init();
    const char *broken = g_broken_desc.load(std::memory_order_acquire);
    return broken != nullptr ? broken : g_desc;
}

extern "C" int gpuaes_gpu_started(void) { return gpuaes::ready() ? 1 : 0; }

extern "C" int gpuaes_gpu_device_count(void) { return gpuaes::ready() ? gpuaes::g_device_count.load() : 0; }

extern "C" const char *gpuaes_gpu_state(void)
{
    using namespace gpuaes;
    if (g_child_after_cuda.load()) return kForkMsg;
    switch (g_init_state.load(std::memory_order_acquire)) {
    case kInitNone: return GPUAES_STATE_NOT_STARTED;
    case kInitRunning: return "GPU starting";
    default: return gpuaes_gpu_description();
    }
}

extern "C" void gpuaes_gpu_shutdown(void)
{
    using namespace gpuaes;
    // A forked child keeps off the parent's resources; at exit,
    // quiesce_at_exit() gave them back already, and the CUDA runtime may be
    // gone: no CUDA call here.
    if (g_child_after_cuda.load() || exit_began()) return;
    pthread_mutex_lock(&g_init_lock);
    const bool join = g_init_joinable;
    g_init_joinable = false;
    pthread_mutex_unlock(&g_init_lock);
    if (join) pthread_join(g_init_thread, nullptr); // an initialisation under way ends first
    if (g_init_state.load() != kInitDone) return;   // never started: nothing to give back
    if (!g_closed_at_exit.load()) {
        host_ranges_release(); // ranges a caller left registered
        gpu_resources_release(false); // reusable: lifecycle.h
    }
    // Forget the initialisation: a later load starts afresh.
    pthread_mutex_lock(&g_init_lock);
    g_usable = false;
    g_cc = 0;
    std::snprintf(g_desc, sizeof g_desc, "no usable GPU: not initialised");
    g_broken_desc.store(nullptr);
    g_broken_claimed.store(false);
    g_init_state.store(kInitNone, std::memory_order_release);
    pthread_mutex_unlock(&g_init_lock);
}
