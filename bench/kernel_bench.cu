// kernel_bench.cu - times each gpuaes kernel alone, on device-resident
// buffers, with CUDA events: no host copies, no PCIe, no OpenSSL.  The
// figures are the ceiling of the GPU path (reported as path `kernel`).
//
// For each key size and each kernel (ECB enc, ECB dec, CTR128, CTR32 = GCM's
// keystream, CBC dec, CFB dec): 1 GiB of random input, a separate 1 GiB
// output, a few warm-up launches, then the median of --launches timed
// launches; GB/s = bytes processed once / kernel time (10^9 bytes/s).  A
// device-to-device cudaMemcpy of the same size is timed as the memory
// reference.  Before timing, every kernel is checked on a small buffer
// (ECB against FIPS-197 appendix C, the others against ECB), and a kernel
// that fails its check is not timed.
//
// GCM as the product runs it (cuda/staging/pipeline.cu): per staging chunk (--chunk-kib,
// default 8 MiB), the CTR32 kernel and then the GHASH kernels over its output
// (launch_kernel(KM_CTR32) + launch_ghash), every chunk of the buffer back to
// back on one stream, timed as one sequence; also GHASH alone and CTR32 alone
// over the same chunks.  GHASH is self-checked first against a bitwise
// reference (SP 800-38D algorithm 1) on several lengths, and after timing the
// first and last chunk's GHASH of the GCM sequence are checked against the
// host (gpuaes::gf_mul, which test_ghash_math checks against OpenSSL).
//
// Rows are appended to --csv FILE (header written if the file is new or
// empty): cipher,direction,update_bytes,threads,path,gbps,cpu_core_s_per_gb
// with path `kernel`, threads 1, update_bytes = buffer size, cpu empty.
// CTR and GCM get an enc and a dec row from the one measurement (the same
// kernels; GCM decryption hashes the input instead of the output, the same
// work).  AES-n-GCM is CTR32 + GHASH per chunk; AES-n-GHASH (direction enc)
// is GHASH alone per chunk; AES-n-CTR32 (enc) is the CTR32 kernel in one
// launch over the whole buffer (what the GCM row measured before GHASH moved
// to the GPU).
#include <cuda_runtime.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/aes_kernels.cuh"
#include "gf128_ref.h"   // test/support: the reference multiply
#include "kernels/aes_key.h"
#include "kernels/ghash_launch.h"
#include "gpuaes_counter.h"
#include "gpuaes_gpu.h"
#include "rng.h"           // test/support: the seeded generator

namespace {

void check(cudaError_t e, const char *what, int line)
{
    if (e != cudaSuccess) {
        std::fprintf(stderr, "kernel_bench: line %d: %s: %s (%s)\n", line, what, cudaGetErrorString(e),
                     cudaGetErrorName(e));
        std::exit(1);
    }
}
#define CK(call) check((call), #call, __LINE__)

[[noreturn]] void die(const char *msg, const char *arg = "")
{
    std::fprintf(stderr, "kernel_bench: %s%s\n", msg, arg);
    std::exit(2);
}

__global__ void fill_random(uint64_t *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = rng_at(seed, i);
}

struct Op {
    int kmode;
    const char *mode;       // cipher mode in the CSV name
    const char *dirs[2];    // CSV directions this kernel serves
    int ndirs;
    const char *label;
};

const Op kOps[] = {
    {gpuaes::KM_ECB_ENC, "ECB", {"enc", nullptr}, 1, "ECB encrypt"},
    {gpuaes::KM_ECB_DEC, "ECB", {"dec", nullptr}, 1, "ECB decrypt"},
    {gpuaes::KM_CTR128, "CTR", {"enc", "dec"}, 2, "CTR (128-bit counter)"},
    {gpuaes::KM_CTR32, "CTR32", {"enc", nullptr}, 1, "CTR32 (GCM keystream, no GHASH)"},
    {gpuaes::KM_CBC_DEC, "CBC", {"dec", nullptr}, 1, "CBC decrypt"},
    {gpuaes::KM_CFB_DEC, "CFB", {"dec", nullptr}, 1, "CFB128 decrypt"},
};

rng_state g_rng = rng_seeded(0x0123456789abcdefULL);   // fixed: every run times the same data
uint64_t rnd64() { return rng_next(&g_rng); }
void rnd_bytes(unsigned char *p, size_t n) { rng_bytes(&g_rng, p, n); }

// KParams for one kernel: round keys of the right direction, counter and chaining block.
gpuaes::KParams make_params(const gpuaes_key *k, int kmode, const unsigned char ctr[16], const unsigned char prev[16])
{
    gpuaes::KParams p;
    std::memset(&p, 0, sizeof p);
    std::memcpy(p.rk, gpuaes::kmode_decrypts(kmode) ? k->rk_dec : k->rk_enc, sizeof p.rk);
    gpuaes_ctr_columns(ctr, p.iv_be);
    std::memcpy(p.iv_raw, prev, 16);
    return p;
}

// Runs one kernel on host data through small device buffers (synchronously).
std::vector<unsigned char> run_small(int kmode, int rounds, const gpuaes::KParams &p,
                                     const std::vector<unsigned char> &in, void *din, void *dout)
{
    std::vector<unsigned char> out(in.size());
    CK(cudaMemcpy(din, in.data(), in.size(), cudaMemcpyHostToDevice));
    CK(gpuaes::launch_kernel(kmode, rounds, p, din, dout, (uint32_t)(in.size() / 16), 0));
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(out.data(), dout, in.size(), cudaMemcpyDeviceToHost));
    return out;
}

