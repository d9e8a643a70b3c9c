/*
 * gpuaes_gpu.h - the narrow C interface between provider/ (C11, OpenSSL-facing,
 * no CUDA headers) and cuda/ (CUDA C++17: devices, streams, staging, kernels).
 *
 * The GPU layer knows AES and whole-block modes; it knows nothing of OpenSSL,
 * padding, partial blocks or parameters.  The provider knows nothing of CUDA.
 */
#ifndef GPUAES_GPU_H
#define GPUAES_GPU_H

#include <stddef.h>
#include <string.h>

#include "gpuaes_counter.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Whole-block operations the GPU performs (lengths are multiples of 16). */
typedef enum gpuaes_op {
    GPUAES_ECB_ENCRYPT,
    GPUAES_ECB_DECRYPT,
    GPUAES_CTR128,        /* out = in ^ E(ctr), 128-bit big-endian counter, full carry */
    GPUAES_CTR32,         /* the same with GCM's inc32: only the low 32 bits count, mod 2^32 */
    GPUAES_CBC_DECRYPT,   /* out[i] = D(in[i]) ^ in[i-1], in[-1] = iv */
    GPUAES_CFB128_DECRYPT, /* out[i] = E(in[i-1]) ^ in[i], in[-1] = iv */
    /* GCM's bulk: GPUAES_CTR32 plus GHASH of the ciphertext (out[] when
     * encrypting, in[] when decrypting): job.h in, job.ghash out. */
    GPUAES_GCM_ENCRYPT,
    GPUAES_GCM_DECRYPT
} gpuaes_op;

/* The chaining state for in[len] of a job of op that starts at state iv (in
 * place): the counter advanced by len / 16 blocks (CTR128 with full carry,
 * CTR32 and GCM by inc32), or the last input block (CBC and CFB decryption
 * chain on the previous ciphertext block); ECB has none.  in: the job's
 * input, read before an in-place job overwrites it (unused by the counter
 * modes, whose keystream jobs have none).  The one copy of this rule: the
 * GPU layer's job results and the service client's pieces use it. */
static inline void gpuaes_state_after(gpuaes_op op, unsigned char iv[16], const unsigned char *in,
                                      size_t len)
{
    switch (op) {
    case GPUAES_CTR128:
        gpuaes_ctr128_add(iv, len / 16);
        break;
    case GPUAES_CTR32: case GPUAES_GCM_ENCRYPT: case GPUAES_GCM_DECRYPT:
        gpuaes_ctr32_add(iv, len / 16);
        break;
    case GPUAES_CBC_DECRYPT: case GPUAES_CFB128_DECRYPT:
        if (len >= 16)
            memcpy(iv, in + len - 16, 16);
        break;
    case GPUAES_ECB_ENCRYPT: case GPUAES_ECB_DECRYPT:
        break;
    }
}

/* Outcome of gpuaes_gpu_run(). */
typedef enum gpuaes_status {
    GPUAES_OK = 0,     /* everything done on the GPU */
    GPUAES_BUSY,       /* no GPU or no free staging slot: nothing done, not an error */
    GPUAES_FAILED      /* a CUDA call failed: job.error says which; a prefix may be done */
} gpuaes_status;

/* The size of every error buffer of this interface (job.error and the
 * error[] arguments below): one NUL-terminated line, truncated to fit. */
#define GPUAES_ERROR_SIZE 160

/* Expanded AES key schedules (encryption and equivalent-inverse decryption),
 * host memory only; wiped on free. */
typedef struct gpuaes_key gpuaes_key;

/* keylen 16, 24 or 32 bytes; NULL on any other length or out of memory. */
gpuaes_key *gpuaes_key_new(const unsigned char *key, size_t keylen);
void gpuaes_key_free(gpuaes_key *key);

/*
 * The caller's share of a job (optional): the calling thread, which drives
 * the GPU pipeline, processes pieces from the job's END on the CPU whenever
 * the pipeline has nothing else for it to do, while the GPU takes chunks
 * from the front; the two meet in the middle.  The callback processes
 * in[0..n) -> out[0..n) (pointers into the job's buffers, a piece of whole
 * blocks; out may equal in) with the job's op, starting from `state`: the CTR
 * counter block of in[0] (GPUAES_CTR128 / CTR32 / GCM), the previous
 * ciphertext block (CBC / CFB decrypt; the layer keeps it even when the GPU
 * has already overwritten it in place), or nothing (ECB).  GCM (the GHASH
 * ops only): it also writes `ghash` = Y of the piece's ciphertext (see
 * gpuaes_job.ghash).  Called on the thread that called gpuaes_gpu_run(),
 * pieces in back-to-front order, never concurrently.  Returns 1 when the
 * piece is done; 0 on failure: then out[0..n) may be partly written, the
 * layer takes no further pieces (the piece belongs to the gap, below), and
 * the caller, who knows, must fail the whole operation.
 */
