// staging.cu - gpuaes_gpu_run(): moves a job through pinned staging buffers
// and CUDA streams, chunk by chunk, with every stage of different chunks in
// flight at once.
//
// A chunk goes through four stages: copy-in (the caller's pageable in[] ->
// pinned, on the copy pool's threads), GPU (H2D, kernel(s), D2H on the
// lane's stream), copy-out (pinned -> the caller's out[], copy pool again),
// retired (done += n).  Lane i % lanes holds chunk i from its copy-in to its
// retirement.  CTR without GHASH needs no input on the GPU: its GPU stage
// makes the chunk's keystream only (no copy-in, no H2D), and its copy-out
// is out[] = in[] ^ keystream (four passes over host memory per byte
// instead of six, and PCIe one way).  The calling thread drives the stages
// (a poll loop: no thread is woken per chunk) and copies parts itself when
// nothing else is ready.
//
// The caller's share (job.cpu_share): when nothing moved and no copy part
// is left to help with, the calling thread takes a piece (kCpuPiece) from
// the END of the region no chunk has claimed yet, [next_off_, cpu_from_),
// and processes it on the CPU through the callback.  Chunks are claimed
// front to back and pieces back to front, so the GPU and the caller meet in
// the middle and finish together without any tuning; one thread moves both
// ends, so the split point needs no atomics.  A piece's CBC/CFB chain block
// in[a-16..a) is still the input when it is read, except at the meeting
// point, where the GPU's last chunk may already be copied out in place:
// there it comes from the chunk's last_in, taken from in[] when its copy-in
// started.  GCM: each piece's Y (GHASH times H) is prepended to the tail's,
// Y_tail' = Y_piece * H^|tail| ^ Y_tail.  With nothing at all to do, the
// caller spins kSpinNs, then sleeps until the oldest copy or GPU chunk it
// waits for completes (copy_wait; an event with blocking sync).
//
// Why this shape (measured, bench/NOTES.md): the host copies, not PCIe or the
// kernels, bound one job; copy-ins and copy-outs of different chunks
// overlap each other here as well as the DMA, and 6 lanes of 4 MiB keep 24
// MiB in flight: enough to cover the latencies, and little enough that the
// staging stays largely in the last-level cache, where the DMA reads it (6
// beat 8 at 64 MiB in every mode, 39-41 against 37-39 GB/s for ECB, NOTES
// §11).  A job's chunks ramp up from 256 KiB and down again at its
// end (chunk_len), so that the GPU starts early and the last copy-out is short.
//
// Order and failures: GPU completions are taken and copy-outs started in
// chunk order, and a chunk is copied out only once its GPU stage succeeded,
// so out[0..done) is final and out[done..cpu_from) untouched whatever fails (a
// copy-out of chunk j never starts before every chunk < j succeeded; copy-ins
// only read in[]).  In place (out == in) chunks write only their own range.
//
// Slots: up to kMaxSlots, created on demand and reused (buffers are never
// allocated per call); a slot idle for kIdleReleaseNs is freed by the idle
// release thread (lifecycle.cu).  A caller that finds none free, or whose
// new slot gpu_memory_max would not hold (memory_cap.h: also while an
// allocation that found memory full is backed off from), gets GPUAES_BUSY
// at once.  DMA only ever touches the slot's own pinned and
// device buffers.
//
// Secrets (docs/DESIGN.md, "Secrets"): when a job returns, every pinned
// byte it wrote is zero again, and a wipe of every device byte it wrote is
// queued on the lane's stream, ahead of anything the lane does next.  The
// pinned side costs no extra pass: the copy-out that reads a chunk's
// output (or keystream) zeroes it as it reads (kCopyWipe), with the
// zero-copy input at the same offsets; the few bytes no copy-out reads (GCM's
// 16-byte chunk GHASH, its matrices, the chunks of a failed job) are wiped
// on the caller's thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <pthread.h>
#include <vector>

#include <cuda_runtime.h>

#include "aes_kernels.cuh"
#include "aes_key.h"
#include "copy_pool.h"
#include "cuda_guest.h"
#include "ghash_launch.h"
#include "gpu_settings.h"
#include "gpu_state.h"
#include "gpuaes_counter.h"
#include "gpuaes_gpu.h"
#include "memory_cap.h"

