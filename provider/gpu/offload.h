/*
 * offload.h - the GPU path's decisions and jobs: when a call goes to the GPU
 * (offload.c, dispatch.c), running a job with its reporting, and the rule
 * for buffers that overlap.
 */
#ifndef GPUAES_OFFLOAD_H
#define GPUAES_OFFLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "gpuaes_gpu.h"                /* gpuaes_job */

typedef struct gpuaes_prov gpuaes_prov;             /* prov_ctx.h */
typedef struct fallback_cipher fallback_cipher;     /* prov_ctx.h */

/* The GPU operations, each with its own offload threshold. */
typedef enum {
    OFFLOAD_ECB_ENC, OFFLOAD_ECB_DEC, OFFLOAD_CBC_DEC, OFFLOAD_CFB_DEC, OFFLOAD_CTR, OFFLOAD_GCM,
    OFFLOAD_KINDS
} offload_kind;

/* Each kind's GPU operation: the block path's job, and the operation whose
 * rate the service publishes for the kind (GCM: encryption, for both). */
static inline gpuaes_op offload_op(offload_kind kind)
{
    static const gpuaes_op ops[OFFLOAD_KINDS] = {
        [OFFLOAD_ECB_ENC] = GPUAES_ECB_ENCRYPT, [OFFLOAD_ECB_DEC] = GPUAES_ECB_DECRYPT,
        [OFFLOAD_CBC_DEC] = GPUAES_CBC_DECRYPT, [OFFLOAD_CFB_DEC] = GPUAES_CFB128_DECRYPT,
        [OFFLOAD_CTR] = GPUAES_CTR128, [OFFLOAD_GCM] = GPUAES_GCM_ENCRYPT,
    };
    return ops[kind];
}

/* offload.c: the decision to use the GPU, and running a job with its reporting. */
/* Whether the GPU can take this kind at all (GCM needs compute capability 8.0). */
int offload_possible(offload_kind kind);
/* The GPU is up for a call of len bytes that it could take; starts it once the
 * process has done gpu_start_bytes of such work (never blocks). */
int offload_gpu_up(const gpuaes_prov *prov, size_t len);
/* Known never to run on the GPU in this process (asks nothing of a GPU not started). */
int offload_ruled_out(offload_kind kind);

/* A call as the gate sees it: its kind and key size, what the CPU's first
 * estimate is measured with (offload_measure_cpu): the variant's fallback,
 * its IV length and direction; and whether a CPU answer binds the caller's
 * later calls too (a GCM message's first data: the default provider keeps
 * the message), so that dispatch never takes it to look again at the CPU. */
typedef struct offload_call {
    const fallback_cipher *fb;
    offload_kind kind;
    size_t keylen;
    size_t ivlen;
    int enc;
    int cpu_binds;
} offload_call;

typedef enum {
    GATE_CPU,                         /* not the GPU's: below the threshold, no GPU up */
    GATE_CPU_CHOSEN,                  /* the GPU could, dispatch chose the CPU: time the call */
    GATE_GPU,
} offload_gate_answer;

/* The one gate of every call that may go to the GPU: the kind's threshold,
 * the GPU up (started once the process has done gpu_start_bytes of such
 * work), the kind possible there, then dispatch (the CPU's first estimate
 * measured aside before it is asked). */
offload_gate_answer offload_gate(const gpuaes_prov *prov, const offload_call *call, size_t len);
/* The threshold in force for kind (SIZE_MAX: never; the GPU path is off when
 * the default provider failed an assumption at load). */
size_t offload_threshold(const gpuaes_prov *prov, offload_kind kind);
/* Keystream ahead (CTR) in force: the knob, unless the GPU path is off. */
int offload_keystream_on(const gpuaes_prov *prov);

/*
 * How a cipher family finishes a GPU job on the CPU (offload_job).  arg is
 * the family's.  The caller's pieces (share) run on the calling thread from
 * the job's end while the GPU runs, if the policy gives it pieces.  After
 * the job:
 *   stopped  the GPU's prefix [0, job->done) is done: the state there is
 *            job->iv (GCM: job->ghash, the prefix's GHASH)
 *   gap      [job->done, job->cpu_from), which neither did (a GPU failure;
 *            all of the job when it got no key), on the CPU from that state
 *   resumed  the share did [job->cpu_from, len): go on from job->iv_end
 *            (GCM: job->ghash_tail)
 */
