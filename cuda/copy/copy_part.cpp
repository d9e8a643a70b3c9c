// copy_part.cpp - the copy primitives of the staging copies (see
// copy_part.h).
#include "copy/copy_part.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h> // SSE2 streaming stores: baseline on x86-64
#endif

namespace gpuaes {
namespace {

#if defined(__x86_64__)
// Zeroes the 64 bytes at p, just read (in L1): plain stores, so that the
// staging stays in the last-level cache where the DMA engine finds it.
inline void zero64(unsigned char *p)
{
    const __m128i z = _mm_setzero_si128();
    for (int k = 0; k < 4; ++k) _mm_storeu_si128(reinterpret_cast<__m128i *>(p + 16 * k), z);
}
#endif

// memcpy with non-temporal stores: the destination (the caller's output)
// goes straight to DRAM instead of being read for ownership first and then
// evicting the pinned staging buffers from the last-level cache.  With
// `wipe` (== src), src is zeroed as it is read.
void stream_copy(unsigned char *dst, const unsigned char *src, size_t n, unsigned char *wipe)
{
#if defined(__x86_64__)
    const size_t head = (size_t)(-(uintptr_t)dst & 15);
    if (n < head + 64) {
        std::memcpy(dst, src, n);
        if (wipe != nullptr) std::memset(wipe, 0, n);
        return;
    }
    std::memcpy(dst, src, head);
    if (wipe != nullptr) {
        std::memset(wipe, 0, head);
        wipe += head;
    }
    dst += head;
    src += head;
    n -= head;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i));
        const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16));
        const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 32));
        const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 48));
        if (wipe != nullptr) zero64(wipe + i);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i), a);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 16), b);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 32), c);
        _mm_stream_si128(reinterpret_cast<__m128i *>(dst + i + 48), d);
    }
    _mm_sfence(); // streaming stores are weakly ordered: publish them before the part counts as done
    if (i < n) {
        std::memcpy(dst + i, src + i, n - i);
        if (wipe != nullptr) std::memset(wipe + i, 0, n - i);
    }
#else
    std::memcpy(dst, src, n);
    if (wipe != nullptr) std::memset(wipe, 0, n);
#endif
}

// dst = src ^ ks (dst == src allowed), with non-temporal stores when
// `stream`.  The loads are unaligned, the stores aligned once dst is.
// With `wipe` (== ks), ks is zeroed as it is read.
void xor_copy(unsigned char *dst, const unsigned char *src, const unsigned char *ks, size_t n, bool stream,
              unsigned char *wipe)
{
    size_t i = 0;
#if defined(__x86_64__)
    if (stream) {
        const size_t head = std::min(n, (size_t)(-(uintptr_t)dst & 15));
        for (; i < head; ++i) dst[i] = src[i] ^ ks[i];
        if (wipe != nullptr) std::memset(wipe, 0, head);
    }
    for (; i + 64 <= n; i += 64) {
        __m128i v[4];
        for (int k = 0; k < 4; ++k)
            v[k] = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i *>(src + i + 16 * k)),
                                 _mm_loadu_si128(reinterpret_cast<const __m128i *>(ks + i + 16 * k)));
        if (wipe != nullptr) zero64(wipe + i);
        for (int k = 0; k < 4; ++k) {
            __m128i *d = reinterpret_cast<__m128i *>(dst + i + 16 * k);
            if (stream) _mm_stream_si128(d, v[k]);
            else _mm_storeu_si128(d, v[k]);
        }
    }
    if (stream) _mm_sfence(); // publish the streaming stores before the part counts as done
#endif
    const size_t tail = i;
    for (; i + 8 <= n; i += 8) {
        uint64_t a, b;
        std::memcpy(&a, src + i, 8);
        std::memcpy(&b, ks + i, 8);
        a ^= b;
        std::memcpy(dst + i, &a, 8);
    }
    for (; i < n; ++i) dst[i] = src[i] ^ ks[i];
    if (wipe != nullptr) std::memset(wipe + tail, 0, n - tail);
}

// Start of part k: k * part, moved down so that dst + offset is 64-byte
// aligned (no cache line of dst is written by two threads); 0 and n at the
// ends.  Monotonic because part >= 64.
size_t part_begin(const CopyTask *t, int k)
{
    if (k <= 0) return 0;
    if (k >= t->nparts) return t->n;
    size_t b = (size_t)k * t->part;
    if (b >= t->n) return t->n;
    b -= (size_t)(((uintptr_t)t->dst + b) & 63);
    return b;
}

} // namespace

void copy_part(const CopyTask *t, int k)
{
    const size_t b = part_begin(t, k), e = part_begin(t, k + 1);
    if (e <= b) return;
    unsigned char *const wipe = t->wipe != nullptr ? t->wipe + b : nullptr;
    if (t->ks != nullptr) {
        xor_copy(t->dst + b, t->src + b, t->ks + b, e - b, t->stream, wipe);
    } else if (t->stream) {
        stream_copy(t->dst + b, t->src + b, e - b, wipe);
    } else {
        std::memcpy(t->dst + b, t->src + b, e - b);
        if (wipe != nullptr) std::memset(wipe, 0, e - b);
    }
    if (t->wipe_also != nullptr) std::memset(t->wipe_also + b, 0, e - b);
}

} // namespace gpuaes
