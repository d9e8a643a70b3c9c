// pinned_pair.h - a pinned host buffer and a device buffer, what a staging
// lane (slot_pool.cu) and a keystream window (ks_windows.cu) each hold:
// made device memory first, wiped before they are freed, and the one way a
// failed allocation is reported (cuda/ internal).
//
// The caller keeps its sizes and its memory cap reservation (memory_cap.h);
// this knows only the two buffers and what a failure means.
#ifndef GPUAES_PINNED_PAIR_H
#define GPUAES_PINNED_PAIR_H

#include <cstddef>

#include <cuda_runtime_api.h>

namespace gpuaes {

struct PinnedPair {
    unsigned char *host = nullptr;     // pinned
    unsigned char *host_dev = nullptr; // host as the device sees it (mapped pairs only)
    unsigned char *dev = nullptr;      // device
};

// The CUDA call that made an allocation fail, and its error.
struct AllocError {
    const char *call = "";
    cudaError_t error = cudaSuccess;
};

// One CUDA call of an allocation: true when it succeeded, else *err names it.
inline bool alloc_call(cudaError_t e, const char *call, AllocError *err)
{
    if (e == cudaSuccess) return true;
    err->call = call;
    err->error = e;
    return false;
}

// Makes dev_bytes of device memory, then host_bytes of pinned memory (with
// `mapped`: mapped into the device's address space, host_dev set).  False
// with *err on failure; what was made stays in *p for pinned_pair_release.
bool pinned_pair_alloc(PinnedPair *p, size_t host_bytes, size_t dev_bytes, bool mapped, AllocError *err);

// The funnel of a failed allocation: "<stage>: <call>: <CUDA's text>" into
// error[size], the out-of-memory back-off when memory was full
// (mem_alloc_failed), and a broken GPU when the error is fatal (the same
// text).  True when it was fatal: the caller frees nothing more.
bool alloc_failed(const AllocError &err, const char *stage, char *error, size_t size);

// How a release checks each CUDA call (best effort: it goes on whatever the
// answer; a fatal error should mark the GPU broken).
using ReleaseCheck = bool (*)(cudaError_t e, const char *call);

// Zeroes the first host_dirty pinned bytes; then, with `cuda`, the first
// dev_dirty device bytes (a synchronous cudaMemset: not a hot path), frees
// both buffers and empties *p.  Without `cuda` (the GPU is broken, or the
// context may not be touched) the host wipe is all: nothing is freed and *p
// keeps its pointers.
void pinned_pair_release(PinnedPair *p, size_t host_dirty, size_t dev_dirty, bool cuda, ReleaseCheck check);

} // namespace gpuaes

#endif
