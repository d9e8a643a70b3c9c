// test_ghash_math.cpp - host-only check of the GPU GHASH (cuda/ghash.cuh):
// the kernels' device functions compiled for the CPU, run as the kernels run
// them (thread Horner, in-block tree, final tree, chunk append), against
//  - a plain Horner GHASH with the provider's gf128_mul (gcm_math.c), and
//  - OpenSSL: GHASH_seg * H = tag' ^ E0 ^ L' * H, where tag' is AES-GCM's tag
//    with the all-zero 96-bit IV over the blocks fed as AAD (the relation
//    cipher_gcm.c folds segments with).
// Random keys (H = E_K(0)), 1..5000 blocks, several thread/m shapes.
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

// The kernels' work on the CPU: ghash_partial_kernel for every CUDA block,
// then ghash_final_kernel, in the same order and with the same formulas.
G128 sim_kernels(const G128 &h, const unsigned char *data, uint32_t nb, uint32_t threads, uint32_t m_min)
{
    const GhashPlan pl = ghash_plan(nb, threads, m_min);
    GParams p{};
    G128 pw[kGhashMaxLevels + 1];
    ghash_powers(pw, h, pl.m, pl.levels);
    p.h = h;
    for (int L = 0; L < pl.levels; ++L) p.pw[L] = pw[L];
    p.m = pl.m;
    p.pad = pl.pad;
    p.nb = nb;
    CHECK((uint64_t)pl.threads * pl.blocks * pl.m == (uint64_t)nb + pl.pad && pl.pad < (uint64_t)pl.threads * pl.blocks * pl.m,
          "plan shape nb=%u", nb);
    CHECK(pl.blocks <= kGhashMaxFinal && (pl.blocks & (pl.blocks - 1)) == 0, "plan blocks %u", pl.blocks);
    // The kernel loads through a uint32_t view (4 little-endian words a block).
    std::vector<uint32_t> raw((size_t)nb * 4 + 4);
    std::memcpy(raw.data(), data, (size_t)nb * 16);

    std::vector<G128> partials(pl.blocks);
    std::vector<G128> s(pl.threads);
    for (uint32_t b = 0; b < pl.blocks; ++b) {
        for (uint32_t tid = 0; tid < pl.threads; ++tid)
            s[tid] = ghash_thread(p, raw.data(), (uint64_t)b * pl.threads + tid);
        int L = 0;
        for (uint32_t stride = 1; stride < pl.threads; stride <<= 1, ++L)
            for (uint32_t tid = 0; tid < pl.threads; ++tid)
                if ((tid & (2 * stride - 1)) == 0) s[tid] = ghash_combine(s[tid], p.pw[L], s[tid + stride]);
        partials[b] = s[0];
    }
    int L = pl.block_levels;
    for (uint32_t stride = 1; stride < pl.blocks; stride <<= 1, ++L)
        for (uint32_t tid = 0; tid < pl.blocks; ++tid)
            if ((tid & (2 * stride - 1)) == 0) partials[tid] = ghash_combine(partials[tid], p.pw[L], partials[tid + stride]);
    // staging.cu's power for the host append: pw[levels] when there is no pad.
    if (pl.pad == 0) {
        const G128 a = pw[pl.levels], b = gf_pow(h, nb);
        CHECK(std::memcmp(&a, &b, sizeof a) == 0, "pw[levels] != H^nb, nb=%u", nb);
    }
    return partials[0];
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
    static const uint32_t shapes[][2] = {{kGhashThreads, kGhashM}, {32, 1}, {64, 3}, {2, 5}, {1, 1}, {128, 16}};
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
            if (sh[0] == 1 && nb > 600) continue; // one thread per block: slow final tree, covered below 600
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
            s = ghash_append(s, gf_pow(h, n), sim_kernels(h, data.data() + (size_t)off * 16, n, kGhashThreads, kGhashM));
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
        CHECK(pl.blocks <= kGhashMaxFinal && (uint64_t)pl.threads * pl.blocks * pl.m >= nb && pl.levels < kGhashMaxLevels,
              "plan nb=%u", nb);
    }
    {
        const uint32_t nb = (1u << 19) - 3;
        std::vector<unsigned char> big((size_t)nb * 16);
        unsigned char hb[16], ref[16] = {0}, got[16];
        RAND_bytes(big.data(), (int)big.size());
        RAND_bytes(hb, 16);
        horner(ref, hb, big.data(), nb);
        g128_to_bytes(sim_kernels(g128_from_bytes(hb), big.data(), nb, kGhashThreads, kGhashM), got);
        CHECK(std::memcmp(got, ref, 16) == 0, "kernel sim nb=%u", nb);
        ++cases;
    }

    std::printf("test_ghash_math: %d cases, %d failures\n", cases, failures);
    return failures == 0 ? 0 : 1;
}
