/*
 * assumptions.c - the checks of provider/fallback_assumptions.h: each asks
 * the default provider, through the dispatch functions gpuaes calls
 * (gpuaes_variants' fallbacks), whether it behaves as gpuaes assumes.
 * AES-128 throughout; every check is a few blocks of work.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>

#include "gpuaes.h"
#include "gcm_math.h"
#include "fallback_assumptions.h"
#include "gpuaes_counter.h"

#define BLOCK 16

static const unsigned char K1[16] = "assume-key-one!";
static const unsigned char K2[16] = "assume-key-two!";
static const unsigned char IV1[16] = "assume-iv-one!!";
static const unsigned char IV2[16] = "assume-iv-two!!";

/* ---- helpers: each failure names what differed or which call failed ---- */

/* An expectation: counted, so that a test can invert the flip-th one. */
static int expect(assume_run *r, int ok, const char *what)
{
    if (++r->seen == r->flip)
        ok = !ok;
    if (!ok && r->why[0] == '\0')
        snprintf(r->why, sizeof(r->why), "%s", what);
    return ok;
}

/* A call the check needs to succeed (not an expectation: a broken setup). */
static int need(assume_run *r, int ok, const char *what)
{
    if (!ok && r->why[0] == '\0')
        snprintf(r->why, sizeof(r->why), "call failed: %s", what);
    return ok;
}

static const fallback_cipher *cipher(gpuaes_mode mode)
{
    for (size_t v = 0; v < gpuaes_variant_count; v++)
        if (gpuaes_variants[v].mode == mode && gpuaes_variants[v].keylen == 16)
            return gpuaes_variants[v].fallback;
    return NULL;
}

/* A context of the default provider's AES-128 in `mode`. */
typedef struct fbc {
    const fallback_cipher *fb;
    void *ctx;
    size_t ivlen;
} fbc;

static int open_ctx(assume_run *r, fbc *c, gpuaes_mode mode)
{
    c->fb = cipher(mode);
    c->ctx = c->fb != NULL ? c->fb->newctx(r->provctx) : NULL;
    c->ivlen = mode == MODE_GCM ? 12 : BLOCK;
    return need(r, c->ctx != NULL, "newctx");
}

static void close_ctx(fbc *c)
{
    if (c->ctx != NULL)
        c->fb->freectx(c->ctx);
    c->ctx = NULL;
}

static int init(fbc *c, int enc, const unsigned char *key, const unsigned char *iv)
{
    return (enc ? c->fb->einit : c->fb->dinit)(c->ctx, key, key != NULL ? 16 : 0, iv,
                                                iv != NULL ? c->ivlen : 0, NULL);
}

/* An update that must succeed; returns its outl (or SIZE_MAX on failure). */
static size_t upd(fbc *c, unsigned char *out, const unsigned char *in, size_t inl)
{
    size_t outl = 0;

    return c->fb->update(c->ctx, out, &outl, inl + BLOCK, in, inl) ? outl : SIZE_MAX;
}

static int get_uint(fbc *c, const char *key, unsigned int *v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(key, v), OSSL_PARAM_END };

    return c->fb->get_ctx_params(c->ctx, p);
}

static int set_uint(fbc *c, const char *key, unsigned int v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(key, &v), OSSL_PARAM_END };

    return c->fb->set_ctx_params(c->ctx, p);
}

static int get_block(fbc *c, const char *key, unsigned char b[BLOCK])
{
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(key, b, BLOCK), OSSL_PARAM_END };

    return c->fb->get_ctx_params(c->ctx, p);
}

static int gcm_tag(fbc *c, unsigned char *tag, size_t n)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, tag, n),
                        OSSL_PARAM_END };

    return c->fb->get_ctx_params(c->ctx, p);
}

static int gcm_set_tag(fbc *c, const unsigned char *tag, size_t n)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, (void *)tag, n),
                        OSSL_PARAM_END };

    return c->fb->set_ctx_params(c->ctx, p);
}

/* n bytes (a multiple of 16) through a fresh AES-128-ECB encryption. */
static int ecb(assume_run *r, const unsigned char *key, unsigned char *out,
               const unsigned char *in, size_t n)
{
    fbc e = { 0 };
    int ok = open_ctx(r, &e, MODE_ECB) && need(r, init(&e, 1, key, NULL), "ECB init")
        && need(r, upd(&e, out, in, n) == n, "ECB update");

    close_ctx(&e);
    return ok;
}

/* A fresh context of `mode` from (key, iv), n bytes of in. */
static int fresh(assume_run *r, gpuaes_mode mode, int enc, const unsigned char *key,
                 const unsigned char *iv, unsigned char *out, const unsigned char *in, size_t n)
{
    fbc f = { 0 };
    int ok = open_ctx(r, &f, mode) && need(r, init(&f, enc, key, iv), "init")
        && need(r, set_uint(&f, OSSL_CIPHER_PARAM_PADDING, 0) || mode == MODE_GCM, "padding")
        && need(r, upd(&f, out, in, n) == n, "update");

    close_ctx(&f);
    return ok;
}

