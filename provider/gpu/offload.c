/*
 * offload.c - when to use the GPU, and running a GPU job with its reporting:
 * a failure goes to the OpenSSL error queue, the debug log and a counter;
 * the caller completes the rest on the CPU.
 */
#include <stdatomic.h>
#include <openssl/err.h>

#include "prov_ctx.h"
#include "offload.h"
#include "debug.h"
#include "gpu_backend.h"

static _Atomic uint64_t gpu_bytes;
static _Atomic uint64_t cpu_share_bytes;
static _Atomic uint64_t gpu_errors;
static _Atomic uint64_t gcm_fused_bytes;

int offload_possible(offload_kind kind)
{
    return gpu()->job.supports(offload_op(kind));
}

int offload_ruled_out(offload_kind kind)
{
    return gpu()->job.started() && !offload_possible(kind);
}

/*
 * The GPU's start-up costs 0.2-0.9 s and ~0.5 GiB of device memory.  It
 * starts only in a process that has already done gpu_start_bytes of work the
 * GPU could have taken, on the CPU (dispatch = force: at the first such call),
 * so short processes never pay for it.  In-process, the call that crosses
 * the threshold waits for it (gpuaes_gpu_wait): a process must not exit while
 * the CUDA runtime starts on another thread, which crashed at exit on the
 * H200 (docs/DESIGN.md, "Threads, fork, errors, secrets").  With the service
 * backend it is started in the background; the call waits at most 3 ms, for
 * a connection to a service already running (gpu_remote.c).
 */
int offload_gpu_up(const gpuaes_prov *prov, size_t len)
{
    static _Atomic uint64_t eligible;

    if (gpu()->job.started())
        return gpu()->job.available();
    if (prov->dispatch != DISPATCH_FORCE
        && atomic_fetch_add_explicit(&eligible, len, memory_order_relaxed) + len
               < prov->gpu_start_bytes)
        return 0;
    return gpu()->start();
}

size_t offload_threshold(const gpuaes_prov *prov, offload_kind kind)
{
    return prov->gpu_path_off ? SIZE_MAX : prov->offload_min[kind];
}

int offload_keystream_on(const gpuaes_prov *prov)
{
    return prov->ks_enabled && !prov->gpu_path_off;
}

offload_gate_answer offload_gate(const gpuaes_prov *prov, const offload_call *call, size_t len)
{
    if (len < offload_threshold(prov, call->kind) || len < 16 || !offload_gpu_up(prov, len)
        || !offload_possible(call->kind))
        return GATE_CPU;
    offload_measure_cpu(prov, call->fb, call->kind, call->keylen, call->ivlen, call->enc);
    return dispatch_to_gpu(prov, call->kind, call->keylen, len, call->cpu_binds) ? GATE_GPU : GATE_CPU_CHOSEN;
}

/*
 * The dispatcher's first CPU estimate of a kind and key size, measured aside
 * by the one caller that claims it (dispatch_cpu_claim; a no-op for all
 * others and once it is known).  "An unknown CPU rate goes to the
 * CPU" put a fresh process's first large call there whole: on the H200
 * through gpuaesd, a 64 MiB CTR call took 17-22 ms instead of ~3
 * (bench/results/README.md, earlier runs: 2026-11-27-h200/s31-b), and a GCM
 * message's first data decides its engine for the whole message.  A scratch buffer in a context
 * of the fallback's own, touched first and timed the second time: ~50 us,
 * once per kind, key size and process.  Cache-hot, so the CPU looks at its
 * fastest: the GPU must beat that.
 */
void offload_measure_cpu(const gpuaes_prov *prov, const fallback_cipher *fb, offload_kind kind,
                          size_t keylen, size_t ivlen, int enc)
{
    static const unsigned char key[32], iv[16];
    size_t n = 4 * DISPATCH_SAMPLE, outl;
    unsigned char *buf;
    void *fc;
    OSSL_FUNC_cipher_encrypt_init_fn *init = enc ? fb->einit : fb->dinit;
    uint64_t t0 = 0;
    int ok;

    if (!dispatch_cpu_claim(kind, keylen))
        return;
    buf = OPENSSL_zalloc(n);
    fc = fb->newctx(prov->fallback_provctx);
    ok = buf != NULL && fc != NULL && keylen <= sizeof(key) && ivlen <= sizeof(iv);

    for (int i = 0; ok && i < 2; i++) {
        t0 = dispatch_now_ns();
        ok = init(fc, key, keylen, ivlen > 0 ? iv : NULL, ivlen, NULL)
             && fb->update(fc, buf, &outl, n, buf, n);
    }
    if (ok)
        dispatch_cpu_done(kind, keylen, n, dispatch_now_ns() - t0);
    if (fc != NULL)
        fb->freectx(fc);
    OPENSSL_clear_free(buf, n);
}

