/*
 * test_params_fuzz.c - random API sequences on a gpuaes context and a default
 * context side by side: inits with and without key/IV, IV length changes,
 * padding, num, AAD, updates small and large, tags, final, copies, TLS AADs
 * (GCM, rarely: TLS mode is for good).  After
 * every operation the result, the error queue, the output and the context
 * parameters must agree.  On the first difference the sequence is printed
 * (reproduce with GPUAES_TEST_SEED).
 */
#include "test_params.h"
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

#define NSEQ 12
#define NOPS 40
#define MAXUPD 70000

enum { F_INIT, F_REINIT_NOKEY, F_REINIT_NOIV, F_REINIT_NONE, F_IVLEN, F_PAD, F_NUM, F_AAD,
       F_UPD_SMALL, F_UPD_BIG, F_SET_TAG, F_FINAL, F_GET_TAG, F_COPY, F_TLS_AAD, F_COUNT };
static const char *const fnames[] = { "init", "reinit(NULL key)", "reinit(NULL iv)",
    "reinit(NULL, NULL)", "set ivlen", "set padding", "set num", "aad", "update",
    "update", "set tag", "final", "get tag", "copy", "tls aad" };

static unsigned char keys[3][32], ivs[3][128], *data, *outs[2];

typedef struct {
    char *why;
    size_t whylen;
    int n;
} fuzz_report_arg;

static void report_first(const char *key, void *varg)
{
    fuzz_report_arg *f = varg;

    if (f->n++ == 0)
        snprintf(f->why, f->whylen, "ctx param %s differs", key);
}

/* Every gettable ctx parameter without side effects agrees; 0 if not. */
static int params_agree(EVP_CIPHER_CTX *x[2], char *why, size_t whylen)
{
    fuzz_report_arg arg = { why, whylen, 0 };

    return pv_ctx_differences(x[0], x[1], report_first, &arg) == 0;
}

/* One random operation on both contexts; 0 with *why set when they disagree. */
static int fuzz_op(EVP_CIPHER_CTX *x[2], EVP_CIPHER *c[2], int gcm, int enc, char *log,
                   size_t loglen, char *why, size_t whylen)
{
    static const int ivlens[] = { 12, 16, 1, 8, 60, 128, 0, 129 };
    static const int taglens[] = { 16, 16, 12, 4, 0, 17 };
    int op = (int)test_rand_below(F_COUNT), k = (int)test_rand_below(3), v = 0;
    int mode = EVP_CIPHER_get_mode(c[0]);
    int ret[2], err[2], ol[2] = { 0, 0 }, pad[2] = { 0, 0 };
    size_t n = 0, off = test_rand_below(64);
    unsigned char tag[2][32], settag[32];

    if (op == F_UPD_SMALL || op == F_AAD)
        n = test_rand_below(100);
    else if (op == F_UPD_BIG)
        n = 100 + test_rand_below(MAXUPD - 100);
    else if (op == F_IVLEN)
        v = ivlens[test_rand_below(8)];
    else if (op == F_PAD)
        v = (int)test_rand_below(2);
    else if (op == F_NUM)          /* num >= 16 crashes default's CFB: not tried */
        v = (int)test_rand_below(16);
    else if (op == F_SET_TAG || op == F_GET_TAG)
        v = taglens[test_rand_below(6)];
    else if (op == F_TLS_AAD)      /* the record length field: below 8 + 16 refused decrypting */
        v = (int)test_rand_below(64);
    /* TLS mode is for good (most later operations then fail alike): rarely */
    if (op == F_TLS_AAD && (!gcm || test_rand_below(4) != 0))
        op = F_UPD_SMALL;
    /* num means nothing to ECB/CBC (test_params_ctx.c checks it is kept): here it would
     * only hide other differences behind the first one */
    if (op == F_NUM && (mode == EVP_CIPH_ECB_MODE || mode == EVP_CIPH_CBC_MODE))
        op = F_PAD;
    test_rand_bytes(settag, sizeof(settag));
    snprintf(log + strlen(log), loglen - strlen(log), "  %s key%d n=%zu v=%d\n", fnames[op], k, n, v);
    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX *y;

        ERR_clear_error();
        switch (op) {
        case F_INIT: ret[j] = EVP_CipherInit_ex2(x[j], c[j], keys[k], ivs[k], enc, NULL); break;
        case F_REINIT_NOKEY: ret[j] = EVP_CipherInit_ex2(x[j], NULL, NULL, ivs[k], enc, NULL); break;
        case F_REINIT_NOIV: ret[j] = EVP_CipherInit_ex2(x[j], NULL, keys[k], NULL, enc, NULL); break;
        case F_REINIT_NONE: ret[j] = EVP_CipherInit_ex2(x[j], NULL, NULL, NULL, enc, NULL); break;
        case F_IVLEN: ret[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_IVLEN, v, NULL); break;
        case F_PAD: ret[j] = EVP_CIPHER_CTX_set_padding(x[j], v); break;
        case F_NUM: ret[j] = EVP_CIPHER_CTX_set_num(x[j], v); break;
        case F_AAD:
            ret[j] = gcm ? EVP_CipherUpdate(x[j], NULL, &ol[j], data + off, (int)n) : 1;
            ol[j] = 0;
            break;
        case F_UPD_SMALL:
        case F_UPD_BIG:
            ret[j] = EVP_CipherUpdate(x[j], outs[j], &ol[j], data + off, (int)n);
            break;
        case F_SET_TAG:
            ret[j] = gcm ? EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_SET_TAG, v, enc ? NULL : settag) : 1;
            break;
        case F_FINAL: ret[j] = EVP_CipherFinal_ex(x[j], outs[j], &ol[j]); break;
        case F_GET_TAG:
            ret[j] = gcm ? EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_GET_TAG, v, tag[j]) : 1;
            break;
        case F_TLS_AAD: {
            unsigned char aad[13] = { 0, 0, 0, 0, 0, 0, 0, 1, 23, 3, 3, 0, (unsigned char)v };

            ret[j] = pad[j] = EVP_CIPHER_CTX_ctrl(x[j], EVP_CTRL_AEAD_TLS1_AAD, 13, aad);
            break;
        }
        case F_COPY:
            y = EVP_CIPHER_CTX_new();
            ret[j] = EVP_CIPHER_CTX_copy(y, x[j]);
            EVP_CIPHER_CTX_free(x[j]);
            x[j] = y;
            break;
        }
        ret[j] = ret[j] > 0;
        err[j] = ERR_peek_error() != 0;
        if (!ret[j])
            ol[j] = 0;
    }
    ERR_clear_error();
    if (ret[0] != ret[1])
        snprintf(why, whylen, "%s: default returned %d, gpuaes %d", fnames[op], ret[0], ret[1]);
    else if (!ret[0] && err[0] && !err[1])
        snprintf(why, whylen, "%s: default failed with an error, gpuaes without", fnames[op]);
    else if (ol[0] != ol[1] || memcmp(outs[0], outs[1], (size_t)ol[0]) != 0)
        snprintf(why, whylen, "%s: output differs (%d vs %d bytes)", fnames[op], ol[0], ol[1]);
    else if (op == F_GET_TAG && ret[0] && gcm && memcmp(tag[0], tag[1], (size_t)v) != 0)
        snprintf(why, whylen, "get tag: tags differ");
    else if (pad[0] != pad[1])
        snprintf(why, whylen, "tls aad: the pad differs (%d vs %d)", pad[0], pad[1]);
    else
        return params_agree(x, why, whylen);
    return 0;
}

