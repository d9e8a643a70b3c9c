// aes_kernels.cu - AES kernels: ECB enc/dec, CTR128, CTR32, CBC dec, CFB128 dec.
//
// Constant time: the T-tables are read from bank-conflict-free replicated
// shared-memory copies (aes_tables.cuh, "the tables as every kernel reads them").
// Round keys arrive by value in the kernel parameters (uniform, constant
// bank), and global memory is addressed only by block index, never by data.
//
// Launched with programmatic dependent launch (pdl.cuh) where the GPU has it:
// a kernel fills its tables while the kernel before it on the stream drains,
// and waits for it before touching global memory; it lets the next kernel
// (GCM's GHASH) start as its own blocks finish their last block.
#include <cuda_runtime.h>

#include "kernels/aes_kernels.cuh"
#include "kernels/aes_tables.cuh"
#include "kernels/pdl.cuh"

namespace gpuaes {
namespace {

constexpr int kMaxThreads = 1024;

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

    // Te0 named first: the first table instantiated sits at offset 0 of the
    // constant bank, where the fill addresses it without loading an offset.
    fill_replicated(smem, !kDec ? c_te0<>.v : c_td0<>.v, 256);
    if (kDec) fill_replicated(smem + kTableWords, c_isbox<>.v, 64);
    __syncthreads();
    grid_dep_wait(); // global memory only after the kernel before is complete

    // entry_bytes is always kEntryBytes (see SharedTab).
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
    return launch_pdl(aes_kernel<NR, MODE>, g, b, smem, s, pdl, p, in, out, n, kEntryBytes);
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
