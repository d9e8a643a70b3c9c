// Throwaway device test for cuda/ (not committed).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <cuda_runtime_api.h>
#include "gpuaes_gpu.h"
#include "aes_key.h"
#include "aes_kernels.cuh"

static std::atomic<int> g_fail{0};
#define CHECK(c, ...) do { if (!(c)) { if (g_fail++ < 40) { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); printf("\n"); fflush(stdout);} } } while (0)
static const char* opname[] = {"ECB_ENC", "ECB_DEC", "CTR128", "CTR32", "CBC_DEC", "CFB_DEC"};
static const size_t MiB = 1 << 20;

static const EVP_CIPHER* cip(const char* m, int kl) {
    char n[64]; snprintf(n, sizeof n, "AES-%d-%s", kl * 8, m);
    return EVP_get_cipherbyname(n);
}
static void evp(const EVP_CIPHER* c, bool enc, const unsigned char* k, const unsigned char* iv, const unsigned char* in, unsigned char* out, size_t len) {
    EVP_CIPHER_CTX* x = EVP_CIPHER_CTX_new();
    EVP_CipherInit_ex(x, c, NULL, k, iv, enc); EVP_CIPHER_CTX_set_padding(x, 0);
    size_t off = 0;
    while (off < len) { int n = (int)std::min<size_t>(len - off, 1 << 30), ol = 0; EVP_CipherUpdate(x, out + off, &ol, in + off, n); if (ol != n) abort(); off += n; }
    EVP_CIPHER_CTX_free(x);
}
static void add128(unsigned char* iv, uint64_t n) { for (int i = 15; i >= 0 && n; --i) { n += iv[i]; iv[i] = (unsigned char)n; n >>= 8; } }
static void add32(unsigned char* iv, uint64_t n) { uint32_t c = (uint32_t)iv[12] << 24 | (uint32_t)iv[13] << 16 | (uint32_t)iv[14] << 8 | iv[15]; c += (uint32_t)n; iv[12] = c >> 24; iv[13] = c >> 16; iv[14] = c >> 8; iv[15] = c; }

// Reference: out = op(in); next = state for in[len]
static void ref(int op, const unsigned char* k, int kl, const unsigned char* iv, const unsigned char* in, unsigned char* out, size_t len, unsigned char next[16]) {
    memcpy(next, iv, 16);
    switch (op) {
    case GPUAES_ECB_ENCRYPT: evp(cip("ECB", kl), true, k, NULL, in, out, len); break;
    case GPUAES_ECB_DECRYPT: evp(cip("ECB", kl), false, k, NULL, in, out, len); break;
    case GPUAES_CTR128: evp(cip("CTR", kl), true, k, iv, in, out, len); add128(next, len / 16); break;
    case GPUAES_CTR32: {
        std::vector<unsigned char> ctr(len);
        unsigned char c[16]; memcpy(c, iv, 16);
        for (size_t j = 0; j < len / 16; j++) { memcpy(&ctr[16 * j], c, 16); add32(c, 1); }
        evp(cip("ECB", kl), true, k, NULL, ctr.data(), ctr.data(), len);
        for (size_t i = 0; i < len; i++) out[i] = in[i] ^ ctr[i];
        add32(next, len / 16); break; }
    case GPUAES_CBC_DECRYPT: if (len) memcpy(next, in + len - 16, 16); evp(cip("CBC", kl), false, k, iv, in, out, len); break;
    case GPUAES_CFB128_DECRYPT: if (len) memcpy(next, in + len - 16, 16); evp(cip("CFB", kl), false, k, iv, in, out, len); break;
    }
}

static std::mt19937_64 rng_seed(uint64_t s) { return std::mt19937_64(s); }
static void fill(std::vector<unsigned char>& v, std::mt19937_64& r) { for (size_t i = 0; i + 8 <= v.size(); i += 8) { uint64_t x = r(); memcpy(&v[i], &x, 8); } }

