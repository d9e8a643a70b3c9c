/*
 * length_params.h - a cipher context's key length, IV length and TLS AAD pad,
 * answered by gpuaes itself.
 *
 * EVP asks for one of them, alone, on every init that has a key or an IV
 * (OpenSSL 3.0 and 3.1: EVP_CIPHER_CTX_get_key_length and _get_iv_length;
 * later versions ask once per init and keep it), and for the pad after every
 * TLS 1.2 record's AAD (EVP_CTRL_AEAD_TLS1_AAD: a set, then a get).  The
 * default provider's get_ctx_params looks up each of the seven or eight names
 * it knows before it answers: ~50 ns on the CPU machine, a quarter of a whole
 * TLS 1.3 record of 16 bytes.  The values are the fallback's
 * (ASSUME_LENGTH_PARAMS, ASSUME_GCM_TLS_AAD_PAD); any other request, or one in
 * another form, is the fallback's to answer.
 */
#ifndef GPUAES_LENGTH_PARAMS_H
#define GPUAES_LENGTH_PARAMS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <openssl/core.h>
#include <openssl/core_names.h>

/* Is `key` the parameter name `name`, a string literal?  (Unrolled at compile
 * time; no byte of key past its end is read.  note_params uses it too.) */
static inline int param_name_is(const char *key, const char *name)
{
    size_t i;

    for (i = 0; name[i] != '\0'; i++)
        if (key[i] != name[i])
            return 0;
    return key[i] == '\0';
}

/*
 * A request for the key length, the IV length or the TLS AAD pad alone, as a
 * size_t, answered as the default provider would (OSSL_PARAM_set_size_t's
 * effect): 1.  Else 0, untouched.  ivlen or tlspad SIZE_MAX: not known here,
 * the fallback answers it.
 */
static inline int length_param_answered(OSSL_PARAM params[], size_t keylen, size_t ivlen,
                                        size_t tlspad)
{
    OSSL_PARAM *p = params;
    size_t v;

    if (p == NULL || p->key == NULL || p[1].key != NULL
        || p->data_type != OSSL_PARAM_UNSIGNED_INTEGER || p->data_size != sizeof(size_t)
        || p->data == NULL)
        return 0;
    /* (the first letters differ: one name compared) */
    if (p->key[0] == 'i' && ivlen != SIZE_MAX && param_name_is(p->key, OSSL_CIPHER_PARAM_IVLEN))
        v = ivlen;
    else if (p->key[0] == 'k' && param_name_is(p->key, OSSL_CIPHER_PARAM_KEYLEN))
        v = keylen;
    else if (p->key[0] == 't' && tlspad != SIZE_MAX
             && param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD))
        v = tlspad;
    else
        return 0;
    memcpy(p->data, &v, sizeof(v));
    p->return_size = sizeof(v);
    return 1;
}

#endif