namespace gpuaes {
namespace {

constexpr int kMaxSlots = 8;
constexpr int kMaxLanes = 16;
constexpr size_t kMinChunk = size_t(64) << 10;
constexpr size_t kMaxChunk = size_t(64) << 20;
constexpr size_t kKeystreamAhead = 2; // CTR keystream chunks on the GPU at once (enqueue_gpu)
// The caller's share: a piece is ~40-60 us of one AES-NI core, short
// enough that the pipeline it drives meanwhile (copy-outs wait for it to
// notice a finished chunk) barely notices, long enough that the callback's
// set-up (a re-init of the default provider's context) is noise.
constexpr size_t kCpuPiece = size_t(256) << 10;
// With nothing to do, poll this long before sleeping.  A chunk's stage takes
// tens to hundreds of microseconds and a sleeper wakes tens of microseconds
// late; measured at 64 MiB, 1 thread (H200, share off): 10 us lost 4-15 %
// against polling (ECB 38.9 -> 35.9 GB/s), 50 us 0-6 % (CTR 48.8, ECB 37.9).
constexpr int64_t kSpinNs = 50 * 1000;
// Device GHASH scratch per lane: the partials (the chunk's result goes to
// the lane's pinned memory, at +chunk).
constexpr size_t kGhashBytes = kGhashScratch + 64;

// Staging shape, read once from the configured settings (tuning; defaults measured).
struct StagingConfig {
    size_t chunk = size_t(4) << 20; // GPUAES_STAGING_CHUNK: bytes per chunk buffer, a power of two
    int lanes = 6;                  // GPUAES_STAGING_LANES: chunks in flight per job
    size_t first = size_t(256) << 10; // GPUAES_STAGING_FIRST: the first (and least) chunk of a job
    bool stream_out = true;         // GPUAES_COPY_STREAM: non-temporal stores into out[]
    long trace_job = 0;             // GPUAES_STAGING_TRACE=N: time the stages of the N-th job (stderr)
    size_t zero_copy = size_t(1) << 20; // GPUAES_STAGING_ZEROCOPY: chunks up to this long skip H2D/D2H (stage_gpu)
    // Pinned bytes per lane: the chunk, its GHASH (GCM) at +chunk, with
    // zero-copy a second chunk at +chunk+64 for the kernel's output, and last
    // the GHASH matrices (GCM) that the lane uploads.
    size_t frags_offset() const { return zero_copy != 0 ? 2 * chunk + 64 : chunk + 64; }
    size_t host_bytes() const { return frags_offset() + sizeof(GhashFrags); }
};

StagingConfig g_config;
pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

void read_config()
{
    // Range-checked by the provider against the same limits (gpuaes_gpu.h).
    static_assert(GPUAES_STAGING_CHUNK_MIN == kMinChunk && GPUAES_STAGING_CHUNK_MAX == kMaxChunk
                  && GPUAES_STAGING_LANES_MAX == kMaxLanes, "gpuaes_gpu.h and staging.cu disagree");
    const gpuaes_gpu_settings s = gpu_settings();
    StagingConfig c;
    size_t p2 = kMinChunk;
    while (p2 * 2 <= s.staging_chunk && p2 < kMaxChunk) p2 *= 2; // round down to a power of two
    c.chunk = p2;
    c.lanes = s.staging_lanes;
    c.first = s.staging_first & ~size_t(15);
    if (c.first > c.chunk) c.first = c.chunk;
    c.stream_out = s.copy_stream != 0;
    c.trace_job = s.staging_trace;
    c.zero_copy = s.staging_zerocopy;
    g_config = c;
}

const StagingConfig &config()
{
    pthread_once(&g_config_once, read_config);
    return g_config;
}

std::atomic<long> g_jobs{0}; // jobs started, for GPUAES_STAGING_TRACE

double now_us()
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Per-chunk stage times of one job (a tuning aid): when its copy-in started,
// its GPU stage was enqueued (and the enqueue returned), its GPU stage was
// seen complete, and it was retired; microseconds from the job's start.
class StageTrace {
  public:
    enum Event { copy_in, enqueue, enqueued, gpu_done, retired, kEvents };
    void begin(size_t nchunks)
    {
        t0_ = now_us();
        try { // no exception may reach gpuaes_gpu_run's C caller: no memory, no trace
            t_.assign(nchunks * kEvents, 0.0);
        } catch (...) {
            t_.clear();
        }
    }
    bool on() const { return !t_.empty(); }
    void mark(size_t chunk, Event e)
    {
        if (on()) t_[chunk * kEvents + e] = now_us() - t0_;
    }
    void print(size_t len, size_t chunk, int lanes) const
    {
        if (!on()) return;
        std::fprintf(stderr, "staging trace: %zu bytes, %zu chunks, %d lanes, %.1f us\n"
                             "chunk copy_in enqueue enqueued gpu_done retired (us)\n",
                     len, chunk, lanes, now_us() - t0_);
        for (size_t i = 0; i < chunk && i < t_.size() / kEvents; ++i) {
            const double *r = &t_[i * kEvents];
            std::fprintf(stderr, "%5zu %8.1f %8.1f %8.1f %8.1f %8.1f\n", i, r[0], r[1], r[2], r[3], r[4]);
        }
    }

