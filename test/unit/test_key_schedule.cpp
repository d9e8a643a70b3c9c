// test_key_schedule.cpp - the GPU layer's AES key schedules (cuda/kernels/key_schedule.cpp),
// host only: gpuaes_key_new (AES-NI where the CPU has it) against the portable
// schedule, word for word, encryption and decryption
// (equivalent inverse cipher), on random keys of every size; and both against
// FIPS-197's Appendix A expansions (the first and last words of w[]).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/aes_key.h"
extern "C" {
#include "testutil.h"
}

static void fips(const char *name, const unsigned char *key, size_t len, uint32_t w_nk, uint32_t w_last)
{
    gpuaes_key *a = gpuaes_key_new(key, len), *p = gpuaes_key_new_portable(key, len);
    const int nk = (int)len / 4, last = 4 * (nk + 7) - 1;

    CHECKF(a != nullptr && p != nullptr, "%s: no schedule", name);
    if (a == nullptr || p == nullptr) return;
    CHECKF(a->rk_enc[nk] == w_nk && a->rk_enc[last] == w_last, "%s: w[%d] %08x, w[%d] %08x", name, nk,
           a->rk_enc[nk], last, a->rk_enc[last]);
    CHECKF(p->rk_enc[nk] == w_nk && p->rk_enc[last] == w_last, "%s (portable): w[%d] %08x, w[%d] %08x", name,
           nk, p->rk_enc[nk], last, p->rk_enc[last]);
    gpuaes_key_free(a);
    gpuaes_key_free(p);
}

int main()
{
    // FIPS-197 Appendix A.1, A.2, A.3
    static const unsigned char k128[16] = {0x2b, 0x7e, 0x15, 0x16, 0x28, 0xae, 0xd2, 0xa6,
                                           0xab, 0xf7, 0x15, 0x88, 0x09, 0xcf, 0x4f, 0x3c};
    static const unsigned char k192[24] = {0x8e, 0x73, 0xb0, 0xf7, 0xda, 0x0e, 0x64, 0x52, 0xc8, 0x10, 0xf3, 0x2b,
                                           0x80, 0x90, 0x79, 0xe5, 0x62, 0xf8, 0xea, 0xd2, 0x52, 0x2c, 0x6b, 0x7b};
    static const unsigned char k256[32] = {0x60, 0x3d, 0xeb, 0x10, 0x15, 0xca, 0x71, 0xbe, 0x2b, 0x73, 0xae,
                                           0xf0, 0x85, 0x7d, 0x77, 0x81, 0x1f, 0x35, 0x2c, 0x07, 0x3b, 0x61,
                                           0x08, 0xd7, 0x2d, 0x98, 0x10, 0xa3, 0x09, 0x14, 0xdf, 0xf4};
    int cases = 0;

    test_seed(7);
    fips("A.1", k128, 16, 0xa0fafe17u, 0xb6630ca6u);
    fips("A.2", k192, 24, 0xfe0c91f7u, 0x01002202u);
    fips("A.3", k256, 32, 0x9ba35411u, 0x706c631eu);
    for (size_t len = 16; len <= 32; len += 8)
        for (int i = 0; i < 2000; ++i) {
            unsigned char key[32];
            test_rand_bytes(key, sizeof key);
            if (i == 0) std::memset(key, 0, sizeof key);
            if (i == 1) std::memset(key, 0xff, sizeof key);
            gpuaes_key *a = gpuaes_key_new(key, len), *p = gpuaes_key_new_portable(key, len);
            CHECKF(a != nullptr && p != nullptr, "no schedule");
            if (a == nullptr || p == nullptr) return 1;
            const size_t words = 4 * ((size_t)a->rounds + 1);
            CHECKF(a->rounds == p->rounds && a->rounds == (int)len / 4 + 6, "rounds %d / %d", a->rounds, p->rounds);
            CHECKF(std::memcmp(a->rk_enc, p->rk_enc, words * 4) == 0, "%zu-byte key: encryption schedules differ", len);
            CHECKF(std::memcmp(a->rk_dec, p->rk_dec, words * 4) == 0, "%zu-byte key: decryption schedules differ", len);
            gpuaes_key_free(a);
            gpuaes_key_free(p);
            cases++;
        }
    CHECKF(gpuaes_key_new(k128, 20) == nullptr && gpuaes_key_new(nullptr, 16) == nullptr, "a bad key was taken");
    std::printf("%d random keys and FIPS-197 A.1-A.3\n", cases);
    return test_report("key_schedule");
}
