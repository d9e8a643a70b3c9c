/*
 * gpu_backend.h - which GPU layer the provider's jobs go to (docs/SERVICE.md,
 * "Step 2"): the in-process one (cuda/, or the emulator) or gpuaesd, the
 * per-user service (gpu_remote.c).  One table of the job part of
 * include/gpuaes_gpu.h, chosen once per process by the first provider load
 * (knob gpu_backend) and never changed after.
 *
 * The provider calls the job part through gpu() (gpu()->job.run(job)); the
 * layer's settings go to the in-process layer (gpu_inprocess_configure):
 * in service mode it is never loaded.
 */
#ifndef GPUAES_GPU_BACKEND_H
#define GPUAES_GPU_BACKEND_H

#include <stdatomic.h>

#include "gpuaes_layer.h"

typedef enum { GPU_BACKEND_INPROCESS, GPU_BACKEND_SERVICE } gpu_backend_kind;

/* The job part of include/gpuaes_gpu.h is one gpuaes_layer table
 * (include/gpuaes_layer.h) whichever backend runs it: in process the loaded
 * layer's calls (until the load, gpu_inprocess.c's stand-ins), through the
 * service gpu_remote.c's (keystream windows: slots of a segment that gpuaesd
 * fills, remote_keystream.c).  Its configure and ks_set_limit are not called
 * through here: the settings reach both through gpu_inprocess_configure and
 * the backends' own calls below. */
typedef struct gpu_backend {
    const char *name;
    /* For the call that crossed gpu_start_bytes: in-process it waits for the
     * start-up (offload.c says why); the service is started in the background,
     * and this waits at most 3 ms for the connection (gpu_remote.c). */
    int (*start)(void);
    /* For dispatch.c: GPU jobs in flight now from other processes, in
     * *ns_per_byte the GPU's measured ns per byte for op (16 fractional bits,
     * one job alone; 0: unknown), and in *procs the other processes' threads
     * of large calls (their connections).  The service's published load
     * (docs/SERVICE.md); in process, 0s: this process sees all it can. */
    unsigned (*load)(gpuaes_op op, uint64_t *ns_per_byte, unsigned *procs);
    gpuaes_layer job;                   /* gpu()->job.run(job), ... */
} gpu_backend;

extern _Atomic(const gpu_backend *) gpu_backend_in_use;

/* The service backend's knobs (README, "Knobs"; docs/SERVICE.md). */
typedef struct gpu_remote_settings {
    int disable_gpu;                   /* never start or connect */
    unsigned timeout_ms;               /* service_timeout_ms */
    size_t chunk;                      /* service_chunk */
    unsigned connect_wait_ms;          /* service_connect_wait_ms */
    int ctr_keystream;                 /* service_ctr_keystream */
} gpu_remote_settings;

/* A job's results before anything of it is done (gpuaes_gpu.h): done 0,
 * cpu_from len, iv_end the state at in[len], GPUAES_BUSY.  What a backend's
 * run answers for a job it does not take; the service's sets out from it. */
void gpu_job_unstarted(gpuaes_job *job);

/* A provider instance's start: the first of a process chooses, later ones
 * keep that choice while any instance lives.  Each select is paired with a
 * leave; the last leave shuts the backend down (its threads and memory go
 * back) and returns 1, and the next select chooses again with its own
 * settings (the module may stay mapped between loads: -z nodelete). */
void gpu_backend_select(gpu_backend_kind kind, const gpu_remote_settings *remote);
int gpu_backend_leave(void);
gpu_backend_kind gpu_backend_kind_in_use(void);

/* gpu_inprocess.c: the layer loaded when the GPU first starts (include/gpuaes_layer.h).
 * The provider's settings reach it through these, loaded or not. */
extern const gpu_backend gpu_backend_inprocess;
void gpu_inprocess_configure(const gpuaes_gpu_settings *s);
void gpu_inprocess_ks_limit(size_t total_bytes);

/* gpu_remote.c */
extern const gpu_backend gpu_backend_service;
void gpu_remote_configure(const gpu_remote_settings *s);
/* remote_keystream.c: the keystream segment's bound (keystream_total_bytes,
 * and the windows keystream_max_contexts contexts hold at most). */
void gpu_remote_ks_limit(size_t total_bytes, size_t windows_max);

/* The GPU layer this process's jobs go to: gpu()->job.run(job). */
static inline const gpu_backend *gpu(void)
{
    return atomic_load_explicit(&gpu_backend_in_use, memory_order_acquire);
}

#endif
