/*
 * cipher_family.h - the two cipher families' provider functions and the
 * macros that put them into each variant's dispatch table (provider.c).
 */
#ifndef GPUAES_CIPHER_FAMILY_H
#define GPUAES_CIPHER_FAMILY_H

#include <openssl/core_dispatch.h>

#include "prov_ctx.h"

/*
 * The two cipher families.  Everything but newctx, get_params and update is
 * shared by all variants of a family; provider.c puts these into each
 * variant's table, with the update of its mode: the block family has one for
 * ECB/CBC (block_update: counts what the fallback's block buffer holds), CFB
 * and CTR (block_update_cfb, block_update_ctr: nothing to mirror; CTR counts
 * down its keystream ramp).
 */
#define FAMILY_DECLARE(f)                                                     \
    void *f##_newctx(void *provctx, const gpuaes_variant *var);               \
    const gpuaes_prov *f##_prov_of(const void *vctx);                         \
    OSSL_FUNC_cipher_freectx_fn f##_freectx;                                  \
    OSSL_FUNC_cipher_dupctx_fn f##_dupctx;                                    \
    OSSL_FUNC_cipher_encrypt_init_fn f##_einit;                               \
    OSSL_FUNC_cipher_decrypt_init_fn f##_dinit;                               \
    OSSL_FUNC_cipher_update_fn f##_update;                                    \
    OSSL_FUNC_cipher_final_fn f##_final;                                      \
    OSSL_FUNC_cipher_cipher_fn f##_cipher;                                    \
    OSSL_FUNC_cipher_get_ctx_params_fn f##_get_ctx_params;                    \
    OSSL_FUNC_cipher_set_ctx_params_fn f##_set_ctx_params;                    \
    OSSL_FUNC_cipher_gettable_params_fn f##_gettable_params;                  \
    OSSL_FUNC_cipher_gettable_ctx_params_fn f##_gettable_ctx_params;          \
    OSSL_FUNC_cipher_settable_ctx_params_fn f##_settable_ctx_params;
FAMILY_DECLARE(block)
FAMILY_DECLARE(gcm)
OSSL_FUNC_cipher_update_fn block_update_cfb;
OSSL_FUNC_cipher_update_fn block_update_ctr;

#define FAMILY_DISPATCH(f)                                                    \
    { OSSL_FUNC_CIPHER_FREECTX, (void (*)(void))f##_freectx },                \
    { OSSL_FUNC_CIPHER_DUPCTX, (void (*)(void))f##_dupctx },                  \
    { OSSL_FUNC_CIPHER_ENCRYPT_INIT, (void (*)(void))f##_einit },             \
    { OSSL_FUNC_CIPHER_DECRYPT_INIT, (void (*)(void))f##_dinit },             \
    { OSSL_FUNC_CIPHER_FINAL, (void (*)(void))f##_final },                    \
    { OSSL_FUNC_CIPHER_CIPHER, (void (*)(void))f##_cipher },                  \
    { OSSL_FUNC_CIPHER_GET_CTX_PARAMS, (void (*)(void))f##_get_ctx_params },  \
    { OSSL_FUNC_CIPHER_SET_CTX_PARAMS, (void (*)(void))f##_set_ctx_params },  \
    { OSSL_FUNC_CIPHER_GETTABLE_PARAMS, (void (*)(void))f##_gettable_params },\
    { OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_gettable_ctx_params },                              \
    { OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS,                                   \
      (void (*)(void))f##_settable_ctx_params }

/* f##_einit and f##_dinit: the family's own f##_init(ctx, ..., enc). */
#define FAMILY_INITS(f)                                                       \
    int f##_einit(void *vctx, const unsigned char *key, size_t keylen,        \
                  const unsigned char *iv, size_t ivlen,                      \
                  const OSSL_PARAM params[])                                  \
    {                                                                         \
        return f##_init(vctx, key, keylen, iv, ivlen, params, 1);             \
    }                                                                         \
    int f##_dinit(void *vctx, const unsigned char *key, size_t keylen,        \
                  const unsigned char *iv, size_t ivlen,                      \
                  const OSSL_PARAM params[])                                  \
    {                                                                         \
        return f##_init(vctx, key, keylen, iv, ivlen, params, 0);             \
    }

/* The family's parameter lists: those of the default provider's cipher of
 * variant v, one of the family (ASSUME_SHARED_PARAM_TABLES); ctx_type is the
 * family's context, whose fbctx is the default provider's. */
#define FAMILY_PARAM_TABLES(f, ctx_type, v)                            \
    const OSSL_PARAM *f##_gettable_params(void *provctx)                      \
    {                                                                         \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].gettable_params(prov->fallback_provctx);               \
    }                                                                         \
    const OSSL_PARAM *f##_gettable_ctx_params(void *vctx, void *provctx)      \
    {                                                                         \
        const ctx_type *c = vctx;                                             \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].gettable_ctx_params(c != NULL ? c->fbctx : NULL,   \
                                               prov->fallback_provctx);       \
    }                                                                         \
    const OSSL_PARAM *f##_settable_ctx_params(void *vctx, void *provctx)      \
    {                                                                         \
        const ctx_type *c = vctx;                                             \
        const gpuaes_prov *prov = provctx;                                    \
                                                                              \
        return prov->fallbacks[v].settable_ctx_params(c != NULL ? c->fbctx : NULL,   \
                                               prov->fallback_provctx);       \
    }

#endif