  private:
    double t0_ = 0;
    std::vector<double> t_;
};

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

struct Lane {
    cudaStream_t stream = nullptr;
    cudaEvent_t idle_ev = nullptr; // blocking-sync event: the caller sleeps on the lane's chunk
    unsigned char *host = nullptr; // pinned, host_bytes(): input, then the chunk's output (+ GHASH)
    unsigned char *host_dev = nullptr; // the same memory as the device sees it (mapped)
    // Device memory, one allocation (one memset wipes it): din | dout | dgh.
    unsigned char *dmem = nullptr;
    void *din = nullptr;           // device input, chunk bytes
    void *dout = nullptr;          // device output (separate: CBC/CFB read in[j-1])
    G128 *dgh = nullptr;           // device GHASH scratch, kGhashBytes
    // GCM: the H whose matrices (GhashFrags) are in dgh, uploaded on `stream`
    // (within a job: the end of the job wipes dgh).
    G128 frags_h{};
    bool frags_ok = false;
    // Written by the job now running, wiped at its end: device bytes
    // [dev_lo, dev_hi) of dmem, the pinned matrices, anything pinned at all.
    size_t dev_lo = 0, dev_hi = 0;
    bool frags_host = false;
    bool used = false;
};

enum class SlotState { empty, creating, idle, busy, dead };

struct Slot {
    SlotState state = SlotState::empty;
    int nlanes = 0;
    size_t reserved = 0;    // bytes of the memory cap it holds (mem_reserve), under g_pool_lock
    int64_t idle_since = 0; // mono_ns() when it last became idle
    Lane lane[kMaxLanes];
};

pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER; // guards Slot::state only
Slot g_slots[kMaxSlots];

// ---- slot pool -----------------------------------------------------------

size_t dmem_bytes() { return 2 * config().chunk + kGhashBytes; }

// Pinned + device bytes of one slot (what the memory cap counts).
size_t slot_bytes()
{
    return size_t(config().lanes) * (config().host_bytes() + dmem_bytes());
}

// Returns a slot now owned by the caller (busy, or creating: then *create is
// set and the caller must allocate it), or nullptr when all are taken or a
// new one would pass the memory cap.
Slot *acquire_slot(bool *create)
{
    Slot *got = nullptr;
    *create = false;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots)
        if (s.state == SlotState::idle) { s.state = SlotState::busy; got = &s; break; }
    if (got == nullptr)
        for (Slot &s : g_slots)
            if (s.state == SlotState::empty) {
                if (!mem_reserve(slot_bytes())) break; // counted there
                s.state = SlotState::creating;
                s.reserved = slot_bytes();
                got = &s;
                *create = true;
                break;
            }
    pthread_mutex_unlock(&g_pool_lock);
    return got;
}

void set_state(Slot *s, SlotState st)
{
    pthread_mutex_lock(&g_pool_lock);
    s->state = st;
    pthread_mutex_unlock(&g_pool_lock);
}

// Frees a slot's resources, wiping pinned and device buffers first when
// `wipe`.  Best effort: errors are ignored (a sticky one disables the GPU).
// With `cuda` false (GPU broken) only host memory is wiped and nothing is
// freed.
void destroy_slot(Slot *s, bool wipe, bool cuda)
{
    const StagingConfig &cf = config();
    auto check = [](cudaError_t e) {
        if (error_is_fatal(e)) mark_gpu_broken("staging: releasing a slot");
    };
    for (Lane &l : s->lane) {
        if (cuda && l.stream != nullptr) check(cudaStreamSynchronize(l.stream)); // no DMA in flight
        if (wipe && l.host != nullptr) secure_wipe(l.host, cf.host_bytes());
        secure_wipe(&l.frags_h, sizeof l.frags_h);
        if (!cuda) continue;
        if (wipe && l.dmem != nullptr) check(cudaMemset(l.dmem, 0, dmem_bytes()));
        if (l.dmem != nullptr) check(cudaFree(l.dmem));
        if (l.host != nullptr) check(cudaFreeHost(l.host));
        if (l.idle_ev != nullptr) check(cudaEventDestroy(l.idle_ev));
        if (l.stream != nullptr) check(cudaStreamDestroy(l.stream));
        l = Lane();
    }
    s->nlanes = 0;
    // Given back even when nothing was freed (GPU broken): no slot is made again.
    pthread_mutex_lock(&g_pool_lock);
    mem_release(s->reserved);
    s->reserved = 0;
    pthread_mutex_unlock(&g_pool_lock);
}

// ---- one job ---------------------------------------------------------------

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

// job->iv_end := the state for in[len], from the job as given (before
// anything can overwrite in[] in place).
void end_state(gpuaes_job *job, int kmode)
{
    std::memcpy(job->iv_end, job->iv, 16);
    switch (kmode) {
    case KM_CTR128: gpuaes_ctr128_add(job->iv_end, job->len / 16); break;
    case KM_CTR32: gpuaes_ctr32_add(job->iv_end, job->len / 16); break;
    case KM_CBC_DEC:
    case KM_CFB_DEC:
        if (job->len >= 16) std::memcpy(job->iv_end, job->in + job->len - 16, 16);
        break;
    default: break;
    }
}

const char *fault_name(Fault f)
{
    switch (f) {
    case Fault::alloc: return "alloc";
    case Fault::copyin: return "copyin";
    case Fault::launch: return "launch";
    case Fault::copyout: return "copyout";
    case Fault::sync: return "sync";
    default: return "none";
    }
}

class Pipeline {
  public:
    Pipeline(gpuaes_job *job, Slot *slot, int kmode) : job_(job), slot_(slot), kmode_(kmode)
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
        if (gh_ != GhashOver::none) h_ = g128_from_bytes(job->h);
        s_ = g128_zero();
        yt_ = g128_zero();
        htail_ = g128_one();
        share_ = job->cpu_share;
        cpu_from_ = job->len;
        ks_out_ = (kmode == KM_CTR128 || kmode == KM_CTR32) && gh_ == GhashOver::none;
        if (cf.trace_job != 0 && g_jobs.fetch_add(1) + 1 == cf.trace_job) trace_.begin(job->len / first_ + 2);
    }

