/*
 * ring.c - a job ring's shared memory (ring.h): made by the service, mapped
 * by the client.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ring.h"

gpuaesd_ring *gpuaesd_ring_create(int *fd)
{
    int mfd = memfd_create("gpuaesd-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    gpuaesd_ring *r;

    *fd = -1;
    if (mfd < 0)
        return NULL;
    if (ftruncate(mfd, GPUAESD_RING_BYTES) != 0
        || fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0
        || (r = mmap(NULL, GPUAESD_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0)) == MAP_FAILED) {
        close(mfd);
        return NULL;
    }
    r->magic = GPUAESD_RING_MAGIC;
    r->slots = GPUAESD_RING_SLOTS;
    *fd = mfd;
    return r;
}

gpuaesd_ring *gpuaesd_ring_map(int fd)
{
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);
    gpuaesd_ring *r;

    /* Sealed against shrinking: the service cannot make us fault on it. */
    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)
        || st.st_size != GPUAESD_RING_BYTES)
        return NULL;
    r = mmap(NULL, GPUAESD_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r == MAP_FAILED)
        return NULL;
    if (r->magic != GPUAESD_RING_MAGIC || r->slots != GPUAESD_RING_SLOTS) {
        munmap(r, GPUAESD_RING_BYTES);
        return NULL;
    }
    return r;
}

void gpuaesd_ring_unmap(gpuaesd_ring *r)
{
    if (r != NULL)
        munmap(r, GPUAESD_RING_BYTES);
}
