/*
 * test_params_ctx.c - a context of gpuaes and one of default go through the
 * same script (init, odd-sized updates, set num, padding off, re-init with a
 * NULL key or a NULL IV, copy mid-stream, final); after every step the results,
 * the output and the context parameters must agree.
 */
#include "test_params.h"
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

enum { S_INIT, S_INIT2, S_REINIT_NOKEY, S_REINIT_NOIV, S_AAD, S_UPD, S_SETNUM,
       S_PAD, S_NOPAD, S_COPY, S_FINAL };
static const char *const step_names[] = { "init", "init2", "reinit(NULL key)",
    "reinit(NULL iv)", "aad", "update", "set_num", "padding on", "padding off",
    "copy", "final" };

/* n: bytes for aad/update, the value for set_num, the tag length for final. */
static const struct step { int k; size_t n; } script[] = {
    /* 8272 = 517 blocks in all, so the padding-off final succeeds */
    { S_INIT, 0 }, { S_AAD, 13 }, { S_UPD, 1 }, { S_UPD, 15 }, { S_UPD, 17 }, { S_UPD, 33 },
    { S_UPD, 4101 }, { S_SETNUM, 5 }, { S_UPD, 4103 }, { S_NOPAD, 0 }, { S_UPD, 2 }, { S_FINAL, 16 },
    /* new IV, same key; the copy replaces the context, the original is freed */
    { S_REINIT_NOKEY, 0 }, { S_PAD, 0 }, { S_AAD, 5 }, { S_UPD, 100 }, { S_COPY, 0 },
    { S_UPD, 3 }, { S_UPD, 64 }, { S_FINAL, 12 },
    /* new key, IV as the last operation left it */
    { S_REINIT_NOIV, 0 }, { S_UPD, 50 }, { S_NOPAD, 0 }, { S_UPD, 14 }, { S_FINAL, 16 },
    /* partial block with padding off: final fails for ECB/CBC */
    { S_INIT2, 0 }, { S_UPD, 20 }, { S_NOPAD, 0 }, { S_FINAL, 16 },
};
#define NSTEPS (sizeof(script) / sizeof(script[0]))
#define MAXFIN 8
#define BUFSZ 16384

typedef struct {
    const char *cname;
    int enc, gcm;
    EVP_CIPHER *c[2];              /* [0] default, [1] gpuaes */
    EVP_CIPHER_CTX *x[2];
    const unsigned char *in;       /* input stream */
    size_t inpos;
    size_t segend[MAXFIN];         /* decryption: where each encrypted segment ended */
    unsigned char *out[2];
    size_t outpos[2];
    unsigned char tags[MAXFIN][16];
    int nfinal;
} run_t;

static unsigned char key1[32], key2[32], key3[32], iv1[16], iv2[16], iv3[16], aad[64];

typedef struct {
    const run_t *r;
    const char *where;
} ctx_report_arg;

static void report_ctx_param(const char *key, void *varg)
{
    const ctx_report_arg *c = varg;

    fprintf(stderr, "%s %s %s: ctx param %s differs\n", c->r->cname,
            c->r->enc ? "enc" : "dec", c->where, key);
    check_failed(__FILE__, __LINE__, "ctx param");
}

static void compare_ctx_params(run_t *r, const char *where)
{
    ctx_report_arg arg = { r, where };

    (void)pv_ctx_differences(r->x[0], r->x[1], report_ctx_param, &arg);
}

/* One update on both sides (decryption: the rest of a segment before final). */
static void both_update(run_t *r, const unsigned char *in, size_t n, int aad_only,
                        int ret[2], int err[2])
{
    for (int j = 0; j < 2; j++) {
        int ol = 0;

        ret[j] = EVP_CipherUpdate(r->x[j], aad_only ? NULL : r->out[j] + r->outpos[j], &ol,
                                  in, (int)n) > 0;
        err[j] = api_take_error();
        if (ret[j] && !aad_only)
            r->outpos[j] += (size_t)ol;
    }
}

