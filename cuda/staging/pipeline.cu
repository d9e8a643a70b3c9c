// pipeline.cu - one GPU job's pipeline: the Pipeline state machine, its
// stages and the caller's CPU share (see pipeline.h).
#include "staging/pipeline.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "kernels/aes_kernels.cuh"
#include "kernels/aes_key.h"
#include "copy/copy_pool.h"
#include "runtime/fault.h"
#include "runtime/device.h"
#include "gpuaes_counter.h"
#include "staging/pipeline_ghash.h"
#include "runtime/clock.h"
#include "runtime/poll_wait.h"
#include "staging/staging_config.h"

namespace gpuaes {
namespace {

constexpr size_t kKeystreamAhead = 2; // CTR keystream chunks on the GPU at once (enqueue_gpu)
// Direct chunks on the GPU at once: one in D2H, one in H2D, one queued to
// cover our reaction to a completion.  2 and 6 read the same as 3 (H200,
// one thread's 64 MiB ECB/GCM/CBC-dec through gpuaesd, five rounds: medians
// 24.3-26.0 against 21.3-24.7 GB/s, the spread of one setting 12-27, the
// client's copy pool then starved at random: measured again since aacff00
// it may differ; bench/results/final-checks-aacff00 call B).
constexpr size_t kDirectAhead = 3;
// The caller's share: a piece is ~40-60 us of one AES-NI core, short
// enough that the pipeline it drives meanwhile (copy-outs wait for it to
// notice a finished chunk) barely notices, long enough that the callback's
// set-up (a re-init of the default provider's context) is noise.
constexpr size_t kCpuPiece = size_t(256) << 10;

// Length of chunk i of a job, `rem` bytes of it not yet in a chunk.  The
// chunks ramp up from `first`, doubling, to the buffer size `cap`, and down
// again at the end (each at most half of what is left): the GPU starts after
// one small copy-in instead of a whole buffer's, and the last copy-out is
// small too, so that filling and draining the pipeline cost little.  A
// remainder below `first` joins the chunk before it.  Multiples of 16.
size_t chunk_len(size_t i, size_t rem, size_t first, size_t cap)
{
    size_t n = i < 32 && (first << i) < cap ? first << i : cap;
    const size_t half = ((rem / 2) + 15) & ~size_t(15);
    if (n > half) n = half > first ? half : first;
    if (n >= rem || (rem - n < first && rem <= cap)) n = rem;
    return n;
}

class Pipeline {
  public:
    Pipeline(gpuaes_job *job, Slot *slot, int kmode, bool direct, bool traced)
        : job_(job), slot_(slot), kmode_(kmode), direct_(direct)
    {
        const StagingConfig &cf = config();
        cap_ = cf.chunk;
        stream_out_ = cf.stream_out;
        nlanes_ = slot->nlanes;
        first_ = cf.first;
        zero_copy_ = cf.zero_copy;
        fault_ = gpu_fault();
        // An injected fault hits the 2nd chunk of a job of 3 or more chunks
        // (more than 4 first chunks' worth), so that a partial prefix comes
        // back; otherwise the first.
        fault_chunk_ = job->len > 4 * first_ ? 1 : 0;
        std::memcpy(iv0_, job->iv, 16);
        std::memcpy(chain_, job->iv, 16);
        std::memcpy(done_chain_, job->iv, 16);
        const bool dec = kmode_decrypts(kmode);
        std::memcpy(params_.rk, dec ? job->key->rk_dec : job->key->rk_enc, sizeof params_.rk);
        gh_ = job->op == GPUAES_GCM_ENCRYPT ? GhashOver::out : job->op == GPUAES_GCM_DECRYPT ? GhashOver::in
                                                                                          : GhashOver::none;
        if (gh_ != GhashOver::none) gcm_.set_h(job->h);
        share_ = job->cpu_share;
        cpu_from_ = job->len;
        // Direct: the input goes to the GPU by DMA anyway, and no host pass is left.
        // A keystream job (no input) makes keystream either way.
        ks_out_ = (!direct_ || job->in == nullptr) && (kmode == KM_CTR128 || kmode == KM_CTR32) &&
                  gh_ == GhashOver::none;
        // A keystream job written straight into registered memory (gpuaesd's
        // pieces and window fills) goes in whole chunks: there is no copy-in
        // for a ramp to overlap, and its answer waits for its last byte
        // anyway, while each chunk costs an enqueue (12-27 us under four
        // running jobs) and a completion poll.  H200 through gpuaesd: a lone
        // 1 MiB piece ran in 3 chunks in 146-152 us, its D2H ~19 us
        // (bench/results/service-waits-db8f23f call C).
        if (direct_ && job->in == nullptr) first_ = cap_;
        if (traced) trace_.begin(job->len / first_ + 2);
    }

