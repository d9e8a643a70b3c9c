/* rng.h - the one random generator of the tests and benches: splitmix64, seeded, deterministic.
 * One 64-bit word of state, so each thread or stream keeps its own by value; the same seed gives the
 * same numbers on every run and machine.  Seeds that differ by a multiple of RNG_GAMMA give shifted
 * copies of one stream: seed workers with small distinct numbers (1, 2, 3 ...), not with k * RNG_GAMMA. */
#ifndef GPUAES_SUPPORT_RNG_H
#define GPUAES_SUPPORT_RNG_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define RNG_FN static inline __host__ __device__   /* rng_at also fills device buffers (kernel_bench) */
#else
#define RNG_FN static inline
#endif

#define RNG_GAMMA 0x9e3779b97f4a7c15ULL            /* the state's step: 2^64 / the golden ratio */

typedef struct { uint64_t state; } rng_state;

/* splitmix64's output function: a bijective mix of one word. */
RNG_FN uint64_t rng_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

RNG_FN rng_state rng_seeded(uint64_t seed)
{
    rng_state r;

    r.state = seed;
    return r;
}

RNG_FN uint64_t rng_next(rng_state *r)
{
    return rng_mix(r->state += RNG_GAMMA);
}

/* The i-th number (from 0) of the stream seeded with seed, without walking it: for draws shared
 * by threads through an atomic counter, or one per element of a buffer. */
RNG_FN uint64_t rng_at(uint64_t seed, uint64_t i)
{
    return rng_mix(seed + (i + 1) * RNG_GAMMA);
}

/* Uniform enough in 0..n-1 (modulo bias is irrelevant to tests); 0 when n == 0. */
static inline size_t rng_below(rng_state *r, size_t n)
{
    return n == 0 ? 0 : (size_t)(rng_next(r) % n);
}

/* n random bytes, eight per number. */
static inline void rng_bytes(rng_state *r, unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i += 8) {
        uint64_t v = rng_next(r);

        memcpy(p + i, &v, n - i < 8 ? n - i : 8);
    }
}

#ifdef __cplusplus
/* The same generator for C++'s std::shuffle and <random> (a UniformRandomBitGenerator). */
struct rng_engine {
    typedef uint64_t result_type;
    rng_state s;

    explicit rng_engine(uint64_t seed) : s(rng_seeded(seed)) {}
    static constexpr result_type min() { return 0; }
    static constexpr result_type max() { return UINT64_MAX; }
    result_type operator()() { return rng_next(&s); }
};
#endif

#endif
