// test_copy_pool.cpp - the staging copy pool (cuda/copy/copy_pool.cpp) on its own,
// no GPU needed: many copies in flight at once from several owner threads,
// odd sizes and alignments, plain and streaming stores, owners helping and
// waiting out of order, and the workers stopped and restarted while copies
// are in flight; XOR copies (dst = src ^ ks, staging's CTR copy-out), also in
// place; copies that wipe their staging operand (kCopyWipe: src, or ks) and a
// second buffer as they go; the load rule (copy_workers_for) on given
// inputs and on a machine made busy; workers that sleep when idle (no CPU
// spent) and wake for new copies (many short jobs from many threads, under
// a deadline: a lost wake-up would hang or stall); stop with every worker
// asleep, and a fork child (copy_pool_atfork_child), also one forked while
// the settings lock is held (gpu_settings.cpp); gpuaes_host_copy_begin/_end counted as one owner, not one per
// copy begun.  Every byte of every destination is checked, the
// bytes around it must be untouched, and every wiped byte must be zero.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sched.h>
#include <csignal>
#include <chrono>
#include <thread>
#include <vector>

#include "copy/copy_pool.h"
#include "runtime/gpu_settings.h"
#include "gpuaes_gpu.h"
#include "check.h"
#include "rng.h"

using namespace gpuaes;

namespace {

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

void make(Buf &b, rng_engine &rng, size_t n, Kind kind)
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

void start(CopyTask *t, Buf &b, unsigned flags, rng_engine &rng)
{
    unsigned char *d = dst_of(b);
    const unsigned char *src = b.kind == kXorInPlace ? d : b.src.data() + b.src_off;
    b.wipe = (flags & kCopyWipe) != 0;
    if (b.wipe && rng() % 2) b.also.assign(b.n, 0x5a);
    void *also = b.also.empty() ? nullptr : b.also.data();
    if (b.kind == kCopy) copy_start(t, d, src, b.n, flags, also);
    else copy_start_xor(t, d, src, b.ks.data(), b.n, flags, also);
}

bool all_bytes(const unsigned char *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; ++i)
        if (p[i] != v) return false;
    return true;
}

void check(const Buf &b, const char *what)
{
    const size_t before = kGuard + b.dst_off, after = before + b.n;
    CHECKF(std::memcmp(b.dst.data() + before, b.want.data(), b.n) == 0, "%s: %zu bytes differ from the source",
           what, b.n);
    CHECKF(all_bytes(b.dst.data(), before, kGuardByte), "%s: byte before the destination written", what);
    CHECKF(all_bytes(b.dst.data() + after, b.dst.size() - after, kGuardByte),
           "%s: byte after the destination written", what);
    if (!b.wipe) return;
    const unsigned char *staged = b.kind == kCopy ? b.src.data() + b.src_off : b.ks.data();
    CHECKF(all_bytes(staged, b.n, 0) && all_bytes(b.also.data(), b.also.size(), 0),
           "%s: a wiped byte is not zero (%zu bytes)", what, b.n);
}

size_t random_size(rng_engine &rng)
{
    switch (rng() % 4) {
    case 0: return rng() % 4096;                      // below any split
    case 1: return (size_t(256) << 10) * (1 + rng() % 4) + rng() % 3 - 1; // around part boundaries
    default: return rng() % (size_t(5) << 20);        // up to 5 MiB
    }
}

// One owner: rounds of up to 4 copies in flight, helped and waited in a
// random order, the way pipeline.cu drives them.
void owner(unsigned seed, int rounds)
{
    rng_engine rng(seed);
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
            CHECKF(copy_finished(&tt), "copy_wait returned before the copy finished");
            check(bb, bb.kind == kCopy ? "copy" : bb.kind == kXor ? "xor" : "xor in place");
        }
    }
}

// Aborts the test if a section takes longer than its deadline (a lost
// wake-up, or a join that never returns).
std::atomic<const char *> g_section{"start"};
std::atomic<long> g_deadline_ms{0};

void watchdog()
{
    for (;;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const long d = g_deadline_ms.load();
        const long now = (long)std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch()).count();
        if (d != 0 && now > d) {
            std::fprintf(stderr, "FAIL: %s: past its deadline (hung?)\n", g_section.load());
            std::_Exit(1);
        }
    }
}

// ThreadSanitizer runs this ~5-10x slower.
#if defined(__SANITIZE_THREAD__)
constexpr int kSlow = 10;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr int kSlow = 10;
#else
constexpr int kSlow = 1;
#endif
#else
constexpr int kSlow = 1;
#endif

