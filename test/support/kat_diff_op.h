/* kat_diff_op.h - one EVP cipher operation fed in chunks; shared by test_kat and test_diff. */
#ifndef KAT_DIFF_OP_H
#define KAT_DIFF_OP_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>

#include "rng.h"

typedef enum { KD_ECB, KD_CBC, KD_CFB, KD_CTR, KD_GCM } kd_mode;

typedef struct {
    const char *name;        /* OpenSSL name, e.g. "AES-128-CFB" (CFB = CFB128) */
    kd_mode mode;
    size_t keylen;
} kd_cipher;

#define KD_NCIPHERS 15
extern const kd_cipher kd_ciphers[KD_NCIPHERS];
const kd_cipher *kd_find(kd_mode mode, size_t keylen);   /* NULL if none */
int kd_is_block_mode(kd_mode mode);                      /* ECB, CBC: padding applies */

/* How data is cut into update calls; the same style and seed give the same cuts,
 * so two providers can be fed identically. */
typedef enum {
    KD_ONE_SHOT,   /* one update */
    KD_TINY,       /* 1..17 bytes */
    KD_ODD,        /* odd sizes, small to large */
    KD_MIXED,      /* tiny, odd, block multiples, huge, and some empty updates */
    KD_BLOCKS      /* multiples of 16 */
} kd_split_style;

typedef struct {
    kd_split_style style;
    rng_state rng;   /* private per splitter, so that threads and providers don't interfere */
} kd_split;

kd_split kd_split_make(kd_split_style style, uint64_t seed);
size_t kd_split_next(kd_split *s, size_t remaining);   /* may return 0 (empty update) */

/* Description of one operation. */
typedef struct {
    int enc;
    int padding;                             /* ECB/CBC only */
    const unsigned char *key;
    const unsigned char *iv;                 /* NULL for ECB */
    size_t ivlen;                            /* GCM: 1..128, set via AEAD_IVLEN first */
    const unsigned char *aad;                /* GCM only */
    size_t aadlen;
    unsigned char *tag;                      /* GCM: encrypt writes it, decrypt checks it */
    size_t taglen;                           /* 1..16 */
    int in_place;                            /* see kd_run() */
    kd_split split, aad_split;
    int tag_early;                           /* decrypt: set the tag before the data */
    int key_then_iv;                         /* init the key, then the IV, in two calls */
} kd_op;

enum { KD_OK = 1, KD_FINAL_FAILED = 0, KD_ERROR = -1 };

/* Inits ctx for op (cipher, direction, IV length, key, IV, padding); 1 on success. */
int kd_init(EVP_CIPHER_CTX *ctx, EVP_CIPHER *c, kd_mode mode, const kd_op *op);
int kd_set_tag(EVP_CIPHER_CTX *ctx, const unsigned char *tag, size_t taglen);
int kd_get_tag(EVP_CIPHER_CTX *ctx, unsigned char *tag, size_t taglen);

/*
 * Runs op over in[0..len) into out (room for len + 16).  in_place: in is copied
 * to out and processed there; for ECB/CBC the cuts are rounded to whole blocks
 * so that output never lags input (callers don't combine in_place with padded
 * decryption).  Returns KD_OK, KD_FINAL_FAILED (only the final call failed: bad
 * tag or padding) or KD_ERROR.  *outlen: bytes written including final.
 */
int kd_run(EVP_CIPHER *c, kd_mode mode, kd_op *op,
           const unsigned char *in, size_t len, unsigned char *out, size_t *outlen);

#endif
