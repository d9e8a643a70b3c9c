/*
 * assume_block.c - the checks of the block-mode assumptions of
 * provider/assume/fallback_assumptions.h (ECB, CBC, CFB, CTR; the parameter tables):
 * each asks the default provider whether it behaves as gpuaes assumes.
 */
#include "assume_util.h"
#include "gpuaes_counter.h"
#include "prov_ctx.h"

static const unsigned char IV1[16] = "assume-iv-one!!";
static const unsigned char IV2[16] = "assume-iv-two!!";

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

int check_REINIT_KEEPS_SCHEDULE(assume_run *r)
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

int check_INIT_RESETS_STREAM(assume_run *r)
{
    unsigned char in[48], a[48], b[48];
    unsigned int num = 99;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 2);
    /* ECB: 5 bytes buffered, then an init: 16 bytes are a block of their own. */
    ok = open_init(r, &c, MODE_ECB, 1, K1, NULL)
        && need(r, upd(&c, a, in, 5) == 0, "update") && need(r, init(&c, 1, NULL, NULL), "re-init")
        && expect(r, upd(&c, a, in + 5, 16) == 16, "ECB: init kept buffered bytes")
        && ecb(r, K1, b, in + 5, 16)
        && expect(r, memcmp(a, b, 16) == 0, "ECB: init kept buffered bytes (output)");
    close_ctx(&c);
    /* CBC decryption: the held-back block is dropped. */
    ok = ok && open_init(r, &c, MODE_CBC, 0, K1, IV1)
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
        ok = open_init(r, &c, m, 0, K1, IV1)
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

int check_INIT_KEEPS_PADDING(assume_run *r)
{
    unsigned char in[32], out[48];
    unsigned int pad = 1;
    int ok = 1;

    fill(in, sizeof(in), 3);
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 };

        ok = open_init(r, &c, m, 0, K1, IV1)
            && need(r, set_uint(&c, OSSL_CIPHER_PARAM_PADDING, 0), "set padding")
            && need(r, init(&c, 0, NULL, IV1), "re-init")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_PADDING, &pad), "get padding")
            && expect(r, pad == 0, "init reset the padding parameter")
            && expect(r, upd(&c, out, in, 32) == 32, "init reset padding (a block was held back)");
        close_ctx(&c);
    }
    return ok;
}

int check_PADDING_MIDSTREAM(assume_run *r)
{
    unsigned char pt[60], ct[64], out[80];
    size_t outl = 0;
    int ok = 1;

    fill(pt, sizeof(pt), 4);
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 }, e = { 0 };

        /* ct: pt encrypted with padding (64 bytes). */
        ok = open_init(r, &e, m, 1, K1, IV1)
            && need(r, upd(&e, ct, pt, 60) == 48, "update")
            && need(r, e.fb->final(e.ctx, ct + 48, &outl, 16) && outl == 16, "final");
        close_ctx(&e);
        ok = ok && open_init(r, &c, m, 0, K1, IV1)
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

/* The rule of ASSUME_BLOCK_BUFFER_RULE (held_after, block_ctx.h). */
static size_t keep_after(size_t total, int dec_pad)
{
    size_t keep = total % BLOCK;

    return keep == 0 && total > 0 && dec_pad ? BLOCK : keep;
}

int check_BLOCK_BUFFER_RULE(assume_run *r)
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

int check_UPDATED_IV(assume_run *r)
{
    unsigned char in[80], out[96], ref[80], iv[BLOCK], want[BLOCK];
    unsigned int num = 99;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 6);
    /* CBC decryption: 40 bytes (8 buffered), then 8 more (a whole block held). */
    ok = open_init(r, &c, MODE_CBC, 0, K1, IV1)
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
    ok = ok && open_init(r, &c, MODE_CFB, 0, K1, IV1)
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
    ok = ok && open_init(r, &c, MODE_CTR, 1, K1, IV1)
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

int check_NUM_PARAM(assume_run *r)
{
    static const size_t steps[] = { 5, 11, 21, 0 };
    static const unsigned int nums[] = { 5, 0, 5, 5 };
    unsigned char in[64], out[80];
    unsigned int num = 99;
    int ok = 1;

    fill(in, sizeof(in), 7);
    for (gpuaes_mode m = MODE_CFB; ok && m <= MODE_CTR; m++) {
        fbc c = { 0 };

        ok = open_init(r, &c, m, 0, K1, IV1);
        for (size_t i = 0; ok && i < sizeof(steps) / sizeof(steps[0]); i++)
            ok = need(r, upd(&c, out, in, steps[i]) == steps[i], "update")
                && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
                && expect(r, num == nums[i], "CTR/CFB: num is not the position in the block");
        close_ctx(&c);
    }
    for (gpuaes_mode m = MODE_ECB; ok && m <= MODE_CBC; m++) {
        fbc c = { 0 };

        ok = open_init(r, &c, m, 0, K1, IV1)
            && expect(r, set_uint(&c, OSSL_CIPHER_PARAM_NUM, 7), "ECB/CBC: num not settable")
            && need(r, upd(&c, out, in, 40) != SIZE_MAX, "update")
            && need(r, get_uint(&c, OSSL_CIPHER_PARAM_NUM, &num), "num")
            && expect(r, num == 7, "ECB/CBC: an update changed num");
        close_ctx(&c);
    }
    return ok;
}

int check_CTR_128BIT_COUNTER(assume_run *r)
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

int check_CTR_SCRATCH_REBUILDS_PARTIAL(assume_run *r)
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

