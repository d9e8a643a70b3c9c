// runtime/quiet_thread.h - the GPU layer's own threads (the start-up, the
// idle release, the copy workers): plain pthreads that take no process
// signal, since signals are the application's.  Header-only, as all of
// runtime/'s small utilities: the CPU tests that compile a cuda/ source need
// nothing more.
#ifndef GPUAES_RUNTIME_QUIET_THREAD_H
#define GPUAES_RUNTIME_QUIET_THREAD_H

#include <pthread.h>
#include <signal.h>

namespace gpuaes {

// Creates a joinable thread running fn(arg) with every signal blocked (it
// inherits the mask, set around its creation) and names it `name` (glibc;
// nullptr: unnamed).  False when it could not be created.
inline bool start_quiet_thread(pthread_t *thread, void *(*fn)(void *), void *arg, const char *name)
{
    sigset_t all, old;
    sigfillset(&all);
    const bool masked = pthread_sigmask(SIG_SETMASK, &all, &old) == 0;
    const bool made = pthread_create(thread, nullptr, fn, arg) == 0;
#if defined(__GLIBC__)
    if (made && name != nullptr) (void)pthread_setname_np(*thread, name);
#else
    (void)name;
#endif
    if (masked) pthread_sigmask(SIG_SETMASK, &old, nullptr);
    return made;
}

} // namespace gpuaes

#endif
