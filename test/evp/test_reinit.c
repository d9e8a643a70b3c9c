/*
 * test_reinit.c - re-initialisation and init orders, gpuaes against the
 * default provider, step by step (return codes, output lengths and bytes,
 * tags).
 *
 * Block modes (ECB, CBC, CFB, CTR; every key size; padding on and off for
 * ECB/CBC): init, two updates (one across the threshold), then a re-init with
 * key NULL / same / different, IV NULL / given, direction same / flipped / -1,
 * updates of 16 B, 4 KiB + 5, 64 KiB, 300000 B and final, then a re-init back
 * to the first direction without a key and the same updates.  A re-init
 * without a key keeps the default provider's key schedule, which ECB and CBC
 * build for one direction only: while the direction differs from the
 * schedule's, the output is the default provider's, whatever it is, so
 * gpuaes must not offload.  Also a re-init and a set_params that the default
 * provider refuses part-way (padding applied, then a malformed num).
 *
 * GCM: init orders (IV before key as `openssl speed` does, key before IV, IV
 * length set in between, re-key or new IV at each point of a message, data
 * or AAD before the key, a re-key refused in its parameters) with 3 updates
 * of D bytes, encryption and decryption.
 *
 * Run with GPUAES_OFFLOAD_MIN_BYTES=4096 GPUAES_DISPATCH=force.  --gpu: a GPU is required and
 * gpu-bytes must grow exactly where the GPU may be used (GCM: by the data
 * size) and not elsewhere.  --gcm: only GCM.  --gcm-default: only GCM,
 * D = 16 MiB, AES-128.  --dispatched: the thresholds are the defaults, so the
 * dispatcher chooses per call (measuring the CPU first, declining a slower
 * GPU): gpu-bytes may grow less, never more.
 */
#include "api_util.h"
#include "kat_diff_op.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static test_env env;
static int gpu;                       /* --gpu: check where the GPU was used */
static int dispatched;                /* --dispatched: the GPU may take less than it could */
static char desc[200];

/* ---- two contexts fed the same calls: [0] gpuaes, [1] default ---- */

typedef struct {
    EVP_CIPHER *c[2];
    EVP_CIPHER_CTX *x[2];
    unsigned char *out[2];
} pair;

static void pair_new(pair *p, const char *name, size_t maxlen)
{
    p->c[0] = api_fetch(&env, name, "gpuaes");
    p->c[1] = api_fetch(&env, name, "default");
    for (int j = 0; j < 2; j++) {
        p->x[j] = EVP_CIPHER_CTX_new();
        p->out[j] = malloc(maxlen + 32);
        if (p->x[j] == NULL || p->out[j] == NULL)
            exit(1);
    }
}

static void pair_free(pair *p)
{
    for (int j = 0; j < 2; j++) {
        EVP_CIPHER_CTX_free(p->x[j]);
        EVP_CIPHER_free(p->c[j]);
        free(p->out[j]);
    }
    ERR_clear_error();
}

/* Both return codes equal; returns it. */
static int same_rc(int r0, int r1, const char *what)
{
    CHECKF(r0 == r1, "%s: %s: gpuaes %d, default %d", desc, what, r0, r1);
    ERR_clear_error();
    return r0 && r1;
}

static int pair_init(pair *p, int with_cipher, const unsigned char *key,
                     const unsigned char *iv, int enc)
{
    int r[2];

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherInit_ex2(p->x[j], with_cipher ? p->c[j] : NULL, key, iv, enc, NULL);
    return same_rc(r[0], r[1], "init");
}

static int pair_ctrl(pair *p, int type, int arg, void *ptr, const char *what)
{
    int r[2];

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CIPHER_CTX_ctrl(p->x[j], type, arg, ptr) > 0;
    return same_rc(r[0], r[1], what);
}

/* One update (out NULL: AAD); the outputs must agree. */
static int pair_update(pair *p, const unsigned char *in, size_t len, int aad)
{
    int r[2], n[2] = { 0, 0 };

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherUpdate(p->x[j], aad ? NULL : p->out[j], &n[j], in, (int)len);
    if (!same_rc(r[0], r[1], aad ? "aad" : "update"))
        return 0;
    CHECKF(n[0] == n[1] && (aad || memcmp(p->out[0], p->out[1], (size_t)n[0]) == 0),
           "%s: update of %zu: output differs (%d / %d bytes)", desc, len, n[0], n[1]);
    return 1;
}