    ~Pipeline()
    {
        secure_wipe(&params_, sizeof params_);
        secure_wipe(&gparams_, sizeof gparams_);
        secure_wipe(pw_, sizeof pw_);
        secure_wipe(&h_, sizeof h_);
        secure_wipe(&s_, sizeof s_);
        secure_wipe(&yt_, sizeof yt_);
        secure_wipe(&htail_, sizeof htail_);
        secure_wipe(&hk_, sizeof hk_);
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
        if (idle) idle = wipe_lanes();
        trace_.print(job_->len, in_, nlanes_);
        job_->status = job_->done == cpu_from_ ? GPUAES_OK : GPUAES_FAILED;
        if (job_->status == GPUAES_FAILED && job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "internal: incomplete job");
        return idle;
    }

    bool fatal() const { return fatal_; }

  private:
    // Device bytes [lo, hi) of l.dmem written by this job.
    static void note_device(Lane &l, size_t lo, size_t hi)
    {
        if (l.dev_hi == 0 || lo < l.dev_lo) l.dev_lo = lo;
        if (hi > l.dev_hi) l.dev_hi = hi;
    }

    // The end of a job whose lanes are idle: what it left in the slot is
    // wiped before anybody can reuse it.  Device: one memset per lane it
    // wrote, queued on the lane's stream (before the lane's next work; the
    // caller does not wait for it).  Pinned: the copy-outs zeroed what they
    // read; here the GCM matrices, and, if a chunk copied in was never
    // copied out (the job stopped early), all of every lane it used.  False
    // when a wipe could not be queued: the slot must then be destroyed
    // (which wipes synchronously).
    bool wipe_lanes()
    {
        // Not done == len: with the caller's share the GPU does a prefix,
        // and a needless wipe of every lane cost ~2.5 ms per 64 MiB job
        // (measured: 39 -> 15 GB/s).
        const bool complete = done_ == in_;
        const StagingConfig &cf = config();
        bool good = true;
        for (int k = 0; k < nlanes_; ++k) {
            Lane &l = slot_->lane[k];
            if (!complete && l.used) secure_wipe(l.host, cf.host_bytes());
            else if (l.frags_host) secure_wipe(l.host + cf.frags_offset(), sizeof(GhashFrags));
            l.frags_host = false;
            l.used = false;
            if (l.dev_hi == 0) continue;
            const cudaError_t e = cudaMemsetAsync(l.dmem + l.dev_lo, 0, l.dev_hi - l.dev_lo, l.stream);
            if (e != cudaSuccess) {
                if (error_is_fatal(e)) {
                    fatal_ = true;
                    mark_gpu_broken("staging: wipe: cudaMemsetAsync");
                }
                good = false;
                continue; // left for destroy_slot()
            }
            if (l.dev_hi > 2 * cap_) l.frags_ok = false; // the matrices went with the scratch
            l.dev_lo = l.dev_hi = 0;
        }
        return good;
    }

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

