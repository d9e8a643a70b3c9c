/*
 * test_params_gcm.c - the parameters libssl and other callers use beyond plain
 * update/final: GCM IV lengths 1..128, the TLS 1.2 record interface of GCM
 * (tlsaad, tlsivfixed, tlsivgen, tlsivinv) and of CBC (tls-version,
 * tls-mac-size, tls-mac).  gpuaes and default run side by side and must agree.
 */
#include "test_params.h"
#include "api_util.h"

#include <string.h>
#include <stdint.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/provider.h>
#include <openssl/err.h>
#include <openssl/prov_ssl.h>

static const char *const gcms[] = { "AES-128-GCM", "AES-256-GCM" };

static void fetch_pair(test_env *env, const char *name, EVP_CIPHER *c[2])
{
    c[0] = api_fetch(env, name, "default");
    c[1] = api_fetch(env, name, "gpuaes");
}

static void free_pair(EVP_CIPHER *c[2], EVP_CIPHER_CTX *x[2])
{
    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX_free(x[j]);
        EVP_CIPHER_free(c[j]);
    }
    ERR_clear_error();
}

/* Any IV length 1..128 gives default's ciphertext and tag; the tag verifies. */
static void gcm_ivlens(test_env *env, const char *name)
{
    static const int ivl[] = { 1, 7, 12, 13, 16, 64, 128 };
    unsigned char key[32], iv[128], aad[20], in[100], ct[2][100], tag[2][16], pt[100];
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2] = { NULL, NULL };

    fetch_pair(env, name, c);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(aad, sizeof(aad));
    test_rand_bytes(in, sizeof(in));
    for (size_t i = 0; i < sizeof(ivl) / sizeof(ivl[0]); i++) {
        int ok[2];
        pval a, b;

        for (int j = 0; j < 2; j++) {
            int n = 0, m = 0;

            EVP_CIPHER_CTX_free(x[j]);
            x[j] = EVP_CIPHER_CTX_new();
            ok[j] = EVP_EncryptInit_ex2(x[j], c[j], NULL, NULL, NULL)
                    && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_IVLEN, ivl[i], NULL) > 0
                    && EVP_EncryptInit_ex2(x[j], NULL, key, iv, NULL)
                    && EVP_EncryptUpdate(x[j], NULL, &n, aad, sizeof(aad))
                    && EVP_EncryptUpdate(x[j], ct[j], &n, in, sizeof(in))
                    && EVP_EncryptFinal_ex(x[j], ct[j] + n, &m)
                    && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_GET_TAG, 16, tag[j]) > 0;
        }
        CHECKF(ok[0] && ok[1], "%s ivlen %d: default %d gpuaes %d", name, ivl[i], ok[0], ok[1]);
        CHECKF(memcmp(ct[0], ct[1], sizeof(in)) == 0 && memcmp(tag[0], tag[1], 16) == 0,
               "%s ivlen %d: ciphertext or tag differs", name, ivl[i]);
        pv_ctx(x[0], OSSL_CIPHER_PARAM_IVLEN, OSSL_PARAM_UNSIGNED_INTEGER, &a);
        pv_ctx(x[1], OSSL_CIPHER_PARAM_IVLEN, OSSL_PARAM_UNSIGNED_INTEGER, &b);
        CHECKF(pv_equal(&a, &b), "%s ivlen %d: ivlen param", name, ivl[i]);
        pv_ctx(x[0], OSSL_CIPHER_PARAM_IV, OSSL_PARAM_OCTET_STRING, &a);
        pv_ctx(x[1], OSSL_CIPHER_PARAM_IV, OSSL_PARAM_OCTET_STRING, &b);
        CHECKF(pv_equal(&a, &b), "%s ivlen %d: iv param", name, ivl[i]);
        /* gpuaes decrypts its own output; a flipped tag bit fails */
        for (int bad = 0; bad < 2; bad++) {
            EVP_CIPHER_CTX *d = EVP_CIPHER_CTX_new();
            int n = 0, m = 0, r;

            tag[1][3] ^= (unsigned char)bad;
            r = EVP_DecryptInit_ex2(d, c[1], NULL, NULL, NULL)
                && EVP_CIPHER_CTX_ctrl(d, EVP_CTRL_AEAD_SET_IVLEN, ivl[i], NULL) > 0
                && EVP_DecryptInit_ex2(d, NULL, key, iv, NULL)
                && EVP_DecryptUpdate(d, NULL, &n, aad, sizeof(aad))
                && EVP_DecryptUpdate(d, pt, &n, ct[1], sizeof(in))
                && EVP_CIPHER_CTX_ctrl(d, EVP_CTRL_AEAD_SET_TAG, 16, tag[1]) > 0
                && EVP_DecryptFinal_ex(d, pt + n, &m) > 0;
            tag[1][3] ^= (unsigned char)bad;
            CHECKF(r == !bad && (bad || memcmp(pt, in, sizeof(in)) == 0),
                   "%s ivlen %d: decrypt with %s tag returned %d", name, ivl[i],
                   bad ? "a wrong" : "the right", r);
            EVP_CIPHER_CTX_free(d);
        }
    }
    free_pair(c, x);
}

