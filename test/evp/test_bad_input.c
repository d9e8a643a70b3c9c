/*
 * test_bad_input.c - misuse must fail cleanly: return 0 with an error on the
 * queue (where default puts one), never crash, and leave the context usable.
 * Each case runs on default and on gpuaes; gpuaes must answer like default.
 * With --gpu (GPUAES_OFFLOAD_MIN_BYTES=0, GPUAES_DISPATCH=force) the data
 * sizes reach the GPU path.
 */
#define _POSIX_C_SOURCE 200809L
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

#define BIG ((1u << 20) + 32)          /* > one emulator chunk, whole blocks */

static unsigned char key[32], iv[16], *plain, *ct, *outbuf[2];
static test_env *g_env;

typedef struct {
    int n;                             /* the bad value */
    size_t len;                        /* data size */
    int enc;
} case_arg;

/* A case runs a sequence and returns the result of its one interesting call;
 * *err says whether that call left an error.  *outl: bytes in out. */
typedef int case_fn(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                    unsigned char *out, size_t *outl, int *err);

/* The interesting call: a clean queue before, note the queue after. */
#define CALL(expr) do { ERR_clear_error(); r = (expr) > 0; *err = ERR_peek_error() != 0; } while (0)

static void run_case(test_env *env, const char *cname, const char *what, case_fn *f,
                     const case_arg *a)
{
    EVP_CIPHER *c[2] = { api_fetch(env, cname, "default"), api_fetch(env, cname, "gpuaes") };
    int r[2], e[2];
    size_t ol[2] = { 0, 0 };

    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();

        r[j] = f(x, c[j], a, outbuf[j], &ol[j], &e[j]);
        EVP_CIPHER_CTX_free(x);
        ERR_clear_error();
    }
    CHECKF(r[0] == r[1], "%s %s (n=%d len=%zu %s): default returned %d, gpuaes %d", cname, what,
           a->n, a->len, a->enc ? "enc" : "dec", r[0], r[1]);
    CHECKF(r[0] || !e[0] || e[1], "%s %s (n=%d len=%zu %s): no error on the queue", cname, what,
           a->n, a->len, a->enc ? "enc" : "dec");
    CHECKF(ol[0] == ol[1] && memcmp(outbuf[0], outbuf[1], ol[0]) == 0,
           "%s %s (n=%d len=%zu): output differs (%zu vs %zu bytes)", cname, what, a->n, a->len,
           ol[0], ol[1]);
    EVP_CIPHER_free(c[0]);
    EVP_CIPHER_free(c[1]);
}

/* After the failed call the context must still encrypt like default: run
 * update+final and hand back the output for comparison. */
static int still_works(EVP_CIPHER_CTX *x, const case_arg *a, unsigned char *out, size_t *outl)
{
    int n = 0, m = 0, ok;

    ok = EVP_CipherInit_ex2(x, NULL, key, iv, a->enc, NULL)
         && EVP_CipherUpdate(x, out, &n, a->enc ? plain : ct, (int)a->len);
    if (ok && EVP_CIPHER_get_mode(EVP_CIPHER_CTX_get0_cipher(x)) == EVP_CIPH_GCM_MODE && !a->enc)
        return 1;                      /* no tag to check against: the data is enough */
    ok = ok && EVP_CipherFinal_ex(x, out + n, &m);
    *outl = ok ? (size_t)(n + m) : 0;
    return ok;
}

/* GCM: default's encryption of plain and its tag, for the decrypt-side cases. */
static const unsigned char *gcm_input(const EVP_CIPHER *c, size_t len, unsigned char t[16])
{
    static unsigned char *buf;
    EVP_CIPHER *d = api_fetch(g_env, EVP_CIPHER_get0_name(c), "default");
    size_t ol;

    if (buf == NULL)
        buf = malloc(BIG + 64);
    CHECK(api_crypt(d, 1, key, iv, NULL, 0, plain, len, buf, &ol, t, 1));
    EVP_CIPHER_free(d);
    return buf;
}

/* ---- the cases ---- */

static int c_set_keylen(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                        unsigned char *out, size_t *outl, int *err)
{
    int r;

    if (!EVP_CipherInit_ex2(x, c, NULL, NULL, a->enc, NULL))
        return -1;
    CALL(EVP_CIPHER_CTX_set_key_length(x, a->n));
    if (EVP_CIPHER_CTX_get_key_length(x) != EVP_CIPHER_get_key_length(c)
        || !still_works(x, a, out, outl))
        return -2;
    return r;
}