// Under it, the bulk sections run a quarter of their rounds.
constexpr int kShare = kSlow > 1 ? 4 : 1;

// A named section with a deadline (0: none but ctest's timeout; the bulk
// copy sections take tens of seconds on a loaded 2-core VM).
void section(const char *name, int seconds)
{
    const long now = (long)std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::steady_clock::now().time_since_epoch()).count();
    static long began = now;
    std::printf("%-18s took %.2f s\n", g_section.load(), (double)(now - began) / 1e3);
    began = now;
    g_section = name;
    g_deadline_ms = seconds > 0 ? now + 1000L * seconds * kSlow : 0;
}

double cpu_s()
{
    rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           r.ru_stime.tv_usec * 1e-6;
}

// The load rule on given inputs (copy_pool.h has the numbers behind it).
void test_rule()
{
    auto rule = [](int cpus, double idle, int jobs, int workers) {
        CopyLoad l;
        l.cpus = cpus;
        l.idle = idle;
        l.jobs = jobs;
        l.workers = workers;
        return copy_workers_for(l);
    };
    CHECKF(rule(16, 16.0, 1, 7) == 7, "rule: idle machine, one job: every worker");
    CHECKF(rule(16, 15.2, 1, 63) == kCopiers - 1, "rule: copiers in all capped at kCopiers");
    CHECKF(rule(16, 0.4, 1, 7) == 0, "rule: every core busy: the owner copies alone");
    CHECKF(rule(16, 0.0, 4, 7) == 0, "rule: no idle core");
    CHECKF(rule(16, 3.7, 1, 7) == 3, "rule: 3.7 idle cores: 3 workers");
    CHECKF(rule(16, 16.0, 6, 7) == 2, "rule: 6 jobs' owners copy: 2 workers");
    CHECKF(rule(16, 16.0, 16, 7) == 0, "rule: 16 jobs: owners only");
    CHECKF(rule(4, 9.0, 1, 7) == 3, "rule: idle above the CPUs we may use is capped");
    CHECKF(rule(16, 16.0, 1, 0) == 0, "rule: no worker threads");
    CHECKF(rule(16, 16.0, 0, 7) == 7, "rule: no job counted yet: as one");
}

// The load samples' arithmetic on synthetic /proc/stat sums: a CPU going
// offline (or a cpuset shrinking) lowers the sums; the rule must judge again
// from the next sample on, not freeze until the sums catch up.
void test_load_idle()
{
    auto at = [](int cpus, uint64_t idle, uint64_t total, int64_t ms) {
        LoadSample s;
        s.cpus = cpus;
        s.idle = idle;
        s.total = total;
        s.at = ms * 1000000;
        return s;
    };
    auto near = [](double a, double b) { return a > b - 1e-9 && a < b + 1e-9; };
    LoadSample last; // none yet: since boot
    CHECKF(near(copy_load_idle(&last, at(4, 300, 400, 1)), 3.0), "load: first sample, since boot");
    CHECKF(copy_load_idle(&last, at(4, 301, 402, 2)) < 0, "load: under a tick per CPU: too little");
    CHECKF(near(copy_load_idle(&last, at(4, 400, 800, 3)), 1.0), "load: 100 of 400 ticks idle on 4 CPUs");
    // A day of uptime, then CPU 3 goes offline: sums over 3 CPUs, far lower.
    last = at(4, 20000000, 34560000, 10);
    CHECKF(copy_load_idle(&last, at(3, 15000000, 25920000, 20)) < 0, "load: CPU offline: new baseline");
    CHECKF(near(copy_load_idle(&last, at(3, 15000150, 25920300, 30)), 1.5),
           "load: judged again right after a CPU went offline");
    // Same count, lower sums (a cpuset moved to other, younger CPUs).
    CHECKF(copy_load_idle(&last, at(3, 100, 200, 40)) < 0, "load: sums went down: new baseline");
    CHECKF(near(copy_load_idle(&last, at(3, 400, 500, 50)), 3.0), "load: judged again after the sums went down");
    // Idle down while the total grows: incomparable, not a wrapped difference.
    CHECKF(copy_load_idle(&last, at(3, 300, 900, 60)) < 0, "load: idle went down: new baseline");
    // Our workers' awake time counts as idle.
    last = at(2, 0, 1000, 100);
    LoadSample cur = at(2, 100, 1200, 200); // 1 idle core over 100 ms
    cur.ours = last.ours + 50000000;        // plus 50 ms of our workers': half a core
    CHECKF(near(copy_load_idle(&last, cur), 1.5), "load: our workers' time counts as idle");
}

