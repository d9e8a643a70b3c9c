// key_schedule.cpp - AES key expansion on the host (FIPS-197 section 5.2)
// plus the decryption schedule of the equivalent inverse cipher (5.3.5).
//
// Constant time: the key is secret, so no table is ever indexed by key-derived
// bytes and no branch depends on them.  With AES-NI (x86-64), the keys take
// AESKEYGENASSIST and AESIMC; otherwise SubWord computes the
// S-box arithmetically (inverse as x^254 with a branch-free GF(2^8) multiply,
// then the affine map) and InvMixColumns uses the same multiply: 5-14 us a
// key, which gpuaesd paid for every job.  test_key_schedule holds the two to
// each other and to FIPS-197's examples.
#include <cstdlib>
#include <cstring>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/aes_key.h"

using gpuaes::secure_wipe;

namespace {

// Multiply by x in GF(2^8) without a branch on the top bit.
inline uint32_t xtime_ct(uint32_t a)
{
    return ((a << 1) ^ (0x1bu & (0u - ((a >> 7) & 1u)))) & 0xffu;
}

// a*b in GF(2^8); both operands may be secret: masks, no branches, fixed trip count.
inline uint32_t gmul_ct(uint32_t a, uint32_t b)
{
    uint32_t r = 0;
    for (int i = 0; i < 8; ++i) {
        r ^= a & (0u - (b & 1u));
        a = xtime_ct(a);
        b >>= 1;
    }
    return r;
}

inline uint32_t rotl8(uint32_t x, int n) { return ((x << n) | (x >> (8 - n))) & 0xffu; }

uint32_t sbox_ct(uint32_t x)
{
    // x^254 = x^-1 (0 -> 0); the exponent is public, so its bits may steer the loop.
    uint32_t r = 1;
    for (int bit = 7; bit >= 0; --bit) {
        r = gmul_ct(r, r);
        if ((254 >> bit) & 1) r = gmul_ct(r, x);
    }
    return (r ^ rotl8(r, 1) ^ rotl8(r, 2) ^ rotl8(r, 3) ^ rotl8(r, 4) ^ 0x63u) & 0xffu;
}

uint32_t sub_word(uint32_t w)
{
    return (sbox_ct(w >> 24) << 24) | (sbox_ct((w >> 16) & 0xff) << 16) |
           (sbox_ct((w >> 8) & 0xff) << 8) | sbox_ct(w & 0xff);
}

uint32_t inv_mix_column(uint32_t w)
{
    const uint32_t a0 = w >> 24, a1 = (w >> 16) & 0xff, a2 = (w >> 8) & 0xff, a3 = w & 0xff;
    const uint32_t b0 = gmul_ct(a0, 14) ^ gmul_ct(a1, 11) ^ gmul_ct(a2, 13) ^ gmul_ct(a3, 9);
    const uint32_t b1 = gmul_ct(a0, 9) ^ gmul_ct(a1, 14) ^ gmul_ct(a2, 11) ^ gmul_ct(a3, 13);
    const uint32_t b2 = gmul_ct(a0, 13) ^ gmul_ct(a1, 9) ^ gmul_ct(a2, 14) ^ gmul_ct(a3, 11);
    const uint32_t b3 = gmul_ct(a0, 11) ^ gmul_ct(a1, 13) ^ gmul_ct(a2, 9) ^ gmul_ct(a3, 14);
    return (b0 << 24) | (b1 << 16) | (b2 << 8) | b3;
}

// The portable schedule (any CPU): FIPS-197 5.2 and 5.3.5 word by word.
void expand_portable(const unsigned char *key, int nk, gpuaes_key *k)
{
    const int nr = nk + 6;
    const int total = 4 * (nr + 1);
    uint32_t *w = k->rk_enc;

    for (int i = 0; i < nk; ++i)
        w[i] = ((uint32_t)key[4 * i] << 24) | ((uint32_t)key[4 * i + 1] << 16) |
               ((uint32_t)key[4 * i + 2] << 8) | (uint32_t)key[4 * i + 3];
    uint32_t rcon = 1; // public
    for (int i = nk; i < total; ++i) {
        uint32_t t = w[i - 1];
        if (i % nk == 0) {
            t = sub_word((t << 8) | (t >> 24)) ^ (rcon << 24);
            rcon = xtime_ct(rcon);
        } else if (nk > 6 && i % nk == 4) {
            t = sub_word(t);
        }
        w[i] = w[i - nk] ^ t;
    }

    // Decryption schedule: round r uses encryption round nr-r; the middle
    // rounds get InvMixColumns so decryption can use Td tables (as OpenSSL).
    for (int r = 0; r <= nr; ++r)
        for (int c = 0; c < 4; ++c) k->rk_dec[4 * r + c] = w[4 * (nr - r) + c];
    for (int i = 4; i < 4 * nr; ++i) k->rk_dec[i] = inv_mix_column(k->rk_dec[i]);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define GPUAES_KEY_AESNI 1

// The same with AES-NI (AESKEYGENASSIST's SubWord and AESIMC's InvMixColumns
// in hardware: constant time, ~0.2 us instead of 5-14 us a key on the CPU
// machine), for every key size; a round key's 16 bytes become four
// big-endian words, as the portable schedule's.  gpuaesd makes a schedule
// for every job (its pieces, keystream fills), so this is on its path.
__attribute__((target("aes,sse2"))) inline __m128i aesni_spread(__m128i k, __m128i t)
{
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    k = _mm_xor_si128(k, _mm_slli_si128(k, 4));
    return _mm_xor_si128(k, t);
}

inline void words_of(const unsigned char b[16], uint32_t *w)
{
    for (int c = 0; c < 4; ++c)
        w[c] = ((uint32_t)b[4 * c] << 24) | ((uint32_t)b[4 * c + 1] << 16) | ((uint32_t)b[4 * c + 2] << 8) |
               (uint32_t)b[4 * c + 3];
}

// AES-192: six words a step.  The step's first four words come from the last
// four's spread as in AES-128 (a); the last two from the step's fourth and
// the previous two (b's low half).  The words are laid out in order in w[]
// bytes, then the round keys read back 16 bytes at a time.
__attribute__((target("aes,sse2"))) void expand_aesni_192(const unsigned char *key, gpuaes_key *k)
{
    alignas(16) unsigned char w[13 * 16 + 8];
    __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(key)), t, u;
    __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i *>(key + 16));

