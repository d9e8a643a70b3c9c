/*
 * host_membw.c - how many bytes per second this host's threads can stream
 * from one buffer into another (memcpy), the way a cipher call reads its
 * input and writes its output.  It bounds what any provider can reach on
 * large updates: a call of N bytes moves at least N in and N out.
 *
 *   cc -O2 -pthread bench/probe/host_membw.c -o host_membw
 *   ./host_membw [SIZE_MIB [SECONDS]]      (default 64 MiB per buffer, 0.3 s)
 *
 * Prints, per thread count 1 2 4 8 16 32: the median of 5 measurements of
 * GB/s (bytes copied, all threads, 10^9 per second, wall time).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REPEATS 5

static size_t size;
static double seconds;
static atomic_int go, stop;

typedef struct {
    unsigned char *in, *out;
    unsigned long long bytes;
    pthread_t th;
} worker;

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg)
{
    worker *w = arg;

    while (!atomic_load(&go))
        ;
    w->bytes = 0;
    do {
        memcpy(w->out, w->in, size);
        w->bytes += size;
    } while (!atomic_load(&stop));
    return NULL;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static const int counts[] = { 1, 2, 4, 8, 16, 32 };
    worker w[32];

    size = (size_t)(argc > 1 ? atof(argv[1]) : 64) << 20;
    seconds = argc > 2 ? atof(argv[2]) : 0.3;
    for (int i = 0; i < 32; i++) {
        w[i].in = malloc(size);
        w[i].out = malloc(size);
        if (w[i].in == NULL || w[i].out == NULL) {
            fprintf(stderr, "host_membw: out of memory\n");
            return 1;
        }
        memset(w[i].in, i + 1, size);   /* touch every page */
        memset(w[i].out, 0, size);
    }
    printf("# host_membw: %zu MiB per buffer, memcpy in -> out, %g s x %d, median GB/s\n",
           size >> 20, seconds, REPEATS);
    printf("threads,gbps\n");
    for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
        int n = counts[c];
        double r[REPEATS];

        for (int k = 0; k < REPEATS; k++) {
            unsigned long long total = 0;
            double t0, t1;

            atomic_store(&go, 0);
            atomic_store(&stop, 0);
            for (int i = 0; i < n; i++)
                if (pthread_create(&w[i].th, NULL, run, &w[i]) != 0) {
                    fprintf(stderr, "host_membw: pthread_create failed\n");
                    return 1;
                }
            t0 = now();
            atomic_store(&go, 1);
            {                           /* sleep: the main thread takes no core */
                struct timespec d = { (time_t)seconds,
                                      (long)((seconds - (double)(time_t)seconds) * 1e9) };

                nanosleep(&d, NULL);
            }
            atomic_store(&stop, 1);
            for (int i = 0; i < n; i++) {
                pthread_join(w[i].th, NULL);
                total += w[i].bytes;
            }
            t1 = now();
            r[k] = (double)total / (t1 - t0) / 1e9;
        }
        qsort(r, REPEATS, sizeof(r[0]), cmp);
        printf("%d,%.1f\n", n, r[REPEATS / 2]);
        fflush(stdout);
    }
    return 0;
}
