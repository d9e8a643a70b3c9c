// test_ghash_math.cpp - host-only check of the GPU GHASH (cuda/kernels/ghash.cuh,
// cuda/kernels/ghash_mma.cuh): the kernels' scheme run on the CPU as the kernels run
// it (the warps' 8 Horner chains on the tensor cores, emulated: the host's
// matrix fragments, MMAs as popcounts in the PTX layouts, the kernel's
// packing and shuffle indices; the power tables' rounds; lane powers, warp
// XOR, warp powers; the last block's powers and combine; chunk append),
// against
//  - a plain Horner GHASH with the provider's gf128_mul (gcm_math.c), and
//  - OpenSSL: GHASH_seg * H = tag' ^ E0 ^ L' * H, where tag' is AES-GCM's tag
//    with the all-zero 96-bit IV over the blocks fed as AAD (the relation
//    gcm_engine.c folds segments with).
// The multiply itself (integer multiplies with holes, Karatsuba, reduction)
// against gf128_mul (itself such a multiply, with 64-bit words) and both
// against the bitwise algorithm of SP 800-38D, on random and on extreme operands (all ones: the most set
// bit-pairs per column; single bits: every reduction path), the unreduced
// sums, the powers, and the plan for every length class.
// Random keys (H = E_K(0)), 1..5000 blocks, several warp/k shapes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "check.h"
#include "gf128_ref.h"
#include "kernels/ghash.cuh"
#include "kernels/ghash_mma.cuh"

extern "C" {
#include "gcm/gcm_math.h"
}

using namespace gpuaes;

namespace {

// __byte_perm(x, y, s) (selectors 0..7 only).
uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
    const uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int i = 0; i < 4; ++i) r |= (uint32_t)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}

// mma_step for a whole warp: x[lane] and c[lane][] -> x[lane].  The MMAs
// are popcounts of A rows and B columns gathered from the lanes' registers
// in the PTX layouts that bench/probe/bmma_probe.cu checked on the GPU.
void emu_step(const GhashFrags &f, uint32_t x[32], const uint32_t c[32][kMmaStep])
{
    uint32_t packed[32] = {};
    for (int m = 0; m < kMmaTiles; ++m) {
        int D[16][8] = {};
        for (int pr = 0; pr < kMmaPairs; ++pr)
            for (int r = 0; r < 16; ++r)
                for (int n = 0; n < 8; ++n)
                    for (int t = 0; t < 4; ++t)
                        for (int kh = 0; kh < 2; ++kh) {
                            const uint32_t a = f.a[pr][m][4 * (r % 8) + t][2 * kh + r / 8];
                            const uint32_t *cl = c[4 * n + t];
                            const uint32_t b = kh == 0 ? (pr == 0 ? x[4 * n + t] : cl[1]) : (pr == 0 ? cl[0] : cl[2]);
                            D[r][n] += __builtin_popcount(a & b);
                        }
        for (uint32_t lane = 0; lane < 32; ++lane)
            for (int j = 0; j < 4; ++j) {
                const uint32_t g = lane >> 2, t = lane & 3;
                const int d = D[g + 8 * (j >> 1)][2 * t + (j & 1)];
                packed[lane] |= ((uint32_t)d & 1u) << mma_pack_bit(m, j);
            }
    }
    for (uint32_t lane = 0; lane < 32; ++lane)
        x[lane] = byte_perm(packed[mma_src_lane(lane, 0)], packed[mma_src_lane(lane, 1)], mma_half_sel(lane)) ^
                  c[lane][3];
}

// The raw words of a G128 (as the kernel loads them) and back.
void g128_to_raw(const G128 &g, uint32_t r[4])
{
    for (int i = 0; i < 4; ++i) r[i] = bswap32(g.w[i]);
}

G128 raw_to_g128(const uint32_t r[4])
{
    G128 g = {{bswap32(r[0]), bswap32(r[1]), bswap32(r[2]), bswap32(r[3])}};
    return g;
}

// warp_chains on the CPU: the 8 chains' values of the warp's 32k blocks from q0.
void emu_chains(const GhashFrags &f, const uint32_t *raw, uint32_t pad, uint64_t q0, uint32_t k, G128 out[8])
{
    uint32_t x[32] = {};
    for (uint32_t s = 0; s < k; ++s) {
        uint32_t c[32][kMmaStep];
        for (uint32_t lane = 0; lane < 32; ++lane)
            for (int i = 0; i < kMmaStep; ++i) {
                const uint64_t q = q0 + (lane >> 2) + 32 * (uint64_t)s + 8 * i;
                c[lane][i] = q >= pad ? raw[4 * (q - pad) + (lane & 3)] : 0u;
            }
        emu_step(f, x, c);
    }
    for (int n = 0; n < 8; ++n) out[n] = raw_to_g128(x + 4 * n);
}

