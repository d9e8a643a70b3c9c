/* api_util.c - helpers shared by the API tests. */
#include "api_util.h"

#include <stdlib.h>
#include <limits.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

const char *const api_ciphers[API_NCIPHERS] = {
    "AES-128-ECB", "AES-192-ECB", "AES-256-ECB",
    "AES-128-CBC", "AES-192-CBC", "AES-256-CBC",
    "AES-128-CFB", "AES-192-CFB", "AES-256-CFB",
    "AES-128-CTR", "AES-192-CTR", "AES-256-CTR",
    "AES-128-GCM", "AES-192-GCM", "AES-256-GCM",
};

EVP_CIPHER *api_fetch(test_env *env, const char *name, const char *provider)
{
    EVP_CIPHER *c = test_fetch(env, name, provider);

    if (c == NULL) {
        fprintf(stderr, "cannot fetch %s from %s\n", name, provider);
        ERR_print_errors_fp(stderr);
        exit(1);
    }
    return c;
}

int api_crypt(const EVP_CIPHER *c, int enc, const unsigned char *key,
              const unsigned char *iv, const unsigned char *aad, size_t aadlen,
              const unsigned char *in, size_t len, unsigned char *out,
              size_t *outl, unsigned char tag[16], int padding)
{
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int gcm = EVP_CIPHER_get_mode(c) == EVP_CIPH_GCM_MODE;
    int ok = 0, n = 0, m = 0, an = 0;
    size_t done = 0;

    *outl = 0;
    if (ctx == NULL || !EVP_CipherInit_ex2(ctx, c, key, iv, enc, NULL))
        goto end;
    EVP_CIPHER_CTX_set_padding(ctx, padding);
    if (gcm && aadlen > 0 && !EVP_CipherUpdate(ctx, NULL, &an, aad, (int)aadlen))
        goto end;
    /* EVP takes int lengths: feed in slices so any size_t length works. */
    while (done < len) {
        size_t s = len - done > INT_MAX / 2 ? INT_MAX / 2 : len - done;

        if (!EVP_CipherUpdate(ctx, out + *outl, &n, in + done, (int)s))
            goto end;
        done += s;
        *outl += (size_t)n;
    }
    if (gcm && !enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, 16, tag))
        goto end;
    if (!EVP_CipherFinal_ex(ctx, out + *outl, &m))
        goto end;
    *outl += (size_t)m;
    if (gcm && enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag))
        goto end;
    ok = 1;
end:
    EVP_CIPHER_CTX_free(ctx);
    return ok;
}

int api_take_error(void)
{
    int had = ERR_peek_error() != 0;

    ERR_clear_error();
    return had;
}

/* Is name one of the colon-separated names in names? */
static int named(const char *names, const char *name)
{
    size_t n = strlen(name);

    for (const char *s = names; *s != '\0';) {
        const char *e = strchr(s, ':');
        size_t len = e != NULL ? (size_t)(e - s) : strlen(s);

        if (len == n && OPENSSL_strncasecmp(s, name, n) == 0)
            return 1;
        s += len + (e != NULL);
    }
    return 0;
}

int api_raw_cipher_find(const OSSL_ALGORITHM *algs, const char *name, api_raw_cipher *r)
{
    memset(r, 0, sizeof(*r));
    for (; algs != NULL && algs->algorithm_names != NULL; algs++) {
        if (!named(algs->algorithm_names, name))
            continue;
        for (const OSSL_DISPATCH *d = algs->implementation; d->function_id != 0; d++) {
            switch (d->function_id) {
            case OSSL_FUNC_CIPHER_NEWCTX: r->newctx = OSSL_FUNC_cipher_newctx(d); break;
            case OSSL_FUNC_CIPHER_FREECTX: r->freectx = OSSL_FUNC_cipher_freectx(d); break;
            case OSSL_FUNC_CIPHER_DUPCTX: r->dupctx = OSSL_FUNC_cipher_dupctx(d); break;
            case OSSL_FUNC_CIPHER_ENCRYPT_INIT: r->init[1] = OSSL_FUNC_cipher_encrypt_init(d); break;
            case OSSL_FUNC_CIPHER_DECRYPT_INIT: r->init[0] = OSSL_FUNC_cipher_decrypt_init(d); break;
            case OSSL_FUNC_CIPHER_UPDATE: r->update = OSSL_FUNC_cipher_update(d); break;
            case OSSL_FUNC_CIPHER_FINAL: r->final = OSSL_FUNC_cipher_final(d); break;
            case OSSL_FUNC_CIPHER_GET_CTX_PARAMS: r->get = OSSL_FUNC_cipher_get_ctx_params(d); break;
            case OSSL_FUNC_CIPHER_SET_CTX_PARAMS: r->set = OSSL_FUNC_cipher_set_ctx_params(d); break;
            }
        }
        return 1;
    }
    return 0;
}
