// module_exit.h - the module's exit handlers, run in an order gpuaes chooses.
//
// gpuaes.so is linked with --wrap=atexit and --wrap=__cxa_atexit, so every
// exit handler registered from inside the module lands in one list kept
// here instead of glibc's: the static CUDA runtime's teardown (registered
// at its first API call, on whichever thread makes it, at whatever moment),
// nvcc's fatbinary unregistration, C++ static destructors.  glibc holds one
// handler for the module (run at exit, or at dlclose if that comes first).
// It runs the GPU layer's quiesce first, whatever the order the others were
// registered in, and then the list, newest first, only if the quiesce says
// that no thread is inside CUDA or reading its memory; otherwise the module
// is kept mapped and the list is skipped (the process is ending: the kernel
// takes back what the runtime would have given back).
#ifndef GPUAES_MODULE_EXIT_H
#define GPUAES_MODULE_EXIT_H

namespace gpuaes {

// Returns true when the layer is quiet: no CUDA call under way or to come in
// this process, no thread reading pinned memory.  Must be bounded in time.
using QuiesceFn = bool (*)();

// Installs the quiesce (once, at load) and makes sure the module's glibc
// handler is registered.
void module_exit_install(QuiesceFn quiesce);

// Registers the module's glibc handler once more, so that it runs before
// the exit handlers other libraries registered so far (libcuda registers
// its own when it is loaded and initialised).  It runs once however often
// it is registered.
void module_exit_register_again();

} // namespace gpuaes

#endif
