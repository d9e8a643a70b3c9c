// pipeline_ghash.cu - a job's GCM state on the host (see pipeline_ghash.h).
#include "staging/pipeline_ghash.h"

#include <cstring>

#include "kernels/aes_key.h"

namespace gpuaes {

JobGhash::JobGhash()
{
    s_ = g128_zero();
    yt_ = g128_zero();
    htail_ = g128_one();
}

JobGhash::~JobGhash()
{
    secure_wipe(&gparams_, sizeof gparams_);
    secure_wipe(pw_, sizeof pw_);
    secure_wipe(&h_, sizeof h_);
    secure_wipe(&s_, sizeof s_);
    secure_wipe(&yt_, sizeof yt_);
    secure_wipe(&htail_, sizeof htail_);
    secure_wipe(&hk_, sizeof hk_);
}

// The GHASH kernels go on the chunk's stream after the CTR kernel (encrypt:
// over its output) or over the input (decrypt).  The powers of H they need,
// pw_[L] = H^(m * 2^L), are squared on the host once per job, a level more
// whenever a chunk needs it; H^nb for the host's append is a product of
// them (m = 1: one multiply per set bit of nb, which is public).  A fresh
// gf_pow per chunk cost ~15 us of enqueue (measured).
cudaError_t JobGhash::enqueue(Lane &l, G128 &h_pow_n, const void *data, uint32_t nb, size_t cap)
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
    h_pow_n = pl.m == 1 ? pow_from_squares(nb) : gf_pow(h_, nb);
    // The chunk's GHASH goes straight to the lane's pinned slot (mapped):
    // one API call fewer than a 16-byte D2H (~4 us each, measured).
    return launch_ghash(gparams_, pl, data, l.dgh, reinterpret_cast<G128 *>(l.buf.host_dev + cap), l.stream);
}

// Built once per job into the first lane's pinned area that needs them,
// copied to the others' (a lane's area changes only while it is idle:
// before its first chunk of a job), uploaded only where the lane's last H
// differs.  Compared in constant time.
cudaError_t JobGhash::ensure_frags(Lane &l)
{
    uint32_t diff = 0;
    for (int i = 0; i < 4; ++i) diff |= l.frags_h.w[i] ^ h_.w[i];
    if (l.frags_ok && diff == 0) return cudaSuccess;
    GhashFrags *f = reinterpret_cast<GhashFrags *>(l.buf.host + lane_frags_offset(config()));
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

void JobGhash::append_chunk(unsigned char *sc_at, const G128 &h_pow_n)
{
    G128 sc;
    std::memcpy(&sc, sc_at, sizeof sc);
    secure_wipe(sc_at, sizeof sc);
    s_ = ghash_append(s_, h_pow_n, sc);
    secure_wipe(&sc, sizeof sc);
}

// Y_tail' = Y_piece * H^|tail| ^ Y_tail.
void JobGhash::prepend_piece(const unsigned char y[16], size_t k)
{
    if (k != hk_n_) {
        hk_ = gf_pow(h_, k);
        hk_n_ = k;
    }
    G128 yp = g128_from_bytes(y);
    yt_ = g128_xor(gf_mul(yp, htail_), yt_); // the piece goes before the tail
    htail_ = gf_mul(htail_, hk_);
    secure_wipe(&yp, sizeof yp);
}

void JobGhash::finish(unsigned char ghash[16], unsigned char tail[16]) const
{
    G128 y = gf_mul(s_, h_);
    g128_to_bytes(y, ghash); // zero when nothing is done
    g128_to_bytes(yt_, tail);
    secure_wipe(&y, sizeof y);
}

// pw_[L + 1] = pw_[L]^2 up to L = levels.
void JobGhash::square_powers(int levels)
{
    for (; pw_levels_ < levels; ++pw_levels_) pw_[pw_levels_ + 1] = gf_mul(pw_[pw_levels_], pw_[pw_levels_]);
}

// H^n from pw_[L] = H^(2^L) (pw_m_ == 1, n < 2^(pw_levels_ + 1)).
G128 JobGhash::pow_from_squares(uint32_t n) const
{
    G128 r = g128_one();
    for (int L = 0; L <= pw_levels_; ++L)
        if ((n >> L) & 1u) r = gf_mul(r, pw_[L]);
    return r;
}

} // namespace gpuaes