/* 13-byte TLS 1.2 AAD whose length field is `len`. */
static void tls_aad(unsigned char a[13], int seq, size_t len)
{
    memset(a, 0, 13);
    a[7] = (unsigned char)seq;
    a[8] = 0x17;
    a[9] = 0x03;
    a[10] = 0x03;
    a[11] = (unsigned char)(len >> 8);
    a[12] = (unsigned char)len;
}

/* Records as libssl builds them: explicit IV | payload | tag, in place. */
static void gcm_tls_records(test_env *env, const char *name)
{
    static const size_t lens[] = { 0, 1, 1000, 16384 };
    enum { NREC = sizeof(lens) / sizeof(lens[0]) };
    static unsigned char rec[2][NREC][8 + 16384 + 16], ctrec[NREC][8 + 16384 + 16], plain[16384];
    unsigned char key[32], iv[12], a[13];
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2];

    fetch_pair(env, name, c);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(plain, sizeof(plain));
    for (int enc = 1; enc >= 0; enc--) {
        for (int j = 0; j < 2; j++) {
            x[j] = EVP_CIPHER_CTX_new();
            CHECK(EVP_CipherInit_ex2(x[j], c[j], key, NULL, enc, NULL));
            /* enc: -1 restores the whole IV (deterministic); dec: the 4 fixed bytes */
            CHECKF(EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_SET_IV_FIXED, enc ? -1 : 4, iv) > 0,
                   "%s side %d: tlsivfixed", name, j);
        }
        for (int r = 0; r < NREC; r++) {
            size_t len = lens[r], total = 8 + len + 16;
            int pad[2], ret[2];

            for (int j = 0; j < 2; j++) {
                if (enc) {
                    memset(rec[j][r], 0, 8);
                    memcpy(rec[j][r] + 8, plain, len);
                } else {
                    memcpy(rec[j][r], ctrec[r], total);   /* default's record */
                }
                tls_aad(a, r, enc ? 8 + len : total);
                pad[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_TLS1_AAD, 13, a);
                ret[j] = EVP_Cipher(x[j], rec[j][r], rec[j][r], (unsigned int)total);
            }
            CHECKF(pad[0] == pad[1], "%s %s rec %d: tlsaad returned %d vs %d", name,
                   enc ? "enc" : "dec", r, pad[0], pad[1]);
            CHECKF(ret[0] == ret[1], "%s %s rec %d: EVP_Cipher returned %d vs %d", name,
                   enc ? "enc" : "dec", r, ret[0], ret[1]);
            CHECKF(memcmp(rec[0][r], rec[1][r], enc ? total : 8 + len) == 0,
                   "%s %s rec %d (%zu bytes): record differs", name, enc ? "enc" : "dec", r, len);
            if (enc)
                memcpy(ctrec[r], rec[0][r], total);
            else
                CHECKF(memcmp(rec[1][r] + 8, plain, len) == 0, "%s rec %d: plaintext", name, r);
        }
        if (!enc) {          /* a tampered record fails on both */
            int ret[2];

            for (int j = 0; j < 2; j++) {
                memcpy(rec[j][2], ctrec[2], 8 + 1000 + 16);   /* the 1000-byte record */
                rec[j][2][20] ^= 1;
                tls_aad(a, 2, 8 + 1000 + 16);
                EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_TLS1_AAD, 13, a);
                ret[j] = EVP_Cipher(x[j], rec[j][2], rec[j][2], 8 + 1000 + 16) > 0;
            }
            CHECKF(!ret[0] && !ret[1], "%s: tampered record accepted (default %d gpuaes %d)",
                   name, ret[0], ret[1]);
        }
        for (int j = 0; j < 2; j++)
            EVP_CIPHER_CTX_free(x[j]);
        ERR_clear_error();
    }
    for (int j = 0; j < 2; j++)
        EVP_CIPHER_free(c[j]);
}