    std::memcpy(w, key, 24);
#define GPUAES_K192(i, rcon)                                                              \
    t = _mm_shuffle_epi32(_mm_aeskeygenassist_si128(b, rcon), 0x55);                    \
    a = aesni_spread(a, t);                                                               \
    u = _mm_shuffle_epi32(a, 0xff);                                                       \
    b = _mm_xor_si128(_mm_xor_si128(b, _mm_slli_si128(b, 4)), u);                         \
    _mm_storeu_si128(reinterpret_cast<__m128i *>(w + 24 * (i)), a);                       \
    if (24 * (i) + 16 < (int)sizeof w) _mm_storel_epi64(reinterpret_cast<__m128i *>(w + 24 * (i) + 16), b);
    GPUAES_K192(1, 0x01) GPUAES_K192(2, 0x02) GPUAES_K192(3, 0x04) GPUAES_K192(4, 0x08)
    GPUAES_K192(5, 0x10) GPUAES_K192(6, 0x20) GPUAES_K192(7, 0x40) GPUAES_K192(8, 0x80)
#undef GPUAES_K192
    for (int r = 0; r <= 12; ++r) {
        const __m128i rk = _mm_loadu_si128(reinterpret_cast<const __m128i *>(w + 16 * r));
        unsigned char bytes[16];

        words_of(w + 16 * r, k->rk_enc + 4 * r);
        _mm_storeu_si128(reinterpret_cast<__m128i *>(bytes), r == 0 || r == 12 ? rk : _mm_aesimc_si128(rk));
        words_of(bytes, k->rk_dec + 4 * (12 - r));
        secure_wipe(bytes, sizeof bytes);
    }
    secure_wipe(w, sizeof w);
}