    ~Pipeline()
    {
        secure_wipe(&params_, sizeof params_); // gcm_ wipes itself
        for (Flight &f : fl_) secure_wipe(&f.h_pow_n, sizeof f.h_pow_n);
    }

    // Runs the job; returns false when the slot's streams may not be idle
    // (then the slot must not be reused).
    bool run()
    {
        // Chunk counters, each <= the one before: copy-in started [0, in_),
        // GPU stage enqueued [0, gpu_), copy-out started [0, out_), retired
        // [0, done_).  Nothing at or beyond limit_ (the first failed chunk)
        // moves past the stage it is in.  The caller's pieces: [cpu_from_, len).
        while (done_ < limit_ && job_->done < cpu_from_) {
            bool moved = retire();
            moved |= start_copy_out();
            moved |= enqueue_gpu();
            moved |= start_copy_in();
            if (moved || help() || cpu_piece()) idle_since_ = 0;
            else idle();
        }
        // Copy-ins of chunks that will not be used (after a failure) still
        // write our pinned buffers: wait for them.
        for (size_t i = gpu_; i < in_; ++i) copy_wait(&fl_[i % nlanes_].copy);
        finish_iv();
        // No DMA of this job may be in flight once we return.  A lane whose
        // last chunk was seen complete (cudaStreamQuery, before its copy-out)
        // is idle already; only chunks enqueued and not seen complete,
        // [out_, gpu_), can still be running (after a failure).  Syncing
        // every lane cost ~14 us per job (measured, a 256 KiB job is ~80).
        bool idle = !fatal_;
        for (size_t i = out_; i < gpu_ && !fatal_; ++i)
            if (cudaStreamSynchronize(lane_of(i).stream) != cudaSuccess) idle = false;
        // Not idle: the slot is destroyed, and wiped then (after a sync).
        // Not done == len: with the caller's share the GPU does a prefix,
        // and a needless wipe of every lane cost ~2.5 ms per 64 MiB job
        // (measured: 39 -> 15 GB/s).
        if (idle) idle = wipe_lanes(slot_, done_ == in_, &fatal_);
        trace_.print(job_->len, in_, nlanes_);
        job_->status = job_->done == cpu_from_ ? GPUAES_OK : GPUAES_FAILED;
        if (job_->status == GPUAES_FAILED && job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "internal: incomplete job");
        return idle;
    }

    bool fatal() const { return fatal_; }

  private:
    enum class GhashOver { none, out, in }; // GCM: GHASH of the output (encrypt) or input (decrypt)

    // What a lane holds for its chunk while it is in flight.
    struct Flight {
        size_t off = 0, n = 0;           // the chunk: in[off .. off + n)
        const unsigned char *result = nullptr; // pinned: where the GPU stage leaves its output
        CopyTask copy;                   // copy-in, then copy-out
        G128 h_pow_n{};                  // GCM: H^(n/16), to append this chunk's GHASH
        unsigned char last_in[16] = {0}; // CBC/CFB: in[off + n - 16 .. off + n), read when the copy-in starts
    };

    Lane &lane_of(size_t i) { return slot_->lane[i % (size_t)nlanes_]; }
    Flight &flight_of(size_t i) { return fl_[i % (size_t)nlanes_]; }
    size_t off_of(size_t i) const { return fl_[i % (size_t)nlanes_].off; }
    size_t len_of(size_t i) const { return fl_[i % (size_t)nlanes_].n; }

    // Chunk i failed: it and every later chunk stop where they are.  After
    // a fatal error no stream may be queried again: only chunks already
    // being copied out can still be retired.
    void stop_at(size_t i)
    {
        if (i < limit_) limit_ = i;
        if (fatal_ && out_ < limit_) limit_ = out_;
    }

