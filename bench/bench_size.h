/* bench_size.h - the benchmarks' size arguments ("16", "1K", "4M", "1KiB", "64MB", "1G"), shared by
 * evp_bench and load_proc. */
#ifndef GPUAES_BENCH_SIZE_H
#define GPUAES_BENCH_SIZE_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Bytes (K/M/G = 2^10/2^20/2^30, an optional "iB"/"B"); 0 when malformed. */
static inline size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v;

    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0 || end == s)
        return 0;
    switch (*end) {
    case 'k': case 'K': v <<= 10; end++; break;
    case 'm': case 'M': v <<= 20; end++; break;
    case 'g': case 'G': v <<= 30; end++; break;
    default: break;
    }
    if (strcasecmp(end, "ib") == 0 || strcasecmp(end, "b") == 0)
        end += strlen(end);
    if (*end != '\0')
        return 0;
    return (size_t)v;
}

#endif
