#define _POSIX_C_SOURCE 200809L  /* flockfile */
/*
 * debug.c - GPUAES_DEBUG=1 (or debug = 1 in openssl.cnf) traces to stderr.
 * Compiled in always; one atomic load and a branch when off.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/crypto.h>

#include "gpuaes.h"

/* Set at each load (settings.c), read from any thread. */
static atomic_int debug_on;

void gpuaes_debug_set(int on)
{
    atomic_store_explicit(&debug_on, on != 0, memory_order_relaxed);
}

int gpuaes_debug_enabled(void)
{
    return atomic_load_explicit(&debug_on, memory_order_relaxed);
}

void gpuaes_debug(const char *fmt, ...)
{
    va_list ap;

    if (!gpuaes_debug_enabled())
        return;
    va_start(ap, fmt);
    flockfile(stderr);
    fputs("gpuaes: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}
