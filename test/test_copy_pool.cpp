// test_copy_pool.cpp - the staging copy pool (cuda/copy_pool.cpp) on its own,
// no GPU needed: many copies in flight at once from several owner threads,
// odd sizes and alignments, plain and streaming stores, owners helping and
// waiting out of order, and the workers stopped and restarted while copies
// are in flight; XOR copies (dst = src ^ ks, staging's CTR copy-out), also in
// place; copies that wipe their staging operand (kCopyWipe: src, or ks) and a
// second buffer as they go.  Every byte of every destination is checked, the
// bytes around it must be untouched, and every wiped byte must be zero.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <chrono>
#include <thread>
#include <vector>

#include "copy_pool.h"
#include "gpuaes_gpu.h"

using namespace gpuaes;

namespace {

std::atomic<int> g_failures{0};
constexpr size_t kGuard = 64;
constexpr unsigned char kGuardByte = 0xA5;

enum Kind { kCopy, kXor, kXorInPlace };

struct Buf {
    std::vector<unsigned char> src, dst; // dst has kGuard bytes either side
    std::vector<unsigned char> ks, want; // XOR: the keystream, and src ^ ks
    std::vector<unsigned char> also;     // kCopyWipe: a second buffer to wipe, or empty
    size_t n = 0, src_off = 0, dst_off = 0;
    Kind kind = kCopy;
    bool wipe = false;
};

unsigned char *dst_of(Buf &b) { return b.dst.data() + kGuard + b.dst_off; }

void make(Buf &b, std::mt19937_64 &rng, size_t n, Kind kind)
{
    b.n = n;
    b.kind = kind;
    b.src_off = rng() % 64;
    b.dst_off = rng() % 64;
    b.src.resize(b.src_off + n);
    for (size_t i = 0; i < b.src.size(); ++i) b.src[i] = (unsigned char)(rng() >> 17);
    b.dst.assign(b.dst_off + n + 2 * kGuard, kGuardByte);
    b.want.assign(b.src.begin() + (long)b.src_off, b.src.end());
    if (kind == kCopy) return;
    b.ks.resize(n);
    for (size_t i = 0; i < n; ++i) {
        b.ks[i] = (unsigned char)(rng() >> 23);
        b.want[i] ^= b.ks[i];
    }
    if (kind == kXorInPlace) std::memcpy(dst_of(b), b.src.data() + b.src_off, n);
}

void start(CopyTask *t, Buf &b, unsigned flags, std::mt19937_64 &rng)
{
    unsigned char *d = dst_of(b);
    const unsigned char *src = b.kind == kXorInPlace ? d : b.src.data() + b.src_off;
    b.wipe = (flags & kCopyWipe) != 0;
    if (b.wipe && rng() % 2) b.also.assign(b.n, 0x5a);
    void *also = b.also.empty() ? nullptr : b.also.data();
    if (b.kind == kCopy) copy_start(t, d, src, b.n, flags, also);
    else copy_start_xor(t, d, src, b.ks.data(), b.n, flags, also);
}

bool all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i] != 0) return false;
    return true;
}

void check(const Buf &b, const char *what)
{
    const unsigned char *d = b.dst.data() + kGuard + b.dst_off;
    if (std::memcmp(d, b.want.data(), b.n) != 0) {
        std::fprintf(stderr, "FAIL %s: %zu bytes differ from the source\n", what, b.n);
        ++g_failures;
    }
    for (size_t i = 0; i < kGuard + b.dst_off; ++i)
        if (b.dst[i] != kGuardByte) {
            std::fprintf(stderr, "FAIL %s: byte before the destination written\n", what);
            ++g_failures;
            return;
        }
    for (size_t i = kGuard + b.dst_off + b.n; i < b.dst.size(); ++i)
        if (b.dst[i] != kGuardByte) {
            std::fprintf(stderr, "FAIL %s: byte after the destination written\n", what);
            ++g_failures;
            return;
        }
    if (!b.wipe) return;
    const unsigned char *staged = b.kind == kCopy ? b.src.data() + b.src_off : b.ks.data();
    if (!all_zero(staged, b.n) || !all_zero(b.also.data(), b.also.size())) {
        std::fprintf(stderr, "FAIL %s: a wiped byte is not zero (%zu bytes)\n", what, b.n);
        ++g_failures;
    }
}