typedef int (*gpuaes_cpu_share_fn)(void *arg, const unsigned char *in, unsigned char *out, size_t n,
                                   const unsigned char state[16], unsigned char ghash[16]);

typedef struct gpuaes_job {
    gpuaes_op op;
    const gpuaes_key *key;
    /* in == NULL: a keystream job (GPUAES_CTR128 / CTR32 only, no cpu_share):
     * out = E(ctr), E(ctr + 1), ... (gpuaesd's keystream windows, in a
     * registered range: DMA'd straight there, no input copied). */
    /* In: CTR counter block of in[0], or CBC/CFB previous ciphertext block.
     * Out: the same for in[done] (counter advanced, or last ciphertext block
     * consumed), so the caller can finish the rest of the job elsewhere. */
    unsigned char iv[16];
    const unsigned char *in;
    unsigned char *out;            /* may equal in (in place) */
    size_t len;                    /* multiple of 16 */
    /* GPUAES_GCM_*: in: the GHASH key H = E_K(0^128).  Out: Y = S * H, where
     * S is the GHASH from a zero state of the ciphertext blocks C_1..C_n of
     * the done prefix (n = done/16), S = sum_{i=1..n} C_i * H^(n-i+1): the
     * "times H" form that both the GPU and the default provider's GHASH (via
     * a GCM tag) give without a division by H.  All zero when done is 0.
     * ghash_tail: the same for the CPU-done tail, out[cpu_from..len).  Unused
     * by the other operations. */
    unsigned char h[16];
    unsigned char ghash[16];
    unsigned char ghash_tail[16];
    gpuaes_cpu_share_fn cpu_share; /* NULL: the GPU does it all */
    void *cpu_share_arg;
    /* Results */
    size_t done;                   /* bytes of the GPU prefix out[0..done) final and correct (multiple of 16) */
    size_t cpu_from;               /* out[cpu_from..len) final and correct, done by cpu_share (len: none) */
    unsigned char iv_end[16];      /* the state (as iv) for in[len], whatever was done */
    gpuaes_status status;          /* GPUAES_OK: done == cpu_from (all of out[] is done) */
    char error[GPUAES_ERROR_SIZE];               /* why, when status == GPUAES_FAILED */
    int direct;                    /* 1: ran by DMA straight from a registered range (below) */
    /* 1: the job paid a one-time cost, so its time is no sample of the path's
     * speed (gpuaesd's client: memory of its segment touched for the first
     * time, tens of ms per 64 MiB).  The caller zeroes it; a layer sets it. */
    int first_use;
} gpuaes_job;

/* ---- Settings (README, "Knobs") ----
 *
 * The provider parses and range-checks every knob (openssl.cnf and the
 * environment) and hands the GPU layer's share to gpuaes_gpu_configure()
 * before anything can use the GPU.  The limits below are the one copy both
 * sides use.  Never configured (a program linking the layer alone), the
 * layer runs on these defaults.
 */
typedef enum gpuaes_fault {        /* GPUAES_FAULT: the GPU stage that fails on purpose (tests) */
    GPUAES_FAULT_NONE, GPUAES_FAULT_ALLOC, GPUAES_FAULT_COPYIN, GPUAES_FAULT_LAUNCH,
    GPUAES_FAULT_COPYOUT, GPUAES_FAULT_SYNC
} gpuaes_fault;

#define GPUAES_DEVICE_MAX           4096
#define GPUAES_STAGING_CHUNK_DEFAULT ((size_t)4 << 20)
#define GPUAES_STAGING_CHUNK_MIN    ((size_t)64 << 10)
#define GPUAES_STAGING_CHUNK_MAX    ((size_t)64 << 20)
#define GPUAES_STAGING_LANES_DEFAULT 6
#define GPUAES_STAGING_LANES_MIN    2
#define GPUAES_STAGING_LANES_MAX    16
#define GPUAES_STAGING_FIRST_DEFAULT ((size_t)256 << 10)
#define GPUAES_STAGING_FIRST_MIN    ((size_t)4 << 10)
#define GPUAES_STAGING_ZEROCOPY_DEFAULT ((size_t)1 << 20)
#define GPUAES_STAGING_TRACE_MAX    (1L << 30)
#define GPUAES_COPY_THREADS_MAX     64
#define GPUAES_IDLE_RELEASE_MS_DEFAULT 2000
#define GPUAES_COPY_PART_DEFAULT    ((size_t)256 << 10)
#define GPUAES_COPY_PART_MIN        ((size_t)4 << 10)
#define GPUAES_COPY_PART_MAX        ((size_t)64 << 20)
/* Keystream queued or in flight at once, process-wide (cuda/keystream/ks_launcher.cu):
 * a fill beyond it is refused, so no keystream window may be larger. */