/* The key length, IV length and TLS AAD pad of both contexts agree (gpuaes
 * answers these itself where it knows them: provider/length_params.h). */
static void same_lengths(EVP_CIPHER_CTX *x[2], const char *name, const char *when)
{
    static const char *const keys[] = { OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_IVLEN,
                                        OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD };

    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        pval a, b;

        pv_ctx(x[0], keys[k], OSSL_PARAM_UNSIGNED_INTEGER, &a);
        pv_ctx(x[1], keys[k], OSSL_PARAM_UNSIGNED_INTEGER, &b);
        CHECKF(pv_equal(&a, &b), "%s %s: %s differs", name, when, keys[k]);
        if (!pv_equal(&a, &b)) {
            pv_print("default", &a);
            pv_print("gpuaes ", &b);
        }
    }
    ERR_clear_error();
}

/* Those lengths through TLS mode: before any TLS AAD, after an IV length set
 * in TLS mode, a refused and a taken TLS AAD, another IV length, a record, a
 * re-key and a copy. */
static void gcm_tls_lengths(test_env *env, const char *name)
{
    unsigned char key[32], iv[12], a[13], rec[8 + 100 + 16] = { 0 };
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2] = { NULL, NULL }, *d[2];

    fetch_pair(env, name, c);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    for (int enc = 1; enc >= 0; enc--) {
        int r[2];

        for (int j = 0; j < 2; j++) {
            EVP_CIPHER_CTX_free(x[j]);
            x[j] = EVP_CIPHER_CTX_new();
            CHECK(EVP_CipherInit_ex2(x[j], c[j], key, NULL, enc, NULL));
        }
        same_lengths(x, name, "new");
        for (int j = 0; j < 2; j++)
            r[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_SET_IV_FIXED, 4, iv) > 0;
        CHECKF(r[0] == r[1], "%s: tlsivfixed %d vs %d", name, r[0], r[1]);
        same_lengths(x, name, "TLS mode");
        for (int j = 0; j < 2; j++)
            r[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_IVLEN, 16, NULL) > 0;
        CHECKF(r[0] == r[1], "%s: ivlen 16 in TLS mode %d vs %d", name, r[0], r[1]);
        same_lengths(x, name, "ivlen 16 in TLS mode");
        tls_aad(a, 0, 4);                 /* a length below the explicit IV's: refused */
        for (int j = 0; j < 2; j++)
            r[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_TLS1_AAD, 13, a);
        CHECKF(r[0] == r[1], "%s: refused tlsaad %d vs %d", name, r[0], r[1]);
        same_lengths(x, name, "a refused TLS AAD");
        tls_aad(a, 1, enc ? 8 + 100 : sizeof(rec));
        for (int j = 0; j < 2; j++)
            r[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_TLS1_AAD, 13, a);
        CHECKF(r[0] == r[1], "%s: tlsaad %d vs %d", name, r[0], r[1]);
        same_lengths(x, name, "a TLS AAD");
        for (int j = 0; j < 2; j++)       /* (gpuaes mirrors no parameter now) */
            r[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_IVLEN, 8, NULL) > 0;
        CHECKF(r[0] == r[1], "%s: ivlen 8 after a TLS AAD %d vs %d", name, r[0], r[1]);
        same_lengths(x, name, "ivlen 8 after a TLS AAD");
        for (int j = 0; j < 2; j++)       /* decrypting: the tag is wrong, refused */
            r[j] = EVP_Cipher(x[j], rec, rec, sizeof(rec)) > 0;
        same_lengths(x, name, "a record");
        for (int j = 0; j < 2; j++)
            CHECK(EVP_CipherInit_ex2(x[j], NULL, key, NULL, enc, NULL));
        same_lengths(x, name, "a re-key");
        for (int j = 0; j < 2; j++) {
            d[j] = EVP_CIPHER_CTX_new();
            r[j] = d[j] != NULL && EVP_CIPHER_CTX_copy(d[j], x[j]);
        }
        CHECKF(r[0] && r[1], "%s: copy %d %d", name, r[0], r[1]);
        if (r[0] && r[1])
            same_lengths(d, name, "a copy");
        for (int j = 0; j < 2; j++)
            EVP_CIPHER_CTX_free(d[j]);
    }
    free_pair(c, x);
}

