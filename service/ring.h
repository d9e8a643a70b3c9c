/*
 * ring.h - a connection's job ring (include/gpuaesd_proto.h, gpuaesd_ring;
 * docs/SERVICE.md, "Job rings"), the same at both ends: the shared words'
 * atomics, the wake-up after publishing, and the memfd made by the service
 * and mapped by the client.
 */
#ifndef GPUAESD_RING_H
#define GPUAESD_RING_H

#include <stdint.h>
#include <unistd.h>

#include "gpuaesd_proto.h"

static inline uint32_t ring_load(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline void ring_store(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_RELEASE);
}

/* Between a side's store (an index, or its sleeping word) and its load of
 * the other's: with the peer doing the same, one of them sees the other. */
static inline void ring_fence(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* After publishing: wakes the peer through efd if it said it sleeps. */
static inline void ring_kick(const uint32_t *sleeping, int efd)
{
    uint64_t one = 1;

    ring_fence();
    if (ring_load(sleeping))
        (void)!write(efd, &one, sizeof(one));
}

/* Empties a (non-blocking) eventfd. */
static inline void ring_drain(int efd)
{
    uint64_t v;

    (void)!read(efd, &v, sizeof(v));
}

/* Service: a new ring (zeroed, magic and slots set) in a memfd sealed
 * against shrinking and growing, mapped; its descriptor in *fd.  NULL on
 * failure. */
gpuaesd_ring *gpuaesd_ring_create(int *fd);

/* Client: maps the ring descriptor of a hello reply after checking it (a
 * sealed memfd of GPUAESD_RING_BYTES, magic, slots); does not close fd.
 * NULL when it does not check out. */
gpuaesd_ring *gpuaesd_ring_map(int fd);

void gpuaesd_ring_unmap(gpuaesd_ring *r);

#endif
