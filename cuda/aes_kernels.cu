// aes_kernels.cu - AES kernels: ECB enc/dec, CTR128, CTR32, CBC dec, CFB128 dec.
//
// Constant-time design (Tezcan 2021, "GPU-based AES without bank conflicts"):
// a T-table lookup on a GPU leaks through shared-memory bank conflicts (lanes
// of a warp hitting different words of one bank are serialised, so timing
// depends on the secret indices).  Here each 1 KiB table is replicated 32
// times in shared memory, laid out [entry][lane] (word index entry*32+lane).
// Lane l therefore only ever reads bank l, whatever the index: a warp's
// lookup is one conflict-free shared access for every possible data, so the
// timing does not depend on keys or data.  Only Te0 (or Td0) is stored;
// Te1..Te3 are byte rotations of it, and the encryption last round takes the
// S-box byte out of Te0.  Decryption's last round needs InvSbox: stored as
// 64 words (4 bytes each) replicated the same way, word (x>>2)*32+lane.
// Round keys arrive by value in the kernel parameters (uniform, constant
// bank), and global memory is addressed only by block index, never by data.
//
// Launched with programmatic dependent launch (pdl.cuh) where the GPU has it:
// a kernel fills its tables while the kernel before it on the stream drains,
// and waits for it before touching global memory; it lets the next kernel
// (GCM's GHASH) start as its own blocks finish their last block.
#include <cuda_runtime.h>

#include "aes_kernels.cuh"
#include "aes_tables.cuh"
#include "pdl.cuh"

namespace gpuaes {
namespace {

constexpr int kLanes = 32;
constexpr int kMaxThreads = 1024;
constexpr uint32_t kTableWords = 256 * kLanes;     // replicated Te0/Td0: 32 KiB
constexpr uint32_t kIsboxWords = 64 * kLanes;      // replicated packed InvSbox: 8 KiB

__constant__ const tables::Words256 c_te0 = tables::kTe0;
__constant__ const tables::Words256 c_td0 = tables::kTd0;
__constant__ const tables::Words64 c_isbox = tables::kInvSboxWords;

// Shared-memory accessor for aes_block.cuh.  t and isb point at this lane's
// column; `stride` is the byte distance between entries (kLanes * 4 = 128).
// It is a kernel argument rather than a constant so that each address is
// one IMAD (FMA pipe) instead of shift/mask/LEA on the integer pipe, which
// is what limits these kernels (about 330 -> 620 GB/s for AES-128 on H200).
struct SharedTab {
    const char *t;
    const char *isb;
    uint32_t stride;
    template <int K>
    __device__ __forceinline__ uint32_t w(uint32_t s) const
    {
        const uint32_t x = K == 3 ? s >> 24 : __byte_perm(s, 0, 0x4440 | K); // byte K of s
        return *reinterpret_cast<const uint32_t *>(t + x * stride);
    }
    template <int K>
    __device__ __forceinline__ uint32_t ib(uint32_t s) const
    {
        const uint32_t x = K == 3 ? s >> 24 : __byte_perm(s, 0, 0x4440 | K);
        const uint32_t word = *reinterpret_cast<const uint32_t *>(isb + (x >> 2) * stride);
        return __byte_perm(word, 0, 0x4440 | (x & 3)); // byte x&3 of the packed word
    }
};

template <int MODE>
constexpr size_t smem_bytes()
{
    return (kmode_decrypts(MODE) ? kTableWords + kIsboxWords : kTableWords) * sizeof(uint32_t);
}

// The blocks of this thread (persistent grid: stride over the blocks,
// nblocks < 2^31, no overflow).  kNoInput: CTR keystream, the input taken as zero.
template <int NR, int MODE, bool kNoInput>
__device__ __forceinline__ void run_blocks(const KParams &p, const SharedTab &T, const uint4 *__restrict__ in,
                                           uint4 *__restrict__ out, uint32_t nblocks)
{
    const uint32_t grid_stride = gridDim.x * blockDim.x;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < nblocks; j += grid_stride) {
        const uint4 c = kNoInput ? make_uint4(0, 0, 0, 0) : in[j];
        uint32_t cur[4] = {c.x, c.y, c.z, c.w};
        uint32_t prev[4] = {p.iv_raw[0], p.iv_raw[1], p.iv_raw[2], p.iv_raw[3]};
        if (MODE == KM_CBC_DEC || MODE == KM_CFB_DEC) {
            if (j != 0) {
                const uint4 q = in[j - 1];
                prev[0] = q.x; prev[1] = q.y; prev[2] = q.z; prev[3] = q.w;
            }
        }
        uint32_t o[4];
        process_block<NR, MODE>(j, cur, prev, p, T, o);
        out[j] = make_uint4(o[0], o[1], o[2], o[3]);
    }
}

template <int NR, int MODE>
__global__ void __launch_bounds__(kMaxThreads)
aes_kernel(const __grid_constant__ KParams p, const uint4 *__restrict__ in, uint4 *__restrict__ out,
           uint32_t nblocks, uint32_t entry_bytes)
{
    extern __shared__ uint32_t smem[];
    constexpr bool kDec = kmode_decrypts(MODE);

    // Fill the replicated tables.  A warp's 32 consecutive i share one entry
    // (i>>5), so each constant-cache read is a broadcast.
    for (uint32_t i = threadIdx.x; i < kTableWords; i += blockDim.x)
        smem[i] = kDec ? c_td0.v[i / kLanes] : c_te0.v[i / kLanes];
    if (kDec)
        for (uint32_t i = threadIdx.x; i < kIsboxWords; i += blockDim.x)
            smem[kTableWords + i] = c_isbox.v[i / kLanes];
    __syncthreads();
    grid_dep_wait(); // global memory only after the kernel before is complete

    // entry_bytes is always kLanes * 4 (see SharedTab).
    const uint32_t lane = threadIdx.x & (kLanes - 1);
    const SharedTab T{reinterpret_cast<const char *>(smem + lane),
                      reinterpret_cast<const char *>(smem + kTableWords + lane), entry_bytes};
    // CTR without input (in == nullptr, the same for the whole grid): the keystream itself.
    if ((MODE == KM_CTR128 || MODE == KM_CTR32) && in == nullptr) run_blocks<NR, MODE, true>(p, T, in, out, nblocks);
    else run_blocks<NR, MODE, false>(p, T, in, out, nblocks);
    grid_dep_launch(); // a dependant waits for our completion before it reads anything
}

struct KernelSlot {
    const void *fn = nullptr;
    cudaError_t (*launch)(dim3, dim3, size_t, cudaStream_t, bool, const KParams &, const uint4 *, uint4 *,
                          uint32_t) = nullptr;
    size_t smem = 0;
    int threads = 0;  // chosen block size
    int max_grid = 0; // resident blocks on the whole device
};

// [rounds index 0..2 for 10/12/14][mode]; written once by kernels_init()
// (under the device init lock), read-only afterwards.
KernelSlot g_kernels[3][KM_COUNT];

template <int NR, int MODE>
cudaError_t launch_one(dim3 g, dim3 b, size_t smem, cudaStream_t s, bool pdl, const KParams &p, const uint4 *in,
                       uint4 *out, uint32_t n)
{
    return launch_pdl(aes_kernel<NR, MODE>, g, b, smem, s, pdl, p, in, out, n, (uint32_t)(kLanes * sizeof(uint32_t)));
}

template <int NR, int MODE>
void register_kernel()
{
    KernelSlot &k = g_kernels[(NR - 10) / 2][MODE];
    k.fn = reinterpret_cast<const void *>(&aes_kernel<NR, MODE>);
    k.launch = &launch_one<NR, MODE>;
    k.smem = smem_bytes<MODE>();
}

template <int NR>
void register_nr()
{
    register_kernel<NR, KM_ECB_ENC>();
    register_kernel<NR, KM_ECB_DEC>();
    register_kernel<NR, KM_CTR128>();
    register_kernel<NR, KM_CTR32>();
    register_kernel<NR, KM_CBC_DEC>();
    register_kernel<NR, KM_CFB_DEC>();
}

} // namespace

