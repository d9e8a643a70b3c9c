// staging.cu - gpuaes_gpu_run(): moves a job through pinned staging buffers
// and two CUDA streams, chunk by chunk, so that the host copies of one chunk
// overlap the GPU work (H2D, kernel, D2H) of the other.
//
// Slots: up to kMaxSlots, created on demand and reused (buffers are never
// allocated per call).  A caller that finds none free gets GPUAES_BUSY at
// once.  DMA only ever touches the slot's own pinned and device buffers;
// the caller's out[] is written by host memcpy, strictly in chunk order,
// and only after the chunk's stream was synchronised, so out[0..done) is
// always final and out[done..len) untouched, whatever fails.
//
// The host copies (caller's pageable in[] -> pinned, pinned -> pageable
// out[]) are the bottleneck on one thread (~12 GB/s each, against 50+ GB/s
// for PCIe and the kernels), so they go through parallel_memcpy()
// (copy_pool.h): split over the calling thread and a few worker threads.
// It returns only when the whole range is copied, so the ordering below is
// unchanged: per iteration i, copy-out of chunk i-2, then copy-in of chunk
// i, both while the GPU works on chunk i-1 (2 lanes).
#include <cstdio>
#include <cstring>
#include <pthread.h>

#include <cuda_runtime.h>

#include "aes_kernels.cuh"
#include "aes_key.h"
#include "copy_pool.h"
#include "ghash_launch.h"
#include "gpu_state.h"
#include "gpuaes_gpu.h"

