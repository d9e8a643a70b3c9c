/*
 * test_params_num.c - the num parameter.  CFB and CTR: 0..15 mid-stream and
 * from the start, then a GPU-sized update, exactly like the default provider;
 * 16 and above refused (0 and an error: the default provider of OpenSSL 3.0
 * takes them and reads out of bounds), through set_params and at init, the
 * context left as it was.  ECB and CBC do not use num: gpuaes answers like
 * the default provider.
 */
#include "test_params.h"
#include "api_util.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

#define HEAD 5
#define BIG (((size_t)1 << 20) + 37)        /* reaches the GPU with offload_min_bytes 0, forced */

static unsigned char key[32], iv[16], *in, *out[2];

static int set_num(EVP_CIPHER_CTX *x, unsigned int v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &v), OSSL_PARAM_END };

    return EVP_CIPHER_CTX_set_params(x, p);
}

/* The rest after the head: both contexts, same output, same num and IV after. */
static void both_go_on(EVP_CIPHER_CTX *x[2], const char *what)
{
    int l[2] = { 0, 0 }, r[2];
    unsigned char v[2][16] = { { 0 }, { 0 } };   /* ECB: 0 bytes written */

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherUpdate(x[j], out[j], &l[j], in + HEAD, (int)BIG);
    CHECKF(r[0] && r[1] && l[0] == l[1] && memcmp(out[0], out[1], (size_t)l[0]) == 0,
           "%s: the update after differs", what);
    CHECKF(EVP_CIPHER_CTX_get_num(x[0]) == EVP_CIPHER_CTX_get_num(x[1]), "%s: num %d vs %d", what,
           EVP_CIPHER_CTX_get_num(x[0]), EVP_CIPHER_CTX_get_num(x[1]));
    r[0] = EVP_CIPHER_CTX_get_updated_iv(x[0], v[0], 16);
    r[1] = EVP_CIPHER_CTX_get_updated_iv(x[1], v[1], 16);
    CHECKF(r[0] == r[1] && (!r[0] || memcmp(v[0], v[1], 16) == 0), "%s: updated IV differs", what);
}

/* init (new contexts when c != NULL), then the head (ECB/CBC hold it) */
static void init_pair(EVP_CIPHER_CTX *x[2], EVP_CIPHER *c[2], int enc)
{
    int l[2] = { 0, 0 };

    for (int j = 0; j < 2; j++) {
        if (c != NULL)
            x[j] = EVP_CIPHER_CTX_new();
        CHECK(EVP_CipherInit_ex2(x[j], c != NULL ? c[j] : NULL, key, iv, enc, NULL)
              && EVP_CipherUpdate(x[j], out[j], &l[j], in, HEAD));
    }
    CHECK(l[0] == l[1] && memcmp(out[0], out[1], (size_t)l[0]) == 0);
}

static void free_pair(EVP_CIPHER_CTX *x[2])
{
    EVP_CIPHER_CTX_free(x[0]);
    EVP_CIPHER_CTX_free(x[1]);
    ERR_clear_error();
}

/* CFB/CTR: 0..15 after the head and, at init, from the start, like default. */
static void num_valid(EVP_CIPHER *c[2], const char *name, int enc)
{
    for (unsigned int v = 0; v < 16; v++) {
        EVP_CIPHER_CTX *x[2];
        char what[96];

        snprintf(what, sizeof(what), "%s %s num=%u mid-stream", name, enc ? "enc" : "dec", v);
        init_pair(x, c, enc);
        CHECKF(set_num(x[0], v) && set_num(x[1], v), "%s: refused", what);
        both_go_on(x, what);
        free_pair(x);

        snprintf(what, sizeof(what), "%s %s num=%u at init", name, enc ? "enc" : "dec", v);
        for (int j = 0; j < 2; j++) {
            OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &v), OSSL_PARAM_END };

            x[j] = EVP_CIPHER_CTX_new();
            CHECKF(EVP_CipherInit_ex2(x[j], c[j], key, iv, enc, p), "%s: refused", what);
        }
        both_go_on(x, what);
        free_pair(x);
    }
}

/* CFB/CTR: 16 and above refused by gpuaes (default is not asked: undefined
 * there), with an error; the context goes on from where it was, like a
 * default context that never saw the call. */
static void num_refused(EVP_CIPHER *c[2], const char *name, int enc)
{
    static const unsigned int bad[] = { 16, 17, 18, 31, 255, 256, 65536, UINT_MAX };

    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, (unsigned int *)&bad[k]),
                            OSSL_PARAM_END };
        EVP_CIPHER_CTX *x[2];
        char what[96];
        int r;

        snprintf(what, sizeof(what), "%s %s num=%u", name, enc ? "enc" : "dec", bad[k]);
        init_pair(x, c, enc);
        ERR_clear_error();
        r = set_num(x[1], bad[k]);
        CHECKF(!r && ERR_peek_error() != 0, "%s: set_params returned %d, %s error", what, r,
               ERR_peek_error() ? "an" : "no");
        CHECKF(EVP_CIPHER_CTX_get_num(x[1]) == HEAD, "%s: num %d after the refusal", what,
               EVP_CIPHER_CTX_get_num(x[1]));
        both_go_on(x, what);
        /* at init: refused too; a good init after it works */
        ERR_clear_error();
        r = EVP_CipherInit_ex2(x[1], NULL, key, iv, enc, p);
        CHECKF(!r && ERR_peek_error() != 0, "%s at init: returned %d, %s error", what, r,
               ERR_peek_error() ? "an" : "no");
        init_pair(x, NULL, enc);
        both_go_on(x, what);
        free_pair(x);
    }
}

/* ECB/CBC: whatever default answers, and the same bytes after. */
static void num_unused(EVP_CIPHER *c[2], const char *name, int enc)
{
    static const unsigned int vals[] = { 3, 16, 255, UINT_MAX };

    for (size_t k = 0; k < sizeof(vals) / sizeof(vals[0]); k++) {
        EVP_CIPHER_CTX *x[2];
        char what[96];
        int r[2];

        snprintf(what, sizeof(what), "%s %s num=%u", name, enc ? "enc" : "dec", vals[k]);
        init_pair(x, c, enc);
        r[0] = set_num(x[0], vals[k]);
        r[1] = set_num(x[1], vals[k]);
        CHECKF(r[0] == r[1], "%s: default returned %d, gpuaes %d", what, r[0], r[1]);
        both_go_on(x, what);
        free_pair(x);
    }
}

void params_num_tests(test_env *env)
{
    in = malloc(HEAD + BIG);
    out[0] = malloc(BIG + 32);
    out[1] = malloc(BIG + 32);
    test_rand_bytes(in, HEAD + BIG);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    for (int i = 0; i < API_NCIPHERS - 3; i++) {
        EVP_CIPHER *c[2] = { api_fetch(env, api_ciphers[i], "default"),
                             api_fetch(env, api_ciphers[i], "gpuaes") };
        int mode = EVP_CIPHER_get_mode(c[0]);

        for (int enc = 1; enc >= 0; enc--) {
            if (mode == EVP_CIPH_ECB_MODE || mode == EVP_CIPH_CBC_MODE) {
                num_unused(c, api_ciphers[i], enc);
                continue;
            }
            num_valid(c, api_ciphers[i], enc);
            num_refused(c, api_ciphers[i], enc);
        }
        EVP_CIPHER_free(c[0]);
        EVP_CIPHER_free(c[1]);
    }
    free(in);
    free(out[0]);
    free(out[1]);
}