static void do_step(run_t *r, int i)
{
    const struct step *s = &script[i];
    int ret[2] = { 1, 1 }, err[2] = { 0, 0 };
    size_t before[2] = { r->outpos[0], r->outpos[1] }, n = s->n;
    char where[96];

    snprintf(where, sizeof(where), "step %d (%s %zu)", i, step_names[s->k], s->n);
    if (!r->enc && s->k == S_UPD && r->nfinal < MAXFIN && r->inpos + n > r->segend[r->nfinal])
        n = r->segend[r->nfinal] - r->inpos;     /* stay inside this segment's ciphertext */
    if (!r->enc && s->k == S_FINAL && r->inpos < r->segend[r->nfinal]) {
        both_update(r, r->in + r->inpos, r->segend[r->nfinal] - r->inpos, 0, ret, err);
        r->inpos = r->segend[r->nfinal];
    }
    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX *x = r->x[j], *y;
        int ol = 0;

        switch (s->k) {
        case S_INIT:
            ret[j] = EVP_CipherInit_ex2(x, r->c[j], key1, iv1, r->enc, NULL);
            break;
        case S_INIT2:
            ret[j] = EVP_CipherInit_ex2(x, r->c[j], key3, iv3, r->enc, NULL);
            break;
        case S_REINIT_NOKEY:
            ret[j] = EVP_CipherInit_ex2(x, NULL, NULL, iv2, r->enc, NULL);
            break;
        case S_REINIT_NOIV:
            ret[j] = EVP_CipherInit_ex2(x, NULL, key2, NULL, r->enc, NULL);
            break;
        case S_AAD:
            if (r->gcm) {
                ol = 0;
                ret[j] = EVP_CipherUpdate(x, NULL, &ol, aad, (int)n);
                CHECKF(!ret[j] || ol == (int)n, "%s %s: aad outl %d", r->cname, where, ol);
            }
            break;
        case S_UPD:
            ret[j] = EVP_CipherUpdate(x, r->out[j] + r->outpos[j], &ol, r->in + r->inpos, (int)n);
            if (ret[j] > 0)
                r->outpos[j] += (size_t)ol;
            break;
        case S_SETNUM:
            ret[j] = EVP_CIPHER_CTX_set_num(x, (int)n);
            break;
        case S_PAD:
        case S_NOPAD:
            ret[j] = EVP_CIPHER_CTX_set_padding(x, s->k == S_PAD);
            break;
        case S_COPY:
            y = EVP_CIPHER_CTX_new();
            ret[j] = EVP_CIPHER_CTX_copy(y, x);
            EVP_CIPHER_CTX_free(x);
            r->x[j] = y;
            break;
        case S_FINAL:
            if (r->gcm && !r->enc)
                ret[j] = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, (int)n, r->tags[r->nfinal]);
            if (ret[j] > 0)
                ret[j] = EVP_CipherFinal_ex(x, r->out[j] + r->outpos[j], &ol);
            if (ret[j] > 0)
                r->outpos[j] += (size_t)ol;
            break;
        }
        ret[j] = ret[j] > 0;
        err[j] |= api_take_error();
    }
    if (s->k == S_UPD)
        r->inpos += n;
    CHECKF(ret[0] == ret[1], "%s %s %s: default returned %d, gpuaes %d", r->cname,
           r->enc ? "enc" : "dec", where, ret[0], ret[1]);
    CHECKF(ret[0] || !err[0] || err[1], "%s %s %s: default failed with an error, gpuaes without",
           r->cname, r->enc ? "enc" : "dec", where);
    CHECKF(r->outpos[0] - before[0] == r->outpos[1] - before[1]
           && memcmp(r->out[0] + before[0], r->out[1] + before[1], r->outpos[0] - before[0]) == 0,
           "%s %s %s: output differs (%zu vs %zu bytes)", r->cname, r->enc ? "enc" : "dec",
           where, r->outpos[0] - before[0], r->outpos[1] - before[1]);
    if (s->k == S_FINAL) {
        if (r->enc && r->gcm && ret[0]) {
            unsigned char t[2][16];

            for (int j = 0; j < 2; j++)
                CHECK(EVP_CIPHER_CTX_ctrl(r->x[j], EVP_CTRL_AEAD_GET_TAG, (int)n, t[j]) > 0);
            CHECKF(memcmp(t[0], t[1], n) == 0, "%s %s: tag differs", r->cname, where);
            memcpy(r->tags[r->nfinal], t[0], n);
        }
        if (r->enc && r->nfinal < MAXFIN)
            r->segend[r->nfinal] = r->outpos[0];
        r->nfinal++;
    }
    compare_ctx_params(r, where);
}

static void run_script(test_env *env, const char *cname, int enc, const unsigned char *in,
                       run_t *prev)
{
    run_t r;

    memset(&r, 0, sizeof(r));
    r.cname = cname;
    r.enc = enc;
    r.in = in;
    for (int j = 0; j < 2; j++) {
        r.c[j] = api_fetch(env, cname, j ? "gpuaes" : "default");
        r.x[j] = EVP_CIPHER_CTX_new();
        r.out[j] = calloc(1, BUFSZ);
    }
    r.gcm = EVP_CIPHER_get_mode(r.c[0]) == EVP_CIPH_GCM_MODE;
    if (!enc) {              /* decrypt what the encryption run produced */
        memcpy(r.segend, prev->segend, sizeof(r.segend));
        memcpy(r.tags, prev->tags, sizeof(r.tags));
    }
    for (size_t i = 0; i < NSTEPS; i++)
        do_step(&r, (int)i);
    if (enc) {
        memcpy(prev->segend, r.segend, sizeof(r.segend));
        memcpy(prev->tags, r.tags, sizeof(r.tags));
        prev->out[0] = r.out[0];                 /* handed over, freed by the caller */
        r.out[0] = NULL;
    }
    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX_free(r.x[j]);
        EVP_CIPHER_free(r.c[j]);
        free(r.out[j]);
    }
}