void frags_for(const G128 &h, GhashFrags &f)
{
    ghash_frags(gf_pow(h, 8), gf_pow(h, 16), gf_pow(h, 32), f);
}

// The kernels' work on the CPU: ghash_kernel for every CUDA block
// (the warps' chains, lane powers, warp XOR, warp powers; the extra block's
// final powers), then the last CUDA block's combine, with the same functions and formulas.
// `warps` data warps per CUDA block (the kernel has kGhashWarps), at least
// k_min blocks per lane.
G128 sim_kernels(const G128 &h, const unsigned char *data, uint32_t nb, uint32_t warps, uint32_t k_min)
{
    const GhashPlan pl = ghash_plan(nb, warps, k_min);
    GParams p{};
    G128 pw[kGhashMaxLevels + 1];
    ghash_powers(pw, h, pl.m, pl.levels);
    for (int L = 0; L < pl.levels; ++L) p.pw[L] = pw[L];
    p.m = pl.m;
    p.pad = pl.pad;
    p.nb = nb;
    const uint32_t k = pl.per_lane;
    int log2k = 0;
    while ((1u << log2k) < k) ++log2k;
    CHECKF(pl.m == 1 && pl.threads == 32 * warps && (uint64_t)pl.threads * k * pl.blocks == (uint64_t)nb + pl.pad &&
              ((uint64_t)1 << pl.levels) == (uint64_t)nb + pl.pad && ((uint64_t)1 << pl.block_levels) == (uint64_t)pl.threads * k &&
              k >= k_min && (k & (k - 1)) == 0 && pl.levels >= 8,
           "plan shape nb=%u", nb);
    CHECKF(pl.blocks >= 1 && pl.blocks <= kGhashMaxPartials && (pl.blocks & (pl.blocks - 1)) == 0, "plan blocks %u",
           pl.blocks);
    // The kernel loads through a uint32_t view (4 little-endian words a block).
    std::vector<uint32_t> raw((size_t)nb * 4 + 4);
    std::memcpy(raw.data(), data, (size_t)nb * 16);

    GhashFrags frags;
    frags_for(h, frags);
    // The power warp's tables: lane powers (32-table of H), warp powers
    // (8-table of H^(32k)), rounds as the kernel runs them.
    G128 a, b, r1[4], r8[3];
    for (uint32_t i = 0; i < 4; ++i) {
        gpow32_r1(p.pw, 0, pl.levels, i, a, b);
        r1[i] = gf_mul(a, b);
    }
    const int wbase = 5 + log2k;
    for (uint32_t i = 0; i < 3; ++i) {
        gpow8_r1(p.pw, wbase, pl.levels, i, a, b);
        r8[i] = gf_mul(a, b);
    }
    gpow32_r2(p.pw, 0, pl.levels, r1, a, b);
    const G128 q28 = gf_mul(a, b);
    gpow8_r2(p.pw, wbase, pl.levels, r8, a, b);
    const G128 q7 = gf_mul(a, b);
    G128 lanep[32], wpow[8];
    for (uint32_t l = 0; l < 32; ++l) {
        gpow32_r3(p.pw, 0, pl.levels, r1, q28, (32 - l) & 31, a, b);
        lanep[l] = l == 0 ? p.pw[5] : gf_mul(a, b);
    }
    for (uint32_t w = 0; w < warps; ++w) wpow[w] = gpow8_entry(p.pw, wbase, pl.levels, r8, q7, warps - 1 - w);

    std::vector<G128> partials(pl.blocks);
    for (uint32_t bi = 0; bi < pl.blocks; ++bi) {
        const uint64_t seg = (uint64_t)bi << pl.block_levels;
        if (seg + ((uint64_t)1 << pl.block_levels) <= p.pad) {
            partials[bi] = g128_zero();
            continue;
        }
        G128 part = g128_zero();
        for (uint32_t w = 0; w < warps; ++w) {
            G128 chains[8];
            emu_chains(frags, raw.data(), p.pad, seg + ((uint64_t)w << (5 + log2k)), k, chains);
            G128 sw = g128_zero();
            for (uint32_t n = 0; n < 8; ++n) sw = g128_xor(sw, gf_mul(chains[n], lanep[24 + n]));
            part = g128_xor(part, gf_mul(sw, wpow[w]));
        }
        partials[bi] = part;
    }
    // The extra block's powers (32-tables of H^S and H^(32S)), then
    // the combine (combine_partials).
    G128 tab[64];
    for (int half = 0; half < 2; ++half) {
        const int base = pl.block_levels + 5 * half;
        G128 t1[4];
        for (uint32_t i = 0; i < 4; ++i) {
            gpow32_r1(p.pw, base, pl.levels, i, a, b);
            t1[i] = gf_mul(a, b);
        }
        gpow32_r2(p.pw, base, pl.levels, t1, a, b);
        const G128 t28 = gf_mul(a, b);
        for (uint32_t e = 0; e < 32; ++e) {
            gpow32_r3(p.pw, base, pl.levels, t1, t28, e, a, b);
            tab[32 * half + e] = gf_mul(a, b);
        }
    }
    const uint32_t B = pl.blocks;
    G128 r = g128_zero();
    if (B <= 32) {
        for (uint32_t t = 0; t < B; ++t) r = g128_xor(r, gf_mul(partials[t], tab[B - 1 - t]));
    } else {
        const uint32_t nw = B / 32;
        for (uint32_t w = 0; w < nw; ++w) {
            G128 y = g128_zero();
            for (uint32_t l = 0; l < 32; ++l) y = g128_xor(y, gf_mul(partials[32 * w + l], tab[31 - l]));
            r = g128_xor(r, gf_mul(y, tab[32 + nw - 1 - w]));
        }
    }
    // pipeline_ghash.cu's power for the host append: pw[levels] when there is no pad.
    if (pl.pad == 0) {
        const G128 a = pw[pl.levels], bb = gf_pow(h, nb);
        CHECKF(std::memcmp(&a, &bb, sizeof a) == 0, "pw[levels] != H^nb, nb=%u", nb);
    }
    return r;
}