    // First error wins; a fatal one disables the GPU for the process.
    void fail(const char *stage, const char *call, cudaError_t e)
    {
        if (job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "%s: %s: %s", stage, call, cudaGetErrorString(e));
        if (error_is_fatal(e)) {
            fatal_ = true;
            char why[sizeof job_->error];
            std::snprintf(why, sizeof why, "%s: %s: %s", stage, call, cudaGetErrorString(e));
            mark_gpu_broken(why);
        }
    }

    // An injected fault (GPUAES_FAULT) that `hits` this stage fails chunk i
    // if it is the chosen one: the error is recorded as a real one would be.
    bool injected(size_t i, bool hits, const char *stage, const char *call)
    {
        if (!hits || i != fault_chunk_) return false;
        fault_note(job_->error, sizeof job_->error, stage, call);
        return true;
    }

    // Copy-in of the next chunk, when its lane is free.
    bool start_copy_in()
    {
        if (next_off_ >= cpu_from_ || in_ >= limit_ || in_ - done_ >= (size_t)nlanes_) return false;
        Flight &f = flight_of(in_);
        f.off = next_off_;
        f.n = chunk_len(in_, cpu_from_ - next_off_, first_, cap_);
        next_off_ += f.n;
        // The chain block after this chunk, while in[] still holds it: a
        // copy-out in place overwrites it (the next chunk's, and a CPU
        // piece's at the meeting point).
        if (kmode_ == KM_CBC_DEC || kmode_ == KM_CFB_DEC) std::memcpy(f.last_in, job_->in + f.off + f.n - 16, 16);
        trace_.mark(in_, StageTrace::copy_in);
        // Keystream chunks copy nothing in: the copy-out's XOR reads in[].
        // Direct ones neither: their H2D reads in[].
        lane_of(in_).used = true;
        if (ks_out_ || direct_)
            copy_start(&f.copy, lane_of(in_).buf.host, nullptr, 0, 0);
        else
            copy_start(&f.copy, lane_of(in_).buf.host, job_->in + f.off, f.n, 0);
        ++in_;
        return true;
    }

    // GPU stage of the next chunk, once its copy-in is complete.
    bool enqueue_gpu()
    {
        if (gpu_ >= in_ || gpu_ >= limit_ || !copy_finished(&flight_of(gpu_).copy)) return false;
        // Keystream chunks need no copy-in, so nothing else paces their GPU
        // stages: with every lane's D2H in flight at once the copy engine
        // shares itself among them and the oldest chunk, the one the XOR
        // waits for, finishes last.  Two at a time keep D2H busy (~54 GB/s)
        // and complete in order (measured, 64 MiB: 40 -> 43-47 GB/s).
        if (ks_out_ && gpu_ - out_ >= kKeystreamAhead) return false;
        if (direct_ && gpu_ - out_ >= kDirectAhead) return false; // nothing else paces them either
        copy_wait(&flight_of(gpu_).copy); // complete: only releases the task
        const size_t i = gpu_++;
        trace_.mark(i, StageTrace::enqueue);
        if (!stage_gpu(i)) stop_at(i);
        trace_.mark(i, StageTrace::enqueued);
        return true;
    }

    // Copy-out of the oldest chunk on the GPU, once its stream is done.
    bool start_copy_out()
    {
        if (out_ >= gpu_ || out_ >= limit_ || fatal_) return false;
        const size_t i = out_;
        if (injected(i, fault_ == Fault::sync, "sync", "cudaStreamSynchronize")) {
            stop_at(i);
            return true;
        }
        const cudaError_t e = cudaStreamQuery(lane_of(i).stream);
        if (e == cudaErrorNotReady) return false;
        if (e != cudaSuccess) {
            fail("sync", "cudaStreamQuery", e);
            stop_at(i);
            return true;
        }
        trace_.mark(i, StageTrace::gpu_done);
        Flight &f = flight_of(i);
        Lane &l = lane_of(i);
        if (gh_ != GhashOver::none) gcm_.append_chunk(l.buf.host + cap_, f.h_pow_n); // S: GHASH of out[0..off + n)
        // Urgent: the lane is free only once its copy-out is done.  It
        // zeroes the staging it reads, and a zero-copy chunk's input, which
        // the kernel read from the lane's pinned buffer.
        const unsigned flags = kCopyUrgent | kCopyWipe | (stream_out_ ? kCopyStream : 0);
        unsigned char *const zc_input = f.result != l.buf.host ? l.buf.host : nullptr;
        if (ks_out_ && job_->in != nullptr)
            copy_start_xor(&f.copy, job_->out + off_of(i), job_->in + off_of(i), f.result, len_of(i), flags);
        else // direct: the D2H wrote out[] already; a keystream job's is the keystream itself
            copy_start(&f.copy, job_->out + off_of(i), f.result, direct_ ? 0 : len_of(i), flags, zc_input);
        ++out_;
        return true;
    }

