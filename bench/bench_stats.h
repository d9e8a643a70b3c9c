/* bench_stats.h - the benchmarks' clock and medians, shared by evp_bench, small_calls, service_rtt,
 * gcm_engine_cpu and tls_client. */
#ifndef GPUAES_BENCH_STATS_H
#define GPUAES_BENCH_STATS_H

#include <stdlib.h>
#include <time.h>

/* Seconds on the monotonic clock. */
static inline double bench_mono_s(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int bench_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

/* v[0..n) in ascending order. */
static inline void bench_sort(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), bench_cmp_double);
}

/* The median of v[0..n) (sorts v; the mean of the middle two when n is even). */
static inline double bench_median(double *v, int n)
{
    bench_sort(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
