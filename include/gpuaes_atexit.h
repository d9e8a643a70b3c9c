/*
 * gpuaes_atexit.h - exit handlers that belong to this module.
 *
 * glibc's atexit() called from a shared object binds the handler to that
 * object: it runs at dlclose, and never after the object is gone.
 * Sanitizer runtimes intercept atexit() and lose that binding (under
 * ThreadSanitizer, a handler ran at exit after OpenSSL had unloaded the
 * module: a jump into unmapped memory).  __cxa_atexit with this object's
 * __dso_handle keeps it everywhere.
 */
#ifndef GPUAES_ATEXIT_H
#define GPUAES_ATEXIT_H

#ifdef __cplusplus
extern "C" {
#endif

extern void *__dso_handle;
int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

/* Registers fn(arg) to run at exit, or when this module is unloaded first. */
static inline int gpuaes_atexit(void (*fn)(void *), void *arg)
{
    return __cxa_atexit(fn, arg, &__dso_handle);
}

#ifdef __cplusplus
}
#endif
#endif