/* The GPU part of offload_job, with its reporting. */
static void run_reported(const gpuaes_prov *prov, offload_kind kind, gpuaes_job *job)
{
    job->status = GPUAES_OK;
    job->error[0] = '\0';
    {
        int busy = dispatch_gpu_begin();
        uint64_t t0 = dispatch_now_ns();

        gpu()->job.run(job);
        /* The path's rate includes the caller's share: that is what a call
         * sent this way gets. */
        dispatch_gpu_end(kind, job->len, job->done + (job->len - job->cpu_from),
                         job->status != GPUAES_FAILED, busy, dispatch_now_ns() - t0, job->first_use);
    }
    atomic_fetch_add_explicit(&gpu_bytes, job->done, memory_order_relaxed);
    atomic_fetch_add_explicit(&cpu_share_bytes, job->len - job->cpu_from, memory_order_relaxed);
    switch (job->status) {
    case GPUAES_OK:
        break;
    case GPUAES_BUSY:
        gpuaes_debug("GPU busy: %zu bytes on the CPU", job->len);
        break;
    case GPUAES_FAILED:
        atomic_fetch_add_explicit(&gpu_errors, 1, memory_order_relaxed);
        GPUAES_RAISE_DATA(prov, ERR_R_OPERATION_FAIL,
                          "gpuaes: GPU failed after %zu of %zu bytes (%s); completed on the CPU",
                          job->done, job->cpu_from, job->error);
        gpuaes_debug("GPU failed after %zu of %zu bytes: %s; completing on the CPU",
                     job->done, job->cpu_from, job->error);
        break;
    }
}

/* The caller's pieces of a job (gpu_cpu_share: which kinds get them), and
 * whether one failed. */
typedef struct share_arg {
    const offload_finish *how;
    void *arg;
    int failed;
} share_arg;

static int share_piece(void *vs, const unsigned char *in, unsigned char *out, size_t n,
                       const unsigned char state[16], unsigned char ghash[16])
{
    share_arg *s = vs;
    int ok = s->how->share(s->arg, in, out, n, state, ghash);

    s->failed |= !ok;
    return ok;
}

static int share_wanted(const gpuaes_prov *prov, offload_kind kind)
{
    return prov->cpu_share == CPU_SHARE_ALL || (prov->cpu_share == CPU_SHARE_CTR && kind == OFFLOAD_CTR);
}

int offload_job(const gpuaes_prov *prov, offload_kind kind, gpuaes_job *job, gpuaes_key **gpukey,
                const unsigned char *key, size_t keylen, const offload_finish *how, void *arg)
{
    share_arg share = { how, arg, 0 };
    int ok;

    job->done = 0;
    job->cpu_from = job->len;
    job->first_use = 0;
    if (*gpukey == NULL)
        *gpukey = gpu()->job.key_new(key, keylen);
    if (*gpukey != NULL) {            /* else the CPU does it all: one gap */
        job->key = *gpukey;
        if (how->share != NULL && share_wanted(prov, kind)) {
            job->cpu_share = share_piece;
            job->cpu_share_arg = &share;
        }
        run_reported(prov, kind, job);
    }
    if (share.failed)
        GPUAES_RAISE_DATA(prov, ERR_R_OPERATION_FAIL, "gpuaes: the CPU share of a GPU job failed");
    ok = !share.failed && how->stopped(arg, job)
        && (job->done == job->cpu_from
            || how->gap(arg, job->out + job->done, job->in + job->done, job->cpu_from - job->done))
        && (job->cpu_from == job->len || how->resumed(arg, job));
    OPENSSL_cleanse(job->iv, sizeof(job->iv));
    OPENSSL_cleanse(job->iv_end, sizeof(job->iv_end));
    OPENSSL_cleanse(job->h, sizeof(job->h));
    OPENSSL_cleanse(job->ghash, sizeof(job->ghash));
    OPENSSL_cleanse(job->ghash_tail, sizeof(job->ghash_tail));
    return ok;
}

void offload_report_failure(const gpuaes_prov *prov, const char *what, const char *error)
{
    atomic_fetch_add_explicit(&gpu_errors, 1, memory_order_relaxed);
    GPUAES_RAISE_DATA(prov, ERR_R_OPERATION_FAIL,
                      "gpuaes: GPU %s failed (%s); completed on the CPU", what, error);
    gpuaes_debug("GPU %s failed: %s; completing on the CPU", what, error);
}

uint64_t offload_gpu_bytes(void) { return atomic_load(&gpu_bytes); }
uint64_t offload_cpu_share_bytes(void) { return atomic_load(&cpu_share_bytes); }
uint64_t offload_gpu_errors(void) { return atomic_load(&gpu_errors); }

void offload_count_gcm_fused(size_t len)
{
    atomic_fetch_add_explicit(&gcm_fused_bytes, len, memory_order_relaxed);
}
uint64_t offload_gcm_fused_bytes(void) { return atomic_load(&gcm_fused_bytes); }