static int pair_final(pair *p)
{
    int r[2], n[2] = { 0, 0 };

    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherFinal_ex(p->x[j], p->out[j], &n[j]);
    if (!same_rc(r[0], r[1], "final"))
        return 0;
    CHECKF(n[0] == n[1] && memcmp(p->out[0], p->out[1], (size_t)n[0]) == 0,
           "%s: final: output differs (%d / %d bytes)", desc, n[0], n[1]);
    return 1;
}

/* ---- block modes ---- */

static const size_t sizes[] = { 16, 4 * KiB + 5, 64 * KiB, 300000 };
#define MAXLEN 300000

typedef enum { K_NULL, K_SAME, K_OTHER } key_choice;
typedef enum { D_SAME, D_FLIP, D_KEEP } dir_choice;   /* D_KEEP: enc = -1 */

/* Updates of every size, then final; returns the bytes the GPU took. */
static uint64_t block_run(pair *p, const unsigned char *in)
{
    uint64_t before = test_gpu_bytes(&env);

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
        pair_update(p, in, sizes[i], 0);
    pair_final(p);
    return test_gpu_bytes(&env) - before;
}

static int gpu_capable(kd_mode mode, int enc)
{
    return mode == KD_ECB || mode == KD_CTR || !enc;
}

static void block_one(const kd_cipher *kc, int pad, int enc0, key_choice kch, int new_iv,
                      dir_choice dch, const unsigned char *in)
{
    unsigned char key[32], key2[32], iv[16], iv2[16];
    int enc1 = dch == D_FLIP ? !enc0 : enc0;
    /* The direction of the default provider's key schedule (ECB/CBC). */
    int sched = kch == K_NULL ? enc0 : enc1;
    int schedule_free = kc->mode == KD_CFB || kc->mode == KD_CTR;
    pair p;
    uint64_t used;

    snprintf(desc, sizeof(desc), "%s pad %d %s, re-init key %s iv %s dir %s", kc->name, pad,
             enc0 ? "enc" : "dec", kch == K_NULL ? "NULL" : kch == K_SAME ? "same" : "other",
             new_iv ? "new" : "NULL", dch == D_SAME ? "same" : dch == D_FLIP ? "flipped" : "-1");
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(key2, sizeof(key2));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(iv2, sizeof(iv2));
    pair_new(&p, kc->name, MAXLEN);
    pair_init(&p, 1, key, iv, enc0);
    for (int j = 0; pad == 0 && j < 2; j++)
        EVP_CIPHER_CTX_set_padding(p.x[j], 0);
    pair_update(&p, in, 5000, 0);     /* across the threshold: re-synchronised after */
    pair_update(&p, in + 5000, 37, 0);

    pair_init(&p, 0, kch == K_NULL ? NULL : kch == K_SAME ? key : key2, new_iv ? iv2 : NULL,
              dch == D_KEEP ? -1 : enc1);
    used = block_run(&p, in);
    if (gpu) {
        int want = gpu_capable(kc->mode, enc1) && (schedule_free || sched == enc1);

        CHECKF(want ? used > 0 : used == 0, "%s: GPU took %llu bytes", desc,
               (unsigned long long)used);
    }

    /* Back to the first direction, still without a key. */
    strncat(desc, ", back", sizeof(desc) - strlen(desc) - 1);
    pair_init(&p, 0, NULL, new_iv ? iv : NULL, enc0);
    used = block_run(&p, in);
    if (gpu) {
        int want = gpu_capable(kc->mode, enc0) && (schedule_free || sched == enc0);

        CHECKF(want ? used > 0 : used == 0, "%s: GPU took %llu bytes", desc,
               (unsigned long long)used);
    }
    pair_free(&p);
}

/*
 * A re-init that fails in its parameters (padding off, then a malformed num)
 * after the default provider took the direction, IV and key: both go on from
 * wherever that left them, then through a plain re-init (no key, no IV).
 */
