// aes_key.h - layout of the opaque gpuaes_key (cuda/ internal; plain C++,
// no CUDA headers, so key_schedule.cpp builds with the host compiler).
#ifndef GPUAES_AES_KEY_H
#define GPUAES_AES_KEY_H

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gpuaes_gpu.h"

struct gpuaes_key {
    uint32_t rk_enc[60]; // FIPS-197 w[], big-endian words, 4*(rounds+1) used
    uint32_t rk_dec[60]; // equivalent inverse cipher: reversed, InvMixColumns on rounds 1..rounds-1
    int rounds;          // 10, 12 or 14
};

// The portable schedule whatever the CPU has (gpuaes_key_new takes AES-NI
// where there is one): for test_key_schedule, which holds them to each other.
extern "C" gpuaes_key *gpuaes_key_new_portable(const unsigned char *key, size_t keylen);

namespace gpuaes {

// Wipe that the optimiser may not drop (the buffer is about to be freed).
inline void secure_wipe(void *p, size_t n)
{
    if (p == nullptr || n == 0) return;
    std::memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

} // namespace gpuaes

#endif