#define GPUAES_KS_INFLIGHT_MAX      ((size_t)32 << 20)

typedef struct gpuaes_gpu_settings {
    int disable_gpu;               /* never use the GPU */
    int device;                    /* CUDA device, 0..GPUAES_DEVICE_MAX */
    gpuaes_fault fault;
    size_t staging_chunk;          /* largest chunk (rounded down to a power of two) */
    int staging_lanes;             /* chunks of one job in flight */
    size_t staging_first;          /* a job's first chunk */
    size_t staging_zerocopy;       /* chunks up to this long skip H2D/D2H (0: never) */
    long staging_trace;            /* time the stages of the N-th job (0: off) */
    int copy_threads;              /* host copy threads, the caller included (0: min(8, cores / 2)) */
    size_t copy_part;              /* the largest part of a copy one thread takes */
    int copy_stream;               /* non-temporal stores into the caller's output */
    size_t gpu_memory_max;         /* pinned + device bytes of slots and windows (SIZE_MAX: no cap) */
    unsigned idle_release_ms;      /* slots and windows idle this long are freed (gpuaesd: its
                                      own idle time, so a warm service stays warm) */
} gpuaes_gpu_settings;

#define GPUAES_GPU_SETTINGS_DEFAULT                                           \
    { 0, 0, GPUAES_FAULT_NONE, GPUAES_STAGING_CHUNK_DEFAULT,                  \
      GPUAES_STAGING_LANES_DEFAULT, GPUAES_STAGING_FIRST_DEFAULT,             \
      GPUAES_STAGING_ZEROCOPY_DEFAULT, 0, 0, GPUAES_COPY_PART_DEFAULT, 1, (size_t)-1, \
      GPUAES_IDLE_RELEASE_MS_DEFAULT }

/* Process-wide; each part of the layer takes the values in force at its
 * first use (in practice those of the first provider load). */
void gpuaes_gpu_configure(const gpuaes_gpu_settings *settings);

/*
 * 1 when a usable GPU is ready in this process (never in a child forked
 * after the parent used CUDA), else 0.  Never blocks: the first call starts
 * the GPU's initialisation on a gpuaes-owned thread and answers 0 until it
 * is over, so callers run on the CPU meanwhile.
 */
int gpuaes_gpu_available(void);

/* Starts the initialisation if needed, waits until it is over, and answers
 * as gpuaes_gpu_available().  For explicit questions (provider parameters,
 * tests) and for the one call that decides to start the GPU (the provider's
 * offload_gpu_up: see cuda/runtime/device.cu, "Start-up"). */
int gpuaes_gpu_wait(void);

/* 1 when the GPU can run `op` now: gpuaes_gpu_available(), and for the GCM
 * ops compute capability 8.0 or newer (GHASH runs on the tensor cores' binary
 * MMAs).  Elsewhere gpuaes_gpu_run() answers GPUAES_BUSY for the op. */
int gpuaes_gpu_supports(gpuaes_op op);

/* Human-readable: "NVIDIA H200 (sm_90, 132 SMs, 139 GiB), device 0, started
 * in 0.31 s", or why no GPU is used.  Waits for the initialisation. */
const char *gpuaes_gpu_description(void);

/* 1 once the initialisation is over (usable GPU or not); never starts it. */
int gpuaes_gpu_started(void);

/* The CUDA devices this process sees, known once the initialisation is over
 * (0 before it, and when it found none): gpuaesd starts a worker process
 * for each further device it may use. */
int gpuaes_gpu_device_count(void);

/* The same without waiting: the description once initialised, else
 * GPUAES_STATE_NOT_STARTED or "GPU starting". */
#define GPUAES_STATE_NOT_STARTED \
    "GPU not started (it starts once the process has done gpu_start_bytes of work it could take)"
const char *gpuaes_gpu_state(void);

