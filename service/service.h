/*
 * service.h - gpuaesd's parts: main.c (options, start, the accept loop),
 * serve.c (a reader thread per client: hello, segment; its jobs on up to
 * max_inflight worker threads), wipe.
 */
#ifndef GPUAESD_SERVICE_H
#define GPUAESD_SERVICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuaesd_proto.h"

/* Before the first client; jobs_per_client: the jobs of one connection run
 * at once (1..GPUAESD_INFLIGHT_MAX; anything else keeps the default, 4).
 * Returns the number in force. */
unsigned gpuaesd_serve_init(unsigned jobs_per_client);

/* Serves the connected, uid-checked socket fd on a thread of its own (which
 * closes it).  -1 when no thread could be made or the client table is full:
 * then fd is closed here. */
int gpuaesd_serve(int fd, pid_t pid);

/* Clients connected now; the monotonic time (ms) of the last client
 * activity (a job, a disconnect). */
unsigned gpuaesd_clients(void);
uint64_t gpuaesd_last_activity_ms(void);
uint64_t gpuaesd_now_ms(void);

/* A connection of another uid was refused. */
void gpuaesd_count_refused(void);

/* Shuts down every client's socket, and waits up to wait_ms for their
 * threads to end.  0 when none is left. */
int gpuaesd_clients_stop(int wait_ms);

/* The status reply, as of now. */
void gpuaesd_status_fill(gpuaesd_status_reply *st);

/* The published load (publish.c; include/gpuaesd_load.h).  init: before
 * the first client; fd: the read-only descriptor each hello reply carries,
 * -1 when nothing is published.  A request: queued (job: +1, 0, +1 if its
 * client had none, +len), started (the requests running now, itself
 * included), ended (its wire op, len, whether all of it was done, its time,
 * start's answer, whether its client has none left) or dropped unrun (job:
 * -1, 0, -1 if none left, -len). */
void gpuaesd_publish_init(void);
int gpuaesd_publish_fd(void);
void gpuaesd_publish_clients(int delta);
void gpuaesd_publish_job(int queued, int running, int busy, int64_t bytes);
unsigned gpuaesd_publish_start(void);
void gpuaesd_publish_end(uint32_t op, uint64_t len, int whole, uint64_t ns, unsigned running_at_start,
                         int idle);

/* Zeroes n bytes in a way the compiler keeps. */
void gpuaesd_wipe(void *p, size_t n);

/* warm.c: the GPU layer's start-up and warm-up (a small job of every op on
 * `jobs` threads) in the background; gpu_up is GPUAESD_GPU_STARTING until
 * both are over, and jobs are answered BUSY meanwhile.  stop: joins it. */
void gpuaesd_warm_start(unsigned jobs);
void gpuaesd_warm_stop(void);
int gpuaesd_gpu_up(void);

/* spare.c: spare client segments (GPUAESD_SPARE of them, 64 MiB each),
 * made in the background from start (once the GPU is warm) on.  take: one
 * of seg_size bytes, ready (its memfd, the service's mapping, whether it is
 * registered for DMA), now the caller's; -1 when none is.  stop: joins the
 * maker and drops the spares not taken (before the layer's shutdown). */
void gpuaesd_spare_start(int dma_off);
int gpuaesd_spare_take(uint64_t seg_size, int *fd, unsigned char **map, int *registered);
unsigned gpuaesd_spares_ready(void);
void gpuaesd_spare_stop(void);
int gpuaesd_dma_off(void);

/* Logs to stderr when it is a terminal or a file (foreground); never secrets. */
void gpuaesd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The listening socket systemd passed for dir (activation.c): its fd, -1
 * when not socket-activated, -2 when activated with something unusable. */
int gpuaesd_activated_socket(const char *dir);

#endif
