/*
 * gpuaes_layer.h - the GPU layer as a loadable library (gpuaes_gpu.so).
 *
 * The in-process GPU layer (cuda/ and its static CUDA runtime, or the test
 * emulator) is not linked into gpuaes.so: loading 6 MB of CUDA runtime cost
 * every process that loads gpuaes about 1 ms and 3.5M instructions, GPU or
 * not.  The module dlopens the layer when it first starts the GPU
 * (provider/gpu/gpu_inprocess.c), so a process that never needs the GPU, and
 * every process of the service backend, never maps it.
 *
 * The library exports one symbol, gpuaes_layer_get(), which returns this
 * table of the job part of include/gpuaes_gpu.h (the functions of the same
 * names, same contracts).  The module refuses a table whose abi or size
 * differs from its own (a layer from another build): no GPU, said why.
 */
#ifndef GPUAES_LAYER_H
#define GPUAES_LAYER_H

#include "gpuaes_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPUAES_LAYER_ABI 1
#define GPUAES_LAYER_SYMBOL "gpuaes_layer_get"
/* Beside the module (the build tree), else here (cmake --install). */
#define GPUAES_LAYER_FILE "gpuaes_gpu.so"

typedef struct gpuaes_layer {
    unsigned abi;                  /* GPUAES_LAYER_ABI */
    size_t size;                   /* sizeof(gpuaes_layer) */
    void (*configure)(const gpuaes_gpu_settings *settings);
    int (*available)(void);
    int (*wait)(void);
    int (*supports)(gpuaes_op op);
    const char *(*description)(void);
    int (*started)(void);
    const char *(*state)(void);
    void (*run)(gpuaes_job *job);
    gpuaes_key *(*key_new)(const unsigned char *key, size_t keylen);
    void (*key_free)(gpuaes_key *key);
    void (*memory)(gpuaes_gpu_memory_stats *stats);
    void (*shutdown)(void);
    void (*ks_set_limit)(size_t total_bytes);
    gpuaes_ks_window *(*ks_window_new)(size_t cap);
    gpuaes_status (*ks_fill)(gpuaes_ks_window *w, const gpuaes_key *key, const unsigned char ctr[16],
                             size_t nbytes, int ctr32, char error[GPUAES_ERROR_SIZE]);
    int (*ks_ready)(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE]);
    int (*ks_pin)(gpuaes_ks_window *w, const unsigned char **data, char error[GPUAES_ERROR_SIZE]);
    void (*ks_unpin)(gpuaes_ks_window *w);
    void (*ks_window_free)(gpuaes_ks_window *w);
    void (*ks_stats)(unsigned long long *launches, unsigned long long *jobs);
    void (*ks_windows)(size_t *windows, size_t *pooled);
} gpuaes_layer;

typedef const gpuaes_layer *gpuaes_layer_get_fn(void);

#ifdef __cplusplus
}
#endif
#endif /* GPUAES_LAYER_H */
