/*
 * assume_gcm.c - the checks of the GCM assumptions of
 * provider/assume/fallback_assumptions.h (ASSUME_GCM_*, ASSUME_UNKNOWN_PARAMS_IGNORED):
 * each asks the default provider whether its GCM behaves as gpuaes's own
 * engine (gcm_engine.c) and cipher_gcm.c assume.
 */
#include "assume_util.h"
#include <openssl/err.h>

#include "gcm/gcm_fused.h"
#include "gcm/gcm_math.h"
#include "gpuaes_counter.h"
#include "prov_ctx.h"

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
    int ok = open_init(r, &c, MODE_GCM, 1, key, GIV)
        && gcm_finish(r, &c, aad, naad, in, out, n, tag);

    close_ctx(&c);
    return ok;
}

/* A context (K1, GIV) after one encryption: naad bytes of in as AAD, n as data. */
static int gcm_finished(assume_run *r, fbc *c, size_t naad, const unsigned char *in,
                        unsigned char *out, size_t n, unsigned char tag[BLOCK])
{
    return open_init(r, c, MODE_GCM, 1, K1, GIV)
        && gcm_finish(r, c, naad > 0 ? in : NULL, naad, in, out, n, tag);
}

int check_GCM_IV_BUFFERED(assume_run *r)
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

int check_GCM_IV_INIT_OK(assume_run *r)
{
    unsigned char in[40], out[40 + BLOCK], tag[BLOCK];
    int ok = 1;

    fill(in, sizeof(in), 23);
    /* no key yet, keyed, after AAD, after data, finished; each direction */
    for (int k = 0; ok && k < 10; k++) {
        int enc = k & 1, state = k / 2;
        fbc c = { 0 };

        if (state == 4)
            ok = gcm_finished(r, &c, 20, in, out, 40, tag);
        else
            ok = open_ctx(r, &c, MODE_GCM)
                && need(r, state == 0 || init(&c, 1, K1, GIV), "init")
                && need(r, state < 2 || upd(&c, NULL, in, 20) == 20, "AAD")
                && need(r, state < 3 || upd(&c, out, in, 40) == 40, "data");
        ok = ok && expect(r, init(&c, enc, NULL, GIV),
                          "GCM: an init with a 12-byte IV alone failed");
        close_ctx(&c);
    }
    return ok;
}