// Self-check of every kernel for one key size; ok[kmode] set per kernel.
void self_check(int keylen, bool ok[gpuaes::KM_COUNT])
{
    static const unsigned char kPt[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                          0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
    static const unsigned char kCt[3][16] = {
        {0x69, 0xc4, 0xe0, 0xd8, 0x6a, 0x7b, 0x04, 0x30, 0xd8, 0xcd, 0xb7, 0x80, 0x70, 0xb4, 0xc5, 0x5a},
        {0xdd, 0xa9, 0x7c, 0xa4, 0x86, 0x4c, 0xdf, 0xe0, 0x6e, 0xaf, 0x70, 0xa0, 0xec, 0x0d, 0x71, 0x91},
        {0x8e, 0xa2, 0xb7, 0xca, 0x51, 0x67, 0x45, 0xbf, 0xea, 0xfc, 0x49, 0x90, 0x4b, 0x49, 0x60, 0x89},
    };
    const int ki = (keylen - 16) / 8;
    const size_t nb = 4099; // not a multiple of any block size: exercises the grid-stride tail
    const size_t n = nb * 16;
    unsigned char fips_key[32], rkey[32], ctr[16], prev[16], zero[16] = {0};
    for (int i = 0; i < 32; ++i) fips_key[i] = (unsigned char)i;
    rnd_bytes(rkey, sizeof rkey);
    rnd_bytes(ctr, 16);
    rnd_bytes(prev, 16);
    ctr[12] = 0xff; ctr[13] = 0xff; ctr[14] = 0xf0; // CTR32 wraps mod 2^32 inside the buffer, CTR128 carries

    for (int m = 0; m < gpuaes::KM_COUNT; ++m) ok[m] = false;
    gpuaes_key *fk = gpuaes_key_new(fips_key, (size_t)keylen);
    gpuaes_key *k = gpuaes_key_new(rkey, (size_t)keylen);
    if (fk == nullptr || k == nullptr) die("gpuaes_key_new failed");
    const int rounds = k->rounds;
    void *din = nullptr, *dout = nullptr;
    CK(cudaMalloc(&din, n));
    CK(cudaMalloc(&dout, n));

    // ECB against FIPS-197 C.1/C.2/C.3, every block.
    std::vector<unsigned char> pt(n), ct(n);
    for (size_t b = 0; b < nb; ++b) {
        std::memcpy(&pt[b * 16], kPt, 16);
        std::memcpy(&ct[b * 16], kCt[ki], 16);
    }
    ok[gpuaes::KM_ECB_ENC] =
        run_small(gpuaes::KM_ECB_ENC, rounds, make_params(fk, gpuaes::KM_ECB_ENC, zero, zero), pt, din, dout) == ct;
    ok[gpuaes::KM_ECB_DEC] =
        run_small(gpuaes::KM_ECB_DEC, rounds, make_params(fk, gpuaes::KM_ECB_DEC, zero, zero), ct, din, dout) == pt;

    if (ok[gpuaes::KM_ECB_ENC] && ok[gpuaes::KM_ECB_DEC]) {
        // The other modes against ECB (random key, random data).
        std::vector<unsigned char> in(n), ctrs(n), ctrs32(n);
        rnd_bytes(in.data(), n);
        for (size_t b = 0; b < nb; ++b) {
            unsigned char c[16];
            std::memcpy(c, ctr, 16);
            gpuaes_ctr128_add(c, b);
            std::memcpy(&ctrs[b * 16], c, 16);
            std::memcpy(c, ctr, 16);
            gpuaes_ctr32_add(c, (uint32_t)b);
            std::memcpy(&ctrs32[b * 16], c, 16);
        }
        std::vector<unsigned char> shifted(n); // in[-1] = prev, in[i-1]
        std::memcpy(shifted.data(), prev, 16);
        std::memcpy(shifted.data() + 16, in.data(), n - 16);
        const auto ecb_enc = [&](const std::vector<unsigned char> &x) {
            return run_small(gpuaes::KM_ECB_ENC, rounds, make_params(k, gpuaes::KM_ECB_ENC, zero, zero), x, din, dout);
        };
        const auto ecb_dec = [&](const std::vector<unsigned char> &x) {
            return run_small(gpuaes::KM_ECB_DEC, rounds, make_params(k, gpuaes::KM_ECB_DEC, zero, zero), x, din, dout);
        };
        const auto xorv = [](std::vector<unsigned char> a, const std::vector<unsigned char> &b) {
            for (size_t i = 0; i < a.size(); ++i) a[i] ^= b[i];
            return a;
        };
        ok[gpuaes::KM_CTR128] = run_small(gpuaes::KM_CTR128, rounds, make_params(k, gpuaes::KM_CTR128, ctr, prev), in,
                                          din, dout) == xorv(ecb_enc(ctrs), in);
        ok[gpuaes::KM_CTR32] = run_small(gpuaes::KM_CTR32, rounds, make_params(k, gpuaes::KM_CTR32, ctr, prev), in, din,
                                         dout) == xorv(ecb_enc(ctrs32), in);
        ok[gpuaes::KM_CBC_DEC] = run_small(gpuaes::KM_CBC_DEC, rounds, make_params(k, gpuaes::KM_CBC_DEC, ctr, prev),
                                           in, din, dout) == xorv(ecb_dec(in), shifted);
        ok[gpuaes::KM_CFB_DEC] = run_small(gpuaes::KM_CFB_DEC, rounds, make_params(k, gpuaes::KM_CFB_DEC, ctr, prev),
                                           in, din, dout) == xorv(ecb_enc(shifted), in);
    }
    CK(cudaFree(din));
    CK(cudaFree(dout));
    gpuaes_key_free(fk);
    gpuaes_key_free(k);
}

double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + v[n / 2]);
}

