/*
 * ring.h - a connection's job ring (include/gpuaesd_proto.h, gpuaesd_ring;
 * docs/SERVICE.md, "Job rings"), the same at both ends: the shared words'
 * atomics, the wake-up after publishing, and the memfd made by the service
 * and mapped by the client.
 */
#ifndef GPUAESD_RING_H
#define GPUAESD_RING_H

#include <errno.h>
#include <poll.h>
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

enum { RING_ERROR = -1, RING_TIMEOUT = 0, RING_MOVED = 1, RING_SOCKET = 2 };

/*
 * One side's wait, the same at both ends: says it sleeps, looks once more
 * whether the peer's index moved from `seen` (the fence makes a kick it
 * would miss impossible), then waits on its eventfd and the connection's
 * socket for up to timeout_ms (-1: no bound).  RING_MOVED (look again),
 * RING_SOCKET (the socket has something: its end, or a message),
 * RING_TIMEOUT, or RING_ERROR.
 */
static inline int ring_sleep(uint32_t *sleeping, const uint32_t *index, uint32_t seen, int sock, int efd,
                             int timeout_ms)
{
    struct pollfd p[2] = { { sock, POLLIN, 0 }, { efd, POLLIN, 0 } };
    int rc;

    ring_store(sleeping, 1);
    ring_fence();
    if (ring_load(index) != seen) {
        ring_store(sleeping, 0);
        return RING_MOVED;
    }
    rc = poll(p, 2, timeout_ms);
    ring_store(sleeping, 0);
    if (rc < 0)
        return errno == EINTR ? RING_MOVED : RING_ERROR;
    if (p[1].revents & POLLIN)
        ring_drain(efd);
    if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
        return RING_SOCKET;
    return rc == 0 ? RING_TIMEOUT : RING_MOVED;
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
