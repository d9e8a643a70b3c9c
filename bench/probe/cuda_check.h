// cuda_check.h - CK(call): the probes' CUDA error check (print and exit).
#ifndef GPUAES_PROBE_CUDA_CHECK_H
#define GPUAES_PROBE_CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CK(x)                                                                                            \
    do {                                                                                                 \
        cudaError_t e_ = (x);                                                                            \
        if (e_ != cudaSuccess) {                                                                         \
            std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));    \
            std::exit(1);                                                                                \
        }                                                                                                \
    } while (0)

#endif