size_t random_size(std::mt19937_64 &rng)
{
    switch (rng() % 4) {
    case 0: return rng() % 4096;                      // below any split
    case 1: return (size_t(256) << 10) * (1 + rng() % 4) + rng() % 3 - 1; // around part boundaries
    default: return rng() % (size_t(5) << 20);        // up to 5 MiB
    }
}

// One owner: rounds of up to 4 copies in flight, helped and waited in a
// random order, the way staging.cu's pipeline drives them.
void owner(unsigned seed, int rounds)
{
    std::mt19937_64 rng(seed);
    for (int r = 0; r < rounds; ++r) {
        const int k = 1 + (int)(rng() % 4);
        Buf b[4];
        CopyTask t[4];
        for (int i = 0; i < k; ++i) {
            make(b[i], rng, random_size(rng), (Kind)(rng() % 3));
            start(&t[i], b[i], (unsigned)(rng() & (kCopyStream | kCopyUrgent | kCopyWipe)), rng);
        }
        for (int s = 0; s < 8; ++s) (void)copy_help(&t[rng() % k]);
        int order[4] = {0, 1, 2, 3};
        std::shuffle(order, order + k, rng);
        for (int i = 0; i < k; ++i) {
            Buf &bb = b[order[i]];
            CopyTask &tt = t[order[i]];
            copy_wait(&tt);
            if (!copy_finished(&tt)) {
                std::fprintf(stderr, "FAIL: copy_wait returned before the copy finished\n");
                ++g_failures;
            }
            check(bb, bb.kind == kCopy ? "copy" : bb.kind == kXor ? "xor" : "xor in place");
        }
    }
}

} // namespace

int main()
{
    // 1. Pool not started: the owner copies everything itself.
    owner(1, 20);
    {
        Buf b;
        std::mt19937_64 rng(2);
        make(b, rng, (size_t(3) << 20) + 5, kCopy);
        parallel_memcpy(dst_of(b), b.src.data() + b.src_off, b.n);
        check(b, "parallel_memcpy without workers");
    }

    // 2. Workers running, four owners at once.
    gpuaes_gpu_settings s = GPUAES_GPU_SETTINGS_DEFAULT;
    s.copy_threads = 5;
    gpuaes_gpu_configure(&s);
    copy_pool_enter();
    if (copy_pool_workers() != 4) {
        std::fprintf(stderr, "FAIL: %d workers, wanted 4\n", copy_pool_workers());
        ++g_failures;
    }
    {
        std::vector<std::thread> th;
        for (unsigned i = 0; i < 4; ++i) th.emplace_back(owner, 100 + i, 60);
        for (auto &x : th) x.join();
    }

    // 3. Stop and restart the workers while owners have copies in flight.
    {
        std::atomic<bool> quit{false};
        std::thread stopper([&] {
            while (!quit.load()) {
                copy_pool_stop(false);
                copy_pool_enter(); // restarts them (and counts as one more job)
                copy_pool_leave();
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        });
        std::vector<std::thread> th;
        for (unsigned i = 0; i < 3; ++i) th.emplace_back(owner, 200 + i, 60);
        for (auto &x : th) x.join();
        quit = true;
        stopper.join();
    }
    copy_pool_leave();

    // 4. Final stop: copies still work, on the owner's thread.
    copy_pool_stop(true);
    owner(300, 10);
    if (copy_pool_workers() != 0) {
        std::fprintf(stderr, "FAIL: workers left after the final stop\n");
        ++g_failures;
    }

    if (g_failures.load() != 0) {
        std::fprintf(stderr, "%d failures\n", g_failures.load());
        return 1;
    }
    std::printf("copy pool: all copies exact, no stray writes\n");
    return 0;
}
