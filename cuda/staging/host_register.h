// host_register.h - host memory registered for DMA (gpuaes_gpu_host_register,
// gpuaesd's client segments): the registry of ranges, and the use a direct
// job holds on one while it runs (cuda/ internal).
//
// A range is live (jobs may use it), or leaving (unregister has begun: no new
// job takes it, the call waits for those running).  One mutex guards the
// table; a job looks it up once (a scan of at most kMaxHostRanges entries,
// skipped while the table is empty: the provider never registers anything).
#ifndef GPUAES_HOST_REGISTER_H
#define GPUAES_HOST_REGISTER_H

#include <cstddef>

namespace gpuaes {

constexpr int kMaxHostRanges = 256; // gpuaesd serves at most 256 clients

// A use of the live range holding [in, in + len) and [out, out + len), if
// one does: ok() then, and unregistration waits until the use ends.
class DirectUse {
  public:
    DirectUse(const void *in, const void *out, size_t len);
    ~DirectUse();
    DirectUse(const DirectUse &) = delete;
    DirectUse &operator=(const DirectUse &) = delete;
    bool ok() const { return slot_ >= 0; }

  private:
    int slot_ = -1;
};

// gpuaes_gpu_shutdown(): unregisters every range left (no job runs).
void host_ranges_release();

// In a forked child: the table is forgotten (the child makes no CUDA call).
void host_ranges_atfork_child();

} // namespace gpuaes

#endif
