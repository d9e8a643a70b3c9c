// gpu_settings.cpp - storage for gpuaes_gpu_configure() (include/gpuaes_gpu.h).
// The provider has parsed and range-checked the values; readers take a copy
// once, at their own lazy initialisation, so a lock costs nothing per job.
#include <pthread.h>

#include "runtime/gpu_settings.h"
#include "runtime/fork_child.h"

namespace gpuaes {
namespace {

pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
gpuaes_gpu_settings g_settings = GPUAES_GPU_SETTINGS_DEFAULT;

// A fork while another thread holds g_lock (a provider loading) would leave
// it locked in the child for good: the child gets a fresh one (the module's
// fork handler, runtime/fork_child.h).  Registered at load, so every fork is
// covered; the settings themselves are inherited.
void on_fork_child() { pthread_mutex_init(&g_lock, nullptr); }
struct AtforkAtLoad {
    AtforkAtLoad() { fork_child_add(ForkReset::settings, on_fork_child); }
} g_atfork_at_load;

} // namespace

int64_t idle_release_ns()
{
    const unsigned ms = gpu_settings().idle_release_ms;
    return int64_t(ms != 0 ? ms : GPUAES_IDLE_RELEASE_MS_DEFAULT) * 1000000;
}

gpuaes_gpu_settings gpu_settings()
{
    pthread_mutex_lock(&g_lock);
    const gpuaes_gpu_settings s = g_settings;
    pthread_mutex_unlock(&g_lock);
    return s;
}

} // namespace gpuaes

extern "C" void gpuaes_gpu_configure(const gpuaes_gpu_settings *settings)
{
    if (settings == nullptr) return;
    pthread_mutex_lock(&gpuaes::g_lock);
    gpuaes::g_settings = *settings;
    pthread_mutex_unlock(&gpuaes::g_lock);
}