// Many short jobs from many threads, with pauses long enough for the
// workers to fall asleep in between: every copy must complete (a lost
// wake-up would leave parts to the owner, or hang copy_wait).
void short_jobs(unsigned seed, int jobs)
{
    rng_engine rng(seed);
    std::vector<unsigned char> src(size_t(512) << 10), dst(src.size());
    for (size_t i = 0; i < src.size(); ++i) src[i] = (unsigned char)(rng() >> 13);
    for (int j = 0; j < jobs; ++j) {
        copy_pool_enter();
        const size_t n = (size_t(128) << 10) + rng() % (size_t(384) << 10); // 2..8 parts of >= 64 KiB
        std::memset(dst.data(), 0, n);
        CopyTask t;
        copy_start(&t, dst.data(), src.data(), n, (unsigned)(rng() & kCopyUrgent));
        copy_wait(&t);
        CHECKF(std::memcmp(dst.data(), src.data(), n) == 0, "short job: copy differs");
        copy_pool_leave();
        if (rng() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 200));
    }
}

// Workers asleep wake for a copy that the owner never helps with: they
// must copy every part (within the deadline).
void test_wake_without_help()
{
    std::vector<unsigned char> src(size_t(2) << 20, 0x3c), dst(src.size());
    for (int round = 0; round < 50; ++round) {
        std::this_thread::sleep_for(std::chrono::milliseconds(round % 5 == 0 ? 5 : 0)); // all asleep
        CopyTask t;
        copy_start(&t, dst.data(), src.data(), src.size(), 0);
        while (!copy_finished(&t)) std::this_thread::sleep_for(std::chrono::microseconds(50));
        copy_wait(&t);
    }
    CHECKF(std::memcmp(dst.data(), src.data(), src.size()) == 0, "wake: workers' copy differs");
}

} // namespace