void params_fuzz_tests(test_env *env)
{
    char *log = malloc(NOPS * 64 + 1), why[160];

    data = malloc(MAXUPD + 64);
    outs[0] = malloc(MAXUPD + 64);
    outs[1] = malloc(MAXUPD + 64);
    test_rand_bytes(data, MAXUPD + 64);
    test_rand_bytes(&keys[0][0], sizeof(keys));
    test_rand_bytes(&ivs[0][0], sizeof(ivs));
    for (int i = 0; i < API_NCIPHERS; i++) {
        EVP_CIPHER *c[2] = { api_fetch(env, api_ciphers[i], "default"),
                             api_fetch(env, api_ciphers[i], "gpuaes") };
        int gcm = EVP_CIPHER_get_mode(c[0]) == EVP_CIPH_GCM_MODE;

        for (int s = 0; s < NSEQ; s++) {
            int enc = s & 1;
            EVP_CIPHER_CTX *x[2] = { EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_new() };

            snprintf(log, NOPS * 64, "  init key0 (%s)\n", enc ? "enc" : "dec");
            for (int j = 0; j < 2; j++)
                CHECK(EVP_CipherInit_ex2(x[j], c[j], keys[0], ivs[0], enc, NULL));
            for (int o = 0; o < NOPS; o++)
                if (!fuzz_op(x, c, gcm, enc, log, NOPS * 64, why, sizeof(why))) {
                    fprintf(stderr, "%s sequence %d: %s after\n%s", api_ciphers[i], s, why, log);
                    check_failed(__FILE__, __LINE__, "random API sequence");
                    break;
                }
            EVP_CIPHER_CTX_free(x[0]);
            EVP_CIPHER_CTX_free(x[1]);
        }
        EVP_CIPHER_free(c[0]);
        EVP_CIPHER_free(c[1]);
    }
    free(log);
    free(data);
    free(outs[0]);
    free(outs[1]);
}