/* out = in + n, gpuaes's own CTR counter arithmetic: the default provider
 * must count the same way. */
static void add128(unsigned char out[BLOCK], const unsigned char in[BLOCK], unsigned int n)
{
    memcpy(out, in, BLOCK);
    gpuaes_ctr128_add(out, n);
}

/* Deterministic test bytes. */
static void fill(unsigned char *p, size_t n, unsigned int seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((seed + i) * 167 + (i >> 3));
}

/* ---- block modes ---- */

static int check_REINIT_KEEPS_SCHEDULE(assume_run *r)
{
    static const gpuaes_mode modes[] = { MODE_CBC, MODE_CFB, MODE_CTR };
    unsigned char in[48], a[48], b[48];
    int ok = 1;

    fill(in, sizeof(in), 1);
    for (size_t m = 0; ok && m < sizeof(modes) / sizeof(modes[0]); m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, modes[m]) && need(r, init(&c, 0, K1, IV1), "keyed init")
            && need(r, init(&c, 0, NULL, IV2), "init without key")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 0), "padding")
            && need(r, upd(&c, a, in, sizeof(in)) == sizeof(in), "update")
            && fresh(r, modes[m], 0, K1, IV2, b, in, sizeof(in))
            && expect(r, memcmp(a, b, sizeof(a)) == 0, "init(key NULL) used another key");
        close_ctx(&c);
    }
    return ok;
}

static int check_INIT_RESETS_STREAM(assume_run *r)
{
    unsigned char in[48], a[48], b[48];
    unsigned int num = 99;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 2);
    /* ECB: 5 bytes buffered, then an init: 16 bytes are a block of their own. */
    ok = open_ctx(r, &c, MODE_ECB) && need(r, init(&c, 1, K1, NULL), "init")
        && need(r, upd(&c, a, in, 5) == 0, "update") && need(r, init(&c, 1, NULL, NULL), "re-init")
        && expect(r, upd(&c, a, in + 5, 16) == 16, "ECB: init kept buffered bytes")
        && ecb(r, K1, b, in + 5, 16)
        && expect(r, memcmp(a, b, 16) == 0, "ECB: init kept buffered bytes (output)");
    close_ctx(&c);
    /* CBC decryption: the held-back block is dropped. */
    ok = ok && open_ctx(r, &c, MODE_CBC) && need(r, init(&c, 0, K1, IV1), "init")
        && need(r, upd(&c, a, in, 32) == 16, "update")
        && need(r, init(&c, 0, NULL, IV1), "re-init")
        && expect(r, upd(&c, a, in, 32) == 16, "CBC: init kept the held block")
        && fresh(r, MODE_CBC, 0, K1, IV1, b, in, 16)
        && expect(r, memcmp(a, b, 16) == 0, "CBC: init kept the held block (output)");
    /* ECB and CBC: num back to 0. */
    ok = ok && need(r, set_uint(&c, OSSL_CIPHER_PARAM_NUM, 7), "set num")
        && need(r, init(&c, 0, NULL, IV1), "re-init")
        && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
        && expect(r, num == 0, "CBC: init kept num");
    close_ctx(&c);
    /* CTR and CFB: mid-block, then an init with a new IV: its block from the start. */
    for (gpuaes_mode m = MODE_CFB; ok && m <= MODE_CTR; m++) {
        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && need(r, upd(&c, a, in, 5) == 5, "update")
            && need(r, init(&c, 0, NULL, IV2), "re-init")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
            && expect(r, num == 0, m == MODE_CTR ? "CTR: init kept num" : "CFB: init kept num")
            && need(r, upd(&c, a, in, 20) == 20, "update") && fresh(r, m, 0, K1, IV2, b, in, 20)
            && expect(r, memcmp(a, b, 20) == 0, "CTR/CFB: init kept the partial block");
        close_ctx(&c);
    }
    return ok;
}

static int check_INIT_KEEPS_PADDING(assume_run *r)
{
    unsigned char in[32], out[48];
    unsigned int pad = 1;
    int ok = 1;

    fill(in, sizeof(in), 3);
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 0), "set padding")
            && need(r, init(&c, 0, NULL, IV1), "re-init")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_PADDING, &pad), "get padding")
            && expect(r, pad == 0, "init reset the padding parameter")
            && expect(r, upd(&c, out, in, 32) == 32, "init reset padding (a block was held back)");
        close_ctx(&c);
    }
    return ok;
}

