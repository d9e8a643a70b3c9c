/*
 * layer_export.c - the one symbol a GPU layer library exports
 * (include/gpuaes_layer.h): the table of its gpuaes_gpu.h functions.  The
 * same file for the CUDA layer (cuda/) and the test emulator
 * (test/gpu/gpu_emulator.c): both implement gpuaes_gpu.h.
 */
#include "gpuaes_layer.h"

static const gpuaes_layer layer = {
    GPUAES_LAYER_ABI, sizeof(gpuaes_layer),
    gpuaes_gpu_configure, gpuaes_gpu_available, gpuaes_gpu_wait, gpuaes_gpu_supports,
    gpuaes_gpu_description, gpuaes_gpu_started, gpuaes_gpu_state, gpuaes_gpu_run,
    gpuaes_key_new, gpuaes_key_free, gpuaes_gpu_memory, gpuaes_gpu_shutdown,
    gpuaes_ks_set_limit, gpuaes_ks_window_new, gpuaes_ks_fill, gpuaes_ks_ready, gpuaes_ks_pin,
    gpuaes_ks_unpin, gpuaes_ks_window_free, gpuaes_ks_stats, gpuaes_ks_windows
};

__attribute__((visibility("default"))) const gpuaes_layer *gpuaes_layer_get(void)
{
    return &layer;
}
