#define _POSIX_C_SOURCE 200809L  /* flockfile */
/*
 * debug.c - GPUAES_DEBUG=1 (or debug = 1 in openssl.cnf) traces to stderr.
 * Compiled in always; one atomic load and a branch when off.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <openssl/crypto.h>

#include "debug.h"

/* Set at each load (settings.c), read from any thread. */
static atomic_int debug_on;
static _Atomic long long debug_t0_ns;  /* the first load's: lines say ms since */

static long long debug_now_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

void gpuaes_debug_set(int on)
{
    long long zero = 0;

    atomic_compare_exchange_strong(&debug_t0_ns, &zero, debug_now_ns());
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
    fprintf(stderr, "gpuaes: [%.3f ms] ", (double)(debug_now_ns() - atomic_load(&debug_t0_ns)) / 1e6);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    funlockfile(stderr);
    va_end(ap);
}
