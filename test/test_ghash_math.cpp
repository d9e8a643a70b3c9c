// test_ghash_math.cpp - host-only check of the GPU GHASH (cuda/ghash.cuh):
// the kernels' device functions compiled for the CPU, run as the kernels run
// them (lane Horner with H^32, four blocks per reduction; the power tables'
// rounds; lane powers, warp XOR, warp powers; the final kernel's powers and
// combine; chunk append),
// against
//  - a plain Horner GHASH with the provider's gf128_mul (gcm_math.c), and
//  - OpenSSL: GHASH_seg * H = tag' ^ E0 ^ L' * H, where tag' is AES-GCM's tag
//    with the all-zero 96-bit IV over the blocks fed as AAD (the relation
//    cipher_gcm.c folds segments with).
// The multiply itself (integer multiplies with holes, Karatsuba, reduction)
// against gf128_mul on random and on extreme operands (all ones: the most set
// bit-pairs per column; single bits: every reduction path), the unreduced
// sums, the powers, and the plan for every length class.
// Random keys (H = E_K(0)), 1..5000 blocks, several warp/k shapes.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <openssl/evp.h>
#include <openssl/rand.h>

#include "ghash.cuh"

extern "C" {
#include "gcm_math.h"
}

using namespace gpuaes;

namespace {

int failures = 0;

#define CHECK(cond, ...)                                                                                             \
    do {                                                                                                             \
        if (!(cond)) {                                                                                               \
            std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                                \
            std::fprintf(stderr, __VA_ARGS__);                                                                       \
            std::fprintf(stderr, "\n");                                                                              \
            if (++failures > 10) std::exit(1);                                                                       \
        }                                                                                                            \
    } while (0)

// The kernels' work on the CPU: ghash_partial_kernel for every CUDA block
// (lane Horner, lane powers, warp XOR, warp powers; the extra block's final
// powers), then ghash_final_kernel, with the same functions and formulas.
// `warps` data warps per CUDA block (the kernel has kGhashWarps), at least
// k_min blocks per lane.
G128 sim_kernels(const G128 &h, const unsigned char *data, uint32_t nb, uint32_t warps, uint32_t k_min)
{
    const GhashPlan pl = ghash_plan(nb, warps, k_min);
    GParams p{};
    G128 pw[kGhashMaxLevels + 1];
    ghash_powers(pw, h, pl.m, pl.levels);
    p.h = h;
    for (int L = 0; L < pl.levels; ++L) p.pw[L] = pw[L];
    p.m = pl.m;
    p.pad = pl.pad;
    p.nb = nb;
    const uint32_t k = pl.per_lane;
    int log2k = 0;
    while ((1u << log2k) < k) ++log2k;
    CHECK(pl.m == 1 && pl.threads == 32 * warps && (uint64_t)pl.threads * k * pl.blocks == (uint64_t)nb + pl.pad &&
              ((uint64_t)1 << pl.levels) == (uint64_t)nb + pl.pad && ((uint64_t)1 << pl.block_levels) == (uint64_t)pl.threads * k &&
              k >= k_min && (k & (k - 1)) == 0 && pl.levels >= 8,
          "plan shape nb=%u", nb);
    CHECK(pl.blocks >= 1 && pl.blocks <= kGhashMaxPartials && (pl.blocks & (pl.blocks - 1)) == 0, "plan blocks %u",
          pl.blocks);
    // The kernel loads through a uint32_t view (4 little-endian words a block).
    std::vector<uint32_t> raw((size_t)nb * 4 + 4);
    std::memcpy(raw.data(), data, (size_t)nb * 16);

    GSplit hs[4]; // H^32, H^64, H^96 (launch_ghash: pw[5] * pw[6]), H^128
    g_split(p.pw[5], hs[0]);
    g_split(p.pw[6], hs[1]);
    g_split(gf_mul(p.pw[5], p.pw[6]), hs[2]);
    g_split(p.pw[7], hs[3]);
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
            G128 sw = g128_zero();
            for (uint32_t l = 0; l < 32; ++l) {
                // lane_horner<4>
                const uint64_t q0 = seg + ((uint64_t)w << (5 + log2k)) + l;
                const auto blk = [&](uint32_t j) { return ghash_block(p, raw.data(), q0 + 32 * (uint64_t)j); };
                G128 x;
                if (k == 1) {
                    x = blk(0);
                } else if (k == 2) {
                    x = ghash_first2(blk(0), blk(1), hs[0]);
                } else {
                    G128 c[4] = {blk(0), blk(1), blk(2), blk(3)};
                    x = ghash_first4(c, hs[0], hs[1], hs[2]);
                    for (uint32_t j = 4; j < k; j += 4) {
                        G128 d[4] = {blk(j), blk(j + 1), blk(j + 2), blk(j + 3)};
                        x = ghash_step4(x, d, hs[0], hs[1], hs[2], hs[3]);
                    }
                }
                sw = g128_xor(sw, gf_mul(x, lanep[l]));
            }
            part = g128_xor(part, gf_mul(sw, wpow[w]));
        }
        partials[bi] = part;
    }
    // The extra block's powers (32-tables of H^S and H^(32S)), then
    // ghash_final_kernel.
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
    // staging.cu's power for the host append: pw[levels] when there is no pad.
    if (pl.pad == 0) {
        const G128 a = pw[pl.levels], bb = gf_pow(h, nb);
        CHECK(std::memcmp(&a, &bb, sizeof a) == 0, "pw[levels] != H^nb, nb=%u", nb);
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
        CHECK(std::memcmp(r1, r2, 16) == 0, "gf_mul != gf128_mul");
        const G128 one = gf_pow(g128_from_bytes(b), 0);
        g128_to_bytes(gf_mul(g128_from_bytes(a), one), r2);
        CHECK(std::memcmp(a, r2, 16) == 0, "x * 1 != x");
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
                gf128_mul(ab, bb);
                g128_to_bytes(gf_mul(a, b), r2);
                CHECK(std::memcmp(ab, r2, 16) == 0, "gf_mul != gf128_mul on extreme operands");
            }
        cases += (int)(special.size() * special.size());
    }

    // Unreduced sums reduce to the sum of the products (ghash_step2's
    // aggregation), and step2/first2 are the two-block Horner they claim.
    for (int i = 0; i < 500; ++i) {
        unsigned char buf[5][16];
        for (auto &b : buf) RAND_bytes(b, 16);
        const G128 x = g128_from_bytes(buf[0]), c0 = g128_from_bytes(buf[1]), c1 = g128_from_bytes(buf[2]),
                   h = g128_from_bytes(buf[3]);
        const G128 h32 = gf_pow(h, 32), h64 = gf_pow(h, 64);
        GSplit s32, s64;
        g_split(h32, s32);
        g_split(h64, s64);
        const G128 want = g128_xor(g128_xor(gf_mul(x, h64), gf_mul(c0, h32)), c1);
        const G128 got = ghash_step2(x, c0, c1, s32, s64);
        CHECK(std::memcmp(&want, &got, sizeof want) == 0, "ghash_step2");
        const G128 want1 = g128_xor(gf_mul(c0, h32), c1), got1 = ghash_first2(c0, c1, s32);
        CHECK(std::memcmp(&want1, &got1, sizeof want1) == 0, "ghash_first2");
        // step4/first4: four blocks, one reduction.
        unsigned char more[3][16];
        for (auto &m : more) RAND_bytes(m, 16);
        const G128 c[4] = {c0, c1, g128_from_bytes(more[0]), g128_from_bytes(more[1])};
        const G128 h96 = gf_pow(h, 96), h128 = gf_pow(h, 128);
        GSplit s96, s128;
        g_split(h96, s96);
        g_split(h128, s128);
        G128 w4 = gf_mul(x, h128);
        w4 = g128_xor(w4, gf_mul(c[0], h96));
        w4 = g128_xor(w4, gf_mul(c[1], h64));
        w4 = g128_xor(w4, gf_mul(c[2], h32));
        w4 = g128_xor(w4, c[3]);
        const G128 g4 = ghash_step4(x, c, s32, s64, s96, s128);
        CHECK(std::memcmp(&w4, &g4, sizeof w4) == 0, "ghash_step4");
        const G128 f4 = ghash_first4(c, s32, s64, s96), wf4 = g128_xor(w4, gf_mul(x, h128));
        CHECK(std::memcmp(&wf4, &f4, sizeof f4) == 0, "ghash_first4");
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
            CHECK(std::memcmp(&pe, &pr, sizeof pe) == 0, "32-table e=%u base=%d", e, base);
            if (e < 8) {
                const G128 p8 = gpow8_entry(pw, base, levels, t8, t7, e);
                CHECK(std::memcmp(&p8, &pr, sizeof pe) == 0, "8-table e=%u base=%d", e, base);
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
            CHECK(pl.m == 1 && pl.threads == kGhashThreads && N == ((uint64_t)1 << pl.levels) && N / 2 < n + 256ull &&
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
        CHECK(aes_block(key, keylen, zero, hb) && aes_block(key, keylen, j0, e0), "AES");
        const G128 h = g128_from_bytes(hb);
        horner(ref, hb, data.data(), nb);

        // OpenSSL: ref * H == tag' ^ E0 ^ L' * H
        CHECK(openssl_tag(key, keylen, data.data(), nb * 16, tag), "EVP GCM");
        unsigned char lhs[16];
        std::memcpy(lhs, ref, 16);
        gf128_mul(lhs, hb);
        gcm_len_block(l, (unsigned long long)nb * 128, 0);
        gf128_mul(l, hb);
        for (int j = 0; j < 16; ++j) tag[j] ^= e0[j] ^ l[j];
        CHECK(std::memcmp(lhs, tag, 16) == 0, "horner vs OpenSSL, nb=%u", nb);

        for (const auto &sh : shapes) {
            unsigned char got[16];
            g128_to_bytes(sim_kernels(h, data.data(), nb, sh[0], sh[1]), got);
            CHECK(std::memcmp(got, ref, 16) == 0, "kernel sim nb=%u threads=%u m=%u", nb, sh[0], sh[1]);
            ++cases;
        }

        // Chunks appended on the host as staging.cu does: S = S * H^n ^ S_chunk.
        G128 s = g128_zero();
        for (uint32_t off = 0; off < nb;) {
            uint32_t n = 1 + rnd32() % (nb - off);
            if (rnd32() % 3 == 0) n = nb - off;
            s = ghash_append(s, gf_pow(h, n), sim_kernels(h, data.data() + (size_t)off * 16, n, kGhashWarps, 1));
            off += n;
        }
        unsigned char got[16];
        g128_to_bytes(s, got);
        CHECK(std::memcmp(got, ref, 16) == 0, "chunked append nb=%u", nb);
        ++cases;
    }

    // The staging chunk (8 MiB = 2^19 blocks) and a large odd one: shape only
    // plus one full run (the tree is what differs from the small sizes).
    for (uint32_t nb : {1u << 19, (1u << 19) - 3, 1u << 21, (1u << 21) + 1, (1u << 24) + 7}) {
        const GhashPlan pl = ghash_plan(nb);
        CHECK(pl.blocks <= kGhashMaxPartials && (uint64_t)pl.threads * pl.blocks * pl.per_lane == (uint64_t)nb + pl.pad &&
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
        CHECK(std::memcmp(got, ref, 16) == 0, "kernel sim nb=%u", nb);
        ++cases;
    }

    std::printf("test_ghash_math: %d cases, %d failures\n", cases, failures);
    return failures == 0 ? 0 : 1;
}