typedef struct offload_finish {
    gpuaes_cpu_share_fn share;
    int (*stopped)(void *arg, const gpuaes_job *job);
    int (*gap)(void *arg, unsigned char *out, const unsigned char *in, size_t n);
    int (*resumed)(void *arg, const gpuaes_job *job);
} offload_finish;

/* Runs job (op, in, out, len, iv, h filled in) of kind (whose estimates it
 * feeds and whose share policy it follows) with the context's GPU key, made
 * from key on first use into *gpukey, and finishes it on the CPU: 1 when all
 * of [0, len) is done and the state is the one after it.  A failure of the
 * GPU is reported (error queue, debug log, counter) and costs nothing but
 * time; a failed CPU piece fails the call (in place, its input may be gone).
 * Wipes the job's chaining state. */
int offload_job(const gpuaes_prov *prov, offload_kind kind, gpuaes_job *job, gpuaes_key **gpukey,
                const unsigned char *key, size_t keylen, const offload_finish *how, void *arg);
uint64_t offload_gpu_bytes(void);
uint64_t offload_cpu_share_bytes(void);   /* done by the callers' shares of GPU jobs */
uint64_t offload_gpu_errors(void);
/* GCM bytes of messages on gpuaes's engine run on the CPU in one stitched pass
 * (gcm_fused.c): the gcm-fused-bytes parameter. */
void offload_count_gcm_fused(size_t len);
uint64_t offload_gcm_fused_bytes(void);

/* dispatch.c: CPU or GPU per call, from estimates measured in the process
 * (docs/DESIGN.md, "Dispatch").  Asked for calls at or above the kind's
 * threshold only. */
#define DISPATCH_SAMPLE ((size_t)64 << 10)   /* CPU calls this long feed the estimate */
int dispatch_to_gpu(const gpuaes_prov *prov, offload_kind kind, size_t keylen, size_t len, int cpu_binds);
/* After dispatch_to_gpu on this thread: 1 when it chose the GPU by its
 * estimates (not to look again) with no other thread of large calls, here
 * or in another process, and no other job on the GPU.  A GCM message moves
 * from the default provider only then: it cannot move back. */
int dispatch_gpu_alone(void);
uint64_t dispatch_now_ns(void);
void dispatch_cpu_done(offload_kind kind, size_t keylen, size_t len, uint64_t ns);
/* Around one GPU job (offload_job): begin returns the jobs already in flight.
 * one_time: the job paid a one-time cost (gpuaes_job.first_use): no sample. */
int dispatch_gpu_begin(void);
void dispatch_gpu_end(offload_kind kind, size_t len, size_t done, int ok, int busy_at_start,
                      uint64_t ns, int one_time);
uint64_t dispatch_backoffs(void);
/* 1 for the one caller that is to measure the CPU estimate of (kind, keylen)
 * now (none yet, none claimed): it times a sample and reports it with
 * dispatch_cpu_done. */
int dispatch_cpu_claim(offload_kind kind, size_t keylen);
/* offload.c: that sample, measured aside (claimed here: a no-op once known
 * or claimed), so that no caller's large update waits on the CPU to measure
 * it: the fallback runs a scratch buffer in a context of its own (enc,
 * ivlen: as the variant's calls).  Called before dispatch_to_gpu. */
void offload_measure_cpu(const gpuaes_prov *prov, const fallback_cipher *fb, offload_kind kind,
                          size_t keylen, size_t ivlen, int enc);
#ifdef GPUAES_TEST_HOOKS
/* Model tests (test/unit/test_dispatch_model.c): nonzero, the time dispatch sees;
 * the usable cores in force (set > 0: replaced). */
extern _Atomic uint64_t dispatch_test_clock;
long dispatch_test_cores(long set);
#endif

/* A GPU keystream failure: error queue, debug log, gpu-errors (the bytes are done on the CPU). */
void offload_report_failure(const gpuaes_prov *prov, const char *what, const char *error);

/* in[0, inlen) and out[0, outlen) share bytes without starting at the same
 * address.  The GPU paths read and write in chunks, so such calls (which the
 * default provider serves in its own byte order) stay on the CPU; in-place
 * calls (out == in) do not overlap partially. */
static inline int gpuaes_overlap_partial(const void *in, size_t inlen, const void *out, size_t outlen)
{
    const uintptr_t i = (uintptr_t)in, o = (uintptr_t)out;
    if (in == NULL || out == NULL || i == o || inlen == 0 || outlen == 0) return 0;
    return i < o ? o - i < inlen : i - o < outlen;
}

#endif