struct Timing {
    double med_ms, min_ms, max_ms;
};

// Times `launches` runs of fn (which enqueues on stream 0) with events around each.
template <class F>
Timing time_launches(F fn, int warmup, int launches)
{
    for (int i = 0; i < warmup; ++i) CK(fn());
    CK(cudaDeviceSynchronize());
    std::vector<cudaEvent_t> ev(2 * (size_t)launches);
    for (auto &e : ev) CK(cudaEventCreate(&e));
    for (int i = 0; i < launches; ++i) {
        CK(cudaEventRecord(ev[2 * i], 0));
        CK(fn());
        CK(cudaEventRecord(ev[2 * i + 1], 0));
    }
    CK(cudaDeviceSynchronize());
    std::vector<float> ms((size_t)launches);
    for (int i = 0; i < launches; ++i) CK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    for (auto &e : ev) CK(cudaEventDestroy(e));
    Timing t;
    t.med_ms = median(ms);
    t.min_ms = *std::min_element(ms.begin(), ms.end());
    t.max_ms = *std::max_element(ms.begin(), ms.end());
    return t;
}

// ---- GHASH and GCM per staging chunk ------------------------------------

// GHASH from zero of nb blocks: with the reference multiply, or with
// gpuaes::gf_mul (what the kernels compute, faster on the host).
void ref_ghash(const unsigned char h[16], const unsigned char *data, size_t nb, unsigned char out[16])
{
    unsigned char x[16] = {0};
    for (size_t i = 0; i < nb; ++i) {
        for (int j = 0; j < 16; ++j) x[j] ^= data[16 * i + j];
        gf128_ref_mul(x, h);
    }
    std::memcpy(out, x, 16);
}

