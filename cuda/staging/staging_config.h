// staging_config.h - the staging's shape (chunk size, lanes, first chunk,
// zero-copy bound, non-temporal copy-outs), read once from the configured
// settings, and the per-chunk stage trace (GPUAES_STAGING_TRACE), a tuning
// aid (cuda/ internal; plain C++).
#ifndef GPUAES_STAGING_CONFIG_H
#define GPUAES_STAGING_CONFIG_H

#include <cstddef>
#include <vector>

#include "gpuaes_gpu.h"

namespace gpuaes {

// The limits the provider range-checks the settings against (one place: gpuaes_gpu.h).
constexpr int kMaxLanes = GPUAES_STAGING_LANES_MAX;
constexpr size_t kMinChunk = GPUAES_STAGING_CHUNK_MIN;
constexpr size_t kMaxChunk = GPUAES_STAGING_CHUNK_MAX;

// Staging shape, read once from the configured settings (tuning; defaults measured).
struct StagingConfig {
    size_t chunk = GPUAES_STAGING_CHUNK_DEFAULT; // GPUAES_STAGING_CHUNK: bytes per chunk buffer, a power of two
    int lanes = GPUAES_STAGING_LANES_DEFAULT;   // GPUAES_STAGING_LANES: chunks in flight per job
    size_t first = GPUAES_STAGING_FIRST_DEFAULT; // GPUAES_STAGING_FIRST: the first (and least) chunk of a job
    bool stream_out = true;         // GPUAES_COPY_STREAM: non-temporal stores into out[]
    long trace_job = 0;             // GPUAES_STAGING_TRACE=N: time the stages of the N-th job (stderr)
    size_t zero_copy = GPUAES_STAGING_ZEROCOPY_DEFAULT; // GPUAES_STAGING_ZEROCOPY: chunks up to this long skip H2D/D2H (stage_gpu)
};

// The configuration in force (read at the first call).
const StagingConfig &config();

// Counts a job that begins; true when its stages are to be timed: jobs N ..
// N + kTraceJobs - 1 of the process (GPUAES_STAGING_TRACE=N; a run of them,
// so that a client's pieces through gpuaesd are seen from the ramp on).
constexpr long kTraceJobs = 40;
bool trace_this_job();

double now_us();

// Per-chunk stage times of one job (a tuning aid): when its copy-in started,
// its GPU stage was enqueued (and the enqueue returned), its GPU stage was
// seen complete, and it was retired; microseconds from the job's start.
class StageTrace {
  public:
    enum Event { copy_in, enqueue, enqueued, gpu_done, retired, kEvents };
    void begin(size_t nchunks);
    bool on() const { return !t_.empty(); }
    void mark(size_t chunk, Event e)
    {
        if (on()) t_[chunk * kEvents + e] = now_us() - t0_;
    }
    void print(size_t len, size_t chunk, int lanes) const;

  private:
    double t0_ = 0;
    std::vector<double> t_;
};

} // namespace gpuaes

#endif