static void block_failed_init(const kd_cipher *kc, int enc0, int with_key, int with_iv, int flip,
                              const unsigned char *in)
{
    unsigned char key[32], key2[32], iv[16], iv2[16];
    unsigned int pad = 0;
    OSSL_PARAM params[3] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &pad),
                             OSSL_PARAM_utf8_string(OSSL_CIPHER_PARAM_NUM, "x", 1),
                             OSSL_PARAM_END };
    pair p;
    int r[2];

    snprintf(desc, sizeof(desc), "%s %s, failed re-init key %d iv %d flip %d", kc->name,
             enc0 ? "enc" : "dec", with_key, with_iv, flip);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(key2, sizeof(key2));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(iv2, sizeof(iv2));
    pair_new(&p, kc->name, MAXLEN);
    pair_init(&p, 1, key, iv, enc0);
    pair_update(&p, in, 5000, 0);
    pair_update(&p, in + 5000, 37, 0);
    for (int j = 0; j < 2; j++)
        r[j] = EVP_CipherInit_ex2(p.x[j], NULL, with_key ? key2 : NULL, with_iv ? iv2 : NULL,
                                  flip ? !enc0 : enc0, params);
    same_rc(r[0], r[1], "failing init");
    CHECKF(!r[1], "%s: the default provider took a malformed num", desc);
    block_run(&p, in);
    strncat(desc, ", then re-init", sizeof(desc) - strlen(desc) - 1);
    pair_init(&p, 0, NULL, NULL, -1);
    block_run(&p, in);
    pair_free(&p);
}

/* The same parameters through set_params, in the middle of a stream. */
static void block_failed_params(const kd_cipher *kc, int enc0, const unsigned char *in)
{
    unsigned char key[32], iv[16];
    unsigned int pad = 0;
    OSSL_PARAM params[3] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &pad),
                             OSSL_PARAM_utf8_string(OSSL_CIPHER_PARAM_NUM, "x", 1),
                             OSSL_PARAM_END };
    pair p;
    int r[2];

    snprintf(desc, sizeof(desc), "%s %s, failed set_params", kc->name, enc0 ? "enc" : "dec");
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    pair_new(&p, kc->name, MAXLEN);
    pair_init(&p, 1, key, iv, enc0);
    pair_update(&p, in, 5000, 0);
    pair_update(&p, in + 5000, 37, 0);
    for (int j = 0; j < 2; j++)
        r[j] = EVP_CIPHER_CTX_set_params(p.x[j], params);
    same_rc(r[0], r[1], "failing set_params");
    block_run(&p, in);
    pair_free(&p);
}

static void block_all(void)
{
    unsigned char *in = malloc(MAXLEN);

    test_rand_bytes(in, MAXLEN);
    for (size_t ci = 0; ci < KD_NCIPHERS; ci++) {
        const kd_cipher *kc = &kd_ciphers[ci];

        if (kc->mode == KD_GCM)
            continue;
        for (int pad = !kd_is_block_mode(kc->mode); pad <= 1; pad++)
            for (int enc0 = 0; enc0 <= 1; enc0++)
                for (int k = K_NULL; k <= K_OTHER; k++)
                    for (int v = 0; v <= 1; v++)
                        for (int d = D_SAME; d <= D_KEEP; d++)
                            block_one(kc, pad, enc0, k, v, d, in);
        if (kc->keylen == 16)
            for (int f = 0; f < 16; f++) {
                block_failed_init(kc, f & 1, f >> 1 & 1, f >> 2 & 1, f >> 3, in);
                if (f < 2)
                    block_failed_params(kc, f, in);
            }
    }
    free(in);
}

/* ---- GCM init orders ---- */

enum { S_END, S_INIT, S_BADINIT, S_IVLEN, S_AAD, S_DATA, S_FINAL };

typedef struct {
    unsigned char op;                 /* S_BADINIT: S_INIT with a 17-byte tag (refused) */
    unsigned char key, iv;            /* S_INIT: 0 = NULL, 1 / 2 = first / second */
    signed char dir;                  /* S_INIT: 1 = the order's direction, -1 = keep */
    unsigned short n;                 /* S_IVLEN: the IV length; S_AAD: bytes */
} gstep;