    static void cpu_relax()
    {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }

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
        if (job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "%s: %s: injected fault (GPUAES_FAULT=%s)", stage, call,
                          fault_name(fault_));
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
        lane_of(in_).used = true;
        copy_start(&f.copy, lane_of(in_).host, job_->in + f.off, ks_out_ ? 0 : f.n, 0);
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
        if (gh_ != GhashOver::none) { // S = S * H^n ^ S_chunk: GHASH of out[0..off + n)
            G128 sc;
            std::memcpy(&sc, l.host + cap_, sizeof sc);
            secure_wipe(l.host + cap_, sizeof sc);
            s_ = ghash_append(s_, f.h_pow_n, sc);
            secure_wipe(&sc, sizeof sc);
        }
        // Urgent: the lane is free only once its copy-out is done.  It
        // zeroes the staging it reads, and a zero-copy chunk's input, which
        // the kernel read from the lane's pinned buffer.
        const unsigned flags = kCopyUrgent | kCopyWipe | (stream_out_ ? kCopyStream : 0);
        unsigned char *const zc_input = f.result != l.host ? l.host : nullptr;
        if (ks_out_)
            copy_start_xor(&f.copy, job_->out + off_of(i), job_->in + off_of(i), f.result, len_of(i), flags);
        else
            copy_start(&f.copy, job_->out + off_of(i), f.result, len_of(i), flags, zc_input);
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
        if (ok && gh_ != GhashOver::none) {
            const size_t k = n / 16;
            if (k != hk_n_) {
                hk_ = gf_pow(h_, k);
                hk_n_ = k;
            }
            G128 yp = g128_from_bytes(y);
            yt_ = g128_xor(gf_mul(yp, htail_), yt_); // the piece goes before the tail
            htail_ = gf_mul(htail_, hk_);
            secure_wipe(&yp, sizeof yp);
        }
        secure_wipe(st, sizeof st);
        secure_wipe(y, sizeof y);
        if (ok) cpu_from_ = a;
        else share_ = nullptr; // the caller fails the operation; the GPU ends the job
        return true;
    }

    // Nothing to do: poll for kSpinNs, then sleep until what the pipeline
    // waits for first is complete: the oldest copy-out (retire), the copy-in
    // the next GPU stage needs, or the oldest chunk on the GPU.
    void idle()
    {
        const int64_t now = mono_ns();
        if (idle_since_ == 0) idle_since_ = now;
        if (now - idle_since_ < kSpinNs) {
            cpu_relax();
            return;
        }
        idle_since_ = 0;
        if (done_ < out_ && !copy_finished(&flight_of(done_).copy)) {
            copy_wait(&flight_of(done_).copy); // retire() then only releases it
            return;
        }
        if (gpu_ < in_ && gpu_ < limit_ && !copy_finished(&flight_of(gpu_).copy)) {
            copy_wait(&flight_of(gpu_).copy); // likewise for enqueue_gpu()
            return;
        }
        if (out_ >= gpu_ || out_ >= limit_ || fatal_) return;
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
        f.result = l.host;

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
            const cudaError_t ez = launch_kernel(kmode_, job_->key->rounds, params_, ks_out_ ? nullptr : l.host_dev,
                                                 l.host_dev + result, (uint32_t)(n / 16), l.stream);
            if (ez != cudaSuccess) {
                fail("launch", "cudaLaunchKernel", ez);
                return false;
            }
            f.result = l.host + result;
            return true;
        }

        // Device bytes this chunk writes, wiped at the end of the job: the
        // keystream in dout, or the input in din and the output in dout,
        // and for GCM the GHASH scratch (matrices for H, partials).
        note_device(l, ks_out_ ? cap_ : 0, gh_ != GhashOver::none ? dmem_bytes() : cap_ + n);
        if (injected(i, fault_ == Fault::copyin, "copyin", "cudaMemcpyAsync")) return false;
        cudaError_t e = gh_ != GhashOver::none ? ensure_frags(l) : cudaSuccess;
        if (e != cudaSuccess) {
            fail("copyin", "cudaMemcpyAsync", e);
            return false;
        }
        e = ks_out_ ? cudaSuccess : cudaMemcpyAsync(l.din, l.host, n, cudaMemcpyHostToDevice, l.stream);
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
            e = enqueue_ghash(l, f, gh_ == GhashOver::out ? l.dout : l.din, (uint32_t)(n / 16));
            if (e != cudaSuccess) {
                fail("launch", "ghash kernels", e);
                return false;
            }
        }
        e = cudaMemcpyAsync(l.host, l.dout, n, cudaMemcpyDeviceToHost, l.stream);
        if (e != cudaSuccess) {
            fail("copyout", "cudaMemcpyAsync", e);
            return false;
        }
        return true;
    }

    bool zero_copy_ok(size_t n) const
    {
        return n <= zero_copy_ && gh_ == GhashOver::none;
    }

    // GCM: the chunk's GHASH kernels on its stream, after the CTR kernel
    // (encrypt: over its output) or over the input (decrypt).  The powers
    // of H they need, pw_[L] = H^(m * 2^L), are squared on the host once per
    // job, a level more whenever a chunk needs it; H^nb for the host's append
    // is a product of them (m = 1: one multiply per set bit of nb, which is
    // public).  A fresh gf_pow per chunk cost ~15 us of enqueue (measured).
    cudaError_t enqueue_ghash(Lane &l, Flight &f, const void *data, uint32_t nb)
    {
        const GhashPlan pl = ghash_plan(nb);
        if (pl.m != pw_m_) {
            pw_[0] = gf_pow(h_, pl.m);
            pw_m_ = pl.m;
            pw_levels_ = 0;
        }
        square_powers(pl.levels);
        for (int L = 0; L < pl.levels; ++L) gparams_.pw[L] = pw_[L];
        gparams_.m = pl.m;
        gparams_.pad = pl.pad;
        gparams_.nb = nb;
        f.h_pow_n = pl.m == 1 ? pow_from_squares(nb) : gf_pow(h_, nb);
        // The chunk's GHASH goes straight to the lane's pinned slot (mapped):
        // one API call fewer than a 16-byte D2H (~4 us each, measured).
        return launch_ghash(gparams_, pl, data, l.dgh, reinterpret_cast<G128 *>(l.host_dev + cap_), l.stream);
    }

    // GCM: the lane's scratch must hold the tensor cores' matrices for H.
    // Built once per job into the first lane's pinned area that needs them,
    // copied to the others' (a lane's area changes only while it is idle:
    // before its first chunk of a job), uploaded only where the lane's last H
    // differs.  Compared in constant time.
    cudaError_t ensure_frags(Lane &l)
    {
        uint32_t diff = 0;
        for (int i = 0; i < 4; ++i) diff |= l.frags_h.w[i] ^ h_.w[i];
        if (l.frags_ok && diff == 0) return cudaSuccess;
        GhashFrags *f = reinterpret_cast<GhashFrags *>(l.host + config().frags_offset());
        l.frags_host = true;
        if (frags_ == nullptr) {
            if (pw_m_ != 1) { // the plans' unit (ghash_plan): pw_[L] = H^(2^L)
                pw_[0] = h_;
                pw_m_ = 1;
                pw_levels_ = 0;
            }
            square_powers(5);
            ghash_frags(pw_[3], pw_[4], pw_[5], *f); // H^8, H^16, H^32
            frags_ = f;
        } else if (frags_ != f) {
            std::memcpy(f, frags_, sizeof *f);
        }
        l.frags_ok = false;
        const cudaError_t e = upload_ghash_frags(f, l.dgh, l.stream);
        if (e == cudaSuccess) {
            l.frags_h = h_;
            l.frags_ok = true;
        }
        return e;
    }

    // pw_[L + 1] = pw_[L]^2 up to L = levels.
    void square_powers(int levels)
    {
        for (; pw_levels_ < levels; ++pw_levels_) pw_[pw_levels_ + 1] = gf_mul(pw_[pw_levels_], pw_[pw_levels_]);
    }

    // H^n from pw_[L] = H^(2^L) (pw_m_ == 1, n < 2^(pw_levels_ + 1)).
    G128 pow_from_squares(uint32_t n) const
    {
        G128 r = g128_one();
        for (int L = 0; L <= pw_levels_; ++L)
            if ((n >> L) & 1u) r = gf_mul(r, pw_[L]);
        return r;
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
        if (gh_ != GhashOver::none) {
            G128 y = gf_mul(s_, h_);
            g128_to_bytes(y, job_->ghash); // zero when nothing is done
            g128_to_bytes(yt_, job_->ghash_tail);
            secure_wipe(&y, sizeof y);
        }
        job_->cpu_from = cpu_from_;
    }

    gpuaes_job *job_;
    Slot *slot_;
    int kmode_;
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
    G128 h_{};                           // GCM: H
    G128 s_{};                           // GCM: GHASH of out[0..off_of(out_)) (or in[])
    G128 yt_{};                          // GCM: Y of the caller's tail [cpu_from_, len)
    G128 htail_{};                       // GCM: H^(tail blocks)
    G128 hk_{};                          // GCM: H^hk_n_ (pieces are mostly kCpuPiece)
    size_t hk_n_ = 0;
    GParams gparams_{};                  // GCM: GHASH kernel parameters
    const GhashFrags *frags_ = nullptr;  // GCM: this job's matrices, in the first lane that needed them
    G128 pw_[kGhashMaxLevels + 1] = {};  // GCM: H^(pw_m_ * 2^L), L = 0..pw_levels_ (squared as needed)
    uint32_t pw_m_ = 0;
    int pw_levels_ = -1;
    unsigned char iv0_[16];        // job->iv on entry
    unsigned char chain_[16];      // CBC/CFB chaining block for the next chunk to enqueue
    unsigned char done_chain_[16]; // CBC/CFB state after the done prefix
    StageTrace trace_;
};