int check_GCM_REKEY_RESETS_MESSAGE(assume_run *r)
{
    unsigned char in[64], a[48], b[48], ta[BLOCK], tb[BLOCK], scratch[48];
    int ok = 1;

    fill(in, sizeof(in), 12);
    /* 0: one byte of AAD (gpuaes's move); 1: AAD and data; 2: AAD only */
    for (int h = 0; ok && h < 3; h++) {
        fbc c = { 0 };

        ok = open_init(r, &c, MODE_GCM, 1, K1, GIV)
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

int check_GCM_SEGMENT_GHASH(assume_run *r)
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

/* gcm_engine_adopt's move on c: a copy, switched to encrypting, finished,
 * its tag read; the copy is closed.  need()'s 1, or 0 (what failed, said). */
static int copy_tag(assume_run *r, const fbc *c, unsigned char tag[BLOCK], const char *what)
{
    fbc d = { 0 };
    size_t outl;
    int ok;

    d.fb = c->fb;
    d.ctx = c->fb->dupctx(c->ctx);
    ok = need(r, d.ctx != NULL, "dupctx")
        && need(r, init(&d, 1, NULL, NULL) && d.fb->final(d.ctx, NULL, &outl, 0) && gcm_tag(&d, tag, BLOCK),
                what);
    close_ctx(&d);
    return ok;
}

/* The original c ends its message: encrypting, its tag must be want;
 * decrypting, want must verify.  `why` is the failed expectation's text. */
static int original_ends(assume_run *r, fbc *c, int enc, const unsigned char want[BLOCK], const char *why)
{
    unsigned char tag[BLOCK];
    size_t outl;

    if (enc)
        return need(r, c->fb->final(c->ctx, NULL, &outl, 0) && gcm_tag(c, tag, BLOCK), "final")
            && expect(r, memcmp(tag, want, BLOCK) == 0, why);
    return need(r, gcm_set_tag(c, want, BLOCK), "set tag") && expect(r, c->fb->final(c->ctx, NULL, &outl, 0), why);
}

int check_GCM_DUP_FINAL_TAG(assume_run *r)
{
    unsigned char in[96], ct[96 + BLOCK], out[96 + BLOCK], t48[BLOCK], t96[BLOCK], tag[BLOCK];
    int ok;

    fill(in, sizeof(in), 19);
    /* the tags of AAD 20 || data 48 and of AAD 20 || data 96, made whole */
    ok = gcm_fresh(r, K1, in + 50, 20, in, ct, 48, t48) && gcm_fresh(r, K1, in + 50, 20, in, ct, 96, t96);
    for (int enc = 1; ok && enc >= 0; enc--) {
        const unsigned char *src = enc ? in : ct;
        fbc c = { 0 };

        ok = open_init(r, &c, MODE_GCM, enc, K1, GIV)
            && need(r, upd(&c, NULL, in + 50, 20) == 20 && upd(&c, out, src, 48) == 48,
                    "AAD, data")
            && copy_tag(r, &c, tag, "the copy's final and tag")
            && expect(r, memcmp(tag, t48, BLOCK) == 0,
                      enc ? "GCM: a finished copy's tag is not the message's so far"
                          : "GCM: a decrypting copy's tag is not the message's so far");
        /* the original goes on: its data and (decrypting) its verdict */
        ok = ok && need(r, upd(&c, out + 48, src + 48, 48) == 48, "more data")
            && expect(r, memcmp(out, enc ? ct : in, 96) == 0,
                      "GCM: the original's output changed after the copy's final")
            && original_ends(r, &c, enc, t96, enc ? "GCM: the original's tag changed after the copy's final"
                                                  : "GCM: the original's tag did not verify after the copy's final");
        close_ctx(&c);
    }
    /* Before any data (gcm_engine_adopt when our engine takes a message at
     * its first data): after AAD of 20 bytes (a partial block), and with no
     * AAD (the IV still buffered), the copy's tag is that of the AAD alone,
     * and the original's message goes on unchanged. */
    for (int k = 0; ok && k < 4; k++) {
        int enc = k & 1;
        size_t naad = k < 2 ? 20 : 0;
        fbc c = { 0 };

        ok = gcm_fresh(r, K1, in + 50, naad, in, ct, 0, t48)
            && gcm_fresh(r, K1, in + 50, naad, in, ct, 48, t96)
            && open_init(r, &c, MODE_GCM, enc, K1, GIV)
            && need(r, naad == 0 || upd(&c, NULL, in + 50, naad) == naad, "AAD")
            && copy_tag(r, &c, tag, "the copy's final and tag (no data)")
            && expect(r, memcmp(tag, t48, BLOCK) == 0,
                      "GCM: a copy's tag before any data is not that of the AAD alone")
            && need(r, upd(&c, out, enc ? in : ct, 48) == 48, "data after the copy")
            && expect(r, memcmp(out, enc ? ct : in, 48) == 0,
                      "GCM: the original changed after a copy's final before data")
            && original_ends(r, &c, enc, t96, "GCM: the original changed after a copy's final before data");
        close_ctx(&c);
    }
    return ok;
}

/*
 * gcm_fused_run itself (the engine's code) against a reference made here:
 * the keystream as AES-ECB of the counter blocks (inc32 from C), S * H by
 * Horner with gf128_mul.  Counters just below the 32-bit wrap (the piece
 * crosses it) and at 0; 1 and 5 blocks; both directions, in place once; two
 * pieces in a row on one context (the second init starts afresh).
 */
int check_GCM_FUSED_PIECE(assume_run *r)
{
    static const struct { uint32_t low; size_t blocks; int enc, inplace; } cases[] = {
        { 0xfffffffeu, 5, 1, 0 }, { 0xfffffffeu, 5, 0, 0 }, { 0, 1, 1, 1 }, { 7, 5, 0, 1 },
    };
    unsigned char zero[BLOCK] = { 0 }, in[5 * BLOCK], ks[5 * BLOCK], ctrs[5 * BLOCK], want[5 * BLOCK],
        out[5 * BLOCK], sh[BLOCK], x[BLOCK];
    gcm_fused f = { 0 };
    fbc g = { 0 }, e = { 0 };
    int ok;

    fill(in, sizeof(in), 29);
    ok = open_ctx(r, &g, MODE_GCM) && open_init(r, &e, MODE_ECB, 1, K1, NULL) && ecb(r, K1, f.h, zero, BLOCK);
    if (ok) {
        f.gcm = g.fb;
        f.ecb = e.fb;
        f.ctx = g.ctx;
        f.ecbctx = e.ctx;
        g.ctx = NULL;                 /* f's now: gcm_fused_free frees it */
        ok = need(r, gcm_fused_key(&f, r->provctx, K1, 16), "AEAD_IVLEN 16, keyed init");
    }
    for (size_t t = 0; ok && t < sizeof(cases) / sizeof(cases[0]); t++) {
        size_t n = cases[t].blocks * BLOCK;
        unsigned char ctr[BLOCK];

        memset(ctr, 0x5c, 12);
        for (int i = 0; i < 4; i++)
            ctr[12 + i] = (unsigned char)(cases[t].low >> (24 - 8 * i));
        for (size_t b = 0; b < cases[t].blocks; b++) {
            memcpy(ctrs + b * BLOCK, ctr, BLOCK);
            gpuaes_ctr32_add(ctrs + b * BLOCK, b);
        }
        ok = ecb(r, K1, ks, ctrs, n);
        for (size_t i = 0; ok && i < n; i++)
            want[i] = in[i] ^ ks[i];
        memset(x, 0, BLOCK);          /* S * H over the ciphertext */
        for (size_t b = 0; ok && b < cases[t].blocks; b++) {
            const unsigned char *cb = (cases[t].enc ? want : in) + b * BLOCK;

            for (int i = 0; i < BLOCK; i++)
                x[i] ^= cb[i];
            gf128_mul(x, f.h);
        }
        gf128_mul(x, f.h);            /* S (Horner's X after the last block) times H */
        if (!ok)
            break;
        memcpy(out, in, n);
        ok = need(r, gcm_fused_run(&f, cases[t].enc, ctr, out, cases[t].inplace ? out : in, n, sh),
                  "a piece: IV, data, final, tag")
            && expect(r, memcmp(out, want, n) == 0, "GCM: a 16-byte IV's data keystream is not inc32(J0)'s")
            && expect(r, memcmp(sh, x, BLOCK) == 0,
                      cases[t].enc ? "GCM: a 16-byte IV's tag is not (S ^ L) * H ^ E_K(J0)"
                                   : "GCM: a decrypting piece's tag (made encrypting) is not of its ciphertext");
    }
    gcm_fused_free(&f);
    close_ctx(&g);
    close_ctx(&e);
    return ok;
}

int check_GCM_EMPTY_UPDATE_OK(assume_run *r)
{
    unsigned char in[32], out[48], tag[BLOCK];
    size_t outl = 5;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 14);
    ok = gcm_finished(r, &c, 3, in, out, 32, tag)
        && expect(r, c.fb->update(c.ctx, out, &outl, 0, in, 0) && outl == 0,
                  "GCM: an empty update after final failed");
    close_ctx(&c);
    return ok;
}

int check_GCM_AAD_BEFORE_DATA(assume_run *r)
{
    unsigned char in[32], out[48];
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 15);
    ok = open_init(r, &c, MODE_GCM, 1, K1, GIV)
        && need(r, upd(&c, NULL, in, 5) == 5 && upd(&c, out, in, 5) == 5, "AAD, data");
    ERR_set_mark();
    ok = ok && expect(r, upd(&c, NULL, in, 5) == SIZE_MAX, "GCM: AAD after data was taken");
    ERR_pop_to_mark();
    close_ctx(&c);
    return ok;
}