/* ---- The same lengths through the provider functions themselves ----
 * (OSSL_PROVIDER_query_operation: a caller may pass any key and IV length to
 * an init, as EVP_CipherInit_SKEY of OpenSSL 3.5 does with a raw key.) */

/* A cipher of one provider, called directly: its functions and the provider's context. */
typedef struct raw_cipher {
    api_raw_cipher f;
    void *provctx;
} raw_cipher;

static int raw_find(OSSL_PROVIDER *prov, const char *name, raw_cipher *r)
{
    int nc;
    const api_raw_cipher *f = &r->f;

    r->provctx = OSSL_PROVIDER_get0_provider_ctx(prov);
    return api_raw_cipher_find(OSSL_PROVIDER_query_operation(prov, OSSL_OP_CIPHER, &nc), name, &r->f)
           && f->newctx != NULL && f->freectx != NULL && f->dupctx != NULL && f->init[0] != NULL
           && f->init[1] != NULL && f->update != NULL && f->get != NULL && f->set != NULL;
}

/* The key length, IV length and TLS AAD pad of ctx[0] (default) and ctx[1]
 * (gpuaes) agree, asked alone as a size_t, as a 4-byte unsigned, as an int,
 * with no data, and all three together. */
static void raw_same_lengths(raw_cipher r[2], void *ctx[2], const char *name, const char *when)
{
    static const char *const keys[] = { OSSL_CIPHER_PARAM_KEYLEN, OSSL_CIPHER_PARAM_IVLEN,
                                        OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD };

    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++) {
        for (int form = 0; form < 4; form++) {
            static const unsigned types[] = { OSSL_PARAM_UNSIGNED_INTEGER, OSSL_PARAM_UNSIGNED_INTEGER,
                                              OSSL_PARAM_INTEGER, OSSL_PARAM_UNSIGNED_INTEGER };
            static const size_t sizes[] = { sizeof(size_t), 4, sizeof(int), sizeof(size_t) };
            uint64_t v[2] = { 0x5a5a5a5a5a5a5a5aULL, 0x5a5a5a5a5a5a5a5aULL };
            size_t rs[2];
            int ok[2];

            for (int j = 0; j < 2; j++) {
                OSSL_PARAM p[2] = { { keys[k], types[form], form == 3 ? NULL : &v[j], sizes[form],
                                      OSSL_PARAM_UNMODIFIED }, OSSL_PARAM_END };

                ok[j] = r[j].f.get(ctx[j], p) > 0;
                rs[j] = p[0].return_size;
            }
            CHECKF(ok[0] == ok[1] && rs[0] == rs[1] && (!ok[0] || v[0] == v[1]),
                   "%s %s: %s (form %d) default ok=%d size=%zu value=%#llx, gpuaes ok=%d "
                   "size=%zu value=%#llx", name, when, keys[k], form, ok[0], rs[0],
                   (unsigned long long)v[0], ok[1], rs[1], (unsigned long long)v[1]);
        }
    }
    {
        size_t v[2][3];
        int ok[2];

        for (int j = 0; j < 2; j++) {
            OSSL_PARAM p[4] = { OSSL_PARAM_size_t(keys[0], &v[j][0]),
                                OSSL_PARAM_size_t(keys[1], &v[j][1]),
                                OSSL_PARAM_size_t(keys[2], &v[j][2]), OSSL_PARAM_END };

            memset(v[j], 0, sizeof(v[j]));
            ok[j] = r[j].f.get(ctx[j], p) > 0;
        }
        CHECKF(ok[0] == ok[1] && memcmp(v[0], v[1], sizeof(v[0])) == 0,
               "%s %s: the three together differ", name, when);
    }
    ERR_clear_error();
}