// Plain Horner with the provider's (independent, 64-bit) gf128_mul.
void horner(unsigned char x[16], const unsigned char h[16], const unsigned char *data, size_t nb)
{
    for (size_t i = 0; i < nb; ++i) {
        for (int j = 0; j < 16; ++j) x[j] ^= data[16 * i + j];
        gf128_mul(x, h);
    }
}

// OpenSSL: tag' of AES-GCM (zero 96-bit IV) with `data` as AAD.
bool openssl_tag(const unsigned char *key, int keylen, const unsigned char *data, size_t len, unsigned char tag[16])
{
    static const unsigned char iv[12] = {0};
    const EVP_CIPHER *c = keylen == 16 ? EVP_aes_128_gcm() : keylen == 24 ? EVP_aes_192_gcm() : EVP_aes_256_gcm();
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl;
    bool ok = x != nullptr && EVP_EncryptInit_ex(x, c, nullptr, key, iv) &&
              (len == 0 || EVP_EncryptUpdate(x, nullptr, &outl, data, (int)len)) &&
              EVP_EncryptFinal_ex(x, nullptr, &outl) && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_GCM_GET_TAG, 16, tag);
    EVP_CIPHER_CTX_free(x);
    return ok;
}

bool aes_block(const unsigned char *key, int keylen, const unsigned char in[16], unsigned char out[16])
{
    const EVP_CIPHER *c = keylen == 16 ? EVP_aes_128_ecb() : keylen == 24 ? EVP_aes_192_ecb() : EVP_aes_256_ecb();
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl;
    bool ok = x != nullptr && EVP_EncryptInit_ex(x, c, nullptr, key, nullptr) && EVP_CIPHER_CTX_set_padding(x, 0) &&
              EVP_EncryptUpdate(x, out, &outl, in, 16) && outl == 16;
    EVP_CIPHER_CTX_free(x);
    return ok;
}

uint32_t rnd32()
{
    uint32_t v;
    if (RAND_bytes(reinterpret_cast<unsigned char *>(&v), sizeof v) != 1) std::abort();
    return v;
}

} // namespace