static int c_keylen_param(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                          unsigned char *out, size_t *outl, int *err)
{
    size_t kl = (size_t)a->n;
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_KEYLEN, &kl), OSSL_PARAM_END };
    int r;

    /* the bad length together with a key, at init */
    CALL(EVP_CipherInit_ex2(x, c, key, iv, a->enc, p));
    if (EVP_CIPHER_CTX_get_key_length(x) != EVP_CIPHER_get_key_length(c)
        || !still_works(x, a, out, outl))
        return -2;
    return r;
}

static int c_ivlen(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                   unsigned char *out, size_t *outl, int *err)
{
    int r, want;

    if (!EVP_CipherInit_ex2(x, c, NULL, NULL, a->enc, NULL))
        return -1;
    want = EVP_CIPHER_CTX_get_iv_length(x);
    CALL(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_IVLEN, a->n, NULL));
    if (!r && EVP_CIPHER_CTX_get_iv_length(x) != want)
        return -2;                     /* a refused length must not stick */
    if (!r && !still_works(x, a, out, outl))
        return -3;
    return r;
}

static int c_ivlen_param(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                         unsigned char *out, size_t *outl, int *err)
{
    size_t l = (size_t)a->n;
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_IVLEN, &l), OSSL_PARAM_END };
    int r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL))
        return -1;
    CALL(EVP_CIPHER_CTX_set_params(x, p));
    (void)out;
    *outl = 0;
    return r;
}

/* GCM tag: set on decryption with a bad length, or on encryption at all. */
static int c_set_tag(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                     unsigned char *out, size_t *outl, int *err)
{
    unsigned char t[32] = { 0 };
    int r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL))
        return -1;
    CALL(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, a->n, a->enc ? NULL : t));
    (void)out;
    *outl = 0;
    return r;
}

/* GCM tag: get after encryption with a bad length, or after decryption. */
static int c_get_tag(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                     unsigned char *out, size_t *outl, int *err)
{
    unsigned char t[32], good[16];
    const unsigned char *in = a->enc ? plain : gcm_input(c, a->len, good);
    int n = 0, m = 0, r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL)
        || !EVP_CipherUpdate(x, out, &n, in, (int)a->len)
        || (!a->enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, good) <= 0)
        || !EVP_CipherFinal_ex(x, out + n, &m))
        return -1;
    *outl = (size_t)(n + m);
    CALL(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, a->n, t));
    if (r) {                           /* the tag bytes are compared too */
        memcpy(out + *outl, t, (size_t)a->n);
        *outl += (size_t)a->n;
    }
    return r;
}

static int c_final_no_tag(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                          unsigned char *out, size_t *outl, int *err)
{
    int n = 0, m = 0, r;

    if (!EVP_DecryptInit_ex2(x, c, key, iv, NULL) || !EVP_DecryptUpdate(x, out, &n, ct, (int)a->len))
        return -1;
    *outl = (size_t)n;
    CALL(EVP_DecryptFinal_ex(x, out + n, &m));
    return r;
}

/* Update (data or AAD) after a successful final, and a second final. */
static int c_after_final(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                         unsigned char *out, size_t *outl, int *err)
{
    unsigned char good[16];
    const unsigned char *in = a->enc ? plain : gcm_input(c, a->len, good);
    int n = 0, m = 0, r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL)
        || !EVP_CipherUpdate(x, out, &n, in, (int)a->len)
        || (!a->enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, good) <= 0)
        || !EVP_CipherFinal_ex(x, out + n, &m))
        return -1;
    *outl = (size_t)(n + m);
    if (a->n == 1)                                   /* AAD */
        CALL(EVP_CipherUpdate(x, NULL, &n, plain, 16));
    else if (a->n == 2)                              /* a second final */
        CALL(EVP_CipherFinal_ex(x, out + *outl, &m));
    else                                             /* more data */
        CALL(EVP_CipherUpdate(x, out + *outl, &n, in, (int)a->len));
    return r;
}

