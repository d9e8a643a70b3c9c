// host_copy.cpp - gpuaes_host_copy() (include/gpuaes_gpu.h): the copy pool's
// parallel memcpy for code outside the GPU layer, i.e. the service backend's
// copies into and out of its shared segment (provider/gpu_remote.c).  CPU
// only: the pool (copy_pool.cpp, copy_kernels.cpp, copy_load.cpp) makes no
// CUDA call, so an application in service mode gets its copy threads
// without CUDA.
#include <atomic>

#include "copy_pool.h"
#include "gpu_settings.h"

extern "C" void gpuaes_host_copy(void *dst, const void *src, size_t n, int stream)
{
    using namespace gpuaes;
    static std::atomic<int> s_stream{-1}; // the copy_stream knob, read once
    int st = s_stream.load(std::memory_order_relaxed);
    if (st < 0) {
        st = gpu_settings().copy_stream != 0;
        s_stream.store(st, std::memory_order_relaxed);
    }
    copy_pool_enter();
    CopyTask t;
    copy_start(&t, dst, src, n, stream && st ? kCopyStream : 0);
    copy_wait(&t);
    copy_pool_leave();
}

extern "C" void gpuaes_host_copy_stop(void)
{
    gpuaes::copy_pool_stop(false);
}