static int check_PADDING_MIDSTREAM(assume_run *r)
{
    unsigned char pt[60], ct[64], out[80];
    size_t outl = 0;
    int ok = 1;

    fill(pt, sizeof(pt), 4);
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 }, e = { 0 };

        /* ct: pt encrypted with padding (64 bytes). */
        ok = open_ctx(r, &e, m) && need(r, init(&e, 1, K1, IV1), "init")
            && need(r, upd(&e, ct, pt, 60) == 48, "update")
            && need(r, e.fb->final(e.ctx, ct + 48, &outl, 16) && outl == 16, "final");
        close_ctx(&e);
        ok = ok && open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 0), "padding off")
            && expect(r, upd(&c, out, ct, 48) == 48, "padding off mid-stream: a block held back")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 1), "padding on")
            && expect(r, upd(&c, out + 48, ct + 48, 16) == 0,
                "padding on mid-stream: no block held back")
            && need(r, c.fb->final(c.ctx, out + 48, &outl, 32), "final")
            && expect(r, outl == 12
            && memcmp(out, pt, 60) == 0, "padding on mid-stream: final did not unpad");
        close_ctx(&c);
    }
    return ok;
}

/* The rule of ASSUME_BLOCK_BUFFER_RULE (cipher_block.c's held_after). */
static size_t keep_after(size_t total, int dec_pad)
{
    size_t keep = total % BLOCK;

    return keep == 0 && total > 0 && dec_pad ? BLOCK : keep;
}

static int check_BLOCK_BUFFER_RULE(assume_run *r)
{
    enum { N = 256 };
    unsigned char in[N], ref[N], out[N + BLOCK];
    int ok = 1;

    fill(in, sizeof(in), 5);
    for (int v = 0; ok && v < 8; v++) {
        gpuaes_mode m = v & 1 ? MODE_CBC : MODE_ECB;
        int enc = (v >> 1) & 1, pad = (v >> 2) & 1;
        size_t total = 0, done = 0;
        unsigned int step = 7 + v;
        fbc c = { 0 };

        ok = fresh(r, m, enc, K1, IV1, ref, in, N) && open_ctx(r, &c, m)
            && need(r, init(&c, enc, K1, IV1), "init")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, pad), "padding");
        while (ok && total < N) {
            size_t n = (step = step * 1103515245u + 12345u) >> 27, o;

            if (n > N - total)
                n = N - total;
            o = upd(&c, out + done, in + total, n);
            total += n;
            ok = need(r, o != SIZE_MAX, "update");
            if (!ok)
                break;
            done += o;
            ok = expect(r, done == total - keep_after(total, !enc && pad),
                        "ECB/CBC: the bytes held back differ from the rule");
        }
        ok = ok && expect(r, memcmp(out, ref, done) == 0, "ECB/CBC: the output differs");
        close_ctx(&c);
    }
    return ok;
}

static int check_UPDATED_IV(assume_run *r)
{
    unsigned char in[80], out[96], ref[80], iv[BLOCK], want[BLOCK];
    unsigned int num = 99;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 6);
    /* CBC decryption: 40 bytes (8 buffered), then 8 more (a whole block held). */
    ok = open_ctx(r, &c, MODE_CBC) && need(r, init(&c, 0, K1, IV1), "init")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv")
        && expect(r, memcmp(iv, IV1, BLOCK) == 0, "CBC: updated IV at start is not the IV")
        && need(r, upd(&c, out, in, 40) == 32, "update")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv")
        && expect(r, memcmp(iv, in + 16, BLOCK) == 0,
            "CBC: updated IV is not the last ciphertext block")
        && need(r, upd(&c, out, in + 40, 8) == 0, "update")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv")
        && expect(r, memcmp(iv, in + 16, BLOCK) == 0, "CBC: updated IV includes the held block");
    close_ctx(&c);
    /* CFB decryption: 37 + 11 bytes; then an init with the updated IV continues. */
    ok = ok && open_ctx(r, &c, MODE_CFB) && need(r, init(&c, 0, K1, IV1), "init")
        && fresh(r, MODE_CFB, 0, K1, IV1, ref, in, 80)
        && need(r, upd(&c, out, in, 37) == 37 && upd(&c, out, in + 37, 11) == 11, "update")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv")
        && expect(r, memcmp(iv, in + 32, BLOCK) == 0,
            "CFB: updated IV is not the last ciphertext block")
        && fresh(r, MODE_CFB, 0, K1, iv, out, in + 48, 32)
        && expect(r, memcmp(out, ref + 48, 32) == 0,
            "CFB: an init with the updated IV does not continue");
    close_ctx(&c);
    /* CTR: the next block's counter, already while inside a block. */
    ok = ok && open_ctx(r, &c, MODE_CTR) && need(r, init(&c, 1, K1, IV1), "init")
        && fresh(r, MODE_CTR, 1, K1, IV1, ref, in, 80)
        && need(r, upd(&c, out, in, 5) == 5, "update")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv");
    add128(want, IV1, 1);
    ok = ok && expect(r, memcmp(iv, want, BLOCK) == 0,
        "CTR: updated IV inside a block is not the next counter")
        && need(r, upd(&c, out, in + 5, 11) == 11, "update")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, iv), "updated iv")
        && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
        && expect(r, num == 0
        && memcmp(iv, want, BLOCK) == 0, "CTR: updated IV at a block boundary")
        && fresh(r, MODE_CTR, 1, K1, iv, out, in + 16, 32)
        && expect(r, memcmp(out, ref + 16, 32) == 0,
            "CTR: an init with the updated IV does not continue");
    close_ctx(&c);
    return ok;
}