bool create_slot(Slot *s, gpuaes_job *job)
{
    if (gpu_fault() == Fault::alloc) {
        std::snprintf(job->error, sizeof job->error, "alloc: cudaMalloc: injected fault (GPUAES_FAULT=alloc)");
        destroy_slot(s, false, false); // nothing allocated: gives the reservation back
        return false;
    }
    const StagingConfig &cf = config();
    cudaError_t e = cudaSuccess;
    const char *call = "";
    s->nlanes = cf.lanes;
    for (int k = 0; k < cf.lanes; ++k) {
        Lane &l = s->lane[k];
        if ((e = cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking)) != cudaSuccess) { call = "cudaStreamCreateWithFlags"; l.stream = nullptr; break; }
        if ((e = cudaEventCreateWithFlags(&l.idle_ev, cudaEventBlockingSync | cudaEventDisableTiming)) != cudaSuccess) { call = "cudaEventCreateWithFlags"; l.idle_ev = nullptr; break; }
        if ((e = cudaHostAlloc((void **)&l.host, cf.host_bytes(), cudaHostAllocMapped)) != cudaSuccess) { call = "cudaHostAlloc"; l.host = nullptr; break; }
        if ((e = cudaHostGetDevicePointer((void **)&l.host_dev, l.host, 0)) != cudaSuccess) { call = "cudaHostGetDevicePointer"; break; }
        if ((e = cudaMalloc((void **)&l.dmem, dmem_bytes())) != cudaSuccess) { call = "cudaMalloc"; l.dmem = nullptr; break; }
        l.din = l.dmem;
        l.dout = l.dmem + cf.chunk;
        l.dgh = reinterpret_cast<G128 *>(l.dmem + 2 * cf.chunk); // chunk: a power of two >= 64 KiB, aligned
        if ((e = cudaMemsetAsync(l.dgh, 0, kGhashBytes, l.stream)) != cudaSuccess) { call = "cudaMemsetAsync"; break; } // launch_ghash's counter
    }
    if (e == cudaSuccess) {
        mem_alloc_ok();
        return true;
    }
    if (e == cudaErrorMemoryAllocation) mem_alloc_failed(); // no retry per call: memory_cap.h
    std::snprintf(job->error, sizeof job->error, "alloc: %s: %s", call, cudaGetErrorString(e));
    if (error_is_fatal(e)) {
        mark_gpu_broken(job->error);
        destroy_slot(s, false, false);
        for (Lane &l : s->lane) l = Lane(); // leaked: the context is unusable anyway
    } else {
        destroy_slot(s, false, true); // nothing secret in them yet
    }
    return false;
}