/* The copy and the original both continue exactly like default would. */
static void check_copy_both(test_env *env, const char *cname)
{
    EVP_CIPHER *cg = api_fetch(env, cname, "gpuaes"), *cd = api_fetch(env, cname, "default");
    int gcm = EVP_CIPHER_get_mode(cg) == EVP_CIPH_GCM_MODE;
    unsigned char in[1040], ref[1040], ct[1040], o1[1040], o2[1040], tag[16], t1[16], t2[16];
    size_t rl = 0, cl = 0;

    test_rand_bytes(in, sizeof(in));
    CHECK(api_crypt(cd, 1, key1, iv1, aad, 20, in, sizeof(in), ct, &cl, tag, 0));
    for (int enc = 1; enc >= 0; enc--) {
        const unsigned char *src = enc ? in : ct;
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(), *y = EVP_CIPHER_CTX_new();
        int n1 = 0, n2 = 0, m1 = 0, m2 = 0, ok = 1, a = 0;

        memcpy(ref, enc ? ct : in, sizeof(ref));
        rl = sizeof(ref);
        ok &= EVP_CipherInit_ex2(x, cg, key1, iv1, enc, NULL);
        EVP_CIPHER_CTX_set_padding(x, 0);
        if (gcm)
            ok &= EVP_CipherUpdate(x, NULL, &a, aad, 20);
        ok &= EVP_CipherUpdate(x, o1, &n1, src, 37);
        ok &= EVP_CIPHER_CTX_copy(y, x);
        memcpy(o2, o1, (size_t)n1);
        n2 = n1;
        ok &= EVP_CipherUpdate(x, o1 + n1, &m1, src + 37, 1003);
        n1 += m1;
        ok &= EVP_CipherUpdate(y, o2 + n2, &m2, src + 37, 1003);
        n2 += m2;
        if (gcm && !enc)
            ok &= EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag)
                  & EVP_CIPHER_CTX_ctrl(y, EVP_CTRL_AEAD_SET_TAG, 16, tag);
        ok &= EVP_CipherFinal_ex(x, o1 + n1, &m1);
        n1 += m1;
        ok &= EVP_CipherFinal_ex(y, o2 + n2, &m2);
        n2 += m2;
        CHECKF(ok, "%s %s: copy sequence failed", cname, enc ? "enc" : "dec");
        CHECKF((size_t)n1 == rl && memcmp(o1, ref, rl) == 0, "%s %s: original after copy differs",
               cname, enc ? "enc" : "dec");
        CHECKF((size_t)n2 == rl && memcmp(o2, ref, rl) == 0, "%s %s: copy differs", cname,
               enc ? "enc" : "dec");
        if (gcm && enc) {
            CHECK(EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, t1) > 0);
            CHECK(EVP_CIPHER_CTX_ctrl(y, EVP_CTRL_AEAD_GET_TAG, 16, t2) > 0);
            CHECKF(memcmp(t1, tag, 16) == 0 && memcmp(t2, tag, 16) == 0, "%s: tag after copy", cname);
        }
        EVP_CIPHER_CTX_free(x);
        EVP_CIPHER_CTX_free(y);
    }
    ERR_clear_error();
    EVP_CIPHER_free(cg);
    EVP_CIPHER_free(cd);
}

void gcm_extra_tests(test_env *env);   /* test_params_gcm.c */

void params_ctx_tests(test_env *env)
{
    unsigned char *plain = malloc(BUFSZ);

    test_rand_bytes(plain, BUFSZ);
    test_rand_bytes(key1, 32);
    test_rand_bytes(key2, 32);
    test_rand_bytes(key3, 32);
    test_rand_bytes(iv1, 16);
    test_rand_bytes(iv2, 16);
    test_rand_bytes(iv3, 16);
    test_rand_bytes(aad, sizeof(aad));
    /* Start CTR near a 2^32 and a 2^64 wrap of the counter. */
    memset(iv1 + 8, 0xff, 8);
    iv1[15] = 0xf0;
    memset(iv2 + 12, 0xff, 4);
    iv2[15] = 0xfe;
    for (int i = 0; i < API_NCIPHERS; i++) {
        run_t encrun;

        memset(&encrun, 0, sizeof(encrun));
        run_script(env, api_ciphers[i], 1, plain, &encrun);
        run_script(env, api_ciphers[i], 0, encrun.out[0], &encrun);
        free(encrun.out[0]);
        check_copy_both(env, api_ciphers[i]);
    }
    gcm_extra_tests(env);
    free(plain);
}