int check_GCM_DECRYPT_NEEDS_TAG(assume_run *r)
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

int check_GCM_FINISHED_UNTIL_IV(assume_run *r)
{
    unsigned char in[32], out[48], tag[BLOCK];
    size_t outl = 0;
    fbc c = { 0 };
    int ok;

    fill(in, sizeof(in), 17);
    ok = gcm_finished(r, &c, 0, in, out, 16, tag);
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

int check_GCM_FAILED_FINAL_CONTINUES(assume_run *r)
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

int check_GCM_IVLEN_VOIDS_IV(assume_run *r)
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

int check_GCM_TAG_GET(assume_run *r)
{
    unsigned char in[16], out[32], tag[BLOCK], part[BLOCK + 1];
    fbc c = { 0 }, d = { 0 };
    int ok;

    fill(in, sizeof(in), 20);
    ok = gcm_finished(r, &c, 0, in, out, 16, tag)
        && need(r, gcm_tag(&c, part, 8), "tag of 8")
        && expect(r, memcmp(part, tag, 8) == 0, "GCM: a short tag is not the tag's prefix");
    ERR_set_mark();
    ok = ok && expect(r, !gcm_tag(&c, part, 0), "GCM: a tag of 0 bytes was given")
        && expect(r, !gcm_tag(&c, part, BLOCK + 1), "GCM: a tag of 17 bytes was given")
        && open_init(r, &d, MODE_GCM, 0, K1, GIV)
        && expect(r, !gcm_tag(&d, part, BLOCK), "GCM: a decrypting context gave a tag");
    ERR_pop_to_mark();
    close_ctx(&c);
    close_ctx(&d);
    return ok;
}

int check_UNKNOWN_PARAMS_IGNORED(assume_run *r)
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
    ok = open_init(r, &c, MODE_GCM, 0, K1, GIV)
        && need(r, upd(&c, out, in, 16) == 16, "data")
        && expect(r, c.fb->get_ctx_params(c.ctx, p), "get_ctx_params failed for an unknown key")
        && expect(r, ivlen == 12 && p[1].return_size == OSSL_PARAM_UNMODIFIED
                  && memcmp(buf, (unsigned char[BLOCK]){ 0 }, BLOCK) == 0,
                  "get_ctx_params touched an unknown key");
    close_ctx(&c);
    return ok;
}