typedef struct {
    const char *name;
    int gpu_parts;                    /* data updates the GPU must take */
    int big;                          /* also run with --gcm-default */
    gstep s[12];
} gorder;

#define I(k, v, d) { S_INIT, k, v, d, 0 }
#define L(n) { S_IVLEN, 0, 0, 0, n }
#define A(n) { S_AAD, 0, 0, 0, n }
#define D { S_DATA, 0, 0, 0, 0 }
#define F { S_FINAL, 0, 0, 0, 0 }
#define E 1
#define K -1

static const gorder orders[] = {
    { "key and IV at once", 3, 1, { I(1, 1, E), A(300), D, D, D, F } },
    { "IV, then key (openssl speed)", 3, 1, { I(0, 1, E), I(1, 0, K), D, D, D, F } },
    { "key, then IV", 3, 1, { I(1, 0, E), I(0, 1, K), D, D, D, F } },
    { "IV length, then key and IV", 3, 0, { I(0, 0, E), L(16), I(1, 1, K), A(20), D, D, D, F } },
    { "IV length, IV, then key", 3, 0, { I(0, 0, E), L(16), I(0, 1, K), I(1, 0, E), D, D, D, F } },
    { "IV, IV length (voids it), key: refused", 0, 1, { I(0, 1, E), L(16), I(1, 0, K), D, D, D, F } },
    { "IV, new IV, key", 3, 0, { I(0, 1, E), I(0, 2, K), I(1, 0, K), A(7), D, D, D, F } },
    { "key and IV, re-key before any data", 3, 0, { I(1, 1, E), I(2, 0, K), A(300), D, D, D, F } },
    { "re-key after AAD: the message goes on, state zeroed", 0, 0,
      { I(1, 1, E), A(20), I(2, 0, K), D, D, D, F } },
    { "new IV after AAD: a new message", 3, 0, { I(1, 1, E), A(20), I(0, 2, K), D, D, D, F } },
    { "data before the key: refused, the IV stays", 3, 0,
      { I(0, 1, E), D, I(1, 0, K), D, D, D, F } },
    { "AAD before the key: refused", 3, 0, { I(0, 1, E), A(20), I(1, 0, K), A(20), D, D, D, F } },
    { "re-key in the middle of a GPU message", 1, 0, { I(1, 1, E), D, I(2, 0, K), D, D, F } },
    { "finished, re-key: refused", 1, 0, { I(1, 1, E), D, F, I(2, 0, K), D, D, F } },
    { "finished, new IV", 3, 0, { I(1, 1, E), D, F, I(0, 2, E), D, D, F } },
    { "finished, re-key, new IV", 3, 0, { I(1, 1, E), D, F, I(2, 0, K), I(0, 2, K), D, D, F } },
    /* the default provider takes the new key, then refuses the parameter */
    { "re-key failing in its parameters", 0, 0,
      { I(1, 1, E), { S_BADINIT, 2, 0, K, 0 }, D, D, D, F } },
};

#define MAXDATA 4
#define MAXFINAL 2

/* Keys, IVs, AAD and plaintext of one order, the same in both directions. */
typedef struct {
    unsigned char keys[3][32], ivs[3][16], aad[300];
    unsigned char *pt;
    unsigned char *ct[MAXDATA];       /* the default provider's outputs of encryption */
    unsigned char tags[MAXFINAL][16]; /* and its tags */
} gdata;