// One job checked end to end. inplace: out == in. Returns status.
static int check_job(int op, int kl, size_t len, bool inplace, std::mt19937_64& r, const unsigned char* ivp = nullptr, bool allow_busy = false, const char* tag = "") {
    unsigned char k[32], iv[16], next[16];
    for (auto& b : k) b = (unsigned char)r();
    for (auto& b : iv) b = (unsigned char)r();
    if (ivp) memcpy(iv, ivp, 16);
    std::vector<unsigned char> in(len), exp(len), out(inplace ? 0 : len, 0xA5);
    fill(in, r);
    ref(op, k, kl, iv, in.data(), exp.data(), len, next);
    std::vector<unsigned char> orig = in;
    gpuaes_key* K = gpuaes_key_new(k, kl);
    gpuaes_job j; memset(&j, 0, sizeof j);
    j.op = (gpuaes_op)op; j.key = K; memcpy(j.iv, iv, 16); j.in = in.data(); j.out = inplace ? in.data() : out.data(); j.len = len;
    gpuaes_gpu_run(&j);
    unsigned char* o = inplace ? in.data() : out.data();
    if (j.status == GPUAES_BUSY && allow_busy) {
        CHECK(j.done == 0, "busy with done");
        CHECK(memcmp(j.iv, iv, 16) == 0 || op == GPUAES_ECB_ENCRYPT, "busy changed iv");
        CHECK(inplace ? in == orig : std::all_of(out.begin(), out.end(), [](unsigned char c) { return c == 0xA5; }), "busy touched out");
        gpuaes_key_free(K); return j.status;
    }
    CHECK(j.status == GPUAES_OK, "%s %s kl=%d len=%zu inplace=%d status=%d err=%s", tag, opname[op], kl, len, inplace, j.status, j.error);
    CHECK(j.done == len, "%s %s done=%zu len=%zu", tag, opname[op], j.done, len);
    CHECK(memcmp(o, exp.data(), len) == 0, "%s %s kl=%d len=%zu inplace=%d: output mismatch", tag, opname[op], kl, len, inplace);
    CHECK(memcmp(j.iv, next, 16) == 0, "%s %s kl=%d len=%zu: iv out mismatch", tag, opname[op], kl, len);
    gpuaes_key_free(K);
    return j.status;
}