namespace gpuaes {
namespace {

constexpr size_t kChunk = size_t(8) << 20; // bytes per pipeline stage and per buffer
constexpr int kMaxSlots = 8;
constexpr int kLanes = 2; // streams per slot: chunk i uses lane i % 2
static_assert(kChunk % 16 == 0 && kChunk / 16 < (size_t(1) << 31), "chunk size");
// Pinned bytes per lane: the chunk, then the chunk's GHASH (GCM) at host + kChunk.
constexpr size_t kHostBytes = kChunk + 64;
// Device GHASH scratch per lane: the partials, then the chunk's result.
constexpr size_t kGhashBytes = kGhashScratch + 64;

struct Lane {
    cudaStream_t stream = nullptr;
    unsigned char *host = nullptr; // pinned, kHostBytes: input, then the chunk's output (+ GHASH)
    void *din = nullptr;           // device input, kChunk bytes
    void *dout = nullptr;          // device output (separate: CBC/CFB read in[j-1])
    G128 *dgh = nullptr;           // device GHASH scratch, kGhashBytes
};

enum class SlotState { empty, creating, idle, busy, dead };

struct Slot {
    SlotState state = SlotState::empty;
    Lane lane[kLanes];
};

pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER; // guards Slot::state only
Slot g_slots[kMaxSlots];

// ---- slot pool -----------------------------------------------------------

// Returns a slot now owned by the caller (busy, or creating: then *create is
// set and the caller must allocate it), or nullptr when all are taken.
Slot *acquire_slot(bool *create)
{
    Slot *got = nullptr;
    *create = false;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots)
        if (s.state == SlotState::idle) { s.state = SlotState::busy; got = &s; break; }
    if (got == nullptr)
        for (Slot &s : g_slots)
            if (s.state == SlotState::empty) { s.state = SlotState::creating; got = &s; *create = true; break; }
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
// `wipe`.  Best effort: errors are ignored.  With `cuda` false (GPU broken)
// only host memory is wiped and nothing is freed.
void destroy_slot(Slot *s, bool wipe, bool cuda)
{
    for (Lane &l : s->lane) {
        if (cuda && l.stream != nullptr) (void)cudaStreamSynchronize(l.stream); // no DMA in flight
        if (wipe && l.host != nullptr) secure_wipe(l.host, kHostBytes);
        if (!cuda) continue;
        if (wipe && l.stream != nullptr) {
            if (l.din != nullptr) (void)cudaMemsetAsync(l.din, 0, kChunk, l.stream);
            if (l.dout != nullptr) (void)cudaMemsetAsync(l.dout, 0, kChunk, l.stream);
            if (l.dgh != nullptr) (void)cudaMemsetAsync(l.dgh, 0, kGhashBytes, l.stream);
            (void)cudaStreamSynchronize(l.stream);
        }
        if (l.din != nullptr) (void)cudaFree(l.din);
        if (l.dout != nullptr) (void)cudaFree(l.dout);
        if (l.dgh != nullptr) (void)cudaFree(l.dgh);
        if (l.host != nullptr) (void)cudaFreeHost(l.host);
        if (l.stream != nullptr) (void)cudaStreamDestroy(l.stream);
        l = Lane();
    }
    if (cuda) (void)cudaGetLastError(); // leave no stale error in this thread
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

// iv += n as a 128-bit big-endian integer (wraps mod 2^128).
void ctr128_add(unsigned char iv[16], uint64_t n)
{
    for (int i = 15; i >= 0 && n != 0; --i) {
        n += iv[i];
        iv[i] = (unsigned char)n;
        n >>= 8;
    }
}

// GCM inc32, n times: bytes 12..15 as a big-endian u32 plus n, mod 2^32.
void ctr32_add(unsigned char iv[16], uint64_t n)
{
    uint32_t c = ((uint32_t)iv[12] << 24) | ((uint32_t)iv[13] << 16) | ((uint32_t)iv[14] << 8) | iv[15];
    c += (uint32_t)n;
    iv[12] = (unsigned char)(c >> 24); iv[13] = (unsigned char)(c >> 16);
    iv[14] = (unsigned char)(c >> 8);  iv[15] = (unsigned char)c;
}

void load_be_words(const unsigned char b[16], uint32_t w[4])
{
    for (int i = 0; i < 4; ++i)
        w[i] = ((uint32_t)b[4 * i] << 24) | ((uint32_t)b[4 * i + 1] << 16) | ((uint32_t)b[4 * i + 2] << 8) | b[4 * i + 3];
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
        fault_ = gpu_fault();
        nchunks_ = (job->len + kChunk - 1) / kChunk;
        // An injected fault hits the 2nd chunk of a job of 3 or more chunks,
        // so that a partial prefix comes back; otherwise the first.
        fault_chunk_ = nchunks_ >= 3 ? 1 : 0;
        std::memcpy(iv0_, job->iv, 16);
        std::memcpy(chain_, job->iv, 16);
        std::memcpy(done_chain_, job->iv, 16);
        const bool dec = kmode_decrypts(kmode);
        std::memcpy(params_.rk, dec ? job->key->rk_dec : job->key->rk_enc, sizeof params_.rk);
        gh_ = job->op == GPUAES_GCM_ENCRYPT ? GhashOver::out : job->op == GPUAES_GCM_DECRYPT ? GhashOver::in
                                                                                          : GhashOver::none;
        if (gh_ != GhashOver::none) {
            h_ = g128_from_bytes(job->h);
            gparams_.h = h_;
        }
        s_ = g128_zero();
    }

    ~Pipeline()
    {
        secure_wipe(&params_, sizeof params_);
        secure_wipe(&gparams_, sizeof gparams_);
        secure_wipe(pw_, sizeof pw_);
        secure_wipe(&h_, sizeof h_);
        secure_wipe(&s_, sizeof s_);
    }

    // Runs the job; returns false when the slot's streams may not be idle
    // (then the slot must not be reused).
    bool run()
    {
        size_t i = 0;
        for (; i < nchunks_; ++i) {
            const int s = (int)(i & 1);
            if (pend_[s].active && !finalise(s)) break; // chunk i-2
            if (!stage(i, s)) {
                const int o = s ^ 1; // chunk i-1, older than the failed one: keep it if it completes
                if (pend_[o].active && !fatal_) (void)finalise(o);
                break;
            }
        }
        if (i == nchunks_) {
            // Drain in chunk order.
            for (size_t k = nchunks_ >= 2 ? nchunks_ - 2 : 0; k < nchunks_; ++k) {
                const int s = (int)(k & 1);
                if (pend_[s].active && !finalise(s)) break;
            }
        }
        finish_iv();
        // Quiesce both streams whatever happened, so that no DMA of this job
        // is in flight once we return.
        bool idle = !fatal_;
        for (int s = 0; s < kLanes; ++s) {
            pend_[s].active = false;
            if (!fatal_ && cudaStreamSynchronize(slot_->lane[s].stream) != cudaSuccess) idle = false;
        }
        if (!fatal_) (void)cudaGetLastError();
        if (job_->done == job_->len) job_->status = GPUAES_OK;
        else job_->status = GPUAES_FAILED;
        if (job_->status == GPUAES_FAILED && job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "internal: incomplete job");
        return idle;
    }

    bool fatal() const { return fatal_; }

  private:
    enum class GhashOver { none, out, in }; // GCM: GHASH of the output (encrypt) or input (decrypt)

    struct Pending {
        bool active = false;
        size_t index = 0, off = 0, n = 0;
        G128 h_pow_n{};                  // GCM: H^(n/16), to append this chunk's GHASH
        unsigned char last_in[16] = {0}; // last input (ciphertext) block of the chunk
    };

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

    void fail_injected(const char *stage, const char *call)
    {
        if (job_->error[0] == '\0')
            std::snprintf(job_->error, sizeof job_->error, "%s: %s: injected fault (GPUAES_FAULT=%s)", stage, call,
                          fault_name(fault_));
    }

    // Stage chunk i on lane s: host copy into pinned memory, H2D, kernel, D2H.
    bool stage(size_t i, int s)
    {
        Lane &l = slot_->lane[s];
        Pending &p = pend_[s];
        const size_t off = i * kChunk;
        const size_t n = job_->len - off < kChunk ? job_->len - off : kChunk;

        switch (kmode_) {
        case KM_CTR128: {
            unsigned char c[16];
            std::memcpy(c, iv0_, 16);
            ctr128_add(c, off / 16);
            load_be_words(c, params_.iv_be);
            break;
        }
        case KM_CTR32: {
            unsigned char c[16];
            std::memcpy(c, iv0_, 16);
            ctr32_add(c, off / 16);
            load_be_words(c, params_.iv_be);
            break;
        }
        case KM_CBC_DEC:
        case KM_CFB_DEC:
            std::memcpy(params_.iv_raw, chain_, 16); // last ciphertext block of chunk i-1 (or the iv)
            break;
        default:
            break;
        }

        parallel_memcpy(l.host, job_->in + off, n);
        p.active = true;
        p.index = i;
        p.off = off;
        p.n = n;
        // Chain block for chunk i+1 and the iv once this chunk is done:
        // taken from our private copy, before any output can overwrite in[].
        std::memcpy(p.last_in, l.host + n - 16, 16);
        std::memcpy(chain_, p.last_in, 16);

        cudaError_t e;
        if (fault_ == Fault::copyin && i == fault_chunk_) {
            p.active = false;
            fail_injected("copyin", "cudaMemcpyAsync");
            return false;
        }
        e = cudaMemcpyAsync(l.din, l.host, n, cudaMemcpyHostToDevice, l.stream);
        if (e != cudaSuccess) {
            p.active = false;
            fail("copyin", "cudaMemcpyAsync", e);
            return false;
        }
        if (fault_ == Fault::launch && i == fault_chunk_) {
            p.active = false;
            fail_injected("launch", "cudaLaunchKernel");
            return false;
        }
        e = launch_kernel(kmode_, job_->key->rounds, params_, l.din, l.dout, (uint32_t)(n / 16), l.stream);
        if (e != cudaSuccess) {
            p.active = false;
            fail("launch", "cudaLaunchKernel", e);
            return false;
        }
        if (fault_ == Fault::copyout && i == fault_chunk_) {
            p.active = false;
            fail_injected("copyout", "cudaMemcpyAsync");
            return false;
        }
        if (gh_ != GhashOver::none) {
            e = enqueue_ghash(l, p, gh_ == GhashOver::out ? l.dout : l.din, (uint32_t)(n / 16));
            if (e != cudaSuccess) {
                p.active = false;
                fail("launch", "ghash kernels", e);
                return false;
            }
        }
        e = cudaMemcpyAsync(l.host, l.dout, n, cudaMemcpyDeviceToHost, l.stream);
        if (e == cudaSuccess && gh_ != GhashOver::none)
            e = cudaMemcpyAsync(l.host + kChunk, l.dgh + kGhashMaxFinal, sizeof(G128), cudaMemcpyDeviceToHost,
                                l.stream);
        if (e != cudaSuccess) {
            p.active = false;
            fail("copyout", "cudaMemcpyAsync", e);
            return false;
        }
        return true;
    }

    // GCM: the chunk's GHASH kernels on its stream, after the CTR kernel
    // (encrypt: over its output) or over the input (decrypt); the powers of
    // H they need are computed here on the host, once per job and m.
    cudaError_t enqueue_ghash(Lane &l, Pending &p, const void *data, uint32_t nb)
    {
        const GhashPlan pl = ghash_plan(nb);
        if (pl.m != pw_m_ || pl.levels > pw_levels_) {
            ghash_powers(pw_, h_, pl.m, pl.levels); // pw_[0..levels]
            pw_m_ = pl.m;
            pw_levels_ = pl.levels;
        }
        for (int L = 0; L < pl.levels; ++L) gparams_.pw[L] = pw_[L];
        gparams_.m = pl.m;
        gparams_.pad = pl.pad;
        gparams_.nb = nb;
        // H^nb for the host's append in finalise(): m*P blocks are pw_[levels].
        p.h_pow_n = pl.pad == 0 ? pw_[pl.levels] : gf_pow(h_, nb);
        return launch_ghash(gparams_, pl, data, l.dgh, l.dgh + kGhashMaxFinal, l.stream);
    }

    // Wait for lane s's chunk and publish it: out[off..off+n), done += n.
    bool finalise(int s)
    {
        Lane &l = slot_->lane[s];
        Pending &p = pend_[s];
        p.active = false;
        if (fault_ == Fault::sync && p.index == fault_chunk_) {
            fail_injected("sync", "cudaStreamSynchronize");
            return false;
        }
        const cudaError_t e = cudaStreamSynchronize(l.stream);
        if (e != cudaSuccess) {
            fail("sync", "cudaStreamSynchronize", e);
            return false;
        }
        parallel_memcpy(job_->out + p.off, l.host, p.n); // all of it, before done moves
        if (gh_ != GhashOver::none) { // S = S * H^n ^ S_chunk: GHASH of out[0..done + n)
            G128 sc;
            std::memcpy(&sc, l.host + kChunk, sizeof sc);
            s_ = ghash_append(s_, p.h_pow_n, sc);
            secure_wipe(&sc, sizeof sc);
        }
        job_->done += p.n;
        std::memcpy(done_chain_, p.last_in, 16);
        return true;
    }

    // job->iv := the state for in[done].
    void finish_iv()
    {
        switch (kmode_) {
        case KM_CTR128:
            std::memcpy(job_->iv, iv0_, 16);
            ctr128_add(job_->iv, job_->done / 16);
            break;
        case KM_CTR32:
            std::memcpy(job_->iv, iv0_, 16);
            ctr32_add(job_->iv, job_->done / 16);
            break;
        case KM_CBC_DEC:
        case KM_CFB_DEC:
            std::memcpy(job_->iv, done_chain_, 16);
            break;
        default:
            break; // ECB: unchanged
        }
        if (gh_ != GhashOver::none) g128_to_bytes(s_, job_->ghash); // zero when nothing is done
    }

    gpuaes_job *job_;
    Slot *slot_;
    int kmode_;
    Fault fault_;
    size_t nchunks_ = 0;
    size_t fault_chunk_ = 0;
    bool fatal_ = false;
    KParams params_{};
    Pending pend_[kLanes];
    GhashOver gh_ = GhashOver::none;
    G128 h_{};                           // GCM: H
    G128 s_{};                           // GCM: GHASH of out[0..done) (or in[0..done))
    GParams gparams_{};                  // GCM: GHASH kernel parameters
    G128 pw_[kGhashMaxLevels + 1] = {};  // GCM: H^(pw_m_ * 2^L), L = 0..pw_levels_
    uint32_t pw_m_ = 0;
    int pw_levels_ = -1;
    unsigned char iv0_[16];        // job->iv on entry
    unsigned char chain_[16];      // CBC/CFB chaining block for the next chunk to stage
    unsigned char done_chain_[16]; // CBC/CFB state after the done prefix
};

bool create_slot(Slot *s, gpuaes_job *job)
{
    if (gpu_fault() == Fault::alloc) {
        std::snprintf(job->error, sizeof job->error, "alloc: cudaMalloc: injected fault (GPUAES_FAULT=alloc)");
        return false;
    }
    cudaError_t e = cudaSuccess;
    const char *call = "";
    for (Lane &l : s->lane) {
        if ((e = cudaStreamCreateWithFlags(&l.stream, cudaStreamNonBlocking)) != cudaSuccess) { call = "cudaStreamCreateWithFlags"; l.stream = nullptr; break; }
        if ((e = cudaHostAlloc((void **)&l.host, kHostBytes, cudaHostAllocDefault)) != cudaSuccess) { call = "cudaHostAlloc"; l.host = nullptr; break; }
        if ((e = cudaMalloc(&l.din, kChunk)) != cudaSuccess) { call = "cudaMalloc"; l.din = nullptr; break; }
        if ((e = cudaMalloc(&l.dout, kChunk)) != cudaSuccess) { call = "cudaMalloc"; l.dout = nullptr; break; }
        if ((e = cudaMalloc((void **)&l.dgh, kGhashBytes)) != cudaSuccess) { call = "cudaMalloc"; l.dgh = nullptr; break; }
    }
    if (e == cudaSuccess) return true;
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
}

} // namespace gpuaes

extern "C" void gpuaes_gpu_run(gpuaes_job *job)
{
    using namespace gpuaes;
    if (job == nullptr) return;
    job->done = 0;
    job->status = GPUAES_OK;
    job->error[0] = '\0';
    std::memset(job->ghash, 0, sizeof job->ghash); // GCM: the GHASH of nothing done yet

    const int kmode = kmode_of(job->op);
    if (kmode < 0 || job->key == nullptr || job->len % 16 != 0 ||
        (job->len != 0 && (job->in == nullptr || job->out == nullptr))) {
        job->status = GPUAES_FAILED;
        std::snprintf(job->error, sizeof job->error, "invalid job: bad op, key, buffers or length");
        return;
    }
    if (job->len == 0) return;
    if (!gpuaes_gpu_available()) {
        job->status = GPUAES_BUSY;
        return;
    }

    cudaError_t e = cudaSetDevice(gpu_device());
    if (e != cudaSuccess) {
        job->status = GPUAES_FAILED;
        std::snprintf(job->error, sizeof job->error, "setup: cudaSetDevice: %s", cudaGetErrorString(e));
        if (error_is_fatal(e)) mark_gpu_broken(job->error);
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

    bool idle, fatal;
    {
        CopyPoolUse copiers; // starts the copy workers at the first job
        Pipeline p(job, slot, kmode);
        idle = p.run();
        fatal = p.fatal();
    }
    if (idle) {
        set_state(slot, SlotState::idle);
    } else if (fatal) {
        set_state(slot, SlotState::dead); // context unusable: wiped (host side) by release()
    } else {
        destroy_slot(slot, true, true); // streams in doubt: re-create later
        set_state(slot, SlotState::empty);
    }
}

extern "C" void gpuaes_gpu_release(void)
{
    using namespace gpuaes;
    if (cuda_forbidden()) return; // forked child: the slots belong to the parent's CUDA
    // Join the copy workers (a job still running elsewhere finishes its
    // copies on its own thread); the next job starts them again, unless
    // this is the exit-time release (copy_pool_stop(true) ran first).
    copy_pool_stop(false);
    Slot *mine[kMaxSlots];
    int n = 0;
    pthread_mutex_lock(&g_pool_lock);
    for (Slot &s : g_slots)
        if (s.state == SlotState::idle || s.state == SlotState::dead) {
            mine[n++] = &s;
            s.state = SlotState::creating; // in transition: not handed out meanwhile
        }
    pthread_mutex_unlock(&g_pool_lock);
    if (n == 0) return;

    const bool cuda = !gpu_broken() && cudaSetDevice(gpu_device()) == cudaSuccess;
    for (int i = 0; i < n; ++i) {
        destroy_slot(mine[i], true, cuda);
        if (!cuda) for (Lane &l : mine[i]->lane) l = Lane(); // wiped, left allocated
        set_state(mine[i], SlotState::empty);
    }
}
