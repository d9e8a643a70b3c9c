// runtime/fork_child.h - the one pthread_atfork child handler of a module
// (gpuaes.so: the settings and the copy pool; gpuaes_gpu.so and gpuaesd:
// those and the GPU layer).  Each part registers its reset; the handler
// runs the registered ones once per fork, in the order of ForkReset.
// Header-only: inline functions and their statics are one per module
// (hidden).
#ifndef GPUAES_RUNTIME_FORK_CHILD_H
#define GPUAES_RUNTIME_FORK_CHILD_H

#include <atomic>
#include <pthread.h>

namespace gpuaes {

// In the order the child runs them.  The resets are independent of each
// other (each re-creates its own locks and forgets its own threads).
enum class ForkReset {
    settings,  // gpu_settings.cpp: its lock (registered at load)
    gpu_layer, // device.cu: the start-up's state, then the layer's parts (at load)
    copy_pool, // copy_pool.cpp: its locks and workers (first start; the layer's load)
    count
};

namespace fork_detail {

using Reset = void (*)();

inline std::atomic<Reset> *resets()
{
    // "= {}": constant-initialised, so no guard variable (gpuaes.so links
    // without libstdc++, which has __cxa_guard_acquire).  Null: none registered.
    static std::atomic<Reset> r[(int)ForkReset::count] = {};
    return r;
}

inline void run_resets()
{
    for (int i = 0; i < (int)ForkReset::count; ++i) {
        const Reset reset = resets()[i].load();
        if (reset != nullptr) reset();
    }
}

inline void register_handler() { (void)pthread_atfork(nullptr, nullptr, run_resets); }

} // namespace fork_detail

// Registers `reset` for `which` (again: harmless); the module's handler is
// registered with pthread_atfork at the first call.
inline void fork_child_add(ForkReset which, void (*reset)())
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    fork_detail::resets()[(int)which].store(reset);
    pthread_once(&once, fork_detail::register_handler);
}

} // namespace gpuaes

#endif