static int t_main() {
    printf("available=%d desc=%s\n", gpuaes_gpu_available(), gpuaes_gpu_description());
    if (!gpuaes_gpu_available()) return 1;
    auto r = rng_seed(1);
    // FIPS-197 C.1 / C.3 through the whole path
    {
        unsigned char k[32], pt[16], o[16];
        for (int i = 0; i < 32; i++) k[i] = i;
        for (int i = 0; i < 16; i++) pt[i] = (unsigned char)(i * 0x11);
        const unsigned char c1[16] = {0x69,0xc4,0xe0,0xd8,0x6a,0x7b,0x04,0x30,0xd8,0xcd,0xb7,0x80,0x70,0xb4,0xc5,0x5a};
        const unsigned char c3[16] = {0x8e,0xa2,0xb7,0xca,0x51,0x67,0x45,0xbf,0xea,0xfc,0x49,0x90,0x4b,0x49,0x60,0x89};
        for (int kl : {16, 32}) {
            gpuaes_key* K = gpuaes_key_new(k, kl);
            gpuaes_job j; memset(&j, 0, sizeof j); j.op = GPUAES_ECB_ENCRYPT; j.key = K; j.in = pt; j.out = o; j.len = 16;
            gpuaes_gpu_run(&j);
            CHECK(j.status == GPUAES_OK && memcmp(o, kl == 16 ? c1 : c3, 16) == 0, "FIPS enc kl=%d st=%d %s", kl, j.status, j.error);
            j.op = GPUAES_ECB_DECRYPT; j.in = o; j.out = o; gpuaes_gpu_run(&j);
            CHECK(j.status == GPUAES_OK && memcmp(o, pt, 16) == 0, "FIPS dec kl=%d", kl);
            gpuaes_key_free(K);
        }
    }
    // Sizes around chunk boundaries, all ops, all key sizes, in place and not.
    const size_t C = 8 * MiB;
    std::vector<size_t> lens = {16, 32, 48, 4096, 65536 + 16, MiB + 16, C - 16, C, C + 16, 2 * C, 2 * C + 48, 3 * C - 16, 3 * C + 32, 5 * C + 4096};
    int n = 0;
    for (int op = 0; op < 6; op++)
        for (int kl : {16, 24, 32})
            for (size_t li = 0; li < lens.size(); li++) {
                size_t len = lens[li];
                if (kl == 24 && len > 3 * C) continue;
                bool inplace = ((li + op + kl) & 1);
                check_job(op, kl, len, inplace, r); n++;
            }
    printf("sizes: %d jobs, failures so far %d\n", n, g_fail.load());
    // Counter edge cases across chunk boundaries
    {
        unsigned char iv[16];
        memset(iv, 0xff, 16); // ctr128 wraps mod 2^128 right away; ctr32 wraps low word
        for (int op : {GPUAES_CTR128, GPUAES_CTR32}) for (size_t len : {(size_t)64, C + 64, 3 * C + 16}) check_job(op, 16, len, false, r, iv, false, "wrap-all-ff");
        // low 64 bits wrap in the 2nd chunk
        memset(iv, 0x12, 16); memset(iv + 8, 0xff, 8); uint64_t back = C / 16 + 5; // carry 5 blocks into chunk 1
        unsigned char t[16]; memcpy(t, iv, 16);
        for (int i = 15; i >= 8; i--) { } // iv low64 = 2^64-1 ; set low64 = 2^64 - back
        uint64_t low = 0 - back; for (int i = 0; i < 8; i++) iv[15 - i] = (unsigned char)(low >> (8 * i));
        for (int op : {GPUAES_CTR128, GPUAES_CTR32}) check_job(op, 32, 3 * C, true, r, iv, false, "wrap64-mid");
        // low 32 bits wrap inside chunk 2 (ctr32 must not carry, ctr128 must)
        memset(iv, 0x77, 16); uint32_t l32 = 0u - (uint32_t)(2 * C / 16 + 100);
        iv[12] = l32 >> 24; iv[13] = l32 >> 16; iv[14] = l32 >> 8; iv[15] = l32;
        for (int op : {GPUAES_CTR128, GPUAES_CTR32}) check_job(op, 16, 4 * C, false, r, iv, false, "wrap32-mid");
        (void)t;
    }
    printf("ctr edges done, failures so far %d\n", g_fail.load());
    // Invalid jobs / len 0
    {
        gpuaes_job j; memset(&j, 0, sizeof j); unsigned char b[32] = {0}; unsigned char k[16] = {0};
        gpuaes_key* K = gpuaes_key_new(k, 16);
        j.op = GPUAES_ECB_ENCRYPT; j.key = K; j.in = b; j.out = b; j.len = 0; gpuaes_gpu_run(&j);
        CHECK(j.status == GPUAES_OK && j.done == 0, "len 0");
        j.len = 17; gpuaes_gpu_run(&j); CHECK(j.status == GPUAES_FAILED && j.done == 0, "len 17 st=%d", j.status);
        j.len = 16; j.key = nullptr; gpuaes_gpu_run(&j); CHECK(j.status == GPUAES_FAILED, "null key");
        gpuaes_key_free(K);
    }
    // Release then reuse
    gpuaes_gpu_release(); gpuaes_gpu_release();
    check_job(GPUAES_CBC_DECRYPT, 16, 3 * C + 16, true, r, nullptr, false, "after-release");
    // Concurrency: 16 threads x random jobs; BUSY allowed (and counted).
    {
        std::atomic<int> busy{0}, ok{0};
        std::vector<std::thread> th;
        for (int t = 0; t < 16; t++) th.emplace_back([&, t] {
            auto rr = rng_seed(100 + t);
            for (int it = 0; it < 12; it++) {
                int op = (int)(rr() % 6), kl = 16 + 8 * (int)(rr() % 3);
                size_t len = 16 * (1 + rr() % (3 * C / 16));
                int st = check_job(op, kl, len, rr() & 1, rr, nullptr, true, "mt");
                if (st == GPUAES_BUSY) busy++; else ok++;
            }
        });
        for (auto& x : th) x.join();
        printf("threads: ok=%d busy=%d failures so far %d\n", ok.load(), busy.load(), g_fail.load());
    }
    printf("available after all=%d desc=%s\n", gpuaes_gpu_available(), gpuaes_gpu_description());
    printf("MAIN %s (%d failures)\n", g_fail ? "FAILED" : "PASSED", g_fail.load());
    return g_fail != 0;
}