static int check_NUM_PARAM(assume_run *r)
{
    static const size_t steps[] = { 5, 11, 21, 0 };
    static const unsigned int nums[] = { 5, 0, 5, 5 };
    unsigned char in[64], out[80];
    unsigned int num = 99;
    int ok = 1;

    fill(in, sizeof(in), 7);
    for (gpuaes_mode m = MODE_CFB; ok && m <= MODE_CTR; m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init");
        for (size_t i = 0; ok && i < sizeof(steps) / sizeof(steps[0]); i++)
            ok = need(r, upd(&c, out, in, steps[i]) == steps[i], "update")
                && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
                && expect(r, num == nums[i], "CTR/CFB: num is not the position in the block");
        close_ctx(&c);
    }
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && expect(r, set_uint(&c, OSSL_CIPHER_PARAM_NUM, 7), "ECB/CBC: num not settable")
            && need(r, upd(&c, out, in, 40) != SIZE_MAX, "update")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
            && expect(r, num == 7, "ECB/CBC: an update changed num");
        close_ctx(&c);
    }
    return ok;
}

static int check_CTR_128BIT_COUNTER(assume_run *r)
{
    enum { NB = 40, N = NB * BLOCK + 7 };
    static const int ones[] = { 4, 8, 12, 16 };   /* trailing bytes 0xff: carries of 32..128 bits */
    unsigned char ctr[(NB + 1) * BLOCK], ks[(NB + 1) * BLOCK], zero[N] = { 0 }, out[N + BLOCK];
    int ok = 1;

    for (size_t t = 0; ok && t < sizeof(ones) / sizeof(ones[0]); t++) {
        unsigned char iv[BLOCK];
        fbc c = { 0 };

        memcpy(iv, IV1, BLOCK);
        memset(iv + BLOCK - ones[t], 0xff, ones[t]);
        iv[BLOCK - ones[t]] = 0xfe;                  /* wraps after two blocks */
        if (ones[t] == 16)
            iv[0] = 0xff;
        for (int b = 0; b <= NB; b++)
            add128(ctr + b * BLOCK, iv, b);
        ok = ecb(r, K1, ks, ctr, sizeof(ctr)) && open_ctx(r, &c, MODE_CTR)
            && need(r, init(&c, 1, K1, iv), "init")
            && need(r, upd(&c, out, zero, 100) == 100
            && upd(&c, out + 100, zero, N - 100) == N - 100,
                    "update")
            && expect(r, memcmp(out, ks, N) == 0,
                "CTR: the counter does not carry through 128 bits");
        close_ctx(&c);
    }
    return ok;
}

static int check_CTR_SCRATCH_REBUILDS_PARTIAL(assume_run *r)
{
    unsigned char in[64], a[80], b[80], scratch[BLOCK] = { 0 }, next[BLOCK], ia[BLOCK], ib[BLOCK];
    unsigned int na = 0, nb = 1;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 8);
    add128(next, IV1, 1);
    ok = fresh(r, MODE_CTR, 1, K1, IV1, a, in, 53) && open_ctx(r, &c, MODE_CTR)
        && need(r, init(&c, 1, K1, IV2), "init") && need(r, init(&c, 1, NULL, next), "re-init")
        && need(r, upd(&c, b, scratch, 7) == 7, "scratch")
        && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &nb), "num")
        && need(r, get_block(&c, OSSL_CIPHER_PARAM_UPDATED_IV, ib), "updated iv")
        && need(r, upd(&c, b, in + 23, 30) == 30, "update");
    add128(ia, IV1, 2);
    na = 7;
    ok = ok && expect(r, nb == na
        && memcmp(ia, ib, BLOCK) == 0, "CTR: scratch bytes leave another num or IV")
        && expect(r, memcmp(a + 23, b, 30) == 0,
            "CTR: scratch bytes do not rebuild the partial block");
    close_ctx(&c);
    return ok;
}

