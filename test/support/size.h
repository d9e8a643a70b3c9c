/* size.h - byte counts as the tests and benches write them: one parser, one formatter.
 * "4096", "16K", "64M", "1G" (K/M/G = 2^10/2^20/2^30, either case), optionally followed by "iB" or
 * "B" ("1KiB", "64MB", "16B").  bench/sizes.py reads and writes the same forms for the scripts. */
#ifndef GPUAES_SUPPORT_SIZE_H
#define GPUAES_SUPPORT_SIZE_H

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* 1 and *out set when s is a whole size; 0 when empty, malformed, negative or too large. */
static inline int size_parse(const char *s, size_t *out)
{
    char *end;
    unsigned long long v;
    int shift = 0;

    while (s != NULL && isspace((unsigned char)*s))  /* " 64" from a list written "16, 64" */
        s++;
    if (s == NULL || !isdigit((unsigned char)*s))    /* strtoull would take "-1" */
        return 0;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno != 0)
        return 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    default: break;
    }
    if (strcasecmp(end, "ib") == 0 && shift != 0)
        end += 2;
    else if (strcasecmp(end, "b") == 0)
        end += 1;
    if (*end != '\0' || v > (unsigned long long)(SIZE_MAX >> shift))
        return 0;
    *out = (size_t)v << shift;
    return 1;
}

/* n as "1G", "64M", "16K" when it is a whole number of those, else in bytes ("4097"); returns buf. */
static inline const char *size_format(size_t n, char *buf, size_t len)
{
    static const char units[] = "GMK";

    for (int i = 0; i < 3; i++) {
        size_t unit = (size_t)1 << (30 - 10 * i);

        if (n >= unit && n % unit == 0) {
            snprintf(buf, len, "%zu%c", n / unit, units[i]);
            return buf;
        }
    }
    snprintf(buf, len, "%zu", n);
    return buf;
}

#endif