// Fault injection: run under GPUAES_FAULT=<stage>.
static int t_fault(const char* stage) {
    printf("fault %s: available=%d\n", stage, gpuaes_gpu_available());
    auto r = rng_seed(7);
    const size_t C = 8 * MiB;
    for (int rep = 0; rep < 2; rep++)
    for (size_t len : {(size_t)4096, 2 * C, 4 * C + 32}) for (int op : {GPUAES_CBC_DECRYPT, GPUAES_CTR128, GPUAES_CFB128_DECRYPT, GPUAES_ECB_ENCRYPT}) for (bool inplace : {false, true}) {
        unsigned char k[16], iv[16], next[16];
        for (auto& b : k) b = (unsigned char)r(); for (auto& b : iv) b = (unsigned char)r();
        std::vector<unsigned char> in(len), exp(len), out(inplace ? 0 : len, 0xA5);
        fill(in, r);
        std::vector<unsigned char> orig = in;
        ref(op, k, 16, iv, in.data(), exp.data(), len, next);
        gpuaes_key* K = gpuaes_key_new(k, 16);
        gpuaes_job j; memset(&j, 0, sizeof j);
        j.op = (gpuaes_op)op; j.key = K; memcpy(j.iv, iv, 16); j.in = in.data(); j.out = inplace ? in.data() : out.data(); j.len = len;
        gpuaes_gpu_run(&j);
        unsigned char* o = inplace ? in.data() : out.data();
        size_t nch = (len + C - 1) / C;
        size_t want = (!strcmp(stage, "copyout") || !strcmp(stage, "sync")) && nch >= 3 ? C : 0;
        CHECK(j.status == GPUAES_FAILED, "fault %s: status %d", stage, j.status);
        CHECK(strstr(j.error, stage) != nullptr, "fault %s: error '%s'", stage, j.error);
        CHECK(j.done == want, "fault %s len=%zu: done=%zu want %zu", stage, len, j.done, want);
        CHECK(memcmp(o, exp.data(), j.done) == 0, "fault %s: prefix wrong", stage);
        if (inplace) CHECK(memcmp(o + j.done, orig.data() + j.done, len - j.done) == 0, "fault %s: tail touched (inplace)", stage);
        else CHECK(std::all_of(out.begin() + j.done, out.end(), [](unsigned char c) { return c == 0xA5; }), "fault %s: tail touched", stage);
        // iv state for in[done]: finish on the CPU and compare with the full reference
        unsigned char rest_exp_next[16];
        std::vector<unsigned char> rest(len - j.done);
        ref(op, k, 16, j.iv, orig.data() + j.done, rest.data(), len - j.done, rest_exp_next);
        CHECK(memcmp(rest.data(), exp.data() + j.done, len - j.done) == 0, "fault %s %s: CPU continuation with returned iv wrong", stage, opname[op]);
        if (rep == 0 && len == 4 * C + 32 && op == GPUAES_CBC_DECRYPT && !inplace) printf("  error text: %s (done=%zu)\n", j.error, j.done);
        gpuaes_key_free(K);
    }
    printf("fault %s: after: available=%d desc=%s\n", stage, gpuaes_gpu_available(), gpuaes_gpu_description());
    CHECK(gpuaes_gpu_available() == 1, "gpu still available after injected fault");
    printf("FAULT %s %s (%d failures)\n", stage, g_fail ? "FAILED" : "PASSED", g_fail.load());
    return g_fail != 0;
}