void host_ghash(const unsigned char h[16], const unsigned char *data, size_t nb, unsigned char out[16])
{
    const gpuaes::G128 hh = gpuaes::g128_from_bytes(h);
    gpuaes::G128 x = gpuaes::g128_zero();
    for (size_t i = 0; i < nb; ++i)
        x = gpuaes::gf_mul(gpuaes::g128_xor(x, gpuaes::g128_from_bytes(data + 16 * i)), hh);
    gpuaes::g128_to_bytes(x, out);
}

// What pipeline_ghash.cu's JobGhash::enqueue() sets up for a chunk of nb blocks.
struct GhashChunk {
    gpuaes::GhashPlan pl;
    gpuaes::GParams gp;
};

GhashChunk ghash_chunk(const gpuaes::G128 &h, uint32_t nb)
{
    GhashChunk c;
    std::memset(&c, 0, sizeof c);
    c.pl = gpuaes::ghash_plan(nb);
    gpuaes::G128 pw[gpuaes::kGhashMaxLevels + 1];
    gpuaes::ghash_powers(pw, h, c.pl.m, c.pl.levels);
    for (int L = 0; L < c.pl.levels; ++L) c.gp.pw[L] = pw[L];
    c.gp.m = c.pl.m;
    c.gp.pad = c.pl.pad;
    c.gp.nb = nb;
    return c;
}

// A new GHASH scratch: zeroed, with the tensor cores' matrices for H (as
// pipeline.cu's lanes get before their first GCM chunk), synchronously.
void setup_scratch(const gpuaes::G128 &h, gpuaes::G128 *scratch)
{
    CK(cudaMemset(scratch, 0, gpuaes::kGhashScratch));
    gpuaes::G128 p[6]; // H^(2^i)
    p[0] = h;
    for (int i = 1; i < 6; ++i) p[i] = gpuaes::gf_mul(p[i - 1], p[i - 1]);
    gpuaes::GhashFrags f;
    gpuaes::ghash_frags(p[3], p[4], p[5], f);
    CK(gpuaes::upload_ghash_frags(&f, scratch, 0));
    CK(cudaDeviceSynchronize());
}

// The buffer cut into staging chunks: chunk i is blocks [i*per, i*per + nb(i)).
struct Chunks {
    size_t per = 0, count = 0, nblocks = 0;
    uint32_t nb(size_t i) const { return (uint32_t)std::min(per, nblocks - i * per); }
};

// Streams the chunks go to: chunk i on lane i % n, each lane with its own
// GHASH scratch (as pipeline.cu's lanes).  One lane = the legacy stream 0;
// several = blocking streams, so that events on stream 0 bracket them all.
struct Lanes {
    int n = 1;
    cudaStream_t s[8] = {};
    gpuaes::G128 *scratch[8] = {};
};