/* One size_t parameter (twice: a duplicate key with a second value). */
static int raw_set_size(raw_cipher *r, void *ctx, const char *key, size_t v, const char *key2,
                        size_t v2)
{
    OSSL_PARAM p[3] = { OSSL_PARAM_size_t(key, &v), OSSL_PARAM_END, OSSL_PARAM_END };

    if (key2 != NULL)
        p[1] = (OSSL_PARAM)OSSL_PARAM_size_t(key2, &v2);
    return r->f.set(ctx, p) > 0;
}

#define RAW_BOTH(res, call)                                                     \
    do {                                                                        \
        for (int j_ = 0; j_ < 2; j_++) {                                        \
            raw_cipher *R = &r[j_];                                             \
            void *X = x[j_];                                                    \
            res[j_] = (call) > 0;                                               \
        }                                                                       \
        ERR_clear_error();                                                      \
    } while (0)

#define RAW_STEP(what, call)                                                    \
    do {                                                                        \
        int res_[2];                                                            \
        RAW_BOTH(res_, call);                                                   \
        CHECKF(res_[0] == res_[1], "%s %s: default %d gpuaes %d", name, what,   \
               res_[0], res_[1]);                                               \
        raw_same_lengths(r, x, name, what);                                     \
    } while (0)

/* Every way a sequence of provider calls changes the default's GCM IV length
 * or TLS AAD pad: inits with an IV (taken, refused, failing after the IV on
 * the key or the parameters), IV length sets (taken, refused, repeated, in
 * other integer forms), a copy, TLS AADs in init and set. */