static int t_fork(bool touch_first) {
    if (touch_first) printf("parent: available=%d\n", gpuaes_gpu_available());
    auto r = rng_seed(9);
    if (touch_first) check_job(GPUAES_CTR128, 16, 3 * 8 * MiB, false, r, nullptr, false, "parent-before-fork");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int a = gpuaes_gpu_available();
        printf("child: available=%d desc=%s\n", a, gpuaes_gpu_description());
        if (touch_first) {
            CHECK(a == 0, "child after cuda must not use gpu");
            CHECK(strstr(gpuaes_gpu_description(), "fork") != nullptr, "child desc");
            unsigned char b[64] = {0}, k[16] = {0}; gpuaes_key* K = gpuaes_key_new(k, 16);
            gpuaes_job j; memset(&j, 0, sizeof j); j.op = GPUAES_ECB_ENCRYPT; j.key = K; j.in = b; j.out = b; j.len = 64;
            gpuaes_gpu_run(&j); CHECK(j.status == GPUAES_BUSY && j.done == 0, "child run must be BUSY (%d)", j.status);
            gpuaes_gpu_release(); gpuaes_key_free(K);
        } else {
            CHECK(a == 1, "child of untouched parent should init itself");
            auto rc = rng_seed(11);
            check_job(GPUAES_CBC_DECRYPT, 32, 2 * 8 * MiB + 16, true, rc, nullptr, false, "child");
        }
        printf("child %s (%d failures)\n", g_fail ? "FAILED" : "PASSED", g_fail.load());
        fflush(stdout);
        exit(g_fail != 0); // runs atexit handlers in the child
    }
    int st = 0;
    // never hang: poll with a deadline
    for (int i = 0; i < 300; i++) { if (waitpid(pid, &st, WNOHANG) == pid) break; usleep(100000); if (i == 299) { printf("child HUNG\n"); kill(pid, 9); waitpid(pid, &st, 0); g_fail++; } }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child exit status %d", st);
    check_job(GPUAES_CFB128_DECRYPT, 24, 2 * 8 * MiB + 32, false, r, nullptr, false, "parent-after-fork");
    printf("FORK(touch_first=%d) %s (%d failures)\n", touch_first, g_fail ? "FAILED" : "PASSED", g_fail.load());
    return g_fail != 0;
}

static int t_env() {
    printf("ENV available=%d desc=%s\n", gpuaes_gpu_available(), gpuaes_gpu_description());
    unsigned char b[64] = {0}, k[16] = {0}; gpuaes_key* K = gpuaes_key_new(k, 16);
    gpuaes_job j; memset(&j, 0, sizeof j); j.op = GPUAES_ECB_ENCRYPT; j.key = K; j.in = b; j.out = b; j.len = 64;
    gpuaes_gpu_run(&j); printf("ENV run status=%d done=%zu\n", j.status, j.done);
    gpuaes_key_free(K);
    return gpuaes_gpu_available();
}