int check_GCM_CIPHER_FORMS(assume_run *r)
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
    memset(ta, 0, sizeof(ta));
    /* update: in NULL with a length is a final too */
    ok = ok && need(r, init(&c, 1, K1, GIV), "init") && need(r, upd(&c, NULL, in, 13) == 13, "AAD")
        && need(r, upd(&c, a, in, 40) == 40, "data")
        && expect(r, c.fb->update(c.ctx, a, &outl, 40, NULL, 40) && outl == 0,
                  "GCM update(): in NULL is not final")
        && need(r, gcm_tag(&c, ta, BLOCK), "tag")
        && expect(r, memcmp(ta, tb, BLOCK) == 0, "GCM update(): in NULL gives another tag");
    close_ctx(&c);
    return ok;
}

int check_GCM_PARAMS_IN_ORDER(assume_run *r)
{
    unsigned char in[16], out[32], tag[BLOCK], t8[8] = "tag-8by", got[8];
    unsigned char fixed[2] = { 1, 2 }, aad[13] = { 0 };
    size_t ivlen = 16, zero = 0, taglen = 0;
    OSSL_PARAM tag_iv0[3] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, t8, 8),
                              OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &zero), OSSL_PARAM_END };
    OSSL_PARAM iv16_fixed[3] = {
        OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen),
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed, 2), OSSL_PARAM_END };
    OSSL_PARAM tlsaad[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad, 13),
                             OSSL_PARAM_END };
    OSSL_PARAM get[3] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_TAGLEN, &taglen),
                          OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &ivlen), OSSL_PARAM_END };
    fbc c = { 0 }, d = { 0 }, e = { 0 };
    int ok;

    fill(in, sizeof(in), 23);
    ERR_set_mark();
    /* decrypting: the tag is taken before ivlen 0 is refused */
    ok = open_init(r, &d, MODE_GCM, 0, K1, GIV)
        && need(r, !d.fb->set_ctx_params(d.ctx, tag_iv0), "tag, ivlen 0 refused")
        && need(r, d.fb->get_ctx_params(d.ctx, get), "taglen")
        && expect(r, taglen == 8, "GCM: a tag before a refused ivlen was not taken");
    /* ivlen is taken before a bad tlsivfixed is refused */
    ivlen = 16;
    ok = ok && open_init(r, &e, MODE_GCM, 1, K1, GIV)
        && need(r, !e.fb->set_ctx_params(e.ctx, iv16_fixed), "ivlen, bad tlsivfixed refused")
        && need(r, (ivlen = 0, e.fb->get_ctx_params(e.ctx, get)), "ivlen")
        && expect(r, ivlen == 16, "GCM: an ivlen before a refused tlsivfixed was not taken");
    /* encrypting: a refused tag overwrites the last tag; a refused 13-byte
     * TLS AAD (length field below 8) leaves TLS mode on: data out of place fails */
    ok = ok && gcm_finished(r, &c, 0, in, out, 16, tag)
        && need(r, !gcm_set_tag(&c, t8, 8), "tag refused when encrypting")
        && need(r, gcm_tag(&c, got, 8), "tag")
        && expect(r, memcmp(got, t8, 8) == 0, "GCM: a refused tag did not overwrite the tag")
        && need(r, init(&c, 1, NULL, GIV), "init")
        && need(r, !c.fb->set_ctx_params(c.ctx, tlsaad), "short TLS AAD refused")
        && expect(r, upd(&c, out, in, 16) == SIZE_MAX, "GCM: a refused 13-byte TLS AAD left no TLS mode");
    ERR_pop_to_mark();
    close_ctx(&c);
    close_ctx(&d);
    close_ctx(&e);
    return ok;
}

