// fault.h - fault injection (GPUAES_FAULT): which stage of a GPU job or
// keystream fill fails on purpose, so that tests can exercise the CPU
// fallback without a broken GPU (cuda/ internal; plain C++).
#ifndef GPUAES_FAULT_H
#define GPUAES_FAULT_H

#include <cstddef>

namespace gpuaes {

// The stage that fails (include/gpuaes_gpu.h's gpuaes_fault, same values).
enum class Fault { none, alloc, copyin, launch, copyout, sync };

// The fault injected for this process (read once at init, device.cu).
Fault gpu_fault();

// The GPUAES_FAULT value that selects f ("none" for none).
const char *fault_name(Fault f);

// Records an injected fault of `stage` (the CUDA call `call` it stands for)
// as a real failure would be: "stage: call: injected fault (GPUAES_FAULT=name)"
// into error[size], unless an earlier error is there already.
void fault_note(char *error, size_t size, const char *stage, const char *call);

} // namespace gpuaes

#endif
