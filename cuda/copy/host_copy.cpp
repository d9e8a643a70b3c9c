// host_copy.cpp - gpuaes_host_copy() (include/gpuaes_gpu.h): the copy pool's
// parallel memcpy for code outside the GPU layer, i.e. the service backend's
// copies into and out of its shared segment (provider/gpu/gpu_remote.c).  CPU
// only: the pool (copy_pool.cpp, copy_part.cpp, copy_load.cpp) makes no
// CUDA call, so an application in service mode gets its copy threads
// without CUDA.  No libstdc++ either (malloc and placement new): gpuaes.so links
// this and loads without it.
#include <atomic>
#include <cstdlib>
#include <new>

#include "copy/copy_pool.h"
#include "runtime/gpu_settings.h"
#include "gpuaes_gpu.h"

struct gpuaes_host_copy_task {
    gpuaes::CopyTask t;
};

namespace {

// The flags of a host copy: non-temporal stores where copy_stream allows.
unsigned copy_flags(int stream)
{
    static std::atomic<int> s_stream{-1}; // the copy_stream knob, read once
    int st = s_stream.load(std::memory_order_relaxed);
    if (st < 0) {
        st = gpuaes::gpu_settings().copy_stream != 0;
        s_stream.store(st, std::memory_order_relaxed);
    }
    return stream && st ? gpuaes::kCopyStream : 0;
}

// A whole copy on the caller's thread, the workers helping: the caller is
// an owner throughout.
void copy_now(void *dst, const void *src, const void *ks, size_t n, int stream)
{
    using namespace gpuaes;
    copy_pool_enter();
    CopyTask t;
    copy_start_xor(&t, dst, src, ks, n, copy_flags(stream));
    copy_wait(&t);
    copy_pool_leave();
}

} // namespace

extern "C" void gpuaes_host_copy(void *dst, const void *src, size_t n, int stream)
{
    copy_now(dst, src, nullptr, n, stream);
}

extern "C" gpuaes_host_copy_task *gpuaes_host_copy_begin(void *dst, const void *src, const void *ks, size_t n,
                                                         int stream)
{
    using namespace gpuaes;
    void *mem = std::malloc(sizeof(gpuaes_host_copy_task));
    auto *h = mem != nullptr ? new (mem) gpuaes_host_copy_task : nullptr;
    if (h == nullptr) { // no memory for a task: the copy now
        copy_now(dst, src, ks, n, stream);
        return nullptr;
    }
    // Not an owner until it ends: a caller with many copies begun (the
    // service backend's copies out, one per piece in flight) is one thread.
    // Counted per copy, eight begun copies read as eight owners to the load
    // rule, which then let no worker copy (one thread's 64 MiB jobs through
    // gpuaesd: a job's copy in 1.3-1.5 ms, 6.7-7.5 ms in such a process).
    copy_pool_ready();
    copy_start_xor(&h->t, dst, src, ks, n, copy_flags(stream));
    return h;
}

extern "C" void gpuaes_host_copy_end(gpuaes_host_copy_task *h)
{
    if (h == nullptr) return;
    gpuaes::copy_pool_enter(); // the caller copies what no worker claimed
    gpuaes::copy_wait(&h->t);
    gpuaes::copy_pool_leave();
    h->~gpuaes_host_copy_task();
    std::free(h);
}

extern "C" void gpuaes_host_copy_stop(void)
{
    gpuaes::copy_pool_stop(false);
}