// 128- and 256-bit keys: a round key a step (256: two, from a and b in turn).
__attribute__((target("aes,sse2"))) void expand_aesni(const unsigned char *key, int nk, gpuaes_key *k)
{
    const int nr = nk + 6;
    __m128i rk[15], a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(key)), b, t;
    unsigned char bytes[16];

    rk[0] = a;
    if (nk == 4) { // the rcon of each step is an immediate operand
#define GPUAES_K128(i, rcon) \
    t = _mm_aeskeygenassist_si128(a, rcon); a = aesni_spread(a, _mm_shuffle_epi32(t, 0xff)); rk[i] = a;
        GPUAES_K128(1, 0x01) GPUAES_K128(2, 0x02) GPUAES_K128(3, 0x04) GPUAES_K128(4, 0x08)
        GPUAES_K128(5, 0x10) GPUAES_K128(6, 0x20) GPUAES_K128(7, 0x40) GPUAES_K128(8, 0x80)
        GPUAES_K128(9, 0x1b) GPUAES_K128(10, 0x36)
#undef GPUAES_K128
    } else {       // nk == 8: RotWord+SubWord+rcon from b, then SubWord alone from a
        b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(key + 16));
        rk[1] = b;
#define GPUAES_K256(i, rcon) \
    t = _mm_aeskeygenassist_si128(b, rcon); a = aesni_spread(a, _mm_shuffle_epi32(t, 0xff)); rk[i] = a; \
    if (i < 14) { t = _mm_aeskeygenassist_si128(a, 0); b = aesni_spread(b, _mm_shuffle_epi32(t, 0xaa)); rk[i + 1] = b; }
        GPUAES_K256(2, 0x01) GPUAES_K256(4, 0x02) GPUAES_K256(6, 0x04) GPUAES_K256(8, 0x08)
        GPUAES_K256(10, 0x10) GPUAES_K256(12, 0x20) GPUAES_K256(14, 0x40)
#undef GPUAES_K256
    }
    for (int r = 0; r <= nr; ++r) {
        _mm_storeu_si128(reinterpret_cast<__m128i *>(bytes), rk[r]);
        words_of(bytes, k->rk_enc + 4 * r);
        // decryption round nr - r: this round key, InvMixColumns unless first or last
        _mm_storeu_si128(reinterpret_cast<__m128i *>(bytes),
                         r == 0 || r == nr ? rk[r] : _mm_aesimc_si128(rk[r]));
        words_of(bytes, k->rk_dec + 4 * (nr - r));
    }
    secure_wipe(bytes, sizeof bytes);
    secure_wipe(rk, sizeof rk);
}

bool have_aesni()
{
    static int have = -1; // -1: not asked yet (a race asks twice)
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("aes") ? 1 : 0;
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h != 0;
}
#endif

} // namespace

namespace {

// A zeroed key of keylen's rounds, or nullptr for a bad key or no memory.
gpuaes_key *key_alloc(const unsigned char *key, size_t keylen)
{
    if (key == nullptr || (keylen != 16 && keylen != 24 && keylen != 32)) return nullptr;
    gpuaes_key *k = static_cast<gpuaes_key *>(std::calloc(1, sizeof(gpuaes_key)));
    if (k != nullptr) k->rounds = (int)(keylen / 4) + 6;
    return k;
}

} // namespace

extern "C" gpuaes_key *gpuaes_key_new(const unsigned char *key, size_t keylen)
{
    gpuaes_key *k = key_alloc(key, keylen);
    if (k == nullptr) return nullptr;
    const int nk = (int)(keylen / 4);
#ifdef GPUAES_KEY_AESNI
    if (have_aesni()) {
        if (nk == 6)
            expand_aesni_192(key, k);
        else
            expand_aesni(key, nk, k);
        return k;
    }
#endif
    expand_portable(key, nk, k);
    return k;
}

// For test_key_schedule and key_schedule_bench: the portable schedule whatever the CPU has.
extern "C" gpuaes_key *gpuaes_key_new_portable(const unsigned char *key, size_t keylen)
{
    gpuaes_key *k = key_alloc(key, keylen);
    if (k != nullptr) expand_portable(key, (int)(keylen / 4), k);
    return k;
}

extern "C" void gpuaes_key_free(gpuaes_key *key)
{
    if (key == nullptr) return;
    gpuaes::secure_wipe(key, sizeof(*key));
    std::free(key);
}
