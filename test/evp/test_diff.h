/* test_diff.h - shared state of the differential test (gpuaes against default). */
#ifndef TEST_DIFF_H
#define TEST_DIFF_H

#include <stddef.h>
#include <stdint.h>

#include "kat_diff_op.h"
#include "rng.h"          /* an rng_state per thread and per case */
#include "testutil.h"

typedef struct {
    test_env env;
    EVP_CIPHER *sub[KD_NCIPHERS];   /* gpuaes, the subject */
    EVP_CIPHER *ref[KD_NCIPHERS];   /* default, the reference */
    size_t max_bytes;               /* largest random message */
    int iterations;                 /* random cases per cipher (per thread with --threads) */
} diff_ctx;

/* A random message length in 0..max with weight on boundaries (0, blocks +-1, 4 KiB, 64 KiB). */
size_t diff_rand_len(rng_state *r, size_t max);

/* test_diff.c: one random encrypt/decrypt/cross-decrypt case for cipher i. */
void diff_random_case(diff_ctx *dc, uint64_t seed, int i);

/* test_diff_stream.c: long-lived contexts. */
void diff_switching(diff_ctx *dc, rng_state *r, int i);   /* CPU/GPU alternation, num and IV state */
void diff_dupctx(diff_ctx *dc, rng_state *r, int i);      /* EVP_CIPHER_CTX_copy mid-stream */
void diff_reinit(diff_ctx *dc, rng_state *r, int i);      /* re-init with NULL key / NULL IV */

/* test_diff_wrap.c: CTR and GCM counters wrapping inside long messages. */
void diff_wrap(diff_ctx *dc, rng_state *r);

/* test_diff_migrate.c: GCM messages moving from the CPU to the GPU mid-message
 * (needs GPUAES_OFFLOAD_MIN_BYTES above 64 KiB and GPUAES_DISPATCH=force). */
void diff_migrate(diff_ctx *dc, rng_state *r);

/* test_diff_big.c: 64 MiB and 1 GiB in place, every GPU mode and key size. */
void diff_big(diff_ctx *dc, rng_state *r);

#endif