static int check_REINIT_RESTORES_IV(assume_run *r)
{
    unsigned char in[80], a[96], b[96], next[BLOCK];
    unsigned int num = 99;
    int ok = 1;

    fill(in, sizeof(in), 9);
    for (gpuaes_mode m = MODE_CBC; ok && m <= MODE_CFB; m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 0), "padding")
            && need(r, upd(&c, a, in, 48) == 48, "update")
            && need(r, init(&c, 0, NULL, NULL), "re-init")
            && need(r, upd(&c, a, in + 48, 32) == 32, "update")
            && fresh(r, m, 0, K1, IV1, b, in + 48, 32)
            && expect(r, memcmp(a, b, 32) == 0,
                "CBC/CFB: init without IV does not restart at the IV");
        close_ctx(&c);
    }
    if (ok) {
        fbc c = { 0 };

        add128(next, IV1, 2);
        ok = open_ctx(r, &c, MODE_CTR) && need(r, init(&c, 1, K1, IV1), "init")
            && need(r, upd(&c, a, in, 21) == 21, "update")
            && need(r, init(&c, 1, NULL, NULL), "re-init")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
            && need(r, upd(&c, a, in, 32) == 32, "update")
            && fresh(r, MODE_CTR, 1, K1, next, b, in, 32)
            && expect(r, num == 0
            && memcmp(a, b, 32) == 0,
                    "CTR: init without IV does not go on at the next counter");
        close_ctx(&c);
    }
    return ok;
}

static int check_IV_PARAM_IS_ORIGINAL(assume_run *r)
{
    unsigned char in[48], out[64], iv[BLOCK];
    int ok = 1;

    fill(in, sizeof(in), 10);
    for (gpuaes_mode m = MODE_CBC; ok && m <= MODE_CTR; m++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, m) && need(r, init(&c, 0, K1, IV1), "init")
            && need(r, upd(&c, out, in, 48) != SIZE_MAX, "update")
            && need(r, get_block(&c, OSSL_CIPHER_PARAM_IV, iv), "iv")
            && expect(r, memcmp(iv, IV1, BLOCK) == 0,
                "the IV parameter is not the IV given at init");
        close_ctx(&c);
    }
    return ok;
}

/* Same keys and types, in the same order. */
static int same_list(const OSSL_PARAM *a, const OSSL_PARAM *b)
{
    if (a == b)
        return 1;
    if (a == NULL || b == NULL)
        return 0;
    for (; a->key != NULL && b->key != NULL; a++, b++)
        if (strcmp(a->key, b->key) != 0 || a->data_type != b->data_type)
            return 0;
    return a->key == NULL && b->key == NULL;
}

static int check_SHARED_PARAM_TABLES(assume_run *r)
{
    const fallback_cipher *first[2] = { NULL, NULL };
    int ok = 1;

    for (size_t v = 0; ok && v < gpuaes_variant_count; v++) {
        const fallback_cipher *fb = gpuaes_variants[v].fallback, **f;
        void *ctx = fb->newctx(r->provctx);

        f = &first[gpuaes_variants[v].mode == MODE_GCM];
        if (*f == NULL)
            *f = fb;
        ok = need(r, ctx != NULL, "newctx")
            && expect(r, same_list(fb->gettable_params(r->provctx),
                (*f)->gettable_params(r->provctx))
                      && same_list(fb->gettable_ctx_params(ctx, r->provctx),
                                   (*f)->gettable_ctx_params(ctx, r->provctx))
                      && same_list(fb->settable_ctx_params(ctx, r->provctx),
                                   (*f)->settable_ctx_params(ctx, r->provctx)),
                      gpuaes_variants[v].name);
        if (ctx != NULL)
            fb->freectx(ctx);
    }
    return ok;
}

/* ---- GCM ---- */

static const unsigned char GIV[12] = "gcm-iv-12by";

/* One GCM encryption: init steps given by the caller, then aad, data, final, tag. */
static int gcm_finish(assume_run *r, fbc *c, const unsigned char *aad, size_t naad,
                      const unsigned char *in, unsigned char *out, size_t n,
                          unsigned char tag[BLOCK])
{
    size_t outl = 0;

    return need(r, naad == 0 || upd(c, NULL, aad, naad) == naad, "AAD")
        && need(r, upd(c, out, in, n) == n, "data")
        && need(r, c->fb->final(c->ctx, out + n, &outl, BLOCK), "final")
        && need(r, gcm_tag(c, tag, BLOCK), "tag");
}

static int gcm_fresh(assume_run *r, const unsigned char *key, const unsigned char *aad, size_t naad,
                     const unsigned char *in, unsigned char *out, size_t n,
                         unsigned char tag[BLOCK])
{
    fbc c = { 0 };
    int ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, key, GIV), "init")
        && gcm_finish(r, &c, aad, naad, in, out, n, tag);

    close_ctx(&c);
    return ok;
}

static int check_GCM_IV_BUFFERED(assume_run *r)
{
    unsigned char in[40], a[48], b[48], ta[BLOCK], tb[BLOCK];
    int ok;

    fill(in, sizeof(in), 11);
    ok = gcm_fresh(r, K2, in, 20, in, b, 40, tb);
    for (int order = 0; ok && order < 2; order++) {
        fbc c = { 0 };

        /* key then IV then another key; or IV alone then a key */
        ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, order ? NULL : K1, GIV), "init")
            && need(r, init(&c, 1, K2, NULL), "re-key") && gcm_finish(r, &c, in, 20, in, a, 40, ta)
            && expect(r, memcmp(a, b, 40) == 0 && memcmp(ta, tb, BLOCK) == 0,
                      "GCM: a buffered IV is not applied under the later key");
        close_ctx(&c);
    }
    return ok;
}

