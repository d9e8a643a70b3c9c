// pdl.cuh - programmatic dependent launch (sm_90): a kernel launched with
// programmatic stream serialization may start while the kernel before it on
// the stream drains.  It must wait (grid_dep_wait) before it touches memory
// that kernel may write or read; what it does before the wait (filling shared
// tables, computing from its parameters) overlaps the other kernel's tail.
// A kernel lets its dependants start early with grid_dep_launch.  A launch
// after a copy or an event waits as usual; on older GPUs both are no-ops and
// the attribute is not set.
#ifndef GPUAES_PDL_CUH
#define GPUAES_PDL_CUH

#include <cuda_runtime.h>

#ifndef GPUAES_PDL
#define GPUAES_PDL 1
#endif

namespace gpuaes {

__device__ __forceinline__ void grid_dep_wait()
{
#if GPUAES_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

__device__ __forceinline__ void grid_dep_launch()
{
#if GPUAES_PDL && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Whether the current device supports it (compute capability 9.0+; asked
// once per device).
bool pdl_ok();

// Launches kernel<<<grid, block, smem, stream>>>(args...), with programmatic
// stream serialization when `pdl`, and returns the launch's error (the
// thread's last error is neither read nor needed: cuda_guest.h).
template <class... Args>
cudaError_t launch_pdl(void (*kernel)(Args...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, bool pdl,
                       Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
}

} // namespace gpuaes

#endif
