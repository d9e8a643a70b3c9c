/* mono_clock.h - the one clock of gpuaesd and its client library:
 * CLOCK_MONOTONIC (deadlines, job times, the published load's stamps). */
#ifndef GPUAESD_MONO_CLOCK_H
#define GPUAESD_MONO_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_ns(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline int64_t mono_ms(void)
{
    return mono_ns() / 1000000;
}

#endif