static int check_GCM_REKEY_RESETS_MESSAGE(assume_run *r)
{
    unsigned char in[64], a[48], b[48], ta[BLOCK], tb[BLOCK], scratch[48];
    int ok = 1;

    fill(in, sizeof(in), 12);
    /* 0: one byte of AAD (gpuaes's move); 1: AAD and data; 2: AAD only */
    for (int h = 0; ok && h < 3; h++) {
        fbc c = { 0 };

        ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, K1, GIV), "init")
            && need(r, upd(&c, NULL, in, h == 0 ? 1 : 20) != SIZE_MAX, "AAD")
            && need(r, h != 1 || upd(&c, scratch, in, 33) == 33, "data")
            && need(r, init(&c, 1, K2, NULL), "re-key")
            && gcm_finish(r, &c, NULL, 0, in, h == 0 ? a : b, 40, h == 0 ? ta : tb)
            && (h == 0 || expect(r, memcmp(a, b, 40) == 0 && memcmp(ta, tb, BLOCK) == 0,
                                 "GCM: a re-keyed message depends on what it held"));
        close_ctx(&c);
    }
    return ok;
}

static int check_GCM_SEGMENT_GHASH(assume_run *r)
{
    static const size_t lens[] = { 5, 16, 37, 64 };
    unsigned char in[64], blocks[32] = { 0 }, he[32], tag[BLOCK], x[BLOCK], l[BLOCK];
    size_t outl;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 13);
    blocks[31] = 1;                   /* 0^128, then 0^96 || 0^31 || 1 */
    ok = ecb(r, K1, he, blocks, 32) && open_ctx(r, &c, MODE_GCM)
        && need(r, init(&c, 1, K1, NULL), "keyed init");
    for (size_t t = 0; ok && t < sizeof(lens) / sizeof(lens[0]); t++) {
        size_t b = lens[t], first = b / 3;

        memset(x, 0, BLOCK);
        for (size_t i = 0; i < b; i += BLOCK) {
            for (size_t j = 0; j < BLOCK && i + j < b; j++)
                x[j] ^= in[i + j];
            gf128_mul(x, he);
        }
        gcm_len_block(l, (unsigned long long)b * 8, 0);
        for (int j = 0; j < BLOCK; j++)
            x[j] ^= l[j];
        gf128_mul(x, he);
        for (int j = 0; j < BLOCK; j++)
            x[j] ^= he[BLOCK + j];
        ok = need(r, init(&c, 1, NULL, (const unsigned char *)"\0\0\0\0\0\0\0\0\0\0\0"), "zero IV")
            && need(r, upd(&c, NULL, in, first) != SIZE_MAX
            && upd(&c, NULL, in + first, b - first) != SIZE_MAX,
                    "AAD")
            && need(r, c.fb->final(c.ctx, NULL, &outl, 0), "final")
            && need(r, gcm_tag(&c, tag, BLOCK), "tag")
            && expect(r, memcmp(tag, x, BLOCK) == 0,
                "GCM: an AAD-only message's tag is not GHASH as assumed");
    }
    close_ctx(&c);
    return ok;
}

static int check_GCM_EMPTY_UPDATE_OK(assume_run *r)
{
    unsigned char in[32], out[48], tag[BLOCK];
    size_t outl = 5;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 14);
    ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, K1, GIV), "init")
        && gcm_finish(r, &c, in, 3, in, out, 32, tag)
        && expect(r, c.fb->update(c.ctx, out, &outl, 0, in, 0) && outl == 0,
                  "GCM: an empty update after final failed");
    close_ctx(&c);
    return ok;
}

static int check_GCM_AAD_BEFORE_DATA(assume_run *r)
{
    unsigned char in[32], out[48];
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 15);
    ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, K1, GIV), "init")
        && need(r, upd(&c, NULL, in, 5) == 5 && upd(&c, out, in, 5) == 5, "AAD, data");
    ERR_set_mark();
    ok = ok && expect(r, upd(&c, NULL, in, 5) == SIZE_MAX, "GCM: AAD after data was taken");
    ERR_pop_to_mark();
    close_ctx(&c);
    return ok;
}

static int check_GCM_DECRYPT_NEEDS_TAG(assume_run *r)
{
    unsigned char in[20], ct[32], out[32], tag[BLOCK];
    size_t outl = 0;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 16);
    ok = gcm_fresh(r, K1, NULL, 0, in, ct, 20, tag) && open_ctx(r, &c, MODE_GCM)
        && need(r, init(&c, 0, K1, GIV), "init") && need(r, upd(&c, out, ct, 20) == 20, "data");
    ERR_set_mark();
    ok = ok && expect(r, !c.fb->final(c.ctx, out, &outl, 16),
        "GCM: decrypting final without a tag succeeded");
    ERR_pop_to_mark();
    ok = ok && need(r, gcm_set_tag(&c, tag, BLOCK), "set tag")
        && expect(r, c.fb->final(c.ctx, out, &outl, 16),
            "GCM: the final after a tagless one failed");
    close_ctx(&c);
    return ok;
}

