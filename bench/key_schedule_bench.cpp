// key_schedule_bench.cpp - what an AES key schedule of the GPU layer
// (cuda/kernels/key_schedule.cpp) costs on this CPU: gpuaes_key_new (AES-NI where
// there is one) against the portable constant-time schedule, per key size,
// allocation and wipe included.  gpuaesd makes one for every job.
//   key_schedule_bench [N keys per size, default 20000]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "kernels/aes_key.h"

namespace {

template <typename F>
double us_per_key(F make, size_t len, int n)
{
    unsigned char key[32] = {0x5a};
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) {
        key[i % 32] ^= (unsigned char)i;
        gpuaes_key *k = make(key, len);
        if (k == nullptr) std::abort();
        gpuaes_key_free(k);
    }
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / n;
}

} // namespace

int main(int argc, char **argv)
{
    const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
    if (n < 1) return 2;
    std::printf("# key_schedule_bench: %d keys per size, us per key (new + free)\n", n);
    std::printf("%8s %12s %12s\n", "key", "gpuaes", "portable");
    for (size_t len = 16; len <= 32; len += 8)
        std::printf("%5zu B %12.3f %12.3f\n", len, us_per_key(gpuaes_key_new, len, n),
                    us_per_key(gpuaes_key_new_portable, len, n));
    return 0;
}