    // Publishes the oldest chunk once its copy-out is complete: done += n.
    bool retire()
    {
        if (done_ >= out_ || !copy_finished(&flight_of(done_).copy)) return false;
        Flight &f = flight_of(done_);
        copy_wait(&f.copy);
        job_->done += len_of(done_);
        std::memcpy(done_chain_, f.last_in, 16);
        trace_.mark(done_, StageTrace::retired);
        ++done_;
        return true;
    }

    // Nothing moved: copy a part ourselves, the most urgent first (the copy-in
    // the GPU waits for, then the oldest copy-out, then later copy-ins).  A
    // part delays our next poll by ~20 us, but the extra copier is worth
    // more (measured: only helping while the GPU was idle lost 8-15 %).
    bool help()
    {
        if (gpu_ < in_ && gpu_ < limit_ && copy_help(&flight_of(gpu_).copy)) return true;
        for (size_t i = done_; i < out_; ++i)
            if (copy_help(&flight_of(i).copy)) return true;
        for (size_t i = gpu_ + 1; i < in_; ++i)
            if (copy_help(&flight_of(i).copy)) return true;
        return false;
    }

    // The caller's share: the last kCpuPiece bytes (at most) of the region
    // no chunk has claimed, on the CPU.  Not after a failure (the job ends
    // as soon as the chunks before it are retired).
    bool cpu_piece()
    {
        if (share_ == nullptr || limit_ != SIZE_MAX || cpu_from_ <= next_off_) return false;
        const size_t n = cpu_from_ - next_off_ < kCpuPiece ? cpu_from_ - next_off_ : kCpuPiece;
        const size_t a = cpu_from_ - n;
        unsigned char st[16] = {0}, y[16] = {0};
        switch (kmode_) {
        case KM_CTR128:
        case KM_CTR32:
            counter_at(st, a / 16);
            break;
        case KM_CBC_DEC:
        case KM_CFB_DEC:
            // a > next_off_: in[a-16..a) is unclaimed, still the input.  At
            // the meeting point it is the last claimed chunk's last block.
            std::memcpy(st, a == 0 ? iv0_ : a > next_off_ ? job_->in + a - 16 : flight_of(in_ - 1).last_in, 16);
            break;
        default:
            break;
        }
        const bool ok = share_(job_->cpu_share_arg, job_->in + a, job_->out + a, n, st, y) != 0;
        if (ok && gh_ != GhashOver::none) gcm_.prepend_piece(y, n / 16);
        secure_wipe(st, sizeof st);
        secure_wipe(y, sizeof y);
        if (ok) cpu_from_ = a;
        else share_ = nullptr; // the caller fails the operation; the GPU ends the job
        return true;
    }

    // Nothing to do: poll for kPollBeforeSleepNs (poll_wait.h), then sleep until what the pipeline
    // waits for first is complete: the oldest copy-out (retire), the copy-in
    // the next GPU stage needs, or the oldest chunk on the GPU (in naps for
    // up to kGpuNapForNs, then a blocking sync).
    void idle()
    {
        const int64_t now = mono_ns();
        if (idle_since_ == 0) idle_since_ = now;
        if (now - idle_since_ < kPollBeforeSleepNs) {
            cpu_relax();
            return;
        }
        if (done_ < out_ && !copy_finished(&flight_of(done_).copy)) {
            idle_since_ = 0;
            copy_wait(&flight_of(done_).copy); // retire() then only releases it
            return;
        }
        if (gpu_ < in_ && gpu_ < limit_ && !copy_finished(&flight_of(gpu_).copy)) {
            idle_since_ = 0;
            copy_wait(&flight_of(gpu_).copy); // likewise for enqueue_gpu()
            return;
        }
        if (out_ >= gpu_ || out_ >= limit_ || fatal_) {
            idle_since_ = 0;
            return;
        }
        if (now - idle_since_ < kPollBeforeSleepNs + kGpuNapForNs) {
            sleep_ns(kGpuNapNs);       // start_copy_out() polls the stream next
            return;
        }
        idle_since_ = 0;
        // Lane out_ holds nothing after this chunk's work: an event recorded
        // now completes with it.
        Lane &l = lane_of(out_);
        const char *call = "cudaEventRecord";
        cudaError_t e = cudaEventRecord(l.idle_ev, l.stream);
        if (e == cudaSuccess) {
            call = "cudaEventSynchronize";
            e = cudaEventSynchronize(l.idle_ev);
        }
        if (e != cudaSuccess) {
            fail("sync", call, e);
            stop_at(out_);
        }
    }