// GHASH of every chunk of `data` (device), one result per chunk in outs[i].
cudaError_t enqueue_ghash_chunks(const Chunks &ch, const GhashChunk &full, const GhashChunk &last,
                                 const unsigned char *data, const Lanes &ln, gpuaes::G128 *outs)
{
    for (size_t i = 0; i < ch.count; ++i) {
        const GhashChunk &g = i + 1 == ch.count ? last : full;
        const int l = (int)(i % (size_t)ln.n);
        cudaError_t e = gpuaes::launch_ghash(g.gp, g.pl, data + i * ch.per * 16, ln.scratch[l], outs + i, ln.s[l]);
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// GCM's GPU work per chunk as pipeline.cu enqueues it: CTR32 (din -> dout),
// then GHASH of that chunk of dout.  kp[i]: the chunk's counter.
cudaError_t enqueue_gcm_chunks(const Chunks &ch, int rounds, const std::vector<gpuaes::KParams> &kp,
                               const GhashChunk &full, const GhashChunk &last, const unsigned char *din,
                               unsigned char *dout, const Lanes &ln, gpuaes::G128 *outs, bool ghash)
{
    for (size_t i = 0; i < ch.count; ++i) {
        const size_t off = i * ch.per * 16;
        const int l = (int)(i % (size_t)ln.n);
        cudaError_t e =
            gpuaes::launch_kernel(gpuaes::KM_CTR32, rounds, kp[i], din + off, dout + off, ch.nb(i), ln.s[l]);
        if (e == cudaSuccess && ghash) {
            const GhashChunk &g = i + 1 == ch.count ? last : full;
            e = gpuaes::launch_ghash(g.gp, g.pl, dout + off, ln.scratch[l], outs + i, ln.s[l]);
        }
        if (e != cudaSuccess) return e;
    }
    return cudaSuccess;
}

// launch_ghash against the reference on random data of several lengths
// (one block; odd lengths; the 2 MiB staging chunk, with `big` also the
// 8 MiB one).  Returns the number of failures.
int ghash_self_check(const gpuaes::G128 &h, bool big)
{
    static const uint32_t all[] = {1, 2, 31, 33, 4099, (1u << 17) + 5, 1u << 17, 1u << 19};
    std::vector<uint32_t> sizes(all, all + (big ? 8 : 7));
    size_t max_nb = 0;
    for (uint32_t n : sizes) max_nb = std::max<size_t>(max_nb, n);
    std::vector<unsigned char> buf(max_nb * 16);
    void *d = nullptr;
    gpuaes::G128 *scratch = nullptr, *out = nullptr;
    CK(cudaMalloc(&d, buf.size()));
    CK(cudaMalloc(reinterpret_cast<void **>(&scratch), gpuaes::kGhashScratch));
    CK(cudaMalloc(reinterpret_cast<void **>(&out), sizeof(gpuaes::G128)));
    setup_scratch(h, scratch);
    unsigned char hb[16];
    gpuaes::g128_to_bytes(h, hb);
    int bad = 0;
    for (uint32_t n : sizes) {
        rnd_bytes(buf.data(), (size_t)n * 16);
        CK(cudaMemcpy(d, buf.data(), (size_t)n * 16, cudaMemcpyHostToDevice));
        const GhashChunk g = ghash_chunk(h, n);
        CK(gpuaes::launch_ghash(g.gp, g.pl, d, scratch, out, 0));
        CK(cudaDeviceSynchronize());
        gpuaes::G128 got;
        CK(cudaMemcpy(&got, out, sizeof got, cudaMemcpyDeviceToHost));
        unsigned char gb[16], ref[16];
        gpuaes::g128_to_bytes(got, gb);
        ref_ghash(hb, buf.data(), n, ref);
        if (std::memcmp(gb, ref, 16) != 0) {
            std::printf("GHASH SELF-CHECK FAILED at %u blocks\n", n);
            ++bad;
        }
    }
    CK(cudaFree(d));
    CK(cudaFree(scratch));
    CK(cudaFree(out));
    return bad;
}

long parse_long(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    const long v = std::strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) die("bad value for ", opt);
    return v;
}

void usage()
{
    std::puts("usage: kernel_bench [--csv FILE] [--mib N (default 1024)] [--launches N (default 30)]\n"
              "                    [--chunk-kib N (default 8192)] [--streams N (default 1)] [--gcm-only]\n"
              "                    [--device N] [--name]\n"
              "  --csv FILE     append rows (path 'kernel') to FILE; header written if FILE is new or empty\n"
              "  --mib N        input and output buffer size in MiB (each; reduced to fit the GPU's free memory)\n"
              "  --launches N   timed launches per kernel (median reported), after 3 warm-up launches\n"
              "  --chunk-kib N  staging chunk of the GCM/GHASH rows (a multiple of 16 bytes)\n"
              "  --streams N    GCM/GHASH rows: chunk i on stream i % N (pipeline.cu's lanes), each its own scratch\n"
              "  --gcm-only     only the GCM, GHASH and per-chunk CTR32 rows\n"
              "  --name         print the GPU's name and exit");
}

} // namespace