/* The context's TLS AAD pad is 16. */
static int pad_is_16(assume_run *r, const fbc *c, const char *when)
{
    size_t pad;

    return need(r, get_size(c->fb, c->ctx, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD_PAD, &pad), "get pad")
        && expect(r, pad == 16, when);
}

int check_GCM_TLS_AAD_PAD(assume_run *r)
{
    /* sequence number, type, version, length 40: an explicit IV (8), 16 bytes
     * of data and a tag (16); decrypting, the data is 16 bytes */
    unsigned char aad[13] = { 0, 0, 0, 0, 0, 0, 0, 1, 23, 3, 3, 0, 40 };
    unsigned char fixed[12] = "tls-fixed12", rec[40], out[56];
    /* The whole IV (length -1, as EVP_CTRL_GCM_SET_IV_FIXED with -1 gives it):
     * a fixed part alone has an encrypting context draw the rest from its
     * DRBG, and instantiating that DRBG cost 0.6 ms at every load. */
    OSSL_PARAM iv_fixed[2] = {
        OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED, fixed, (size_t)-1),
        OSSL_PARAM_END };
    OSSL_PARAM tlsaad[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad, 13),
                             OSSL_PARAM_END };
    OSSL_PARAM short_aad[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TLS1_AAD, aad, 12),
                                OSSL_PARAM_END };
    int ok = 1;

    ERR_set_mark();
    for (int enc = 1; ok && enc >= 0; enc--) {
        fbc c = { 0 }, d = { 0 };
        size_t outl;

        fill(rec, sizeof(rec), 40 + enc);
        ok = open_init(r, &c, MODE_GCM, enc, K1, NULL)
            && need(r, c.fb->set_ctx_params(c.ctx, iv_fixed), "TLS fixed IV")
            && need(r, c.fb->set_ctx_params(c.ctx, tlsaad), "TLS AAD")
            && pad_is_16(r, &c, "GCM: the TLS AAD pad after a TLS AAD taken");
        /* a record (decrypting: its tag is wrong, refused), a refused AAD, a
         * re-key: none changes it, nor a copy */
        if (ok)
            (void)c.fb->cipher(c.ctx, out, &outl, sizeof(out), rec, sizeof(rec));
        ok = ok && pad_is_16(r, &c, "GCM: the TLS AAD pad after a record")
            && need(r, !c.fb->set_ctx_params(c.ctx, short_aad), "a 12-byte TLS AAD refused")
            && pad_is_16(r, &c, "GCM: the TLS AAD pad after a refused TLS AAD")
            && need(r, init(&c, enc, K2, NULL), "re-key")
            && pad_is_16(r, &c, "GCM: the TLS AAD pad after a re-key")
            && need(r, (d.fb = c.fb, d.ctx = c.fb->dupctx(c.ctx)) != NULL, "dupctx")
            && pad_is_16(r, &d, "GCM: the TLS AAD pad of a copy");
        close_ctx(&d);
        close_ctx(&c);
    }
    ERR_pop_to_mark();
    return ok;
}