// copy_pool_enter() / copy_pool_leave() around one job's pipeline.
struct CopyPoolUse {
    CopyPoolUse() { copy_pool_enter(); }
    ~CopyPoolUse() { copy_pool_leave(); }
    CopyPoolUse(const CopyPoolUse &) = delete;
    CopyPoolUse &operator=(const CopyPoolUse &) = delete;
};

} // namespace

void staging_atfork_child()
{
    // A parent thread may have held the lock at fork() time.  The slots
    // themselves are never touched again when the parent used CUDA.
    pthread_mutex_init(&g_pool_lock, nullptr);
    copy_pool_atfork_child();
    idle_release_atfork_child();
}

} // namespace gpuaes

extern "C" void gpuaes_gpu_run(gpuaes_job *job)
{
    using namespace gpuaes;
    if (job == nullptr) return;
    job->done = 0;
    job->cpu_from = job->len;
    job->status = GPUAES_OK;
    job->error[0] = '\0';
    std::memset(job->ghash, 0, sizeof job->ghash); // GCM: the GHASH of nothing done yet
    std::memset(job->ghash_tail, 0, sizeof job->ghash_tail);
    std::memcpy(job->iv_end, job->iv, 16);

    const int kmode = kmode_of(job->op);
    if (kmode < 0 || job->key == nullptr || job->len % 16 != 0 ||
        (job->len != 0 && (job->in == nullptr || job->out == nullptr))) {
        job->status = GPUAES_FAILED;
        std::snprintf(job->error, sizeof job->error, "invalid job: bad op, key, buffers or length");
        return;
    }
    end_state(job, kmode);
    if (job->len == 0) return;
    if (!gpuaes_gpu_supports(job->op)) {
        job->status = GPUAES_BUSY;
        return;
    }

    CudaGuest guest; // the caller's context current again, and its error state as found, on return
    if (!guest.ok()) {
        job->status = GPUAES_BUSY;
        return;
    }

    bool create = false;
    Slot *slot = acquire_slot(&create);
    if (slot == nullptr) {
        job->status = GPUAES_BUSY;
        return;
    }
    if (create && !create_slot(slot, job)) {
        set_state(slot, SlotState::empty);
        job->status = GPUAES_FAILED;
        return;
    }
    if (create) idle_release_kick(); // freed again once idle for long

    bool idle, fatal;
    {
        CopyPoolUse copiers; // starts the copy workers at the first job
        Pipeline p(job, slot, kmode);
        idle = p.run();
        fatal = p.fatal();
    }
    if (idle) {
        slot->idle_since = mono_ns();
        set_state(slot, SlotState::idle);
    } else if (fatal) {
        // The context is unusable (no DMA runs any more): pinned memory is
        // wiped now, the rest stays allocated.
        destroy_slot(slot, true, false);
        set_state(slot, SlotState::dead);
    } else {
        destroy_slot(slot, true, true); // streams in doubt: re-create later
        set_state(slot, SlotState::empty);
    }
}

