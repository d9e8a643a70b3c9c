// fault.cpp - fault injection's names and messages (see fault.h).
#include "runtime/fault.h"

#include <cstdio>

namespace gpuaes {

const char *fault_name(Fault f)
{
    switch (f) {
    case Fault::alloc: return "alloc";
    case Fault::copyin: return "copyin";
    case Fault::launch: return "launch";
    case Fault::copyout: return "copyout";
    case Fault::sync: return "sync";
    default: return "none";
    }
}

void fault_note(char *error, size_t size, const char *stage, const char *call)
{
    if (error[0] == '\0')
        std::snprintf(error, size, "%s: %s: injected fault (GPUAES_FAULT=%s)", stage, call, fault_name(gpu_fault()));
}

} // namespace gpuaes
