/* debug.h - the debug log (debug.c) and where code was loaded from (loaded_object.c). */
#ifndef GPUAES_DEBUG_H
#define GPUAES_DEBUG_H

#include <stdint.h>

/* debug.c: GPUAES_DEBUG=1 logs to stderr; compiled in always, free when off.
 * The switch is process-wide: settings_load sets it, the latest load wins. */
void gpuaes_debug_set(int on);
void gpuaes_debug(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
int gpuaes_debug_enabled(void);

/* loaded_object.c: the loaded object holding addr (1), its load base and,
 * for a shared library, its path (NULL for the executable); 0 when none. */
int loaded_object(const void *addr, uintptr_t *base, const char **path);

#endif