/* Update before any key was given. */
static int c_no_key(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                    unsigned char *out, size_t *outl, int *err)
{
    int n = 0, r;

    if (!EVP_CipherInit_ex2(x, c, NULL, NULL, a->enc, NULL))
        return -1;
    CALL(EVP_CipherUpdate(x, out, &n, plain, (int)a->len));
    *outl = r ? (size_t)n : 0;
    return r;
}

/* ECB/CBC decryption whose last block is not valid padding. */
static int c_bad_padding(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                         unsigned char *out, size_t *outl, int *err)
{
    int n = 0, m = 0, r;

    static unsigned char *p, *in;
    EVP_CIPHER *d = api_fetch(g_env, EVP_CIPHER_get0_name(c), "default");
    size_t l;

    /* default's encryption, padding off, of a plaintext ending in 0x00:
     * not a valid padding byte */
    if (p == NULL) {
        p = malloc(BIG + 64);
        in = malloc(BIG + 64);
    }
    memcpy(p, plain, a->len);
    p[a->len - 1] = 0;
    CHECK(api_crypt(d, 1, key, iv, NULL, 0, p, a->len, in, &l, NULL, 0));
    EVP_CIPHER_free(d);
    if (!EVP_DecryptInit_ex2(x, c, key, iv, NULL) || !EVP_DecryptUpdate(x, out, &n, in, (int)a->len))
        return -1;
    *outl = (size_t)n;
    CALL(EVP_DecryptFinal_ex(x, out + n, &m));
    return r;
}

/* A partial last block with padding off. */
static int c_partial_nopad(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                           unsigned char *out, size_t *outl, int *err)
{
    int n = 0, m = 0, r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL) || !EVP_CIPHER_CTX_set_padding(x, 0)
        || !EVP_CipherUpdate(x, out, &n, a->enc ? plain : ct, (int)a->len))
        return -1;
    *outl = (size_t)n;
    CALL(EVP_CipherFinal_ex(x, out + n, &m));
    return r;
}

/* GCM, after the interesting call: data, final, tag, each call's result
 * appended to out so that run_case compares them call by call. */
static void gcm_follow(EVP_CIPHER_CTX *x, const unsigned char *in, size_t len, int enc,
                       unsigned char *out, size_t *outl)
{
    unsigned char t[16] = { 0 };
    int n = 0, m = 0, r[3];

    r[0] = EVP_CipherUpdate(x, out + *outl, &n, in, (int)len) > 0;
    *outl += r[0] ? (size_t)n : 0;
    r[1] = EVP_CipherFinal_ex(x, out + *outl, &m) > 0;
    *outl += r[1] ? (size_t)m : 0;
    r[2] = enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, t) > 0;
    for (int i = 0; i < 3; i++)
        out[(*outl)++] = (unsigned char)r[i];
    memcpy(out + *outl, t, 16);
    *outl += 16;
    ERR_clear_error();
}

/* GCM set_params that default applies in part, then refuses (issue 19 item 2):
 * n 0: [ivlen 16, a bad tlsivfixed]; 1: [ivlen 16, tlsaad not an octet string];
 * 2 (decrypting): [the right tag, ivlen 0]; 3: n 0's as an init's params, after
 * data. */
static int c_gcm_params_partial(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                                unsigned char *out, size_t *outl, int *err)
{
    unsigned char good[16], fixed[2] = { 1, 2 };
    const unsigned char *in = a->enc ? plain : gcm_input(c, a->len, good);
    size_t l16 = 16, l0 = 0, notaad = 13;
    OSSL_PARAM p[3] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &l16), OSSL_PARAM_END,
                        OSSL_PARAM_END };
    int r, n = 0;

    if (a->n == 0 || a->n == 3)
        p[1] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed, 2);
    else if (a->n == 1)
        p[1] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, &notaad);
    else {
        p[0] = OSSL_PARAM_construct_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, good, 16);
        p[1] = OSSL_PARAM_construct_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &l0);
    }
    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL)
        || (a->n == 3 && !EVP_CipherUpdate(x, out, &n, in, (int)a->len)))
        return -1;
    if (a->n == 3)
        CALL(EVP_CipherInit_ex2(x, NULL, NULL, NULL, a->enc, p));
    else
        CALL(EVP_CIPHER_CTX_set_params(x, p));
    *outl = (size_t)n;
    gcm_follow(x, in, a->len, a->enc, out, outl);
    return r;
}

