/* api_util.h - helpers shared by the API tests (params, bad_input, fork, fault, tls). */
#ifndef GPUAES_API_UTIL_H
#define GPUAES_API_UTIL_H

#include <stddef.h>
#include <stdio.h>
#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/evp.h>
#include "testutil.h"

/* The 15 algorithms gpuaes registers, by their canonical names. */
#define API_NCIPHERS 15
extern const char *const api_ciphers[API_NCIPHERS];

/* Fetch or exit(1): a missing algorithm makes every later check meaningless. */
EVP_CIPHER *api_fetch(test_env *env, const char *name, const char *provider);

/* One-shot cipher run: update(in, len) + final.  Returns 1/0, fills out/outl.
 * tag (GCM): written after encryption, checked (set) before decryption. */
int api_crypt(const EVP_CIPHER *c, int enc, const unsigned char *key,
              const unsigned char *iv, const unsigned char *aad, size_t aadlen,
              const unsigned char *in, size_t len, unsigned char *out,
              size_t *outl, unsigned char tag[16], int padding);

/* 1 when the error queue holds at least one error; clears it. */
int api_take_error(void);

/* A cipher's functions as a provider's dispatch table gives them, for the
 * tests that call a provider directly (no EVP between). */
typedef struct api_raw_cipher {
    OSSL_FUNC_cipher_newctx_fn *newctx;
    OSSL_FUNC_cipher_freectx_fn *freectx;
    OSSL_FUNC_cipher_dupctx_fn *dupctx;
    OSSL_FUNC_cipher_encrypt_init_fn *init[2];    /* [enc]: decrypt_init, encrypt_init */
    OSSL_FUNC_cipher_update_fn *update;
    OSSL_FUNC_cipher_final_fn *final;
    OSSL_FUNC_cipher_get_ctx_params_fn *get;
    OSSL_FUNC_cipher_set_ctx_params_fn *set;
} api_raw_cipher;

/* The algorithm of algs (a query's answer, ending in a NULL name) that has
 * name among its colon-separated names (any case): 1 and *r filled (the
 * functions it lacks NULL), or 0. */
int api_raw_cipher_find(const OSSL_ALGORITHM *algs, const char *name, api_raw_cipher *r);

#endif