int main()
{
    std::thread(watchdog).detach();
    section("rule", 10);
    test_rule();
    test_load_idle();
    section("not started", 0);
    // 1. Pool not started: the owner copies everything itself.
    owner(1, 20 / kShare);
    {
        Buf b;
        rng_engine rng(2);
        make(b, rng, (size_t(3) << 20) + 5, kCopy);
        parallel_memcpy(dst_of(b), b.src.data() + b.src_off, b.n);
        check(b, "parallel_memcpy without workers");
    }

    // 2. Workers running, four owners at once.
    section("four owners", 0);
    gpuaes_gpu_settings s = GPUAES_GPU_SETTINGS_DEFAULT;
    s.copy_threads = 5;
    gpuaes_gpu_configure(&s);
    copy_pool_enter();
    CHECKF(copy_pool_workers() == 4, "%d workers, wanted 4", copy_pool_workers());
    {
        std::vector<std::thread> th;
        for (unsigned i = 0; i < 4; ++i) th.emplace_back(owner, 100 + i, 60 / kShare);
        for (auto &x : th) x.join();
    }

    // Idle workers sleep: a job in progress with nothing to copy costs
    // (almost) no CPU; the old pool spun 0.5 ms after every part.
    section("idle", 20);
    {
        copy_pool_enter();
        std::this_thread::sleep_for(std::chrono::milliseconds(20)); // every worker asleep by now
        const double c0 = cpu_s();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const double used = cpu_s() - c0;
        copy_pool_leave();
        CHECKF(used <= (kSlow > 1 ? 0.1 : 0.02), "idle pool used %.3f CPU s in 0.2 s", used);
    }
    section("wake without help", 30);
    test_wake_without_help();
    section("short jobs", 60);
    {
        std::vector<std::thread> th;
        for (unsigned i = 0; i < 8; ++i) th.emplace_back(short_jobs, 400 + i, 1500 / kShare);
        for (auto &x : th) x.join();
    }

    // 3. Stop and restart the workers while owners have copies in flight.
    section("stop under load", 0);
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
        for (unsigned i = 0; i < 3; ++i) th.emplace_back(owner, 200 + i, 60 / kShare);
        for (auto &x : th) x.join();
        quit = true;
        stopper.join();
    }
    copy_pool_leave();

    // Stop with every worker asleep: they wake and exit.
    section("stop asleep", 10);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    copy_pool_stop(false);
    CHECKF(copy_pool_workers() == 0, "workers left after a stop");

    // The load rule live: with every CPU we may use kept busy by other
    // threads, no worker copies (the owners do).
    section("load rule", 30);
    {
        copy_pool_test_auto_threads(4);
        gpuaes_gpu_settings d = GPUAES_GPU_SETTINGS_DEFAULT;
        gpuaes_gpu_configure(&d); // no GPUAES_COPY_THREADS: the load rule decides
        copy_pool_enter();        // starts 3 workers, samples the load
        CHECKF(copy_pool_workers() == 3, "load rule: 3 workers made");
        copy_pool_leave();
        cpu_set_t set;
        CPU_ZERO(&set);
        const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 2;
        std::atomic<bool> quit{false};
        std::vector<std::thread> burn;
        for (int i = 0; i < cpus; ++i)
            burn.emplace_back([&] {
                volatile unsigned long x = 1;
                while (!quit.load(std::memory_order_relaxed)) x = x * 3 + 1;
            });
        std::this_thread::sleep_for(std::chrono::milliseconds(150));
        copy_pool_enter(); // re-samples: the window had no idle core
        const int allowed = copy_pool_allowed();
        owner(500, 5);     // copies still complete, on the owner
        copy_pool_leave();
        quit = true;
        for (auto &x : burn) x.join();
        CHECKF(allowed == 0, "load rule: %d workers allowed with every CPU busy", allowed);
        copy_pool_test_auto_threads(0);
    }

    // gpuaes_host_copy_begin/_end (the service backend's copies): a copy
    // begun and not ended has no owner copying it, so eight of them leave the
    // load rule's owner count at 0 (counted per copy they read as eight
    // owners, and kCopiers - 8 workers: none); ending one counts its caller
    // while it copies what no worker took.  Every byte checked.
    section("host copies", 10);
    {
        constexpr int kCopies = 8;
        constexpr size_t kLen = (size_t)1 << 20;
        std::vector<unsigned char> src(kCopies * kLen), dst(kCopies * kLen, 0);
        rng_engine rng(7);
        for (auto &x : src) x = (unsigned char)rng();
        const int before = copy_pool_owners();
        gpuaes_host_copy_task *t[kCopies];
        for (int i = 0; i < kCopies; ++i)
            t[i] = gpuaes_host_copy_begin(dst.data() + i * kLen, src.data() + i * kLen, nullptr, kLen, 0);
        const int begun = copy_pool_owners() - before;
        for (int i = 0; i < kCopies; ++i) gpuaes_host_copy_end(t[i]);
        CHECKF(begun == 0, "host copies: %d owners counted for %d copies begun by one thread", begun, kCopies);
        CHECKF(copy_pool_owners() == before, "host copies: owners %d after the ends, %d before", copy_pool_owners(),
               before);
        CHECKF(std::memcmp(src.data(), dst.data(), src.size()) == 0, "host copies: a copy differs");
    }

    // A fork child of a process whose pool runs: no worker of the parent's
    // is counted (or joined); the child's next enter starts its own (a child
    // in service mode copies with the pool), its copies are right, and its
    // stop joins only its own workers.
    section("fork", 30);
    {
        copy_pool_enter();
        const pid_t pid = fork();
        if (pid == 0) {
            // pthread_atfork ran copy_pool_atfork_child(); calling it again is harmless.
            copy_pool_atfork_child();
            int bad = copy_pool_workers() != 0;
            copy_pool_enter(); // starts the child's own workers
            owner(600, 3);
            copy_pool_leave();
            copy_pool_stop(true);
            bad |= copy_pool_workers() != 0;
            std::_Exit(bad || test_failures != 0 ? 1 : 0);
        }
        int st = 0;
        CHECKF(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
               "fork child: the parent's workers counted, or a copy failed");
        copy_pool_leave();
    }

    // Forks while another thread holds the settings lock (configuring in a
    // loop): the child must read the settings, not hang on an inherited lock.
    section("fork settings", 30);
    {
        std::atomic<bool> stop{false};
        std::thread conf([&stop] {
            const gpuaes_gpu_settings s = gpu_settings();
            while (!stop.load(std::memory_order_relaxed)) gpuaes_gpu_configure(&s);
        });
        for (int i = 0; i < 200 && test_failures == 0; ++i) {
            const pid_t pid = fork();
            if (pid == 0) {
                alarm(5); // a hung child dies of SIGALRM
                (void)gpu_settings();
                std::_Exit(0);
            }
            int st = 0;
            CHECKF(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
                   "fork while configuring: the child hung on the settings lock");
        }
        stop.store(true);
        conf.join();
    }

    // 4. Final stop: copies still work, on the owner's thread.
    section("final stop", 30);
    copy_pool_stop(true);
    owner(300, 10);
    CHECKF(copy_pool_workers() == 0, "workers left after the final stop");

    if (test_failures != 0) {
        std::fprintf(stderr, "%d failures\n", test_failures);
        return 1;
    }
    section("end", 1);
    std::printf("copy pool: all copies exact, no stray writes\n");
    return 0;
}
