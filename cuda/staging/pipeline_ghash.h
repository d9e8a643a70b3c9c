// pipeline_ghash.h - the GCM part of a job's pipeline (pipeline.cu): the
// powers of H the GHASH kernels need, the tensor cores' matrices in each
// lane, and the host side of the GHASH: chunks appended in order, the
// caller's pieces prepended to its tail (cuda/ internal).
#ifndef GPUAES_PIPELINE_GHASH_H
#define GPUAES_PIPELINE_GHASH_H

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "kernels/ghash_launch.h"
#include "staging/slot_pool.h"

namespace gpuaes {

// One job's GHASH state; every secret in it is wiped when it goes.
class JobGhash {
  public:
    JobGhash();
    ~JobGhash();
    JobGhash(const JobGhash &) = delete;
    JobGhash &operator=(const JobGhash &) = delete;

    void set_h(const unsigned char h[16]) { h_ = g128_from_bytes(h); }

    // The chunk's GHASH kernels on l's stream over `data` (device memory,
    // nb blocks); h_pow_n := H^nb, for append_chunk.  cap: the lane's chunk
    // bytes (the result lands in its pinned memory at +cap).
    cudaError_t enqueue(Lane &l, G128 &h_pow_n, const void *data, uint32_t nb, size_t cap);

    // l's scratch holds the matrices for H (uploaded on its stream if not).
    cudaError_t ensure_frags(Lane &l);

    // S = S * H^n ^ S_chunk, the chunk's GHASH read from (and wiped at) sc.
    void append_chunk(unsigned char *sc, const G128 &h_pow_n);

    // The caller's piece of `blocks` blocks, GHASH Y = y, goes before the tail.
    void prepend_piece(const unsigned char y[16], size_t blocks);

    // ghash := Y of the chunks' prefix (S * H), tail := Y of the caller's tail.
    void finish(unsigned char ghash[16], unsigned char tail[16]) const;

  private:
    void square_powers(int levels);
    G128 pow_from_squares(uint32_t n) const;

    G128 h_{};                           // H
    G128 s_{};                           // GHASH of the chunks appended so far
    G128 yt_{};                          // Y of the caller's tail [cpu_from, len)
    G128 htail_{};                       // H^(tail blocks)
    G128 hk_{};                          // H^hk_n_ (pieces are mostly kCpuPiece)
    size_t hk_n_ = 0;
    GParams gparams_{};                  // GHASH kernel parameters
    const GhashFrags *frags_ = nullptr;  // this job's matrices, in the first lane that needed them
    G128 pw_[kGhashMaxLevels + 1] = {};  // H^(pw_m_ * 2^L), L = 0..pw_levels_ (squared as needed)
    uint32_t pw_m_ = 0;
    int pw_levels_ = -1;
};

} // namespace gpuaes

#endif
