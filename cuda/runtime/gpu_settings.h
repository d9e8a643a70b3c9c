// gpu_settings.h - the knobs the provider configured (gpuaes_gpu_configure),
// for the parts of the GPU layer that read them at their first use (cuda/ internal).
#ifndef GPUAES_GPU_SETTINGS_H
#define GPUAES_GPU_SETTINGS_H

#include <cstdint>

#include "gpuaes_gpu.h"

namespace gpuaes {

// A copy of the settings in force: the latest gpuaes_gpu_configure(), or the
// built-in defaults when there was none.
gpuaes_gpu_settings gpu_settings();

// How long a slot or a pooled window may stay idle before it is freed.
int64_t idle_release_ns();

} // namespace gpuaes

#endif