/* GCM update with in NULL and a length: a final for default (issue 19 item 3).
 * n 0: first thing after init; 1: after data; 2: out NULL too (the AAD form). */
static int c_gcm_null_in(EVP_CIPHER_CTX *x, const EVP_CIPHER *c, const case_arg *a,
                         unsigned char *out, size_t *outl, int *err)
{
    unsigned char good[16];
    const unsigned char *in = a->enc ? plain : gcm_input(c, a->len, good);
    int n = 0, r;

    if (!EVP_CipherInit_ex2(x, c, key, iv, a->enc, NULL)
        || (a->n == 1 && !EVP_CipherUpdate(x, out, &n, in, (int)a->len))
        || (!a->enc && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, good) <= 0))
        return -1;
    *outl = (size_t)n;
    n = -1;
    CALL(EVP_CipherUpdate(x, a->n == 2 ? NULL : out + *outl, &n, NULL, (int)a->len));
    out[(*outl)++] = (unsigned char)n;
    gcm_follow(x, in, a->len, a->enc, out, outl);
    return r;
}

/* ---- NULL output with a non-GCM cipher: default crashes, so gpuaes runs alone, in a child ---- */

static void null_output(test_env *env)
{
    static const size_t lens[] = { 16, 64, 4096, BIG };
    char cases[8192] = "", *last;
    ssize_t got = 0, r;
    int fd[2], status;
    pid_t pid;

    /* The child names each case on a pipe before trying it: after a crash
     * the parent knows which one. */
    CHECK(pipe(fd) == 0);
    fflush(NULL);
    pid = fork();
    if (pid == 0) {
        int bad = 0;

        close(fd[0]);
        alarm(60);
        for (int i = 0; i < API_NCIPHERS - 3; i++) {
            EVP_CIPHER *c = api_fetch(env, api_ciphers[i], "gpuaes");

            for (int enc = 0; enc < 2; enc++)
                for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
                    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
                    int n = -1, ret;

                    dprintf(fd[1], "%s %s %zu bytes\n", api_ciphers[i], enc ? "enc" : "dec", lens[k]);
                    EVP_CipherInit_ex2(x, c, key, iv, enc, NULL);
                    ERR_clear_error();
                    ret = EVP_CipherUpdate(x, NULL, &n, plain, (int)lens[k]);
                    if (ret > 0 || ERR_peek_error() == 0) {
                        fprintf(stderr, "%s %s %zu bytes to a NULL output: returned %d, %s error\n",
                                api_ciphers[i], enc ? "enc" : "dec", lens[k], ret,
                                ERR_peek_error() ? "an" : "no");
                        bad = 1;
                    }
                    EVP_CIPHER_CTX_free(x);
                }
            EVP_CIPHER_free(c);
        }
        _exit(bad);
    }
    close(fd[1]);
    CHECK(pid > 0);
    if (pid <= 0)
        return;
    while (got < (ssize_t)sizeof(cases) - 1 && (r = read(fd[0], cases + got, sizeof(cases) - 1 - got)) > 0)
        got += r;
    cases[got] = '\0';
    close(fd[0]);
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status)) {
        if (got > 0 && cases[got - 1] == '\n')
            cases[got - 1] = '\0';
        last = strrchr(cases, '\n');
        fprintf(stderr, "update to a NULL output crashed gpuaes (signal %d) at: %s\n",
                WTERMSIG(status), last ? last + 1 : cases);
    }
    CHECKF(WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "update to a NULL output (non-GCM) is not a clean failure");
}

static void for_ciphers(test_env *env, int first, int last, const char *what, case_fn *f,
                        const int *ns, size_t nn, const size_t *lens, size_t nl, int dirs)
{
    for (int i = first; i <= last; i++)
        for (int enc = 1; enc >= 0; enc--) {
            if (!(dirs & (enc ? 1 : 2)))
                continue;
            for (size_t k = 0; k < nn; k++)
                for (size_t l = 0; l < nl; l++) {
                    case_arg a = { ns[k], lens[l], enc };

                    run_case(env, api_ciphers[i], what, f, &a);
                }
        }
}

