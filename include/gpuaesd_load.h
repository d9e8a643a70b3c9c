/*
 * gpuaesd_load.h - the load gpuaesd publishes for every client's dispatcher
 * (docs/SERVICE.md, "Published load").
 *
 * The service makes one page of shared memory (a memfd), keeps a writable
 * mapping of it, then seals it: F_SEAL_SHRINK | F_SEAL_GROW (no client can
 * fault on a truncated page), F_SEAL_FUTURE_WRITE (from then on no write(),
 * no new writable shared mapping and no mprotect to writable, through any
 * descriptor; the service's own mapping, made before, stays writable) and
 * F_SEAL_SEAL.  A read-only descriptor of it goes with every HELLO_REPLY
 * (SCM_RIGHTS); a client maps it PROT_READ.  Without the seals (a kernel
 * before 5.1) the service sends none and clients decide alone, as before.
 *
 * The page holds one gpuaesd_load behind a seqlock: the service's single
 * writer (under its lock) makes the sequence odd, stores the words, makes it
 * even; a reader copies the words between two equal even sequence numbers,
 * and gives up after GPUAESD_LOAD_TRIES (a writer preempted mid-update, or a
 * hostile service).  A copy that comes through is then checked
 * (gpuaesd_check_load, service/proto.c): a client believes nothing out of
 * range, and never crashes on what a service put there.
 */
#ifndef GPUAESD_LOAD_H
#define GPUAESD_LOAD_H

#include <stddef.h>
#include <stdint.h>

#include "gpuaesd_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPUAESD_LOAD_MAGIC   0x6c616767u  /* "ggal" */
#define GPUAESD_LOAD_VERSION 1u
#define GPUAESD_LOAD_BYTES   4096u        /* the memfd's size */
#define GPUAESD_LOAD_TRIES   64           /* a reader's attempts at a consistent copy */
#define GPUAESD_LOAD_OPS     (GPUAESD_OP_GCM_DECRYPT + 1)   /* rates indexed by wire op (0 unused;
                                                              keystream fills publish none) */
#define GPUAESD_LOAD_JOBS_MAX 65536u      /* more jobs than this in a snapshot: nonsense */
#define GPUAESD_LOAD_RATE_MAX ((uint64_t)1 << 44)    /* bytes/s: 17 TB/s, nonsense above */

/* A snapshot (all counts over every client of the service). */
typedef struct gpuaesd_load {
    uint32_t jobs_queued;     /* requests accepted, waiting for a worker */
    uint32_t jobs_running;    /* requests running on the GPU layer now */
    uint32_t clients_busy;    /* connections with a request queued or running: a provider runs
                                 one job per connection, so these are whole jobs in flight */
    uint32_t clients;         /* connections now */
    uint32_t gpu_up;          /* GPUAESD_GPU_* */
    uint32_t reserved;        /* 0 */
    uint64_t bytes_inflight;  /* sum of len of the queued and running requests */
    uint64_t stamp_ns;        /* CLOCK_MONOTONIC of the last change */
    /* Per wire op: a request's bytes per second on the GPU layer, scaled to one request
     * alone (times the requests running beside it), decaying (each request weighs 1/8);
     * 0: none measured yet.  rate_ns: CLOCK_MONOTONIC of its last sample. */
    uint64_t rate[GPUAESD_LOAD_OPS];
    uint64_t rate_ns[GPUAESD_LOAD_OPS];
} gpuaesd_load;

typedef struct gpuaesd_load_table gpuaesd_load_table;   /* the shared page (service/load.c) */

/* Service: makes, maps (writable) and seals the page, zeroed.  The table, and
 * in *ro_fd a read-only descriptor to pass to clients; NULL when the kernel
 * cannot seal it so (then nothing is published). */
gpuaesd_load_table *gpuaesd_load_create(int *ro_fd);

/* Service: publishes v (the single writer: callers serialise). */
void gpuaesd_load_write(gpuaesd_load_table *t, const gpuaesd_load *v);

/* Client: maps the descriptor of a hello reply read-only, after checking it
 * (a regular file of GPUAESD_LOAD_BYTES sealed against shrinking, magic and
 * version); does not close fd.  NULL when it does not check out. */
const gpuaesd_load_table *gpuaesd_load_map(int fd);
void gpuaesd_load_unmap(const gpuaesd_load_table *t);

/* Client: a consistent copy of the table (the seqlock), 0; -1 when none
 * came within GPUAESD_LOAD_TRIES.  Not checked: see gpuaesd_check_load. */
int gpuaesd_load_read(const gpuaesd_load_table *t, gpuaesd_load *v);

/* Client: 0 when a copy makes sense (counts below GPUAESD_LOAD_JOBS_MAX,
 * busy clients no more than clients or than jobs, bytes at most 64 GiB a
 * job, gpu_up known, rates up to GPUAESD_LOAD_RATE_MAX, reserved 0);
 * -1: ignore it. */
int gpuaesd_check_load(const gpuaesd_load *v);

#ifdef __cplusplus
}
#endif
#endif /* GPUAESD_LOAD_H */
