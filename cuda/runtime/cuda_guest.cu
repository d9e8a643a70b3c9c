// cuda_guest.cu - leaving the caller's CUDA context and error state as found
// (cuda_guest.h).
#include "runtime/cuda_guest.h"

#include <atomic>
#include <pthread.h>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include "runtime/device.h"

namespace gpuaes {
namespace {

// The driver's context functions, through the runtime: the module links the
// runtime statically and no libcuda, so that it loads where there is none.
PFN_cuCtxGetCurrent_v4000 g_get_ctx = nullptr;
PFN_cuCtxSetCurrent_v4000 g_set_ctx = nullptr;
pthread_once_t g_resolve_once = PTHREAD_ONCE_INIT;
std::atomic<CUcontext> g_primary{nullptr}; // gpuaes's device's primary context, once adopted
thread_local int t_depth = 0;              // guards held by this thread

void resolve()
{
    // Both unchanged since CUDA 4.0; 12000 asks for that ABI from any driver
    // this runtime runs on.
    void *get = nullptr, *set = nullptr;
    cudaDriverEntryPointQueryResult qg = cudaDriverEntryPointSymbolNotFound, qs = qg;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &get, 12000, cudaEnableDefault, &qg) != cudaSuccess ||
        cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", &set, 12000, cudaEnableDefault, &qs) != cudaSuccess ||
        qg != cudaDriverEntryPointSuccess || qs != cudaDriverEntryPointSuccess || get == nullptr || set == nullptr)
        return;
    g_get_ctx = reinterpret_cast<PFN_cuCtxGetCurrent_v4000>(get);
    g_set_ctx = reinterpret_cast<PFN_cuCtxSetCurrent_v4000>(set);
}

// Puts the caller's context back; a failure would leave the application
// running in ours, so gpuaes stops touching the GPU.
void restore(void *saved)
{
    if (g_set_ctx(static_cast<CUcontext>(saved)) != CUDA_SUCCESS)
        mark_gpu_broken("cuCtxSetCurrent: the caller's CUDA context could not be restored");
}

} // namespace

CudaGuest::CudaGuest(bool must_run)
{
    if (t_depth++ > 0) { // the outer guard holds the context
        nested_ = true;
        ok_ = true;
        return;
    }
    const CUcontext primary = g_primary.load(std::memory_order_acquire);
    if (primary == nullptr || cuda_forbidden()) return;
    // Switch first: no runtime call of ours runs in the caller's context.
    CUcontext cur = nullptr;
    if (g_get_ctx(&cur) != CUDA_SUCCESS) return;
    if (cur != primary) {
        if (g_set_ctx(primary) != CUDA_SUCCESS) return;
        saved_ = cur;
        switched_ = true;
    }
    clean_ = cudaPeekAtLastError() == cudaSuccess;
    if (!clean_ && !must_run) { // the application's error: no call of ours may replace it
        if (switched_) restore(saved_);
        switched_ = false;
        return;
    }
    ok_ = true;
}

CudaGuest::~CudaGuest()
{
    --t_depth;
    if (nested_) return;
    if (ok_ && clean_) (void)cudaGetLastError(); // ours only: nothing was pending at entry
    if (switched_) restore(saved_);
}

CudaInitGuest::CudaInitGuest()
{
    ++t_depth;
    clean_ = cudaPeekAtLastError() == cudaSuccess;
    pthread_once(&g_resolve_once, resolve);
    CUcontext cur = nullptr;
    if (g_get_ctx != nullptr && g_get_ctx(&cur) == CUDA_SUCCESS) {
        saved_ = cur;
        have_ = true;
    }
}

CudaInitGuest::~CudaInitGuest()
{
    --t_depth;
    if (clean_) (void)cudaGetLastError();
    if (!have_) return;
    CUcontext cur = nullptr;
    if (g_get_ctx(&cur) != CUDA_SUCCESS || cur != static_cast<CUcontext>(saved_)) restore(saved_);
}

bool CudaInitGuest::adopt_primary()
{
    CUcontext cur = nullptr;
    if (!have_ || g_get_ctx(&cur) != CUDA_SUCCESS || cur == nullptr) return false;
    g_primary.store(cur, std::memory_order_release);
    return true;
}

} // namespace gpuaes
