// host_register.cu - gpuaes_gpu_host_register / _unregister and the registry
// of ranges that direct jobs use (see host_register.h, include/gpuaes_gpu.h).
#include "staging/host_register.h"

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <pthread.h>

#include <cuda_runtime.h>

#include "runtime/cuda_guest.h"
#include "runtime/device.h"
#include "gpuaes_gpu.h"
#include "runtime/layer_gate.h"

namespace gpuaes {
namespace {

enum class RangeState { free, registering, live, leaving };

struct Range {
    uintptr_t base = 0;
    size_t len = 0;
    RangeState state = RangeState::free;
    int users = 0; // direct jobs running in it
};

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; // the table
pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;     // a leaving range's last user is gone
Range g_ranges[kMaxHostRanges];
std::atomic<int> g_used{0}; // entries not free: DirectUse skips the lock at 0

void set_error(char *error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void set_error(char *error, const char *fmt, ...)
{
    if (error == nullptr) return;
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(error, GPUAES_ERROR_SIZE, fmt, ap);
    va_end(ap);
}

// [p, p + len) inside r, without overflow.
bool holds(const Range &r, const void *p, size_t len)
{
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return a >= r.base && len <= r.len && a - r.base <= r.len - len;
}

// Entry i is free again (under g_lock).
void drop(int i)
{
    g_ranges[i] = Range();
    g_used.fetch_sub(1);
}

// Marks live entry i leaving and waits for its direct jobs (under g_lock).
void drain(int i)
{
    g_ranges[i].state = RangeState::leaving;
    while (g_ranges[i].users > 0) pthread_cond_wait(&g_cv, &g_lock);
}

// cudaHostUnregister inside the layer's gate and context.  Nothing to do in a
// forked child or once exit closed the layer (the runtime's teardown unpins).
bool cuda_unregister(void *base, char *error)
{
    if (cuda_forbidden()) return true;
    LayerUse inside;
    if (!inside.ok()) return true;
    CudaGuest guest(true);
    if (!guest.ok()) {
        set_error(error, "cudaHostUnregister: no CUDA context");
        return false;
    }
    const cudaError_t e = cudaHostUnregister(base);
    if (e != cudaSuccess) {
        set_error(error, "cudaHostUnregister: %s", cudaGetErrorString(e));
        return false;
    }
    return true;
}

} // namespace

DirectUse::DirectUse(const void *in, const void *out, size_t len)
{
    if (len == 0 || g_used.load() == 0) return;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < kMaxHostRanges; ++i) {
        Range &r = g_ranges[i];
        if (r.state == RangeState::live && holds(r, in, len) && holds(r, out, len)) {
            ++r.users;
            slot_ = i;
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
}

DirectUse::~DirectUse()
{
    if (slot_ < 0) return;
    pthread_mutex_lock(&g_lock);
    if (--g_ranges[slot_].users == 0 && g_ranges[slot_].state == RangeState::leaving) pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_lock);
}

void host_ranges_release()
{
    for (int i = 0; i < kMaxHostRanges; ++i) {
        pthread_mutex_lock(&g_lock);
        if (g_ranges[i].state != RangeState::live) {
            pthread_mutex_unlock(&g_lock);
            continue;
        }
        drain(i);
        void *base = reinterpret_cast<void *>(g_ranges[i].base);
        pthread_mutex_unlock(&g_lock);
        (void)cuda_unregister(base, nullptr); // best effort: the layer is going
        pthread_mutex_lock(&g_lock);
        drop(i);
        pthread_mutex_unlock(&g_lock);
    }
}

void host_ranges_atfork_child()
{
    pthread_mutex_init(&g_lock, nullptr);
    pthread_cond_init(&g_cv, nullptr);
    for (Range &r : g_ranges) r = Range();
    g_used.store(0);
}

} // namespace gpuaes

extern "C" int gpuaes_gpu_host_register(void *base, size_t len, char error[GPUAES_ERROR_SIZE])
{
    using namespace gpuaes;
    set_error(error, "%s", "");
    const uintptr_t b = reinterpret_cast<uintptr_t>(base);
    if (base == nullptr || len == 0 || b + len < b) {
        set_error(error, "invalid range");
        return -1;
    }
    // Never waits for the start-up (a client's hello must not): the caller
    // asks again later.
    if (!gpuaes_gpu_available()) {
        if (!gpuaes_gpu_started()) return 1;
        set_error(error, "%.150s", gpuaes_gpu_state());
        return -1;
    }
    int slot = -1;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < kMaxHostRanges; ++i) {
        const Range &r = g_ranges[i];
        if (r.state == RangeState::free) {
            if (slot < 0) slot = i;
        } else if (b < r.base + r.len && r.base < b + len) {
            pthread_mutex_unlock(&g_lock);
            set_error(error, "overlaps a registered range");
            return -1;
        }
    }
    if (slot >= 0) { // taken now, live only once CUDA has it: no job uses it before
        g_ranges[slot] = Range{b, len, RangeState::registering, 0};
        g_used.fetch_add(1);
    }
    pthread_mutex_unlock(&g_lock);
    if (slot < 0) {
        set_error(error, "%d ranges registered already", kMaxHostRanges);
        return -1;
    }

    bool ok = false;
    {
        LayerUse inside; // exit waits for the call (layer_gate.h)
        if (!inside.ok()) {
            set_error(error, "the process is exiting");
        } else {
            CudaGuest guest;
            // Portable: pinned for every context (one per device, later).
            const cudaError_t e =
                guest.ok() ? cudaHostRegister(base, len, cudaHostRegisterPortable) : cudaErrorInvalidResourceHandle;
            if (!guest.ok()) set_error(error, "cudaHostRegister: no CUDA context");
            else if (e != cudaSuccess) set_error(error, "cudaHostRegister: %s", cudaGetErrorString(e));
            ok = guest.ok() && e == cudaSuccess;
        }
    }
    pthread_mutex_lock(&g_lock);
    if (ok) g_ranges[slot].state = RangeState::live;
    else drop(slot);
    pthread_mutex_unlock(&g_lock);
    return ok ? 0 : -1;
}

extern "C" int gpuaes_gpu_host_unregister(void *base, char error[GPUAES_ERROR_SIZE])
{
    using namespace gpuaes;
    set_error(error, "%s", "");
    int slot = -1;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < kMaxHostRanges && slot < 0; ++i)
        if (g_ranges[i].state == RangeState::live && g_ranges[i].base == reinterpret_cast<uintptr_t>(base)) slot = i;
    if (slot >= 0) drain(slot); // no new direct job from here on; those running end first
    pthread_mutex_unlock(&g_lock);
    if (slot < 0) {
        set_error(error, "not registered");
        return -1;
    }
    const bool ok = cuda_unregister(base, error);
    pthread_mutex_lock(&g_lock);
    drop(slot);
    pthread_mutex_unlock(&g_lock);
    return ok ? 0 : -1;
}
