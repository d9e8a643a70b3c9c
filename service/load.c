/*
 * load.c - the page of published load (include/gpuaesd_load.h): made and
 * written by the service, mapped read-only and read by clients, through a
 * seqlock of C11 atomics (lock-free, so valid across processes).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuaesd_load.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define WORDS (sizeof(gpuaesd_load) / sizeof(uint64_t))

_Static_assert(sizeof(gpuaesd_load) % sizeof(uint64_t) == 0, "gpuaesd_load: whole words");
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2,
               "the seqlock needs lock-free atomics (shared between processes)");

struct gpuaesd_load_table {
    _Atomic uint32_t magic, version, size, reserved;   /* set before sealing */
    _Atomic uint64_t seq;                              /* odd while the service writes */
    _Atomic uint64_t w[WORDS];                         /* a gpuaesd_load */
};

_Static_assert(sizeof(struct gpuaesd_load_table) <= GPUAESD_LOAD_BYTES, "the table fits its page");

gpuaesd_load_table *gpuaesd_load_create(int *ro_fd)
{
    int fd = memfd_create("gpuaesd-load", MFD_CLOEXEC | MFD_ALLOW_SEALING), ro = -1;
    gpuaesd_load_table *t = MAP_FAILED;
    char path[64];

    *ro_fd = -1;
    if (fd < 0)
        return NULL;
    if (ftruncate(fd, GPUAESD_LOAD_BYTES) != 0
        || (t = mmap(NULL, GPUAESD_LOAD_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
        goto fail;
    atomic_store(&t->magic, GPUAESD_LOAD_MAGIC);
    atomic_store(&t->version, GPUAESD_LOAD_VERSION);
    atomic_store(&t->size, (uint32_t)sizeof(*t));
    /* Our mapping was made before F_SEAL_FUTURE_WRITE and stays writable;
     * nobody else can ever write the page. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0)
        goto fail;
    /* Clients get a read-only descriptor (the seal alone already stops writes). */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ro = open(path, O_RDONLY | O_CLOEXEC);
    if (ro >= 0) {
        close(fd);
        fd = ro;
    }
    *ro_fd = fd;
    return t;
fail:
    if (t != MAP_FAILED)
        munmap(t, GPUAESD_LOAD_BYTES);
    close(fd);
    return NULL;
}

void gpuaesd_load_write(gpuaesd_load_table *t, const gpuaesd_load *v)
{
    uint64_t w[WORDS], s = atomic_load_explicit(&t->seq, memory_order_relaxed);

    memcpy(w, v, sizeof(w));
    atomic_store_explicit(&t->seq, s + 1, memory_order_relaxed);
    atomic_thread_fence(memory_order_release);     /* the odd number before any word */
    for (size_t i = 0; i < WORDS; i++)
        atomic_store_explicit(&t->w[i], w[i], memory_order_relaxed);
    atomic_store_explicit(&t->seq, s + 2, memory_order_release);
}

const gpuaesd_load_table *gpuaesd_load_map(int fd)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    gpuaesd_load_table *t;

    /* Unsealed, the service could shrink it under our mapping: a SIGBUS here. */
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != GPUAESD_LOAD_BYTES)
        return NULL;
    t = mmap(NULL, GPUAESD_LOAD_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    if (t == MAP_FAILED)
        return NULL;
    if (atomic_load(&t->magic) != GPUAESD_LOAD_MAGIC || atomic_load(&t->version) != GPUAESD_LOAD_VERSION
        || atomic_load(&t->size) != sizeof(*t)) {
        munmap(t, GPUAESD_LOAD_BYTES);
        return NULL;
    }
    return t;
}

void gpuaesd_load_unmap(const gpuaesd_load_table *t)
{
    if (t != NULL)
        munmap((void *)t, GPUAESD_LOAD_BYTES);
}

int gpuaesd_load_read(const gpuaesd_load_table *t, gpuaesd_load *v)
{
    gpuaesd_load_table *m = (gpuaesd_load_table *)t;   /* atomic loads only */
    uint64_t w[WORDS];

    for (int i = 0; i < GPUAESD_LOAD_TRIES; i++) {
        uint64_t s1 = atomic_load_explicit(&m->seq, memory_order_acquire), s2;

        if (s1 & 1) {                                  /* a write under way */
            sched_yield();
            continue;
        }
        for (size_t k = 0; k < WORDS; k++)
            w[k] = atomic_load_explicit(&m->w[k], memory_order_relaxed);
        atomic_thread_fence(memory_order_acquire);     /* the words before the second look */
        s2 = atomic_load_explicit(&m->seq, memory_order_relaxed);
        if (s1 == s2) {
            memcpy(v, w, sizeof(w));
            return 0;
        }
    }
    return -1;
}