static int check_GCM_FINISHED_UNTIL_IV(assume_run *r)
{
    unsigned char in[32], out[48], tag[BLOCK];
    size_t outl = 0;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 17);
    ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, K1, GIV), "init")
        && gcm_finish(r, &c, NULL, 0, in, out, 16, tag);
    ERR_set_mark();
    ok = ok && expect(r, upd(&c, out, in, 16) == SIZE_MAX, "GCM: data after final was taken")
        && expect(r, !c.fb->final(c.ctx, out, &outl, 16), "GCM: a second final succeeded")
        && need(r, init(&c, 1, K2, NULL), "re-key")
        && expect(r, upd(&c, out, in, 16) == SIZE_MAX, "GCM: a re-key reopened a finished message");
    ERR_pop_to_mark();
    ok = ok && need(r, init(&c, 1, NULL, GIV), "new IV")
        && expect(r, upd(&c, out, in, 16) == 16, "GCM: a new IV did not reopen the context");
    close_ctx(&c);
    return ok;
}

static int check_GCM_FAILED_FINAL_CONTINUES(assume_run *r)
{
    unsigned char in[50], ct[64], out[64], tag[BLOCK], bad[BLOCK] = { 0 };
    size_t outl = 0;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 18);
    ok = gcm_fresh(r, K1, NULL, 0, in, ct, 50, tag) && open_ctx(r, &c, MODE_GCM)
        && need(r, init(&c, 0, K1, GIV), "init") && need(r, gcm_set_tag(&c, bad, BLOCK), "set tag")
        && need(r, upd(&c, out, ct, 20) == 20, "data");
    ERR_set_mark();
    ok = ok && expect(r, !c.fb->final(c.ctx, out, &outl, 16), "GCM: a wrong tag verified")
        && expect(r, upd(&c, out + 20, ct + 20, 30) == 30 && memcmp(out, in, 50) == 0,
                  "GCM: data after a failed final does not continue the keystream")
        && need(r, gcm_set_tag(&c, tag, BLOCK), "set tag")
        && expect(r, !c.fb->final(c.ctx, out, &outl, 16),
            "GCM: a final after a failed final succeeded");
    ERR_pop_to_mark();
    close_ctx(&c);
    return ok;
}

static int check_GCM_IVLEN_VOIDS_IV(assume_run *r)
{
    unsigned char in[16], out[32], iv16[16] = "sixteen-byte-iv";
    size_t ivlen = 0;
    OSSL_PARAM get[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_END };
    OSSL_PARAM set[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_END };
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 19);
    ok = open_ctx(r, &c, MODE_GCM) && need(r, c.fb->get_ctx_params(c.ctx, get), "ivlen")
        && expect(r, ivlen == 12, "GCM: a new context's IV length is not 12")
        && need(r, init(&c, 1, K1, GIV), "init")
        && need(r, c.fb->set_ctx_params(c.ctx, set), "same ivlen")
        && expect(r, upd(&c, out, in, 16) == 16, "GCM: setting the same IV length voided the IV");
    ivlen = 16;
    ok = ok && need(r, init(&c, 1, NULL, GIV), "init")
        && need(r, c.fb->set_ctx_params(c.ctx, set), "ivlen 16");
    ERR_set_mark();
    ok = ok && expect(r, upd(&c, out, in, 16) == SIZE_MAX, "GCM: a new IV length kept the IV");
    ERR_pop_to_mark();
    c.ivlen = 16;
    ok = ok && need(r, init(&c, 1, NULL, iv16), "init")
        && expect(r, upd(&c, out, in, 16) == 16, "GCM: an IV after a new IV length was refused");
    close_ctx(&c);
    return ok;
}

static int check_GCM_TAG_GET(assume_run *r)
{
    unsigned char in[16], out[32], tag[BLOCK], part[BLOCK + 1];
    OSSL_PARAM null_tag[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, NULL, 0),
                               OSSL_PARAM_END };
    fbc c = { 0 }, d = { 0 };
    int ok;

    fill(in, sizeof(in), 20);
    ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 1, K1, GIV), "init")
        && gcm_finish(r, &c, NULL, 0, in, out, 16, tag)
        && need(r, gcm_tag(&c, part, 8), "tag of 8")
        && expect(r, memcmp(part, tag, 8) == 0, "GCM: a short tag is not the tag's prefix");
    ERR_set_mark();
    ok = ok && expect(r, !gcm_tag(&c, part, 0), "GCM: a tag of 0 bytes was given")
        && expect(r, !c.fb->get_ctx_params(c.ctx, null_tag), "GCM: a tag into NULL was given")
        && expect(r, !gcm_tag(&c, part, BLOCK + 1), "GCM: a tag of 17 bytes was given")
        && open_ctx(r, &d, MODE_GCM) && need(r, init(&d, 0, K1, GIV), "init")
        && expect(r, !gcm_tag(&d, part, BLOCK), "GCM: a decrypting context gave a tag");
    ERR_pop_to_mark();
    close_ctx(&c);
    close_ctx(&d);
    return ok;
}