static void gcm_raw_lengths(test_env *env, const char *name)
{
    static const unsigned char key[32] = "raw-lengths-key-of-32-bytes-....";
    unsigned char iv[128], aad13[13], tag[16] = { 0 };
    raw_cipher r[2];
    size_t keylen = strstr(name, "256") != NULL ? 32 : 16;
    void *x[2] = { NULL, NULL };

    CHECKF(raw_find(env->deflt, name, &r[0]) && raw_find(env->gpuaes, name, &r[1]),
           "%s: dispatch tables", name);
    if (r[0].f.newctx == NULL || r[1].f.newctx == NULL)
        return;
    memset(iv, 0x11, sizeof(iv));
    for (int enc = 1; enc >= 0; enc--) {
        for (int j = 0; j < 2; j++)
            x[j] = r[j].f.newctx(r[j].provctx);
        CHECK(x[0] != NULL && x[1] != NULL);
        raw_same_lengths(r, x, name, "new");
        RAW_STEP("init, IV 16 and a wrong key length",
                 R->f.init[enc](X, key, keylen + 1, iv, 16, NULL));
        RAW_STEP("init, IV 7 and a key length 0", R->f.init[enc](X, key, 0, iv, 7, NULL));
        RAW_STEP("init, IV 0", R->f.init[enc](X, key, keylen, iv, 0, NULL));
        RAW_STEP("init, IV 129", R->f.init[enc](X, key, keylen, iv, 129, NULL));
        RAW_STEP("init, key and IV 20", R->f.init[enc](X, key, keylen, iv, 20, NULL));
        RAW_STEP("init, IV 12 alone", R->f.init[enc](X, NULL, 0, iv, 12, NULL));
        {
            OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16),
                                OSSL_PARAM_END };

            RAW_STEP("init, IV 24 and a tag", R->f.init[enc](X, NULL, 0, iv, 24, p));
        }
        RAW_STEP("ivlen 0", raw_set_size(R, X, OSSL_CIPHER_PARAM_AEAD_IVLEN, 0, NULL, 0));
        RAW_STEP("ivlen 129", raw_set_size(R, X, OSSL_CIPHER_PARAM_AEAD_IVLEN, 129, NULL, 0));
        RAW_STEP("ivlen 9 then 10", raw_set_size(R, X, OSSL_CIPHER_PARAM_AEAD_IVLEN, 9,
                                                 OSSL_CIPHER_PARAM_AEAD_IVLEN, 10));
        RAW_STEP("ivlen 0 then 10", raw_set_size(R, X, OSSL_CIPHER_PARAM_AEAD_IVLEN, 0,
                                                 OSSL_CIPHER_PARAM_AEAD_IVLEN, 10));
        {
            uint32_t v = 33;
            OSSL_PARAM p[2] = { OSSL_PARAM_uint32(OSSL_CIPHER_PARAM_AEAD_IVLEN, &v), OSSL_PARAM_END };

            RAW_STEP("ivlen 33 as uint32", R->f.set(X, p));
        }
        {
            int v = 34;
            OSSL_PARAM p[2] = { OSSL_PARAM_int(OSSL_CIPHER_PARAM_AEAD_IVLEN, &v), OSSL_PARAM_END };

            RAW_STEP("ivlen 34 as int", R->f.set(X, p));
            v = -1;
            RAW_STEP("ivlen -1 as int", R->f.set(X, p));
        }
        {
            double v = 35.0;
            OSSL_PARAM p[2] = { OSSL_PARAM_double(OSSL_CIPHER_PARAM_AEAD_IVLEN, &v), OSSL_PARAM_END };

            RAW_STEP("ivlen 35 as double", R->f.set(X, p));
        }
        {
            size_t v = 40;
            OSSL_PARAM p[3] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, 16),
                                OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &v), OSSL_PARAM_END };

            RAW_STEP("a tag and ivlen 40", R->f.set(X, p));
        }
        RAW_STEP("init, key, IV 12, ivlen 48",
                 (R->f.init[enc](X, key, keylen, iv, 12, (OSSL_PARAM[]){
                      OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &(size_t){ 48 }),
                      OSSL_PARAM_END })));
        RAW_STEP("init, IV 50, wrong key length",
                 R->f.init[enc](X, key, keylen == 16 ? 32 : 16, iv, 50, NULL));
        {
            void *d[2];
            int ok;

            for (int j = 0; j < 2; j++)
                d[j] = r[j].f.dupctx(x[j]);
            ok = d[0] != NULL && d[1] != NULL;
            CHECKF(ok, "%s: dupctx", name);
            if (ok)
                raw_same_lengths(r, d, name, "a copy");
            for (int j = 0; j < 2; j++)
                r[j].f.freectx(d[j]);
        }
        /* TLS: a refused AAD, then one in an init's parameters, a refused one */
        tls_aad(aad13, 1, enc ? 8 + 10 : 8 + 10 + 16);
        {
            OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad13, 12),
                                OSSL_PARAM_END };

            RAW_STEP("a 12-byte TLS AAD", R->f.set(X, p));
            p[0].data_size = 13;
            RAW_STEP("init with a TLS AAD", R->f.init[enc](X, key, keylen, iv, 12, p));
            RAW_STEP("ivlen 8 in TLS mode",
                     raw_set_size(R, X, OSSL_CIPHER_PARAM_AEAD_IVLEN, 8, NULL, 0));
            p[0].data_size = 12;
            RAW_STEP("a 12-byte TLS AAD in TLS mode", R->f.set(X, p));
        }
        for (int j = 0; j < 2; j++)
            r[j].f.freectx(x[j]);
    }
    /* A TLS AAD taken in a set whose later parameter is refused */
    for (int enc = 1; enc >= 0; enc--) {
        for (int j = 0; j < 2; j++)
            x[j] = r[j].f.newctx(r[j].provctx);
        RAW_STEP("init", R->f.init[enc](X, key, keylen, NULL, 0, NULL));
        tls_aad(aad13, 1, enc ? 8 + 10 : 8 + 10 + 16);
        {
            unsigned char fixed[2] = { 1, 2 };
            OSSL_PARAM p[3] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad13, 13),
                                OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed, 2),
                                OSSL_PARAM_END };

            RAW_STEP("a TLS AAD and a refused fixed IV", R->f.set(X, p));
            p[1] = (OSSL_PARAM)OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad13, 12);
            RAW_STEP("a TLS AAD then a short one", R->f.set(X, p));
            p[0].data_size = 12;
            p[1].data_size = 13;
            RAW_STEP("a short TLS AAD then a good one", R->f.set(X, p));
        }
        for (int j = 0; j < 2; j++)
            r[j].f.freectx(x[j]);
    }
}

