#define _POSIX_C_SOURCE 200809L  /* flockfile */
/*
 * debug.c - GPUAES_DEBUG=1 traces to stderr.  Compiled in always; one
 * branch when off.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <openssl/crypto.h>

#include "gpuaes.h"

static int debug_on = -1;

int gpuaes_debug_enabled(void)
{
    if (debug_on < 0) {               /* racy but idempotent: every thread computes the same */
        const char *e = getenv("GPUAES_DEBUG");

        debug_on = e != NULL && *e != '\0' && *e != '0';
    }
    return debug_on;
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