namespace gpuaes {

// Slots idle for at least `idle` at `now` (and, with dead_too, dead ones)
// are wiped and freed; busy ones are left to their jobs.  True while some
// slot is still held that may become idle (the idle release thread goes on).
static bool release_slots(int64_t now, int64_t idle, bool dead_too)
{
    if (cuda_forbidden()) return false; // forked child: the slots belong to the parent's CUDA
    Slot *mine[kMaxSlots];
    bool held = false;
    int n = 0;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots) {
        if ((s.state == SlotState::idle && now - s.idle_since >= idle) || (dead_too && s.state == SlotState::dead)) {
            mine[n++] = &s;
            s.state = SlotState::creating; // in transition: not handed out meanwhile
        } else if (s.state == SlotState::idle || s.state == SlotState::busy || s.state == SlotState::creating) {
            held = true; // becomes idle later
        }
    }
    pthread_mutex_unlock(&g_pool_lock);
    if (n == 0) return held;

    CudaGuest guest(true);
    const bool cuda = !gpu_broken() && guest.ok();
    for (int i = 0; i < n; ++i) {
        destroy_slot(mine[i], true, cuda);
        if (!cuda) for (Lane &l : mine[i]->lane) l = Lane(); // wiped, left allocated
        set_state(mine[i], SlotState::empty);
    }
    return held;
}

bool staging_trim(int64_t now, int64_t idle) { return release_slots(now, idle, false); }

// A running job (only at exit) keeps its slot: its own end wipes it.
void staging_release(bool) { (void)release_slots(INT64_MAX, 0, true); }

} // namespace gpuaes
