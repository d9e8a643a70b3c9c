// layer_gate.h - the threads inside a CUDA-using call of the GPU layer that
// no other flag covers (a job; a keystream window being made), counted so
// that the process's exit can close the layer and wait for them to leave
// CUDA before the CUDA runtime is torn down (module_exit.h).  Calls on a
// window that exists are covered by the window's own busy flag.
#ifndef GPUAES_LAYER_GATE_H
#define GPUAES_LAYER_GATE_H

#include <cstdint>

namespace gpuaes {

// False once the layer is closed: the caller makes no CUDA call.
bool layer_enter();
void layer_leave();

// Closes the layer for good and waits up to wait_ns for the threads inside
// to leave: true when none is left.
bool layer_close(int64_t wait_ns);

// In a forked child: the parent's threads are not there.
void layer_atfork_child();

// layer_enter() / layer_leave() around a scope.
class LayerUse {
public:
    LayerUse() : in_(layer_enter()) {}
    ~LayerUse()
    {
        if (in_) layer_leave();
    }
    bool ok() const { return in_; }
    LayerUse(const LayerUse &) = delete;
    LayerUse &operator=(const LayerUse &) = delete;

private:
    bool in_;
};

} // namespace gpuaes

#endif
