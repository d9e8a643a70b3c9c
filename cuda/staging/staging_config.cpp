// staging_config.cpp - the staging's configuration and stage trace (see
// staging_config.h).
#include "staging/staging_config.h"

#include <atomic>
#include <cstdio>
#include <pthread.h>

#include "runtime/gpu_settings.h"
#include "gpuaes_gpu.h"
#include "runtime/clock.h"

namespace gpuaes {
namespace {

StagingConfig g_config;
pthread_once_t g_config_once = PTHREAD_ONCE_INIT;

void read_config()
{
    // Range-checked by the provider against the same limits (gpuaes_gpu.h).
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

std::atomic<long> g_jobs{0}; // jobs started, for GPUAES_STAGING_TRACE

} // namespace

const StagingConfig &config()
{
    pthread_once(&g_config_once, read_config);
    return g_config;
}

bool trace_this_job()
{
    const long n = config().trace_job;
    if (n == 0) return false;
    const long j = g_jobs.fetch_add(1) + 1;
    return j >= n && j < n + kTraceJobs;
}

double now_us()
{
    return (double)mono_ns() / 1e3;
}

void StageTrace::begin(size_t nchunks)
{
    t0_ = now_us();
    try { // no exception may reach gpuaes_gpu_run's C caller: no memory, no trace
        t_.assign(nchunks * kEvents, 0.0);
    } catch (...) {
        t_.clear();
    }
}

void StageTrace::print(size_t len, size_t chunk, int lanes) const
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

} // namespace gpuaes