int check_REINIT_RESTORES_IV(assume_run *r)
{
    unsigned char in[80], a[96], b[96], next[BLOCK];
    unsigned int num = 99;
    int ok = 1;

    fill(in, sizeof(in), 9);
    for (gpuaes_mode m = MODE_CBC; ok && m <= MODE_CFB; m++) {
        fbc c = { 0 };

        ok = open_init(r, &c, m, 0, K1, IV1)
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
        ok = open_init(r, &c, MODE_CTR, 1, K1, IV1)
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

int check_INIT_OK(assume_run *r)
{
    unsigned char in[32], out[64];
    int ok = 1;

    fill(in, sizeof(in), 24);
    /* One context per mode and direction (the check runs at every load), through
     * each state: fresh, no key yet, mid-block, finished; a key alone, an IV
     * alone (ECB: none), both. */
    for (int k = 0; ok && k < 8; k++) {
        gpuaes_mode m = (gpuaes_mode)(k / 2);
        int enc = k % 2;
        const unsigned char *iv1 = m == MODE_ECB ? NULL : IV1, *iv2 = m == MODE_ECB ? NULL : IV2;
        size_t outl;
        fbc c = { 0 };

        ok = open_ctx(r, &c, m)
            && expect(r, init(&c, enc, NULL, iv1), "an init with an IV alone failed on a fresh context")
            && expect(r, init(&c, enc, K2, NULL), "an init with a key alone failed on an unkeyed context")
            && need(r, upd(&c, out, in, 5) != SIZE_MAX, "5 bytes")
            && expect(r, init(&c, enc, K1, iv2), "an init with a key and an IV failed mid-block")
            && need(r, upd(&c, out, in, 5) != SIZE_MAX, "5 bytes")
            && expect(r, init(&c, enc, NULL, iv1), "an init with an IV alone failed mid-block")
            && need(r, upd(&c, out, in, 5) != SIZE_MAX, "5 bytes")
            && expect(r, init(&c, enc, K2, NULL), "an init with a key alone failed mid-block")
            && need(r, upd(&c, out, in, 5) != SIZE_MAX, "5 bytes");
        if (ok)
            (void)c.fb->final(c.ctx, out, &outl, sizeof(out));   /* may refuse 5 bytes: either way finished */
        ok = ok && expect(r, init(&c, enc, K1, iv2), "an init with a key and an IV failed after a final");
        close_ctx(&c);
    }
    return ok;
}

int check_IV_PARAM_IS_ORIGINAL(assume_run *r)
{
    unsigned char in[48], out[64], iv[BLOCK];
    int ok = 1;

    fill(in, sizeof(in), 10);
    for (gpuaes_mode m = MODE_CBC; ok && m <= MODE_CTR; m++) {
        fbc c = { 0 };

        ok = open_init(r, &c, m, 0, K1, IV1)
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

int check_SHARED_PARAM_TABLES(assume_run *r)
{
    const fallback_cipher *first[2] = { NULL, NULL };
    int ok = 1;

    for (size_t v = 0; ok && v < gpuaes_variant_count; v++) {
        const fallback_cipher *fb = &r->fallbacks[v], **f;
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

/* The context's key and IV length are keylen and ivlen. */
static int lengths_are(assume_run *r, const fallback_cipher *fb, void *ctx, size_t keylen,
                       size_t ivlen, const char *when)
{
    size_t k, i;

    return need(r, get_size(fb, ctx, OSSL_CIPHER_PARAM_KEYLEN, &k)
                   && get_size(fb, ctx, OSSL_CIPHER_PARAM_IVLEN, &i), "get lengths")
        && expect(r, k == keylen && i == ivlen, when);
}

int check_LENGTH_PARAMS(assume_run *r)
{
    static const unsigned char key[32] = "assume-key-of-32-bytes-length!!";
    unsigned char in[16], out[48];
    int ok = 1;

    fill(in, sizeof(in), 31);
    for (size_t v = 0; ok && v < gpuaes_variant_count; v++) {
        const gpuaes_variant *var = &gpuaes_variants[v];
        const fallback_cipher *fb = &r->fallbacks[v];
        const int gcm = var->mode == MODE_GCM;
        const size_t ivlen = var->mode == MODE_ECB ? 0 : gcm ? 12 : BLOCK;
        void *ctx = fb->newctx(r->provctx);
        size_t outl;

        ok = need(r, ctx != NULL, "newctx")
            && lengths_are(r, fb, ctx, var->keylen, ivlen, "a new context's lengths")
            && need(r, fb->einit(ctx, key, var->keylen, ivlen ? IV1 : NULL, ivlen, NULL), "init")
            && need(r, fb->update(ctx, out, &outl, sizeof(out), in, 5), "update")
            && lengths_are(r, fb, ctx, var->keylen, ivlen, "the lengths after an init and an update");
        /* Whether they are refused or not, the key length stays, and so
         * does the IV length of a mode other than GCM. */
        if (ok) {
            (void)set_size(fb, ctx, OSSL_CIPHER_PARAM_KEYLEN, var->keylen == 16 ? 32 : 16);
            if (!gcm)
                (void)set_size(fb, ctx, OSSL_CIPHER_PARAM_IVLEN, 8);
            ok = lengths_are(r, fb, ctx, var->keylen, ivlen, "the lengths after setting others");
        }
        /* GCM's is the last given: as AEAD_IVLEN, or with an IV at init. */
        ok = ok && (!gcm
                    || (need(r, set_size(fb, ctx, OSSL_CIPHER_PARAM_AEAD_IVLEN, 16), "set ivlen 16")
                        && lengths_are(r, fb, ctx, var->keylen, 16, "GCM: the IV length set")
                        && need(r, fb->dinit(ctx, NULL, 0, IV1, 8, NULL), "init with an 8-byte IV")
                        && lengths_are(r, fb, ctx, var->keylen, 8, "GCM: the IV length of an init")));
        if (ctx != NULL)
            fb->freectx(ctx);
    }
    return ok;
}