    // Chunk i is in its lane's pinned buffer (keystream chunks: nothing is):
    // H2D, kernel(s), D2H, or one zero-copy kernel.
    bool stage_gpu(size_t i)
    {
        Lane &l = lane_of(i);
        Flight &f = flight_of(i);
        const size_t off = off_of(i), n = len_of(i);

        switch (kmode_) {
        case KM_CTR128:
        case KM_CTR32: {
            unsigned char c[16];
            counter_at(c, off / 16);
            gpuaes_ctr_columns(c, params_.iv_be);
            break;
        }
        case KM_CBC_DEC:
        case KM_CFB_DEC:
            std::memcpy(params_.iv_raw, chain_, 16); // last ciphertext block of chunk i-1 (or the iv)
            break;
        default:
            break;
        }
        // Chain block for chunk i+1 (and the iv once this chunk is retired).
        if (kmode_ == KM_CBC_DEC || kmode_ == KM_CFB_DEC) std::memcpy(chain_, f.last_in, 16);
        f.result = l.buf.host;

        // Zero-copy: for chunks up to 1 MiB (not GCM, whose GHASH wants the
        // data in device memory) the kernel reads the pinned input and
        // writes a separate pinned output itself, over PCIe: one launch
        // instead of H2D, launch and D2H, and no DMA start-up latency twice.
        // Measured: 1 MiB jobs 8.1 -> 10.4 GB/s, 4 MiB 14.4 -> 16.6; for
        // larger chunks the copy engines are faster (64 MiB: 37 -> 31).  An
        // H2D with only the output zero-copy lost at every size (1 MiB 10.4
        // -> 8.1).
        if (zero_copy_ok(n)) {
            // One launch stands for the copy-in, launch and copy-out faults.
            if (injected(i, fault_ == Fault::copyin || fault_ == Fault::launch || fault_ == Fault::copyout, "launch",
                         "cudaLaunchKernel"))
                return false;
            // Keystream needs no input and goes where the input would be.
            const size_t result = ks_out_ ? 0 : cap_ + 64;
            const cudaError_t ez = launch_kernel(kmode_, job_->key->rounds, params_, ks_out_ ? nullptr : l.buf.host_dev,
                                                 l.buf.host_dev + result, (uint32_t)(n / 16), l.stream);
            if (ez != cudaSuccess) {
                fail("launch", "cudaLaunchKernel", ez);
                return false;
            }
            f.result = l.buf.host + result;
            return true;
        }

        // Device bytes this chunk writes, wiped at the end of the job: the
        // keystream in dout, or the input in din and the output in dout,
        // and for GCM the GHASH scratch (matrices for H, partials).
        note_device(l, ks_out_ ? cap_ : 0, gh_ != GhashOver::none ? dmem_bytes() : cap_ + n);
        if (injected(i, fault_ == Fault::copyin, "copyin", "cudaMemcpyAsync")) return false;
        cudaError_t e = gh_ != GhashOver::none ? gcm_.ensure_frags(l) : cudaSuccess;
        if (e != cudaSuccess) {
            fail("copyin", "cudaMemcpyAsync", e);
            return false;
        }
        e = ks_out_ ? cudaSuccess
                    : cudaMemcpyAsync(l.din, direct_ ? job_->in + off : l.buf.host, n, cudaMemcpyHostToDevice, l.stream);
        if (e != cudaSuccess) {
            fail("copyin", "cudaMemcpyAsync", e);
            return false;
        }
        if (injected(i, fault_ == Fault::launch, "launch", "cudaLaunchKernel")) return false;
        e = launch_kernel(kmode_, job_->key->rounds, params_, ks_out_ ? nullptr : l.din, l.dout, (uint32_t)(n / 16),
                          l.stream);
        if (e != cudaSuccess) {
            fail("launch", "cudaLaunchKernel", e);
            return false;
        }
        if (injected(i, fault_ == Fault::copyout, "copyout", "cudaMemcpyAsync")) return false;
        if (gh_ != GhashOver::none) {
            e = gcm_.enqueue(l, f.h_pow_n, gh_ == GhashOver::out ? l.dout : l.din, (uint32_t)(n / 16), cap_);
            if (e != cudaSuccess) {
                fail("launch", "ghash kernels", e);
                return false;
            }
        }
        e = cudaMemcpyAsync(direct_ ? job_->out + off : l.buf.host, l.dout, n, cudaMemcpyDeviceToHost, l.stream);
        if (e != cudaSuccess) {
            fail("copyout", "cudaMemcpyAsync", e);
            return false;
        }
        return true;
    }