/*
 * Runs the job through pinned staging buffers and CUDA streams, and, with
 * job.cpu_share, on the calling thread too.  Thread-safe; concurrent callers
 * use separate staging slots.  Never leaves out[] in a state other than:
 * out[0..done) and out[cpu_from..len) correct, out[done..cpu_from) (the gap)
 * untouched, save a piece whose cpu_share call failed.  The caller completes
 * the gap from job.iv (the state at in[done]; in[done..cpu_from) is still the
 * input) and continues after the job from job.iv_end.  GPUAES_BUSY: nothing
 * done (done 0, cpu_from len).
 */
void gpuaes_gpu_run(gpuaes_job *job);

/*
 * Registration for DMA: only gpuaesd (service/serve.c) calls these, for its
 * clients' shared segments; the provider never does.
 *
 * A job whose in[0..len) and out[0..len) both lie inside one registered
 * range runs "direct" (job.direct = 1): each chunk goes host -> device from
 * in + off and device -> host to out + off by DMA, with no copy through the
 * pinned staging (in place included).  Same chunks, streams, faults and
 * results (done, iv at done, ghash) as a staged job, with one difference:
 * when a direct job fails, chunks after the done prefix that were already
 * on the GPU may have written their (correct) output into out[done..len),
 * in place over the input, so the caller completes the rest from its own
 * copy of the input (gpuaesd's clients do: the application's buffers).
 *
 * gpuaes_gpu_host_register() page-locks [base, base + len) for the GPU
 * (cudaHostRegister, ~55 ms per 256 MiB of shared memory, once).  Never
 * waits for the GPU's start-up: 1 when it is not over yet (this call starts
 * it; nothing registered: call again once gpuaes_gpu_started()); 0 when
 * registered; -1 when not (no usable GPU, a range overlapping one already
 * registered, too many ranges, the CUDA call failed), error saying why.
 * Jobs in an unregistered range run staged as before.  Registered memory is
 * the caller's: it does not count against gpu_memory_max.
 *
 * gpuaes_gpu_host_unregister(): base as registered.  The range takes no new
 * direct job from the call on; the call waits for the direct jobs still
 * running in it, then unregisters it.  The rule: the memory stays mapped
 * until the call returns (gpuaesd unregisters a client's segment once the
 * client's jobs are over, then unmaps it).  0, or -1 with error (not
 * registered, or the CUDA call failed: forgotten anyway).
 * gpuaes_gpu_shutdown() unregisters whatever is left.
 */
int gpuaes_gpu_host_register(void *base, size_t len, char error[GPUAES_ERROR_SIZE]);
int gpuaes_gpu_host_unregister(void *base, char error[GPUAES_ERROR_SIZE]);

/*
 * Memory this process's GPU layer holds beyond the CUDA context (~0.5 GiB,
 * the driver's): staging slots (pinned + device, per concurrent job) and
 * keystream windows (pinned + device), capped by gpu_memory_max.  A slot or
 * window the cap would not hold is not made (the job answers GPUAES_BUSY,
 * a window NULL: the work goes to the CPU), nor one while an allocation
 * that found memory full is being backed off from; each such refusal counts.
 */
typedef struct gpuaes_gpu_memory_stats {
    size_t held;                   /* bytes now, pinned + device */
    unsigned long long refused;    /* slots and windows not made: the cap, or the back-off */
    unsigned long long oom;        /* allocations that failed for lack of memory */
} gpuaes_gpu_memory_stats;
void gpuaes_gpu_memory(gpuaes_gpu_memory_stats *stats);

/* Waits for nothing: no job may be running and no keystream window be in
 * use (every context freed; e.g. at provider unload).  Wipes and frees all
 * staging slots, pooled keystream windows and the GPU layer's threads; the
 * layer stays usable (the next job or window makes them again).
 * Idempotent.  The exit-time release (final) is internal (cuda/runtime/lifecycle.h). */
void gpuaes_gpu_release(void);

/* Gives back everything the GPU layer holds: the initialisation thread
 * joined, copy threads joined, staging and keystream memory wiped and freed;
 * then forgets the initialisation, so that a later call starts afresh.  For
 * the teardown of the last provider instance: no job or window may be in use. */
void gpuaes_gpu_shutdown(void);