cudaError_t kernels_init(int sm_count)
{
    register_nr<10>();
    register_nr<12>();
    register_nr<14>();
    for (auto &row : g_kernels) {
        for (KernelSlot &k : row) {
            // Prefer shared memory over L1: the kernels stream their data.
            cudaError_t e = cudaFuncSetAttribute(k.fn, cudaFuncAttributePreferredSharedMemoryCarveout,
                                                 (int)cudaSharedmemCarveoutMaxShared);
            if (e != cudaSuccess) return e;
            // Largest resident thread count wins; on a tie the larger block
            // (fewer table fills).
            int best_threads = 0, best_blocks = 0;
            for (int threads : {1024, 512, 256, 128}) {
                int blocks = 0;
                e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k.fn, threads, k.smem);
                if (e != cudaSuccess) return e;
                if (blocks * threads > best_blocks * best_threads) {
                    best_threads = threads;
                    best_blocks = blocks;
                }
            }
            if (best_blocks == 0) return cudaErrorInvalidConfiguration;
            k.threads = best_threads;
            k.max_grid = best_blocks * sm_count;
        }
    }
    return cudaSuccess;
}

cudaError_t launch_kernel(int mode, int rounds, const KParams &p, const void *din, void *dout, uint32_t nblocks,
                          cudaStream_t stream)
{
    if (mode < 0 || mode >= KM_COUNT || (rounds != 10 && rounds != 12 && rounds != 14) ||
        nblocks >= (1u << 31))
        return cudaErrorInvalidValue;
    if (nblocks == 0) return cudaSuccess;
    const KernelSlot &k = g_kernels[(rounds - 10) / 2][mode];
    if (k.launch == nullptr || k.threads == 0) return cudaErrorInitializationError;
    const uint32_t need = (nblocks + (uint32_t)k.threads - 1) / (uint32_t)k.threads;
    const uint32_t grid = need < (uint32_t)k.max_grid ? need : (uint32_t)k.max_grid;
    const bool pdl = pdl_ok();
    return k.launch(dim3(grid), dim3((unsigned)k.threads), k.smem, stream, pdl, p, static_cast<const uint4 *>(din),
                    static_cast<uint4 *>(dout), nblocks);
}

} // namespace gpuaes