/* tlsivgen / tlsivinv outside records: IV invocation field handed out and back. */
static void gcm_ivgen(test_env *env, const char *name)
{
    unsigned char key[32], iv[12], in[50], ct[2][50], tag[2][16], gen[2][2][8], pt[50];
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2];

    fetch_pair(env, name, c);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(in, sizeof(in));
    for (int j = 0; j < 2; j++) {
        x[j] = EVP_CIPHER_CTX_new();
        CHECK(EVP_EncryptInit_ex2(x[j], c[j], key, NULL, NULL));
        CHECK(EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_SET_IV_FIXED, -1, iv) > 0);
        for (int k = 0; k < 2; k++) {     /* two messages: the counter advances */
            int n = 0, m = 0;

            CHECKF(EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_IV_GEN, 8, gen[j][k]) > 0,
                   "%s side %d: tlsivgen", name, j);
            CHECK(EVP_EncryptUpdate(x[j], ct[j], &n, in, sizeof(in))
                  && EVP_EncryptFinal_ex(x[j], ct[j] + n, &m)
                  && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_GET_TAG, 16, tag[j]) > 0);
        }
    }
    CHECKF(memcmp(gen[0], gen[1], sizeof(gen[0])) == 0, "%s: tlsivgen output differs", name);
    CHECKF(memcmp(ct[0], ct[1], sizeof(in)) == 0 && memcmp(tag[0], tag[1], 16) == 0,
           "%s: ciphertext under a generated IV differs", name);
    for (int j = 0; j < 2; j++) {         /* decrypt the second message via tlsivinv */
        int n = 0, m = 0, ok;

        EVP_CIPHER_CTX_free(x[j]);
        x[j] = EVP_CIPHER_CTX_new();
        ok = EVP_DecryptInit_ex2(x[j], c[j], key, NULL, NULL)
             && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_SET_IV_FIXED, -1, iv) > 0
             && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_GCM_SET_IV_INV, 8, gen[0][1]) > 0
             && EVP_DecryptUpdate(x[j], pt, &n, ct[0], sizeof(in))
             && EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_TAG, 16, tag[0]) > 0
             && EVP_DecryptFinal_ex(x[j], pt + n, &m) > 0;
        CHECKF(ok && memcmp(pt, in, sizeof(in)) == 0, "%s side %d: tlsivinv decrypt", name, j);
    }
    free_pair(c, x);
}