/*
 * memcpy(dst, src, n) (not overlapping) by the copy pool's threads and the
 * caller (GPUAES_COPY_THREADS, load rule as for staging copies); stream:
 * non-temporal stores where copy_stream allows (dst not read soon).  Starts
 * no CUDA: for the service backend's copies into and out of its segment.
 * Thread-safe.  gpuaes_host_copy_stop() joins the copy threads (none may be
 * copying for the caller's module to be unloaded; a later copy starts them
 * again).
 */
void gpuaes_host_copy(void *dst, const void *src, size_t n, int stream);
void gpuaes_host_copy_stop(void);

/*
 * The same, begun on the copy pool's threads and ended later, so that the
 * caller can do something else meanwhile (the service backend copies a
 * piece in while the one before is copied out).  dst = src, or src ^ ks
 * when ks is not NULL (n bytes each; dst may equal src).  end waits for
 * the copy, copying what no thread has begun, and frees the task.  A NULL
 * task (out of memory) means the copy is done already; end(NULL) does
 * nothing.  Every begun copy must be ended before its buffers go.
 */
typedef struct gpuaes_host_copy_task gpuaes_host_copy_task;
gpuaes_host_copy_task *gpuaes_host_copy_begin(void *dst, const void *src, const void *ks, size_t n,
                                              int stream);
void gpuaes_host_copy_end(gpuaes_host_copy_task *task);

/* ---- Keystream ahead: asynchronous CTR keystream windows (cuda/keystream/ks_windows.cu) ----
 *
 * A window is a pinned host buffer (and its device twin) that the GPU fills
 * with AES-CTR keystream, E(ctr), E(ctr+1), ..., asynchronously.  Fills of all
 * windows (all contexts, all threads) are coalesced: whatever is queued while
 * a launch is being issued goes into the next one (one multi-job kernel, each
 * job with its own key schedule, counter and length).  Windows are pooled
 * process-wide; their pinned memory counts against a process-wide limit.
 * Keystream is secret: both buffers are wiped when a window is freed (back
 * to the pool); pooled windows idle for a while are freed, and all at exit.
 * A window is used by one thread at a time (its owner).  Exit: release
 * never wipes or frees a window while its owner is inside a call on it or
 * has it pinned (gpuaes_ks_pin), and every call after it fails cleanly.
 */
typedef struct gpuaes_ks_window gpuaes_ks_window;

/* Process-wide limit on the pinned memory of all windows (bytes). */
void gpuaes_ks_set_limit(size_t total_bytes);

/* A window of `cap` bytes (multiple of 16), from the pool or newly made.
 * NULL when there is no usable GPU, the limit would be exceeded, or an
 * allocation failed (not an error: the caller works on the CPU). */
gpuaes_ks_window *gpuaes_ks_window_new(size_t cap);

/* Queues the keystream of nbytes (multiple of 16, <= cap) from counter block
 * ctr (ctr32: GCM inc32, else 128-bit big-endian with carry).  The window
 * must not have a fill in flight.  GPUAES_OK: queued (poll with
 * gpuaes_ks_ready); otherwise nothing was queued and error says why. */
gpuaes_status gpuaes_ks_fill(gpuaes_ks_window *w, const gpuaes_key *key,
                             const unsigned char ctr[16], size_t nbytes, int ctr32,
                             char error[GPUAES_ERROR_SIZE]);

/* Never blocks.  1: the last fill is complete; 0: still in flight; -1: it
 * failed (error says why) or the GPU can no longer be used (fork, exit). */
int gpuaes_ks_ready(gpuaes_ks_window *w, char error[GPUAES_ERROR_SIZE]);

/* gpuaes_ks_ready(), and on 1 also pins the window: *data is the keystream
 * of the last fill, readable until gpuaes_ks_unpin(w), and the exit-time
 * release waits for (or leaves alone) a pinned window instead of wiping it.
 * On 0 and -1 nothing is pinned and *data is NULL. */
int gpuaes_ks_pin(gpuaes_ks_window *w, const unsigned char **data, char error[GPUAES_ERROR_SIZE]);
void gpuaes_ks_unpin(gpuaes_ks_window *w);

/* Waits for a fill in flight, wipes the buffers and returns the window to
 * the pool.  NULL is fine. */
void gpuaes_ks_window_free(gpuaes_ks_window *w);

/* Launches and jobs so far (coalescing evidence), for the provider's parameters. */
void gpuaes_ks_stats(unsigned long long *launches, unsigned long long *jobs);

/* Windows that exist now (in use or pooled), and of them pooled. */
void gpuaes_ks_windows(size_t *windows, size_t *pooled);

#ifdef __cplusplus
}
#endif
#endif /* GPUAES_GPU_H */
