// pinned_pair.cu - a pinned host buffer and a device buffer: made, wiped,
// freed, and a failed allocation reported (see pinned_pair.h).
#include "runtime/pinned_pair.h"

#include <cstdio>

#include <cuda_runtime.h>

#include "kernels/aes_key.h"
#include "runtime/device.h"
#include "runtime/memory_cap.h"

namespace gpuaes {

bool pinned_pair_alloc(PinnedPair *p, size_t host_bytes, size_t dev_bytes, bool mapped, AllocError *err)
{
    // Device memory first: where another process holds it, the attempt
    // fails before pinning host pages (milliseconds) for nothing.
    if (!alloc_call(cudaMalloc((void **)&p->dev, dev_bytes), "cudaMalloc", err)) {
        p->dev = nullptr;
        return false;
    }
    const unsigned flags = mapped ? cudaHostAllocMapped : cudaHostAllocDefault;
    if (!alloc_call(cudaHostAlloc((void **)&p->host, host_bytes, flags), "cudaHostAlloc", err)) {
        p->host = nullptr;
        return false;
    }
    return !mapped
        || alloc_call(cudaHostGetDevicePointer((void **)&p->host_dev, p->host, 0), "cudaHostGetDevicePointer", err);
}

bool alloc_failed(const AllocError &err, const char *stage, char *error, size_t size)
{
    if (err.error == cudaErrorMemoryAllocation) mem_alloc_failed(); // no retry per call: memory_cap.h
    std::snprintf(error, size, "%s: %s: %s", stage, err.call, cudaGetErrorString(err.error));
    if (!error_is_fatal(err.error)) return false;
    mark_gpu_broken(error);
    return true;
}

void pinned_pair_release(PinnedPair *p, size_t host_dirty, size_t dev_dirty, bool cuda, ReleaseCheck check)
{
    secure_wipe(p->host, host_dirty); // nothing when host is null
    if (!cuda) return;
    if (p->dev != nullptr && dev_dirty != 0) (void)check(cudaMemset(p->dev, 0, dev_dirty), "cudaMemset");
    if (p->dev != nullptr) (void)check(cudaFree(p->dev), "cudaFree");
    if (p->host != nullptr) (void)check(cudaFreeHost(p->host), "cudaFreeHost");
    *p = PinnedPair();
}

} // namespace gpuaes