int main(int argc, char **argv)
{
    static const int keylens[] = { 0, 1, 15, 17, 16, 24, 32, 64, -1 };
    static const int ivlens[] = { 0, 8, 15, 17, 32, -1 };
    static const int gcm_ivlens[] = { 0, 1, 12, 128, 129, 1000, -1 };
    static const int taglens[] = { 0, 1, 4, 16, 17, 32, -1 };
    static const int zero[] = { 0 }, after[] = { 0, 1, 2 };
    static const size_t lens[] = { 64, BIG }, small[] = { 64 }, partial[] = { 20, BIG + 5 };
    test_env env;

    g_env = &env;
    if (!test_env_open(&env))
        return 1;
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0)
        test_require_gpu(&env);
    test_seed(7);
    plain = malloc(BIG + 64);
    ct = malloc(BIG + 64);
    outbuf[0] = malloc(2 * BIG + 256);
    outbuf[1] = malloc(2 * BIG + 256);
    test_rand_bytes(plain, BIG + 64);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(ct, BIG + 64);     /* "ciphertext" for stream modes and no-tag cases */

    for_ciphers(&env, 0, API_NCIPHERS - 1, "set_key_length", c_set_keylen, keylens,
                sizeof(keylens) / sizeof(keylens[0]), small, 1, 3);
    for_ciphers(&env, 0, API_NCIPHERS - 1, "keylen param at init", c_keylen_param, keylens,
                sizeof(keylens) / sizeof(keylens[0]), small, 1, 3);
    for_ciphers(&env, 0, API_NCIPHERS - 4, "set ivlen", c_ivlen, ivlens,
                sizeof(ivlens) / sizeof(ivlens[0]), small, 1, 3);
    for_ciphers(&env, 0, API_NCIPHERS - 4, "ivlen param", c_ivlen_param, ivlens,
                sizeof(ivlens) / sizeof(ivlens[0]), small, 1, 3);
    {   /* the limit, as default has it (the cases below hold gpuaes to it) */
        EVP_CIPHER *g = api_fetch(&env, "AES-128-GCM", "default");
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
        int ok128, ok129;

        EVP_EncryptInit_ex2(x, g, NULL, NULL, NULL);
        ok128 = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_IVLEN, 128, NULL) > 0;
        ok129 = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_IVLEN, 129, NULL) > 0;
        printf("default GCM ivlen: 128 %s, 129 %s\n", ok128 ? "accepted" : "refused",
               ok129 ? "accepted" : "refused");
        ERR_clear_error();
        EVP_CIPHER_CTX_free(x);
        EVP_CIPHER_free(g);
    }
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm set ivlen", c_ivlen, gcm_ivlens,
                sizeof(gcm_ivlens) / sizeof(gcm_ivlens[0]), lens, 2, 3);
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm ivlen param", c_ivlen_param,
                gcm_ivlens, sizeof(gcm_ivlens) / sizeof(gcm_ivlens[0]), small, 1, 3);
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm set tag", c_set_tag, taglens,
                sizeof(taglens) / sizeof(taglens[0]), small, 1, 3);
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm get tag", c_get_tag, taglens,
                sizeof(taglens) / sizeof(taglens[0]), lens, 2, 3);
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm decrypt final without tag",
                c_final_no_tag, zero, 1, lens, 2, 2);
    for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm after final", c_after_final,
                after, 3, lens, 2, 3);
    {
        static const int partial_params[] = { 0, 1, 2, 3 }, null_in[] = { 0, 1, 2 };
        uint64_t errors = test_gpu_errors(&env);

        for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm params applied in part",
                    c_gcm_params_partial, partial_params, 4, lens, 2, 3);
        for_ciphers(&env, API_NCIPHERS - 3, API_NCIPHERS - 1, "gcm update with in NULL",
                    c_gcm_null_in, null_in, 3, lens, 2, 3);
        CHECKF(test_gpu_errors(&env) == errors, "gcm: %llu GPU errors counted",
               (unsigned long long)(test_gpu_errors(&env) - errors));
    }
    for_ciphers(&env, 0, API_NCIPHERS - 1, "update without key", c_no_key, zero, 1, lens, 2, 3);
    for_ciphers(&env, 0, 5, "bad padding at final", c_bad_padding, zero, 1, lens, 2, 2);
    for_ciphers(&env, 0, 5, "partial block, padding off", c_partial_nopad, zero, 1, partial, 2, 3);
    null_output(&env);

    free(plain);
    free(ct);
    free(outbuf[0]);
    free(outbuf[1]);
    test_env_close(&env);
    return test_report("bad_input");
}