/* CBC with tls-version set: the provider pads (enc) / strips padding, explicit
 * IV and MAC (dec), and hands the MAC out as tls-mac. */
static void cbc_tls_records(test_env *env, const char *name, unsigned version, size_t macsize)
{
    unsigned char key[32], iv[16], buf[2][16 + 1000 + 48 + 256], ct[16 + 1000 + 48 + 256];
    unsigned char plain[16 + 1000 + 48];
    size_t len = sizeof(plain) - 48 + macsize;    /* explicit IV | data | MAC */
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2];
    int ret[2], ol[2], ctlen = 0;
    pval mac[2];

    fetch_pair(env, name, c);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(plain, sizeof(plain));
    for (int enc = 1; enc >= 0; enc--) {
        for (int j = 0; j < 2; j++) {
            OSSL_PARAM p[3] = {
                OSSL_PARAM_construct_uint(OSSL_CIPHER_PARAM_TLS_VERSION, &version),
                OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_TLS_MAC_SIZE, &macsize),
                OSSL_PARAM_END
            };

            x[j] = EVP_CIPHER_CTX_new();
            CHECK(EVP_CipherInit_ex2(x[j], c[j], key, iv, enc, NULL));
            CHECKF(EVP_CIPHER_CTX_set_params(x[j], p), "%s side %d: tls-version/tls-mac-size", name, j);
            if (enc)
                memcpy(buf[j], plain, len);
            else
                memcpy(buf[j], ct, (size_t)ctlen);      /* default's record */
            ol[j] = -1;
            ret[j] = EVP_CipherUpdate(x[j], buf[j], &ol[j], buf[j], enc ? (int)len : ctlen) > 0;
            api_take_error();
        }
        CHECKF(ret[0] == ret[1] && ol[0] == ol[1] && memcmp(buf[0], buf[1], (size_t)ol[0]) == 0,
               "%s tls %x mac %zu %s: default %d/%d gpuaes %d/%d or bytes differ", name, version,
               macsize, enc ? "enc" : "dec", ret[0], ol[0], ret[1], ol[1]);
        if (enc && ret[0]) {
            ctlen = ol[0];
            memcpy(ct, buf[0], (size_t)ctlen);
        }
        if (!enc) {
            for (int j = 0; j < 2; j++) {
                void *ptr = NULL;
                OSSL_PARAM p[2] = { OSSL_PARAM_octet_ptr(OSSL_CIPHER_PARAM_TLS_MAC, &ptr, macsize),
                                    OSSL_PARAM_END };

                mac[j].ok = EVP_CIPHER_CTX_get_params(x[j], p);
                mac[j].size = ptr != NULL ? macsize : 0;
                memset(mac[j].data, 0, sizeof(mac[j].data));
                if (ptr != NULL)
                    memcpy(mac[j].data, ptr, macsize);
            }
            CHECKF(pv_equal(&mac[0], &mac[1]), "%s tls %x: tls-mac differs", name, version);
        }
        for (int j = 0; j < 2; j++)
            EVP_CIPHER_CTX_free(x[j]);
    }
    for (int j = 0; j < 2; j++)
        EVP_CIPHER_free(c[j]);
    ERR_clear_error();
}

void gcm_extra_tests(test_env *env)
{
    for (size_t i = 0; i < sizeof(gcms) / sizeof(gcms[0]); i++) {
        gcm_ivlens(env, gcms[i]);
        gcm_tls_records(env, gcms[i]);
        gcm_tls_lengths(env, gcms[i]);
        gcm_raw_lengths(env, gcms[i]);
        gcm_ivgen(env, gcms[i]);
    }
    cbc_tls_records(env, "AES-128-CBC", TLS1_2_VERSION, 0);
    cbc_tls_records(env, "AES-128-CBC", TLS1_2_VERSION, 32);
    cbc_tls_records(env, "AES-256-CBC", TLS1_2_VERSION, 48);
    cbc_tls_records(env, "AES-256-CBC", TLS1_VERSION, 20);
}
