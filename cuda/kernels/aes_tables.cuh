// aes_tables.cuh - AES tables generated at compile time from the GF(2^8)
// definitions in FIPS-197, so there is no hand-typed table to get wrong.
// Usable from host code (tests, key schedule checks) and as initialisers of
// __constant__ device data.
#ifndef GPUAES_AES_TABLES_CUH
#define GPUAES_AES_TABLES_CUH

#include <cstdint>

namespace gpuaes {
namespace tables {

constexpr uint8_t xtime(uint8_t a) { return (uint8_t)((a << 1) ^ ((a >> 7) * 0x1b)); }

constexpr uint8_t gmul(uint8_t a, uint8_t b)
{
    uint8_t r = 0;
    for (int i = 0; i < 8; ++i) {
        if (b & 1) r ^= a;
        a = xtime(a);
        b >>= 1;
    }
    return r;
}

// Multiplicative inverse as x^254 (maps 0 to 0, as AES requires).
constexpr uint8_t ginv(uint8_t x)
{
    uint8_t r = 1;
    for (int bit = 7; bit >= 0; --bit) {
        r = gmul(r, r);
        if ((254 >> bit) & 1) r = gmul(r, x);
    }
    return r;
}

constexpr uint8_t rotl8(uint8_t x, int n) { return (uint8_t)((x << n) | (x >> (8 - n))); }

constexpr uint8_t sbox(uint8_t x)
{
    const uint8_t b = ginv(x);
    return (uint8_t)(b ^ rotl8(b, 1) ^ rotl8(b, 2) ^ rotl8(b, 3) ^ rotl8(b, 4) ^ 0x63);
}

struct Words256 { uint32_t v[256]; };
struct Bytes256 { uint8_t v[256]; };
struct Words64 { uint32_t v[64]; };

constexpr Bytes256 make_sbox()
{
    Bytes256 t{};
    for (int i = 0; i < 256; ++i) t.v[i] = sbox((uint8_t)i);
    return t;
}

constexpr Bytes256 make_inv_sbox()
{
    Bytes256 t{};
    for (int i = 0; i < 256; ++i) t.v[sbox((uint8_t)i)] = (uint8_t)i;
    return t;
}

// Te0[x] = {2s, s, s, 3s} (most significant byte first), s = S[x].
constexpr Words256 make_te0()
{
    Words256 t{};
    for (int i = 0; i < 256; ++i) {
        const uint8_t s = sbox((uint8_t)i);
        t.v[i] = ((uint32_t)gmul(s, 2) << 24) | ((uint32_t)s << 16) | ((uint32_t)s << 8) |
                 (uint32_t)gmul(s, 3);
    }
    return t;
}

// Td0[x] = {14s, 9s, 13s, 11s}, s = InvS[x].
constexpr Words256 make_td0()
{
    Words256 t{};
    const Bytes256 is = make_inv_sbox();
    for (int i = 0; i < 256; ++i) {
        const uint8_t s = is.v[i];
        t.v[i] = ((uint32_t)gmul(s, 14) << 24) | ((uint32_t)gmul(s, 9) << 16) |
                 ((uint32_t)gmul(s, 13) << 8) | (uint32_t)gmul(s, 11);
    }
    return t;
}

// Inverse S-box packed 4 bytes per word, little-endian within the word:
// byte x sits in word x>>2 at bits 8*(x&3).
constexpr Words64 make_inv_sbox_words()
{
    Words64 t{};
    const Bytes256 is = make_inv_sbox();
    for (int i = 0; i < 256; ++i) t.v[i >> 2] |= (uint32_t)is.v[i] << (8 * (i & 3));
    return t;
}

constexpr Bytes256 kSbox = make_sbox();
constexpr Bytes256 kInvSbox = make_inv_sbox();
constexpr Words256 kTe0 = make_te0();
constexpr Words256 kTd0 = make_td0();
constexpr Words64 kInvSboxWords = make_inv_sbox_words();

// Spot checks against FIPS-197 and OpenSSL's aes_core.c tables.
static_assert(kSbox.v[0x00] == 0x63 && kSbox.v[0x53] == 0xed && kSbox.v[0xff] == 0x16, "S-box");
static_assert(kInvSbox.v[0xed] == 0x53 && kInvSbox.v[0x00] == 0x52 && kInvSbox.v[0x63] == 0x00, "inverse S-box");
static_assert(kTe0.v[0] == 0xc66363a5u && kTe0.v[1] == 0xf87c7c84u && kTe0.v[255] == 0x2c16163au, "Te0");
static_assert(kTd0.v[0] == 0x51f4a750u && kTd0.v[1] == 0x7e416553u && kTd0.v[255] == 0xd0b85742u, "Td0");
static_assert(kInvSboxWords.v[0] == 0xd56a0952u, "packed inverse S-box");

} // namespace tables

#if defined(__CUDACC__)
// ---- the tables as every kernel reads them --------------------------------
//
// Constant-time design (Tezcan 2021, "GPU-based AES without bank conflicts"):
// a T-table lookup on a GPU leaks through shared-memory bank conflicts (lanes
// of a warp hitting different words of one bank are serialised, so timing
// depends on the secret indices).  Each 1 KiB table is therefore replicated
// 32 times in shared memory, laid out [entry][lane] (word entry*32 + lane):
// lane l only ever reads bank l, whatever the index, so a warp's lookup is
// one conflict-free access for every possible data and its timing does not
// depend on keys or data.  Only Te0 (or Td0) is stored: Te1..Te3 are byte
// rotations of it, and the encryption's last round takes the S-box byte out
// of Te0 (aes_block.cuh).  Decryption's last round needs InvSbox: stored as
// 64 words of 4 bytes, replicated the same way (word (x>>2)*32 + lane).

constexpr int kLanes = 32;
constexpr uint32_t kTableWords = 256 * kLanes; // replicated Te0/Td0: 32 KiB
constexpr uint32_t kIsboxWords = 64 * kLanes;  // replicated packed InvSbox: 8 KiB
constexpr uint32_t kEntryBytes = kLanes * 4;   // from one entry to the next in a lane's column

// The tables in the constant bank, the source of the shared copies.  Every
// file that has kernels needs its own copy (no relocatable device code); a
// variable template is instantiated only in the files that use it.
template <int = 0> __constant__ const tables::Words256 c_te0 = tables::kTe0;
template <int = 0> __constant__ const tables::Words256 c_td0 = tables::kTd0;
template <int = 0> __constant__ const tables::Words64 c_isbox = tables::kInvSboxWords;

// dst[e * kLanes + l] = src[e] for every lane l, e < entries (the block's
// threads share the work).  A warp's 32 consecutive i read one entry, so
// each constant-bank read is a broadcast.
__device__ __forceinline__ void fill_replicated(uint32_t *dst, const uint32_t *src, uint32_t entries)
{
    for (uint32_t i = threadIdx.x; i < entries * kLanes; i += blockDim.x) dst[i] = src[i / kLanes];
}

// The accessor of aes_block.cuh over the replicated tables.  t and isb point
// at this lane's column of Te0/Td0 and of InvSbox (isb unused when only
// encrypting); stride is kEntryBytes.  aes_kernels.cu passes it as a kernel
// argument rather than the constant, so that each address is one IMAD (FMA
// pipe) instead of shift/mask/LEA on the integer pipe, which is what limits
// those kernels (about 330 -> 620 GB/s for AES-128 on H200).
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
#endif // __CUDACC__

} // namespace gpuaes

#endif
