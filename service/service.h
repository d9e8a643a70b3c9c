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

#include "gpuaesd_load.h"
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

/* A connection of another uid was refused. */
void gpuaesd_count_refused(void);

/* Shuts down every client's socket, and waits up to wait_ms for their
 * threads to end.  0 when none is left. */
int gpuaesd_clients_stop(int wait_ms);

/* As gpuaesd_serve, for a connection another process of the service read
 * the first hello of (devices.c): hello (n bytes) and its memfd (mfd, or -1)
 * are handled first.  Takes fd and mfd either way. */
int gpuaesd_serve_handed(int fd, pid_t pid, const void *hello, size_t n, int mfd);

/* The status reply, as of now: this process's (self), or the service's,
 * the other GPUs' workers included. */
void gpuaesd_status_fill(gpuaesd_status_reply *st);
void gpuaesd_status_self(gpuaesd_status_reply *st);

/* devices.c: several GPUs (docs/SERVICE.md, "Several GPUs").
 * parse: the devices knob ("all", or a list "0,2"), -1 when malformed; self:
 * the device this process serves (the list's first, else 0; serve_as sets
 * a worker's).  spawn: once
 * this process's GPU start-up is over, a worker for each further device.
 * route: at a connection's first hello, 1 when it was handed to another
 * GPU's worker (then drop it here), 0 to serve it here.  fill: the DEVICES
 * reply.  clients / last_activity_ms: the workers' (for the idle exit).
 * stop: tells the workers to end; join: waits for them.
 * worker_serve: a worker's loop on its control socket ctl, until it ends or
 * sfd (a signalfd) is readable. */
int gpuaesd_devices_parse(const char *s);
int gpuaesd_devices_self(void);
void gpuaesd_devices_serve_as(int device);
void gpuaesd_devices_spawn(const char *dir, unsigned jobs, long idle_s);
int gpuaesd_devices_spawned(void);
int gpuaesd_devices_route(int fd, pid_t pid, const void *hello, size_t n, int mfd);
void gpuaesd_devices_add_status(gpuaesd_status_reply *st);
void gpuaesd_devices_fill(gpuaesd_devices_reply *r);
unsigned gpuaesd_devices_clients(void);
uint64_t gpuaesd_devices_last_activity_ms(void);
void gpuaesd_devices_stop(void);
void gpuaesd_devices_join(void);
int gpuaesd_worker_serve(int ctl, int sfd);

/* The published load (publish.c; include/gpuaesd_load.h).  init: before
 * the first client; fd: the read-only descriptor each hello reply carries,
 * -1 when nothing is published.  A request: queued (job: +1, 0, +1 if its
 * client had none, +len), started (the requests running now, itself
 * included), ended (its wire op, len, whether all of it was done, its time,
 * start's answer, whether its client has none left) or dropped unrun (job:
 * -1, 0, -1 if none left, -len). */
void gpuaesd_publish_init(void);
int gpuaesd_publish_fd(void);
void gpuaesd_publish_read(gpuaesd_load *v);     /* a copy of what the page says now */
void gpuaesd_publish_clients(int delta);
void gpuaesd_publish_job(int queued, int running, int busy, int64_t bytes);
unsigned gpuaesd_publish_start(void);
void gpuaesd_publish_end(uint32_t op, uint64_t len, int whole, uint64_t ns, unsigned running_at_start,
                         int idle);

/* Zeroes n bytes in a way the compiler keeps. */
void gpuaesd_wipe(void *p, size_t n);

/* Gives every page of a shared memfd mapping its memory, reading a byte a
 * page (a read fault allocates a memfd page and writes nothing: a client's
 * data is safe), one fault at a time (MAP_POPULATE would hold the mmap lock
 * for all of them, stalling a hello's mmap meanwhile).  Before
 * cudaHostRegister, which would otherwise fault them in under the driver's
 * lock, stalling every other client's job (docs/SERVICE.md, "Registration
 * for DMA"). */
void gpuaesd_fault_in(const void *p, size_t n);

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
