// key_schedule.cpp - AES key expansion on the host (FIPS-197 section 5.2)
// plus the decryption schedule of the equivalent inverse cipher (5.3.5).
//
// Constant time: the key is secret, so no table is ever indexed by key-derived
// bytes and no branch depends on them.  SubWord computes the S-box
// arithmetically (inverse as x^254 with a branch-free GF(2^8) multiply, then
// the affine map); InvMixColumns uses the same multiply.
#include <cstdlib>
#include <cstring>

#include "aes_key.h"

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

} // namespace

extern "C" gpuaes_key *gpuaes_key_new(const unsigned char *key, size_t keylen)
{
    if (key == nullptr || (keylen != 16 && keylen != 24 && keylen != 32)) return nullptr;
    gpuaes_key *k = static_cast<gpuaes_key *>(std::calloc(1, sizeof(gpuaes_key)));
    if (k == nullptr) return nullptr;

    const int nk = (int)(keylen / 4);
    const int nr = nk + 6;
    const int total = 4 * (nr + 1);
    uint32_t *w = k->rk_enc;
    k->rounds = nr;

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
    return k;
}

extern "C" void gpuaes_key_free(gpuaes_key *key)
{
    if (key == nullptr) return;
    gpuaes::secure_wipe(key, sizeof(*key));
    std::free(key);
}