// Kernel-only and end-to-end throughput.
static int t_perf() {
    if (!gpuaes_gpu_available()) return 1;
    using namespace gpuaes;
    const size_t len = (size_t)1 << 30;
    void *din, *dout; cudaMalloc(&din, len); cudaMalloc(&dout, len);
    std::vector<unsigned char> h(len); auto r = rng_seed(3); fill(h, r);
    cudaMemcpy(din, h.data(), len, cudaMemcpyHostToDevice);
    cudaStream_t st; cudaStreamCreate(&st);
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    unsigned char k[32]; for (int i = 0; i < 32; i++) k[i] = (unsigned char)(i * 7 + 1);
    for (int kl : {16, 32}) for (int mode = 0; mode < KM_COUNT; mode++) {
        gpuaes_key* K = gpuaes_key_new(k, kl);
        KParams p{}; memcpy(p.rk, kmode_decrypts(mode) ? K->rk_dec : K->rk_enc, sizeof p.rk);
        for (int i = 0; i < 4; i++) { p.iv_be[i] = 0x01020304u * (i + 1); p.iv_raw[i] = 0x0a0b0c0du * (i + 1); }
        cudaError_t e = launch_kernel(mode, K->rounds, p, din, dout, (uint32_t)(len / 16), st);
        cudaStreamSynchronize(st);
        const int reps = 10;
        cudaEventRecord(e0, st);
        for (int i = 0; i < reps; i++) e = launch_kernel(mode, K->rounds, p, din, dout, (uint32_t)(len / 16), st);
        cudaEventRecord(e1, st); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1);
        printf("kernel AES-%d %-8s: %7.1f GB/s (err=%s)\n", kl * 8, opname[mode], (double)len * reps / (ms / reps * 1e-3) / reps / 1e9, cudaGetErrorString(e));
        if (mode == KM_ECB_ENC || mode == KM_CBC_DEC) { // verify the 1 GiB launch
            std::vector<unsigned char> g(len), x(len); unsigned char nx[16], ivb[16];
            for (int i = 0; i < 4; i++) memcpy(ivb + 4 * i, &p.iv_raw[i], 4);
            cudaMemcpy(g.data(), dout, len, cudaMemcpyDeviceToHost);
            ref(mode == KM_ECB_ENC ? GPUAES_ECB_ENCRYPT : GPUAES_CBC_DECRYPT, k, kl, ivb, h.data(), x.data(), len, nx);
            CHECK(g == x, "1 GiB kernel output mismatch kl=%d mode=%d", kl, mode);
        }
        gpuaes_key_free(K);
    }
    // end to end (pageable user buffers)
    for (int op : {GPUAES_ECB_ENCRYPT, GPUAES_CTR128}) for (int nth : {1, 4}) {
        gpuaes_key* K = gpuaes_key_new(k, 16);
        std::vector<std::vector<unsigned char>> outs(nth, std::vector<unsigned char>(len / nth));
        auto t0 = std::chrono::steady_clock::now();
        std::vector<std::thread> th;
        for (int t = 0; t < nth; t++) th.emplace_back([&, t] {
            for (int rep = 0; rep < 2; rep++) {
                gpuaes_job j; memset(&j, 0, sizeof j); j.op = (gpuaes_op)op; j.key = K; j.in = h.data() + t * (len / nth); j.out = outs[t].data(); j.len = len / nth;
                gpuaes_gpu_run(&j); CHECK(j.status == GPUAES_OK, "e2e status %d %s", j.status, j.error);
            }
        });
        for (auto& x : th) x.join();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("end-to-end %s threads=%d: %.2f GB/s\n", opname[op], nth, 2.0 * len / s / 1e9);
        gpuaes_key_free(K);
    }
    printf("PERF %s (%d failures)\n", g_fail ? "FAILED" : "PASSED", g_fail.load());
    return g_fail != 0;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    std::string m = argc > 1 ? argv[1] : "main";
    if (m == "main") return t_main();
    if (m == "fault") return t_fault(argv[2]);
    if (m == "fork-after") return t_fork(true);
    if (m == "fork-before") return t_fork(false);
    if (m == "env") return t_env();
    if (m == "perf") return t_perf();
    return 2;
}