int main(int argc, char **argv)
{
    const char *csv_path = nullptr;
    long mib = 1024, launches = 30, device = 0, chunk_kib = 8192, streams = 1;
    bool name_only = false, gcm_only = false;

    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!std::strcmp(a, "-h") || !std::strcmp(a, "--help")) {
            usage();
            return 0;
        } else if (!std::strcmp(a, "--name")) {
            name_only = true;
        } else if (!std::strcmp(a, "--gcm-only")) {
            gcm_only = true;
        } else if (i + 1 < argc && !std::strcmp(a, "--chunk-kib")) {
            chunk_kib = parse_long(a, argv[++i], 1, 1 << 21);
        } else if (i + 1 < argc && !std::strcmp(a, "--streams")) {
            streams = parse_long(a, argv[++i], 1, 8);
        } else if (i + 1 < argc && !std::strcmp(a, "--csv")) {
            csv_path = argv[++i];
        } else if (i + 1 < argc && !std::strcmp(a, "--mib")) {
            mib = parse_long(a, argv[++i], 1, 16384);
        } else if (i + 1 < argc && !std::strcmp(a, "--launches")) {
            launches = parse_long(a, argv[++i], 1, 100000);
        } else if (i + 1 < argc && !std::strcmp(a, "--device")) {
            device = parse_long(a, argv[++i], 0, 4096);
        } else {
            die("unknown option or missing value: ", a);
        }
    }

    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        std::fprintf(stderr, "kernel_bench: no usable CUDA device (%s)\n",
                     e != cudaSuccess ? cudaGetErrorString(e) : "none found");
        return 3;
    }
    if (device >= count) die("--device out of range");
    CK(cudaSetDevice((int)device));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, (int)device));
    prop.name[sizeof prop.name - 1] = '\0';
    if (name_only) {
        std::printf("%s\n", prop.name);
        return 0;
    }
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    int clock_khz = 0, mem_clock_khz = 0, bus_bits = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, (int)device));
    CK(cudaDeviceGetAttribute(&mem_clock_khz, cudaDevAttrMemoryClockRate, (int)device));
    CK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, (int)device));
    std::printf("GPU: %s (sm_%d%d, %d SMs, %.0f MHz, %.1f GiB, %d-bit bus, L2 %d MB), device %ld; "
                "driver API %d, runtime %d\n",
                prop.name, prop.major, prop.minor, prop.multiProcessorCount, clock_khz / 1e3,
                prop.totalGlobalMem / 1073741824.0, bus_bits, prop.l2CacheSize >> 20, device, drv, rt);
    std::printf("theoretical DRAM bandwidth (2 x memory clock x bus width): %.0f GB/s\n",
                2.0 * mem_clock_khz * 1e3 * (bus_bits / 8) / 1e9);
    CK(gpuaes::kernels_init(prop.multiProcessorCount));

    size_t bytes = (size_t)mib << 20;
    size_t free_b = 0, total_b = 0;
    CK(cudaMemGetInfo(&free_b, &total_b));
    while (bytes > ((size_t)16 << 20) && 2 * bytes + ((size_t)256 << 20) > free_b) bytes /= 2;
    if ((bytes >> 20) != (size_t)mib)
        std::printf("buffers reduced to %zu MiB each to fit %zu MiB free\n", bytes >> 20, free_b >> 20);
    const uint32_t nblocks = (uint32_t)(bytes / 16);
    if (bytes / 16 >= (1u << 31)) die("buffer too large for one launch");

    void *din = nullptr, *dout = nullptr;
    CK(cudaMalloc(&din, bytes));
    CK(cudaMalloc(&dout, bytes));
    fill_random<<<prop.multiProcessorCount * 8, 256>>>(static_cast<uint64_t *>(din), bytes / 8, rnd64());
    CK(cudaGetLastError());
    fill_random<<<prop.multiProcessorCount * 8, 256>>>(static_cast<uint64_t *>(dout), bytes / 8, rnd64());
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    FILE *csv = nullptr;
    if (csv_path != nullptr) {
        FILE *probe = std::fopen(csv_path, "r");
        bool need_header = true;
        if (probe != nullptr) {
            need_header = std::fgetc(probe) == EOF;
            std::fclose(probe);
        }
        csv = std::fopen(csv_path, "a");
        if (csv == nullptr) die("cannot append to ", csv_path);
        if (need_header) std::fprintf(csv, "cipher,direction,update_bytes,threads,path,gbps,cpu_core_s_per_gb\n");
    }

    std::printf("buffers: %zu MiB in, %zu MiB out (device-resident); %ld timed launches after 3 warm-up, "
                "median; GB/s = 10^9 bytes processed / s\n",
                bytes >> 20, bytes >> 20, launches);
    const Timing tc = time_launches(
        [&] { return cudaMemcpyAsync(dout, din, bytes, cudaMemcpyDeviceToDevice, 0); }, 3, (int)launches);
    const double copy_gbps = bytes / (tc.med_ms * 1e-3) / 1e9;
    std::printf("%-40s %9.3f ms  %8.1f GB/s copied (%.1f GB/s of DRAM traffic, read + write)\n",
                "reference: device-to-device cudaMemcpy", tc.med_ms, copy_gbps, 2 * copy_gbps);

    int failures = 0;
    for (int keylen : {16, 24, 32}) {
        bool ok[gpuaes::KM_COUNT];
        self_check(keylen, ok);
        unsigned char key[32], ctr[16], prev[16];
        rnd_bytes(key, sizeof key);
        rnd_bytes(ctr, 16);
        rnd_bytes(prev, 16);
        ctr[12] = ctr[13] = ctr[14] = ctr[15] = 0; // CTR32: no 2^32 wrap within the buffer
        gpuaes_key *k = gpuaes_key_new(key, (size_t)keylen);
        if (k == nullptr) die("gpuaes_key_new failed");
        for (const Op &op : kOps) {
            if (gcm_only) break;
            char name[32];
            std::snprintf(name, sizeof name, "AES-%d-%s", keylen * 8, op.mode);
            char label[96];
            std::snprintf(label, sizeof label, "AES-%d %s", keylen * 8, op.label);
            if (!ok[op.kmode]) {
                std::printf("%-40s SELF-CHECK FAILED: not timed\n", label);
                ++failures;
                continue;
            }
            const gpuaes::KParams p = make_params(k, op.kmode, ctr, prev);
            const int rounds = k->rounds;
            const Timing t = time_launches(
                [&] { return gpuaes::launch_kernel(op.kmode, rounds, p, din, dout, nblocks, 0); }, 3,
                (int)launches);
            const double gbps = bytes / (t.med_ms * 1e-3) / 1e9;
            std::printf("%-40s %9.3f ms  %8.1f GB/s  (min %.3f, max %.3f ms; %.0f%% of the copy rate)\n", label,
                        t.med_ms, gbps, t.min_ms, t.max_ms, 100 * gbps / copy_gbps);
            if (csv != nullptr)
                for (int d = 0; d < op.ndirs; ++d)
                    std::fprintf(csv, "%s,%s,%zu,1,kernel,%.4f,\n", name, op.dirs[d], bytes, gbps);
        }

        // GCM per staging chunk: CTR32 + GHASH, GHASH alone, CTR32 alone.
        if (prop.major < 8) {
            std::printf("AES-%d GCM/GHASH: not timed: GHASH on the tensor cores needs compute capability 8.0\n",
                        keylen * 8);
        } else if (!ok[gpuaes::KM_ECB_ENC] || !ok[gpuaes::KM_CTR32]) {
            std::printf("AES-%d GCM/GHASH: SELF-CHECK of ECB/CTR32 FAILED: not timed\n", keylen * 8);
            ++failures;
        } else {
            const int rounds = k->rounds;
            static const unsigned char zero[16] = {0};
            // H = E_K(0^128), by the ECB kernel.
            std::vector<unsigned char> hz(16, 0);
            const std::vector<unsigned char> hv = run_small(gpuaes::KM_ECB_ENC, rounds,
                                                            make_params(k, gpuaes::KM_ECB_ENC, zero, zero), hz,
                                                            din, dout);
            const gpuaes::G128 h = gpuaes::g128_from_bytes(hv.data());
            const int bad = ghash_self_check(h, keylen == 16);
            // The self-check used the buffers' first bytes: refill them.
            fill_random<<<prop.multiProcessorCount * 8, 256>>>(static_cast<uint64_t *>(din), bytes / 8, rnd64());
            CK(cudaGetLastError());
            CK(cudaDeviceSynchronize());
            if (bad != 0) {
                failures += bad;
            } else {
                Chunks ch;
                ch.per = (size_t)chunk_kib * 1024 / 16;
                ch.nblocks = nblocks;
                ch.count = (ch.nblocks + ch.per - 1) / ch.per;
                const GhashChunk gfull = ghash_chunk(h, ch.nb(0));
                const GhashChunk glast = ghash_chunk(h, ch.nb(ch.count - 1));
                std::vector<gpuaes::KParams> kp(ch.count);
                for (size_t i = 0; i < ch.count; ++i) {
                    unsigned char c[16];
                    std::memcpy(c, ctr, 16);
                    gpuaes_ctr32_add(c, (uint32_t)(i * ch.per));
                    kp[i] = make_params(k, gpuaes::KM_CTR32, c, prev);
                }
                gpuaes::G128 *outs = nullptr;
                Lanes ln;
                ln.n = (int)streams;
                for (int l = 0; l < ln.n; ++l) {
                    if (ln.n > 1) CK(cudaStreamCreate(&ln.s[l]));
                    CK(cudaMalloc(reinterpret_cast<void **>(&ln.scratch[l]), gpuaes::kGhashScratch));
                    setup_scratch(h, ln.scratch[l]);
                }
                CK(cudaMalloc(reinterpret_cast<void **>(&outs), ch.count * sizeof(gpuaes::G128)));
                const unsigned char *cin = static_cast<const unsigned char *>(din);
                unsigned char *cout = static_cast<unsigned char *>(dout);
                char chunk_label[48];
                if (chunk_kib % 1024 == 0) std::snprintf(chunk_label, sizeof chunk_label, "%ld MiB", chunk_kib / 1024);
                else std::snprintf(chunk_label, sizeof chunk_label, "%ld KiB", chunk_kib);
                if (streams > 1) {
                    const size_t len = std::strlen(chunk_label);
                    std::snprintf(chunk_label + len, sizeof chunk_label - len, " chunks/%ld streams", streams);
                } else {
                    std::strncat(chunk_label, " chunks", sizeof chunk_label - std::strlen(chunk_label) - 1);
                }

                const Timing tg = time_launches(
                    [&] { return enqueue_gcm_chunks(ch, rounds, kp, gfull, glast, cin, cout, ln, outs, true); },
                    3, (int)launches);
                // Check the GCM sequence's first and last chunk: CTR32 output
                // hashed on the host.
                bool gcm_ok = true;
                for (size_t i : {(size_t)0, ch.count - 1}) {
                    const uint32_t n = ch.nb(i);
                    std::vector<unsigned char> ct((size_t)n * 16);
                    gpuaes::G128 got;
                    CK(cudaMemcpy(ct.data(), cout + i * ch.per * 16, ct.size(), cudaMemcpyDeviceToHost));
                    CK(cudaMemcpy(&got, outs + i, sizeof got, cudaMemcpyDeviceToHost));
                    unsigned char gb[16], ref[16];
                    gpuaes::g128_to_bytes(got, gb);
                    host_ghash(hv.data(), ct.data(), n, ref);
                    if (std::memcmp(gb, ref, 16) != 0) gcm_ok = false;
                }
                const Timing th = time_launches(
                    [&] { return enqueue_ghash_chunks(ch, gfull, glast, cout, ln, outs); }, 3, (int)launches);
                const Timing tc = time_launches(
                    [&] { return enqueue_gcm_chunks(ch, rounds, kp, gfull, glast, cin, cout, ln, outs, false); },
                    3, (int)launches);
                for (int l = 0; l < ln.n; ++l) {
                    CK(cudaFree(ln.scratch[l]));
                    if (ln.n > 1) CK(cudaStreamDestroy(ln.s[l]));
                }
                CK(cudaFree(outs));
                struct Row {
                    const char *what;
                    const Timing &t;
                    const char *mode;
                    const char *dirs[2];
                    int ndirs;
                };
                const Row rows[] = {{"GCM = CTR32 + GHASH", tg, "GCM", {"enc", "dec"}, 2},
                                    {"GHASH alone", th, "GHASH", {"enc", nullptr}, 1},
                                    {"CTR32 alone", tc, nullptr, {nullptr, nullptr}, 0}};
                for (const Row &r : rows) {
                    char label[96];
                    std::snprintf(label, sizeof label, "AES-%d %s, %s", keylen * 8, r.what, chunk_label);
                    const double gbps = bytes / (r.t.med_ms * 1e-3) / 1e9;
                    if (&r.t == &tg && !gcm_ok) {
                        std::printf("%-40s GHASH OF THE GCM SEQUENCE WRONG: not reported\n", label);
                        ++failures;
                        continue;
                    }
                    std::printf("%-40s %9.3f ms  %8.1f GB/s  (min %.3f, max %.3f ms; %.0f%% of the copy rate)\n",
                                label, r.t.med_ms, gbps, r.t.min_ms, r.t.max_ms, 100 * gbps / copy_gbps);
                    if (csv != nullptr)
                        for (int d = 0; d < r.ndirs; ++d)
                            std::fprintf(csv, "AES-%d-%s,%s,%zu,1,kernel,%.4f,\n", keylen * 8, r.mode, r.dirs[d],
                                         bytes, gbps);
                }
            }
        }
        gpuaes_key_free(k);
        std::fflush(stdout);
    }
    CK(cudaFree(din));
    CK(cudaFree(dout));
    if (csv != nullptr && std::fclose(csv) != 0) die("error writing ", csv_path);
    if (failures) {
        std::fprintf(stderr, "kernel_bench: %d kernel(s) failed the self-check\n", failures);
        return 1;
    }
    return 0;
}