/* One order in one direction; decryption gets encryption's outputs and tags. */
static void gcm_order(const char *name, const gorder *o, int enc, size_t dlen, gdata *g)
{
    size_t ndata = 0, nfinal = 0;
    uint64_t before = test_gpu_bytes(&env);
    pair p;

    snprintf(desc, sizeof(desc), "%s %s: %s", name, enc ? "enc" : "dec", o->name);
    pair_new(&p, name, dlen);
    for (const gstep *s = o->s; s->op != S_END; s++) {
        switch (s->op) {
        case S_INIT:
            pair_init(&p, s == o->s, s->key ? g->keys[s->key] : NULL,
                      s->iv ? g->ivs[s->iv] : NULL, s->dir < 0 ? -1 : enc);
            break;
        case S_BADINIT: {
            unsigned char tag[17] = { 0 };
            OSSL_PARAM bad[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag,
                                                          sizeof(tag)),
                                  OSSL_PARAM_END };
            int r[2];

            for (int j = 0; j < 2; j++)
                r[j] = EVP_CipherInit_ex2(p.x[j], NULL, s->key ? g->keys[s->key] : NULL,
                                          s->iv ? g->ivs[s->iv] : NULL, s->dir < 0 ? -1 : enc,
                                          bad);
            same_rc(r[0], r[1], "failing init");
            CHECKF(!r[1], "%s: the default provider took a 17-byte tag", desc);
            break;
        }
        case S_IVLEN:
            pair_ctrl(&p, EVP_CTRL_AEAD_SET_IVLEN, s->n, NULL, "ivlen");
            break;
        case S_AAD:
            pair_update(&p, g->aad, s->n, 1);
            break;
        case S_DATA:
            if (pair_update(&p, enc ? g->pt : g->ct[ndata], dlen, 0) && enc)
                memcpy(g->ct[ndata], p.out[1], dlen);
            ndata++;
            break;
        case S_FINAL:
            if (!enc)
                pair_ctrl(&p, EVP_CTRL_AEAD_SET_TAG, 16, g->tags[nfinal], "set tag");
            if (pair_final(&p) && enc) {
                unsigned char t[2][16];

                for (int j = 0; j < 2; j++)
                    EVP_CIPHER_CTX_ctrl(p.x[j], EVP_CTRL_AEAD_GET_TAG, 16, t[j]);
                CHECKF(memcmp(t[0], t[1], 16) == 0, "%s: tag differs", desc);
                memcpy(g->tags[nfinal], t[1], 16);
            }
            nfinal++;
            break;
        }
    }
    if (gpu) {
        uint64_t used = test_gpu_bytes(&env) - before;

        uint64_t want = (uint64_t)o->gpu_parts * dlen;

        CHECKF(dispatched ? used <= want : used == want, "%s: GPU took %llu bytes, want %s%llu",
               desc, (unsigned long long)used, dispatched ? "at most " : "",
               (unsigned long long)want);
    }
    pair_free(&p);
}

static void gcm_all(int big)
{
    static const char *const names[] = { "AES-128-GCM", "AES-192-GCM", "AES-256-GCM" };
    size_t dlen = big ? 16 * MiB : 64 * KiB;
    gdata *g = calloc(1, sizeof(*g));

    g->pt = malloc(dlen);
    for (int i = 0; i < MAXDATA; i++)
        g->ct[i] = calloc(1, dlen);
    for (size_t ni = 0; ni < (big ? 1 : 3); ni++)
        for (size_t oi = 0; oi < sizeof(orders) / sizeof(orders[0]); oi++) {
            if (big && !orders[oi].big)
                continue;
            test_rand_bytes(g->keys[0], sizeof(g->keys));
            test_rand_bytes(g->ivs[0], sizeof(g->ivs));
            test_rand_bytes(g->aad, sizeof(g->aad));
            test_rand_bytes(g->pt, dlen);
            memset(g->tags, 0, sizeof(g->tags));
            gcm_order(names[ni], &orders[oi], 1, dlen, g);
            gcm_order(names[ni], &orders[oi], 0, dlen, g);
        }
    for (int i = 0; i < MAXDATA; i++)
        free(g->ct[i]);
    free(g->pt);
    free(g);
}

int main(int argc, char **argv)
{
    int gcm_default = 0, gcm_only = 0;

    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0)
            gpu = 1;
        else if (strcmp(argv[i], "--gcm-default") == 0)
            gcm_default = gcm_only = 1;
        else if (strcmp(argv[i], "--gcm") == 0)
            gcm_only = 1;
        else if (strcmp(argv[i], "--dispatched") == 0)
            dispatched = 1;
    }
    test_seed(0x7265696e6974);
    if (!test_env_open(&env))
        return 1;
    if (gpu)
        test_require_gpu(&env);
    if (!gcm_only)
        block_all();
    gcm_all(gcm_default);
    test_env_close(&env);
    return test_report(gcm_default ? "reinit_gcm_default" : "reinit");
}
