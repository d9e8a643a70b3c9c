/*
 * gpu_remote.h - what the service backend's job part (gpu_remote.c) shares
 * with its keystream windows (remote_keystream.c).
 */
#ifndef GPUAES_GPU_REMOTE_H
#define GPUAES_GPU_REMOTE_H

#include <stddef.h>
#include <time.h>

#include "gpu_backend.h"
#include "gpuaesd_client.h"

/* A key as the service takes it: its bytes, sent with each request (wiped on free). */
typedef struct remote_key {
    size_t keylen;
    unsigned char key[32];
} remote_key;

/* gpu_remote.c */
int remote_ready(void);                /* connected, and the service's GPU up and warm */
const char *remote_socket_dir(void);   /* NULL: the default */
unsigned remote_timeout_ms(void);      /* service_timeout_ms */
unsigned remote_connect_wait_ms(void); /* service_connect_wait_ms */
/* This process's connections open and busy, as the published load counts
 * them among its clients (dispatch subtracts its own). */
void remote_count_conn(int open_delta, int busy_delta);
uint64_t remote_mono_ns(void);          /* CLOCK_MONOTONIC */
/* ms from now on CLOCK_REALTIME, the clock of a pthread_cond_timedwait. */
void remote_deadline(struct timespec *until, unsigned ms);

uint32_t remote_wire_op(gpuaes_op op);  /* GPUAESD_OP_*, 0 for none */

/* remote_pipeline.c: one job through one connection, in pieces, with the
 * caller's share (docs/SERVICE.md, "The pipeline").  0: over (job->status,
 * done, cpu_from and iv set; the connection usable, nothing in flight;
 * *busy_answer: the service answered BUSY).  -1: the connection is dead
 * (job->done / iv: the prefix copied out; cpu_from: the share's tail).
 * *warm: the bytes of the segment, from its start, this process has touched
 * (raised; a job that touched more is a first use: job->first_use). */
typedef struct remote_pipe_settings {
    size_t chunk;                      /* service_chunk: a job's pieces (page multiple) */
    unsigned timeout_ms;               /* service_timeout_ms */
    int ctr_keystream;                 /* service_ctr_keystream */
} remote_pipe_settings;
int remote_pipeline(gpuaes_job *job, const remote_key *k, gpuaesd_conn *c, const remote_pipe_settings *s,
                    int *busy_answer, size_t *warm);

/* remote_keystream.c: the keystream windows' calls of the backend's table (gpu_backend.h) */
gpuaes_ks_window *remote_ks_window_new(size_t cap);
gpuaes_status remote_ks_fill(gpuaes_ks_window *w, const gpuaes_key *key, const unsigned char ctr[16],
                             size_t nbytes, int ctr32, char error[GPUAES_ERROR_SIZE]);
int remote_ks_ready(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE]);
int remote_ks_pin(gpuaes_ks_window *w, const unsigned char **data, char error[GPUAES_ERROR_SIZE]);
void remote_ks_unpin(gpuaes_ks_window *w);
void remote_ks_window_free(gpuaes_ks_window *w);
void remote_ks_windows(size_t *windows, size_t *pooled);
void remote_ks_fork_child(void);       /* the child forgets the parent's connection */
void remote_ks_shutdown(void);         /* no window exists: closes the connection */

#endif