    bool zero_copy_ok(size_t n) const
    {
        return !direct_ && n <= zero_copy_ && gh_ == GhashOver::none;
    }

    // CTR modes: c := the counter block of input block `blocks` (the job's
    // iv advanced by the mode's increment).
    void counter_at(unsigned char c[16], uint64_t blocks) const
    {
        std::memcpy(c, iv0_, 16);
        if (kmode_ == KM_CTR128) gpuaes_ctr128_add(c, blocks);
        else gpuaes_ctr32_add(c, blocks);
    }

    // job->iv := the state for in[done].
    void finish_iv()
    {
        switch (kmode_) {
        case KM_CTR128:
        case KM_CTR32:
            counter_at(job_->iv, job_->done / 16);
            break;
        case KM_CBC_DEC:
        case KM_CFB_DEC:
            std::memcpy(job_->iv, done_chain_, 16);
            break;
        default:
            break; // ECB: unchanged
        }
        // S covers out[0..off_of(out_)) and every chunk started on copy-out
        // was retired, so S is the GHASH of the done prefix; Y = S * H.
        if (gh_ != GhashOver::none) gcm_.finish(job_->ghash, job_->ghash_tail);
        job_->cpu_from = cpu_from_;
    }

    gpuaes_job *job_;
    Slot *slot_;
    int kmode_;
    bool direct_; // in[] and out[] registered: DMA from and to them, no staging copies
    int nlanes_ = 0;
    size_t cap_ = 0;      // bytes per lane buffer: the largest chunk
    size_t first_ = 0;    // the first chunk's length (chunk_len)
    size_t zero_copy_ = 0; // chunks up to this long run zero-copy (stage_gpu)
    size_t next_off_ = 0; // where the next chunk begins
    size_t cpu_from_ = 0; // the caller's pieces cover [cpu_from_, len); chunks stay below it
    gpuaes_cpu_share_fn share_ = nullptr; // NULL: no (more) pieces
    int64_t idle_since_ = 0; // mono_ns() when the loop last found nothing to do (0: it did something)
    bool stream_out_ = true;
    bool ks_out_ = false; // CTR: the GPU stage makes keystream, the copy-out XORs it with in[]
    Fault fault_;
    size_t limit_ = SIZE_MAX;
    size_t in_ = 0, gpu_ = 0, out_ = 0, done_ = 0;
    size_t fault_chunk_ = 0;
    bool fatal_ = false;
    KParams params_{};
    Flight fl_[kMaxLanes];
    GhashOver gh_ = GhashOver::none;
    JobGhash gcm_; // GCM: S, the GHASH of out[0..off_of(out_)) (or in[]), the tail's Y, powers of H
    unsigned char iv0_[16];        // job->iv on entry
    unsigned char chain_[16];      // CBC/CFB chaining block for the next chunk to enqueue
    unsigned char done_chain_[16]; // CBC/CFB state after the done prefix
    StageTrace trace_;
};

} // namespace

bool run_pipeline(gpuaes_job *job, Slot *slot, int kmode, bool direct, bool traced, bool *fatal)
{
    Pipeline p(job, slot, kmode, direct, traced);
    const bool idle = p.run();
    *fatal = p.fatal();
    return idle;
}

} // namespace gpuaes
