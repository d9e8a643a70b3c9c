// cuda_guest.h - gpuaes is a guest on the application's threads (cuda/
// internal).
//
// The provider's calls run on threads it does not own, and the application
// may use CUDA on them too: another device, a driver context of its own
// (cuCtxCreate / cuCtxSetCurrent), its own error checks.  Every entry point
// that makes CUDA calls on such a thread holds a CudaGuest while it does:
//  - Context: the thread's current driver context is saved, gpuaes's primary
//    context is made current only where it is not already, and the saved one
//    is restored at the end.  (cudaSetDevice would have replaced an
//    application's own context by the primary one, for good.)
//  - Error state: the runtime keeps one "last error" per thread and per
//    instance of the runtime library.  gpuaes.so carries its own static
//    instance with hidden symbols, so an application's error state is out of
//    its reach; where cuda/ shares the application's instance (programs linked
//    against it), an error pending at entry is the application's: then gpuaes
//    makes no CUDA call for this call (ok() is false, the caller answers BUSY
//    and the work is done on the CPU) and the error stays as it was.  With a
//    clean state at entry, whatever gpuaes's own calls left (a failure,
//    cudaErrorNotReady from a query) is cleared at the end.  Kernels are
//    launched with calls that return their error (cudaLaunchKernelEx), so no
//    code needs cudaGetLastError() to see one.
// A guard inside another on the same thread does nothing.  Threads gpuaes
// owns (copy workers, an initialisation thread) need no guard.
#ifndef GPUAES_CUDA_GUEST_H
#define GPUAES_CUDA_GUEST_H

namespace gpuaes {

class CudaGuest {
  public:
    // must_run: waits and frees that may not be skipped (a fill in flight,
    // release) run even when an error is pending; a call that succeeds does
    // not touch the last error.
    explicit CudaGuest(bool must_run = false);
    ~CudaGuest();
    CudaGuest(const CudaGuest &) = delete;
    CudaGuest &operator=(const CudaGuest &) = delete;

    // CUDA calls may be made (gpuaes's context is current).
    bool ok() const { return ok_; }

  private:
    void *saved_ = nullptr; // the caller's context (CUcontext), restored when switched_
    bool switched_ = false;
    bool clean_ = false;    // no error was pending at entry
    bool ok_ = false;
    bool nested_ = false;
};

// For do_init(), on the caller's thread: saves the current context at
// construction (resolving cuCtxGetCurrent / cuCtxSetCurrent through the
// runtime once: gpuaes does not link libcuda) and restores it, and the error
// state as above, at destruction.
class CudaInitGuest {
  public:
    CudaInitGuest();
    ~CudaInitGuest();
    CudaInitGuest(const CudaInitGuest &) = delete;
    CudaInitGuest &operator=(const CudaInitGuest &) = delete;

    // After cudaSetDevice(dev) and a first call that created the context:
    // records the now current primary context as gpuaes's.  False (and
    // gpuaes must not use the GPU) when the driver functions are missing.
    bool adopt_primary();

  private:
    void *saved_ = nullptr;
    bool have_ = false; // saved_ is valid
    bool clean_ = false;
};

} // namespace gpuaes

#endif
