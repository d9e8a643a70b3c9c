// job_run.cu - gpuaes_gpu_run(): checks a job, takes a staging slot
// (slot_pool.h), runs the job's pipeline on it (pipeline.h) with the copy
// workers running, and gives the slot back.
#include <cstdio>
#include <cstring>

#include "kernels/aes_block.cuh"
#include "copy/copy_pool.h"
#include "runtime/cuda_guest.h"
#include "gpuaes_gpu.h"
#include "staging/host_register.h"
#include "runtime/layer_gate.h"
#include "staging/pipeline.h"
#include "staging/slot_pool.h"
#include "staging/staging_config.h"
#include "runtime/clock.h"

namespace gpuaes {
namespace {

int kmode_of(gpuaes_op op)
{
    switch (op) {
    case GPUAES_ECB_ENCRYPT: return KM_ECB_ENC;
    case GPUAES_ECB_DECRYPT: return KM_ECB_DEC;
    case GPUAES_CTR128: return KM_CTR128;
    case GPUAES_CTR32: return KM_CTR32;
    case GPUAES_CBC_DECRYPT: return KM_CBC_DEC;
    case GPUAES_CFB128_DECRYPT: return KM_CFB_DEC;
    case GPUAES_GCM_ENCRYPT:
    case GPUAES_GCM_DECRYPT: return KM_CTR32; // + GHASH (Pipeline::gh_)
    }
    return -1;
}


// copy_pool_enter() / copy_pool_leave() around one job's pipeline.
struct CopyPoolUse {
    CopyPoolUse() { copy_pool_enter(); }
    ~CopyPoolUse() { copy_pool_leave(); }
    CopyPoolUse(const CopyPoolUse &) = delete;
    CopyPoolUse &operator=(const CopyPoolUse &) = delete;
};

} // namespace
} // namespace gpuaes

extern "C" void gpuaes_gpu_run(gpuaes_job *job)
{
    using namespace gpuaes;
    if (job == nullptr) return;
    job->done = 0;
    job->cpu_from = job->len;
    job->status = GPUAES_OK;
    job->error[0] = '\0';
    job->direct = 0;
    std::memset(job->ghash, 0, sizeof job->ghash); // GCM: the GHASH of nothing done yet
    std::memset(job->ghash_tail, 0, sizeof job->ghash_tail);
    std::memcpy(job->iv_end, job->iv, 16);

    const int kmode = kmode_of(job->op);
    // in == NULL: a keystream job (CTR ops only, no caller's share).
    const bool keystream = job->in == nullptr && (job->op == GPUAES_CTR128 || job->op == GPUAES_CTR32) &&
                           job->cpu_share == nullptr;
    if (kmode < 0 || job->key == nullptr || job->len % 16 != 0 ||
        (job->len != 0 && ((job->in == nullptr && !keystream) || job->out == nullptr))) {
        job->status = GPUAES_FAILED;
        std::snprintf(job->error, sizeof job->error, "invalid job: bad op, key, buffers or length");
        return;
    }
    gpuaes_state_after(job->op, job->iv_end, job->in, job->len); // before in place overwrites in[]
    if (job->len == 0) return;
    if (!gpuaes_gpu_supports(job->op)) {
        job->status = GPUAES_BUSY;
        return;
    }

    // GPUAES_STAGING_TRACE: the fixed steps' times too (a service piece is a job).
    const bool traced = trace_this_job();
    int64_t t[7] = {traced ? mono_ns() : 0};
    int nt = 1;
    auto mark = [&] { if (traced) t[nt++] = mono_ns(); };

    LayerUse inside; // exit waits for this job to leave CUDA (layer_gate.h)
    if (!inside.ok()) {
        job->status = GPUAES_BUSY; // the process is exiting: the CPU does it
        return;
    }
    mark();
    CudaGuest guest; // the caller's context current again, and its error state as found, on return
    if (!guest.ok()) {
        job->status = GPUAES_BUSY;
        return;
    }

    // in[] and out[] in one registered range (gpuaesd's client segment):
    // DMA straight from and to it, no staging copies; unregistration waits
    // for this job.
    mark();
    DirectUse direct(keystream ? job->out : job->in, job->out, job->len);
    mark();
    Slot *slot = take_slot(job); // sets the status when there is none
    if (slot == nullptr) return;
    job->direct = direct.ok() ? 1 : 0;
    mark();

    bool idle, fatal;
    {
        CopyPoolUse copiers; // starts the copy workers at the first job
        mark();
        idle = run_pipeline(job, slot, kmode, direct.ok(), traced, &fatal);
    }
    mark();
    give_back_slot(slot, idle, fatal);
    if (traced)
        std::fprintf(stderr, "staging trace: job of %zu bytes%s, us: gate %.1f, context %.1f, registration %.1f, "
                             "slot %.1f, copy pool %.1f, pipeline and leave %.1f, slot back %.1f\n",
                     job->len, job->direct ? " (direct)" : "", (t[1] - t[0]) / 1e3, (t[2] - t[1]) / 1e3,
                     (t[3] - t[2]) / 1e3, (t[4] - t[3]) / 1e3, (t[5] - t[4]) / 1e3, (t[6] - t[5]) / 1e3,
                     (mono_ns() - t[6]) / 1e3);
}