static int check_UNKNOWN_PARAMS_IGNORED(assume_run *r)
{
    unsigned char in[16], out[32], buf[BLOCK] = { 0 };
    size_t ivlen = 0;
    OSSL_PARAM p[3] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen),
                        OSSL_PARAM_octet_string("gpuaes-tag-answered", buf, BLOCK),
                            OSSL_PARAM_END };
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 21);
    /* A decrypting context: it would refuse the tag, were it seen. */
    ok = open_ctx(r, &c, MODE_GCM) && need(r, init(&c, 0, K1, GIV), "init")
        && need(r, upd(&c, out, in, 16) == 16, "data")
        && expect(r, c.fb->get_ctx_params(c.ctx, p), "get_ctx_params failed for an unknown key")
        && expect(r, ivlen == 12 && p[1].return_size == OSSL_PARAM_UNMODIFIED
                  && memcmp(buf, (unsigned char[BLOCK]){ 0 }, BLOCK) == 0,
                  "get_ctx_params touched an unknown key");
    close_ctx(&c);
    return ok;
}

static int check_GCM_CIPHER_FORMS(assume_run *r)
{
    unsigned char in[40], a[48], b[48], ta[BLOCK], tb[BLOCK];
    size_t outl = 0;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 22);
    ok = gcm_fresh(r, K1, in, 13, in, b, 40, tb) && open_ctx(r, &c, MODE_GCM)
        && need(r, init(&c, 1, K1, GIV), "init")
        && expect(r, c.fb->cipher(c.ctx, NULL, &outl, 13, in, 13),
            "GCM cipher(): out NULL is not AAD")
        && need(r, c.fb->cipher(c.ctx, a, &outl, 40, in, 40), "cipher() data")
        && expect(r, c.fb->cipher(c.ctx, NULL, &outl, 0, NULL, 0),
            "GCM cipher(): in NULL is not final")
        && need(r, gcm_tag(&c, ta, BLOCK), "tag")
        && expect(r, memcmp(a, b, 40) == 0 && memcmp(ta, tb, BLOCK) == 0,
                  "GCM cipher(): the forms do not give update/final's result");
    close_ctx(&c);
    return ok;
}

/* ---- the table ---- */

static const struct {
    const char *name;
    int (*run)(assume_run *r);
    int at_load;
} checks[ASSUME_COUNT] = {
#define ASSUME_ENTRY(id, load) { "ASSUME_" #id, check_##id, load },
    GPUAES_ASSUMPTIONS(ASSUME_ENTRY)
#undef ASSUME_ENTRY
};

const char *assume_name(gpuaes_assumption a)
{
    return a < ASSUME_COUNT ? checks[a].name : "?";
}

int assume_at_load(gpuaes_assumption a)
{
    return a < ASSUME_COUNT && checks[a].at_load;
}

int assume_check(gpuaes_assumption a, assume_run *r)
{
    int ok;

    r->seen = 0;
    r->why[0] = '\0';
    if (a >= ASSUME_COUNT)
        return 0;
    ERR_set_mark();                   /* the default provider's refusals are expected */
    ok = checks[a].run(r);
    ERR_pop_to_mark();
    return ok;
}

int assume_verify_at_load(gpuaes_prov *prov)
{
#ifdef GPUAES_TEST_HOOKS
    /* The emulated module only: make one check fail, to test what follows. */
    const char *brk = getenv("GPUAES_TEST_BREAK_ASSUMPTION");
#else
    const char *brk = NULL;
#endif

    for (int a = 0; a < ASSUME_COUNT; a++) {
        assume_run r = { .provctx = prov->fallback_provctx,
                         .flip = brk != NULL && strcmp(brk, checks[a].name) == 0 };

        if (!checks[a].at_load || assume_check(a, &r))
            continue;
        /* A libcrypto that behaves otherwise: only the default provider's answers. */
        for (int k = 0; k < OFFLOAD_KINDS; k++)
            prov->offload_min[k] = SIZE_MAX;
        prov->ks_enabled = 0;
        ERR_raise_data(ERR_LIB_PROV, ERR_R_INIT_FAIL,
                       "gpuaes: the default provider breaks %s (%s): GPU path off",
                       checks[a].name, r.why);
        gpuaes_debug("the default provider breaks %s (%s): GPU path off", checks[a].name, r.why);
        return 0;
    }
    return 1;
}