int main()
{
    // {data warps per CUDA block, minimum blocks per lane}: the kernel's shape
    // and smaller ones (more CUDA blocks, more padding, B > 32 at small nb).
    static const uint32_t shapes[][2] = {{kGhashWarps, 1}, {1, 1}, {2, 2}, {1, 4}, {4, 8}};
    const uint32_t maxnb = 5000;
    std::vector<unsigned char> data(maxnb * 16);
    int cases = 0;

    // gf_mul against the provider's gf128_mul, and x * 1 = x, on random elements.
    for (int i = 0; i < 2000; ++i) {
        unsigned char a[16], b[16], r1[16], r2[16];
        RAND_bytes(a, 16);
        RAND_bytes(b, 16);
        if (i == 0) std::memset(a, 0, 16);
        std::memcpy(r1, a, 16);
        gf128_mul(r1, b);
        g128_to_bytes(gf_mul(g128_from_bytes(a), g128_from_bytes(b)), r2);
        CHECKF(std::memcmp(r1, r2, 16) == 0, "gf_mul != gf128_mul");
        std::memcpy(r2, a, 16);
        gf128_ref_mul(r2, b);
        CHECKF(std::memcmp(r1, r2, 16) == 0, "gf128_mul != the bitwise reference");
        std::memcpy(r2, a, 16);
        gf128_mul_portable(r2, b);
        CHECKF(std::memcmp(r1, r2, 16) == 0, "gf128_mul_portable != gf128_mul");
        // b * b^-1 = 1 (the field's 1 is the byte 0x80 first)
        unsigned char inv[16], unit[16] = {0x80};
        if (gf128_inv(inv, b)) {
            gf128_mul(inv, b);
            CHECKF(std::memcmp(inv, unit, 16) == 0, "gf128_inv(b) * b != 1");
        } else {
            CHECKF(false, "gf128_inv refused a nonzero element");
        }
        const G128 one = gf_pow(g128_from_bytes(b), 0);
        g128_to_bytes(gf_mul(g128_from_bytes(a), one), r2);
        CHECKF(std::memcmp(a, r2, 16) == 0, "x * 1 != x");
    }

    {   // zero has no inverse
        unsigned char zero[16] = {}, out[16] = {1};
        CHECKF(gf128_inv(out, zero) == 0 && out[0] == 1, "gf128_inv(0) did not refuse");
    }

    // Extreme operands: zero, one, all ones (each 32 x 32 product then has 8
    // set bit-pairs in its middle columns, the most the holes must hold),
    // single bits x^i (every shift and fold of the reduction), and words of
    // all ones next to zeros.
    {
        std::vector<G128> special;
        special.push_back(g128_zero());
        special.push_back(g128_one());
        special.push_back(G128{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}});
        for (int w = 0; w < 4; ++w) {
            G128 g = g128_zero();
            g.w[w] = 0xffffffffu;
            special.push_back(g);
            g.w[w] = 0x88888888u;
            special.push_back(g);
        }
        for (int i = 0; i < 128; ++i) {
            G128 g = g128_zero();
            g.w[i / 32] = 0x80000000u >> (i % 32);
            special.push_back(g);
        }
        for (const G128 &a : special)
            for (const G128 &b : special) {
                unsigned char ab[16], bb[16], r2[16];
                g128_to_bytes(a, ab);
                g128_to_bytes(b, bb);
                unsigned char ref[16], port[16];
                std::memcpy(ref, ab, 16);
                gf128_ref_mul(ref, bb);
                std::memcpy(port, ab, 16);
                gf128_mul_portable(port, bb);
                CHECKF(std::memcmp(port, ref, 16) == 0, "gf128_mul_portable != the bitwise reference on extreme operands");
                gf128_mul(ab, bb);
                g128_to_bytes(gf_mul(a, b), r2);
                CHECKF(std::memcmp(ab, r2, 16) == 0, "gf_mul != gf128_mul on extreme operands");
                CHECKF(std::memcmp(ab, ref, 16) == 0, "gf128_mul != the bitwise reference on extreme operands");
            }
        cases += (int)(special.size() * special.size());
    }

    // Unreduced sums reduce to the sum of the products (GAcc), and a warp's
    // step on the tensor cores (emulated, with the host's fragments) is the
    // four-block Horner step it claims, in all 8 chains:
    // x*H^32 ^ c0*H^24 ^ c1*H^16 ^ c2*H^8 ^ c3.
    for (int i = 0; i < 500; ++i) {
        unsigned char buf[3][16];
        for (auto &b : buf) RAND_bytes(b, 16);
        const G128 x = g128_from_bytes(buf[0]), c0 = g128_from_bytes(buf[1]), h = g128_from_bytes(buf[2]);
        const G128 h32 = gf_pow(h, 32), h64 = gf_pow(h, 64);
        GSplit s32, s64;
        g_split(h32, s32);
        g_split(h64, s64);
        GAcc acc;
        g_acc_zero(acc);
        g_mul_acc(acc, x, s64);
        g_mul_acc(acc, c0, s32);
        const G128 want = g128_xor(gf_mul(x, h64), gf_mul(c0, h32)), got = g_reduce(acc);
        CHECKF(std::memcmp(&want, &got, sizeof want) == 0, "unreduced sum");
        if (i < 40) {
            GhashFrags f;
            frags_for(h, f);
            const G128 hp[4] = {gf_pow(h, 8), gf_pow(h, 16), gf_pow(h, 24), h32};
            uint32_t xs[32], cs[32][kMmaStep];
            G128 xg[8], cg[8][kMmaStep];
            for (int n = 0; n < 8; ++n) {
                unsigned char r[5][16];
                for (auto &b : r) RAND_bytes(b, 16);
                if (i == 0) std::memset(r, n == 0 ? 0xff : 0, sizeof r); // all ones, and zero
                xg[n] = g128_from_bytes(r[0]);
                for (int j = 0; j < kMmaStep; ++j) cg[n][j] = g128_from_bytes(r[1 + j]);
                uint32_t w[4];
                g128_to_raw(xg[n], w);
                for (int t = 0; t < 4; ++t) xs[4 * n + t] = w[t];
                for (int j = 0; j < kMmaStep; ++j) {
                    g128_to_raw(cg[n][j], w);
                    for (int t = 0; t < 4; ++t) cs[4 * n + t][j] = w[t];
                }
            }
            emu_step(f, xs, cs);
            for (int n = 0; n < 8; ++n) {
                G128 w = gf_mul(xg[n], hp[3]);
                w = g128_xor(w, gf_mul(cg[n][0], hp[2]));
                w = g128_xor(w, gf_mul(cg[n][1], hp[1]));
                w = g128_xor(w, gf_mul(cg[n][2], hp[0]));
                w = g128_xor(w, cg[n][3]);
                const G128 gotn = raw_to_g128(xs + 4 * n);
                CHECKF(std::memcmp(&w, &gotn, sizeof w) == 0, "tensor-core step, chain %d (case %d)", n, i);
            }
        }
        // The power tables: Q^e for Q = pw[base], from pw[L] = H^(2^L).
        G128 pw[kGhashMaxLevels + 1];
        const int levels = 8 + (int)(rnd32() % 12);
        ghash_powers(pw, h, 1, levels);
        const int base = (int)(rnd32() % (uint32_t)(levels - 4));
        G128 a, b, t1[4], t8[3];
        for (uint32_t j = 0; j < 4; ++j) {
            gpow32_r1(pw, base, levels, j, a, b);
            t1[j] = gf_mul(a, b);
        }
        for (uint32_t j = 0; j < 3; ++j) {
            gpow8_r1(pw, base, levels, j, a, b);
            t8[j] = gf_mul(a, b);
        }
        gpow32_r2(pw, base, levels, t1, a, b);
        const G128 t28 = gf_mul(a, b);
        gpow8_r2(pw, base, levels, t8, a, b);
        const G128 t7 = gf_mul(a, b);
        for (uint32_t e = 0; e < 32; ++e) {
            if (base + 32 - __builtin_clz(e | 1) > levels) continue; // its factors are not there
            gpow32_r3(pw, base, levels, t1, t28, e, a, b);
            const G128 pe = gf_mul(a, b), pr = gf_pow(h, (uint64_t)e << base);
            CHECKF(std::memcmp(&pe, &pr, sizeof pe) == 0, "32-table e=%u base=%d", e, base);
            if (e < 8) {
                const G128 p8 = gpow8_entry(pw, base, levels, t8, t7, e);
                CHECKF(std::memcmp(&p8, &pr, sizeof pe) == 0, "8-table e=%u base=%d", e, base);
            }
        }
        cases += 3;
    }

    // The plan, for lengths of every size class up to 2^31.
    for (int b = 0; b <= 31; ++b)
        for (uint32_t n : {1u << b, (1u << b) - 1, (1u << b) + 1, (1u << b) + (rnd32() & ((1u << b) - 1))}) {
            if (n == 0) continue;
            const GhashPlan pl = ghash_plan(n);
            const uint64_t N = (uint64_t)n + pl.pad;
            CHECKF(pl.m == 1 && pl.threads == kGhashThreads && N == ((uint64_t)1 << pl.levels) && N / 2 < n + 256ull &&
                      pl.blocks >= 1 && pl.blocks <= kGhashMaxPartials && (pl.blocks & (pl.blocks - 1)) == 0 &&
                      (uint64_t)pl.threads * pl.per_lane * pl.blocks == N && pl.levels >= 8 &&
                      ((uint64_t)1 << pl.block_levels) == (uint64_t)pl.threads * pl.per_lane,
                   "plan n=%u", n);
            ++cases;
        }

    for (uint32_t nb = 1; nb <= maxnb; nb += (nb < 300 ? 1 : 1 + rnd32() % 97)) {
        unsigned char key[32], zero[16] = {0}, hb[16], e0[16], j0[16] = {0}, tag[16], l[16], ref[16] = {0};
        const int keylen = 16 + 8 * (int)(rnd32() % 3);
        RAND_bytes(key, keylen);
        RAND_bytes(data.data(), nb * 16);
        j0[15] = 1;
        CHECKF(aes_block(key, keylen, zero, hb) && aes_block(key, keylen, j0, e0), "AES");
        const G128 h = g128_from_bytes(hb);
        horner(ref, hb, data.data(), nb);

        // OpenSSL: ref * H == tag' ^ E0 ^ L' * H
        CHECKF(openssl_tag(key, keylen, data.data(), nb * 16, tag), "EVP GCM");
        unsigned char lhs[16];
        std::memcpy(lhs, ref, 16);
        gf128_mul(lhs, hb);
        gcm_len_block(l, (unsigned long long)nb * 128, 0);
        gf128_mul(l, hb);
        for (int j = 0; j < 16; ++j) tag[j] ^= e0[j] ^ l[j];
        CHECKF(std::memcmp(lhs, tag, 16) == 0, "horner vs OpenSSL, nb=%u", nb);

        for (const auto &sh : shapes) {
            unsigned char got[16];
            g128_to_bytes(sim_kernels(h, data.data(), nb, sh[0], sh[1]), got);
            CHECKF(std::memcmp(got, ref, 16) == 0, "kernel sim nb=%u threads=%u m=%u", nb, sh[0], sh[1]);
            ++cases;
        }

        // Chunks appended on the host as pipeline_ghash.cu does: S = S * H^n ^ S_chunk.
        G128 s = g128_zero();
        for (uint32_t off = 0; off < nb;) {
            uint32_t n = 1 + rnd32() % (nb - off);
            if (rnd32() % 3 == 0) n = nb - off;
            s = ghash_append(s, gf_pow(h, n), sim_kernels(h, data.data() + (size_t)off * 16, n, kGhashWarps, 1));
            off += n;
        }
        unsigned char got[16];
        g128_to_bytes(s, got);
        CHECKF(std::memcmp(got, ref, 16) == 0, "chunked append nb=%u", nb);
        ++cases;
    }

    // The staging chunk (8 MiB = 2^19 blocks) and a large odd one: shape only
    // plus one full run (the tree is what differs from the small sizes).
    for (uint32_t nb : {1u << 19, (1u << 19) - 3, 1u << 21, (1u << 21) + 1, (1u << 24) + 7}) {
        const GhashPlan pl = ghash_plan(nb);
        CHECKF(pl.blocks <= kGhashMaxPartials && (uint64_t)pl.threads * pl.blocks * pl.per_lane == (uint64_t)nb + pl.pad &&
                  pl.levels < kGhashMaxLevels && pl.threads == kGhashThreads,
               "plan nb=%u", nb);
    }
    {
        const uint32_t nb = (1u << 19) - 3;
        std::vector<unsigned char> big((size_t)nb * 16);
        unsigned char hb[16], ref[16] = {0}, got[16];
        RAND_bytes(big.data(), (int)big.size());
        RAND_bytes(hb, 16);
        horner(ref, hb, big.data(), nb);
        g128_to_bytes(sim_kernels(g128_from_bytes(hb), big.data(), nb, kGhashWarps, 1), got);
        CHECKF(std::memcmp(got, ref, 16) == 0, "kernel sim nb=%u", nb);
        ++cases;
    }

    std::printf("test_ghash_math: %d cases, %d failures\n", cases, test_failures);
    return test_failures == 0 ? 0 : 1;
}
