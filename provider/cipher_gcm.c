/*
 * cipher_gcm.c - AES-GCM.
 *
 * A GCM message (IV .. final) runs on one of two engines, chosen at its first
 * data update:
 *  - the default provider's GCM context (`fbctx`): TLS records, messages that
 *    start small, every message when no GPU is usable.  Its GHASH state cannot
 *    be exported, so a message that started there finishes there.
 *  - gpuaes's own GCM (`g`): counter, partial block, lengths and GHASH state
 *    are ours.  Large whole-block pieces go to the GPU (GPUAES_GCM_* op:
 *    keystream and the GHASH S of their ciphertext); small ones get their
 *    keystream from the default provider's AES-ECB, so later updates may
 *    switch freely.
 *
 * GHASH on our engine.  X is the usual accumulator (X = (X ^ B) * H per
 * block B of AAD || pad || C || pad); we keep Y = X * H instead, because
 * that is what both kinds of pieces deliver without a division by H:
 *  - CPU-hashed bytes (AAD, its pad, small updates' ciphertext) go, in order,
 *    into a "segment": a default-provider GCM context with the same key and
 *    the all-zero 96-bit IV, fed them as AAD (OpenSSL's fast GHASH).  For a
 *    segment of b bytes (k = ceil(b/16) blocks, zero-padded), GHASH from zero
 *    S_seg, and length block L' = [8b]_64 || [0]_64, its tag is
 *    tag' = (S_seg ^ L') * H ^ E0 with E0 = E_K(0^96 || 0^31 || 1), so
 *    S_seg * H = tag' ^ E0 ^ L' * H.  Appending it: X' = X * H^k ^ S_seg, so
 *    Y' = Y * H^k ^ tag' ^ E0 ^ L' * H.
 *  - a GPU piece of n blocks with GHASH S (from zero): Y' = Y * H^n ^ S * H.
 *  - final: tag = (X ^ L) * H ^ E_K(J0) = Y ^ L * H ^ E_K(J0),
 *    L = [8 * aadlen]_64 || [8 * datalen]_64.
 * A segment is closed before each GPU piece (it then holds whole blocks: the
 * GPU piece starts block-aligned, after the CPU finished the partial block,
 * and AAD's pad is in the segment) and at final (a trailing partial block is
 * zero-padded by the segment's own final, as AAD, which is what GCM's pad
 * of C is).  Everything is duplicable (dupctx).  (ASSUME_GCM_SEGMENT_GHASH;
 * the other ASSUME_GCM_* of provider/fallback_assumptions.h are the default
 * provider's message rules, which this engine repeats.)
 */
#include <stdint.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "gpuaes.h"
#include "gcm_math.h"
#include "gpuaes_counter.h"

#define BLOCK 16
#define AAD_STASH 256                 /* AAD kept while the engine is undecided */
#define GCM_MAX_DATA ((1ULL << 36) - 32)   /* SP 800-38D's limit on one message */

typedef enum { MSG_FALLBACK, MSG_UNDECIDED, MSG_GPU } msg_engine;

typedef struct gcm_ctx {
    const gpuaes_prov *prov;
    const gpuaes_variant *var;
    const fallback_cipher *fb;        /* default provider's AES-GCM */
    const fallback_cipher *ecb;       /* default provider's AES-ECB of the same key size */
    const fallback_cipher *ctr;       /* ... and AES-CTR */
    void *fbctx;
    int enc;
    int tls;                          /* TLS params seen: records stay on the fallback */
    unsigned char key[32];
    int key_set;
    unsigned char iv[128];
    size_t ivlen;
    int iv_set;
    msg_engine msg;
    unsigned char aad[AAD_STASH];     /* AAD of an undecided message, not yet in the segment */
    size_t naad;
    unsigned char tag[BLOCK];         /* decrypt: expected; encrypt: computed at final */
    size_t taglen;
    int tag_ours;                     /* the last tag made was our engine's (else the fallback's) */
    /* gpuaes's own GCM engine (msg == MSG_GPU) */
    struct {
        void *seg;                    /* default GCM, zero IV: GHASH of a segment, as AAD */
        void *ecbctx;                 /* default AES-ECB: H, E_K(J0), a partial block's keystream */
        void *ctrctx;                 /* default AES-CTR: whole blocks on the CPU */
        gpuaes_key *gpukey;
        int keyed;                    /* aux contexts hold the current key */
        unsigned char h[BLOCK];
        unsigned char e0[BLOCK];      /* E_K(0^96 || 0^31 || 1): masks the segment's tag */
        unsigned char ekj0[BLOCK];    /* E_K(J0): masks the message's tag */
        unsigned char y[BLOCK];       /* Y = X * H over everything folded so far */
        int y_zero;                   /* nothing folded yet (Y = 0): skip Y * H^k */
        int seg_live;                 /* the segment was started for this message */
        unsigned long long seg_bytes; /* bytes fed to the live segment */
        unsigned long long pow_n;     /* pow = H^pow_n when pow_ok (lengths repeat) */
        unsigned char pow[BLOCK];
        int pow_ok;
        unsigned char ctr[BLOCK];     /* counter block of the next keystream block */
        unsigned char ek[BLOCK];      /* keystream of the current partial block */
        size_t mres;                  /* bytes of ek used */
        unsigned long long aadlen, datalen;
        int finished;
        int ghash_dead;               /* a final failed: as in the default provider, data
                                         still flows but no tag will verify */
    } g;
} gcm_ctx;

/* The default provider's cipher of another mode with the same key size. */
static const fallback_cipher *sibling(const gpuaes_variant *var, gpuaes_mode mode)
{
    for (size_t v = 0; v < gpuaes_variant_count; v++)
        if (gpuaes_variants[v].mode == mode && gpuaes_variants[v].keylen == var->keylen)
            return gpuaes_variants[v].fallback;
    return NULL;
}

void *gcm_newctx(void *provctx, const gpuaes_variant *var)
{
    gcm_ctx *c = OPENSSL_zalloc(sizeof(*c));
    const gpuaes_prov *prov = provctx;

    if (c == NULL)
        return NULL;
    c->prov = prov;
    c->var = var;
    c->fb = var->fallback;
    c->ecb = sibling(var, MODE_ECB);
    c->ctr = sibling(var, MODE_CTR);
    c->ivlen = 12;                    /* the default's initial IV length: ASSUME_GCM_IVLEN_VOIDS_IV */
    c->fbctx = c->fb->newctx(prov->fallback_provctx);
    if (c->fbctx == NULL || c->ecb == NULL || c->ctr == NULL) {
        c->fb->freectx(c->fbctx);
        OPENSSL_free(c);
        return NULL;
    }
    return c;
}

static void free_engine(gcm_ctx *c)
{
    if (c->g.seg != NULL)
        c->fb->freectx(c->g.seg);
    if (c->g.ecbctx != NULL)
        c->ecb->freectx(c->g.ecbctx);
    if (c->g.ctrctx != NULL)
        c->ctr->freectx(c->g.ctrctx);
    gpuaes_key_free(c->g.gpukey);
}

void gcm_freectx(void *vctx)
{
    gcm_ctx *c = vctx;

    if (c == NULL)
        return;
    c->fb->freectx(c->fbctx);
    free_engine(c);
    OPENSSL_clear_free(c, sizeof(*c));
}

void *gcm_dupctx(void *vctx)
{
    const gcm_ctx *src = vctx;
    gcm_ctx *c = OPENSSL_malloc(sizeof(*c));

    if (c == NULL)
        return NULL;
    *c = *src;
    c->g.gpukey = NULL;               /* remade on first use */
    c->g.seg = src->g.seg != NULL ? src->fb->dupctx(src->g.seg) : NULL;
    c->g.ecbctx = src->g.ecbctx != NULL ? src->ecb->dupctx(src->g.ecbctx) : NULL;
    c->g.ctrctx = src->g.ctrctx != NULL ? src->ctr->dupctx(src->g.ctrctx) : NULL;
    c->fbctx = src->fb->dupctx(src->fbctx);
    if (c->fbctx == NULL || (src->g.seg != NULL && c->g.seg == NULL)
        || (src->g.ecbctx != NULL && c->g.ecbctx == NULL)
        || (src->g.ctrctx != NULL && c->g.ctrctx == NULL)) {
        gcm_freectx(c);
        return NULL;
    }
    return c;
}

static void note_params(gcm_ctx *c, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;
    size_t sz;

    if (params == NULL)
        return;
    if (OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD) != NULL
        || OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED) != NULL
        || OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV) != NULL) {
        c->tls = 1;
        c->msg = MSG_FALLBACK;
    }
    /* A different IV length voids the IV (the default provider then refuses
     * data: ASSUME_GCM_IVLEN_VOIDS_IV). */
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_IVLEN);
    if (p != NULL && OSSL_PARAM_get_size_t(p, &sz) && sz != c->ivlen) {
        c->ivlen = sz;
        c->iv_set = 0;
        if (!(c->msg == MSG_GPU && c->g.finished))
            c->msg = MSG_FALLBACK;
    }
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TAG);
    if (p != NULL && p->data != NULL && p->data_size <= BLOCK) {
        memcpy(c->tag, p->data, p->data_size);
        c->taglen = p->data_size;
        c->tag_ours = 0;              /* the fallback's tag buffer holds it too */
    }
}

/* The default provider has the IV buffered, not yet applied (its first
 * non-empty AAD or data update applies it): the message has not started.
 * (ASSUME_GCM_IV_BUFFERED) */
static int iv_buffered(const gcm_ctx *c)
{
    return c->msg == MSG_UNDECIDED && c->naad == 0 && c->g.aadlen == 0;
}

static int gcm_init(gcm_ctx *c, const unsigned char *key, size_t keylen,
                    const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = enc ? c->fb->einit : c->fb->dinit;

    if (key != NULL && iv == NULL && c->msg == MSG_GPU && !c->g.finished) {
        /* Re-keyed in the middle of a message on our engine: the fallback takes
         * over.  The default provider would now hold a started message (its IV
         * applied) whose GCM state the new key zeroes; one byte of AAD brings
         * the fallback to that same point before the re-key zeroes it too.
         * (ASSUME_GCM_REKEY_RESETS_MESSAGE) */
        static const unsigned char one = 0;
        size_t outl;

        ERR_set_mark();
        (void)c->fb->update(c->fbctx, NULL, &outl, 1, &one, 1);
        ERR_pop_to_mark();
    }

    if (!init(c->fbctx, key, keylen, iv, ivlen, params)) {
        /* It may have taken the key or IV before failing: an undecided
         * message is all in the fallback, which now knows best. */
        if (c->msg == MSG_UNDECIDED)
            c->msg = MSG_FALLBACK;
        return 0;
    }
    c->enc = enc;
    if (key != NULL) {
        memcpy(c->key, key, c->var->keylen);
        c->key_set = 1;
        c->g.keyed = 0;
        gpuaes_key_free(c->g.gpukey);
        c->g.gpukey = NULL;
        /* Re-keyed mid-message: the default provider's context carries on (a
         * finished message stays finished: no update or final without a new
         * IV).  Before the message's first AAD or data the default provider
         * still holds the IV buffered and starts the message with it under
         * the new key, as `openssl speed` does (IV, then key): undecided.
         * (ASSUME_GCM_FINISHED_UNTIL_IV, ASSUME_GCM_IV_BUFFERED) */
        if (iv == NULL && c->msg != MSG_FALLBACK && !(c->msg == MSG_GPU && c->g.finished)
            && !iv_buffered(c))
            c->msg = MSG_FALLBACK;
    }
    if (iv != NULL) {
        memcpy(c->iv, iv, ivlen);
        c->ivlen = ivlen;
        c->iv_set = 1;
        /* Undecided only if the GPU could take this message at all. */
        c->msg = c->tls || c->prov->offload_min[OFFLOAD_GCM] == SIZE_MAX ? MSG_FALLBACK
                                                                          : MSG_UNDECIDED;
        c->naad = 0;
        memset(&c->g.ctr, 0, sizeof(c->g.ctr));
        memset(c->g.y, 0, sizeof(c->g.y));
        c->g.y_zero = 1;
        c->g.seg_live = 0;
        c->g.seg_bytes = 0;
        c->g.mres = 0;
        c->g.aadlen = c->g.datalen = 0;
        c->g.finished = 0;
        c->g.ghash_dead = 0;
    }
    note_params(c, params);
    return 1;
}

int gcm_einit(void *vctx, const unsigned char *key, size_t keylen,
              const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return gcm_init(vctx, key, keylen, iv, ivlen, params, 1);
}

int gcm_dinit(void *vctx, const unsigned char *key, size_t keylen,
              const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return gcm_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* ---- gpuaes's own engine ---- */

/* AAD (or pad, or ciphertext) into the segment, started on first use.
 * (ASSUME_GCM_SEGMENT_GHASH, ASSUME_REINIT_KEEPS_SCHEDULE) */
static int seg_feed(gcm_ctx *c, const unsigned char *p, size_t len)
{
    static const unsigned char zero_iv[12];
    size_t outl;

    if (c->g.ghash_dead || len == 0)
        return 1;
    if (!c->g.seg_live) {
        if (!c->fb->einit(c->g.seg, NULL, 0, zero_iv, sizeof(zero_iv), NULL))
            goto err;
        c->g.seg_live = 1;
        c->g.seg_bytes = 0;
    }
    /* The default provider wants an "output size" even for AAD. */
    if (!c->fb->update(c->g.seg, NULL, &outl, len, p, len))
        goto err;
    c->g.seg_bytes += len;
    return 1;
 err:
    c->g.ghash_dead = 1;              /* bytes are missing from GHASH: no tag may come out */
    return 0;
}

/* Y = Y * H^nblocks ^ add: appends nblocks blocks whose GHASH from zero,
 * times H, is `add`.  nblocks is public; H^n is cached (sizes repeat). */
static void y_fold(gcm_ctx *c, unsigned long long nblocks, const unsigned char add[BLOCK])
{
    if (!c->g.y_zero) {
        if (!c->g.pow_ok || c->g.pow_n != nblocks) {
            gf128_pow(c->g.pow, c->g.h, nblocks);
            c->g.pow_n = nblocks;
            c->g.pow_ok = 1;
        }
        gf128_mul(c->g.y, c->g.pow);
    }
    for (int i = 0; i < BLOCK; i++)
        c->g.y[i] ^= add[i];
    c->g.y_zero = 0;
}

/* Ends the segment of `bytes` bytes: y = S_seg * H (see the top of this file). */
static int seg_result(gcm_ctx *c, unsigned long long bytes, unsigned char y[BLOCK])
{
    unsigned char l[BLOCK];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, y, BLOCK),
                        OSSL_PARAM_END };
    size_t outl;

    if (!c->fb->final(c->g.seg, NULL, &outl, 0) || !c->fb->get_ctx_params(c->g.seg, p))
        return 0;
    gcm_len_block(l, bytes * 8, 0);
    gf128_mul(l, c->g.h);
    for (int i = 0; i < BLOCK; i++)
        y[i] ^= c->g.e0[i] ^ l[i];
    OPENSSL_cleanse(l, sizeof(l));    /* L' * H gives H away */
    return 1;
}

/* Closes the live segment into Y (see the top of this file).  Before a GPU
 * piece (at_final == 0) it must hold whole blocks. */
static int seg_close(gcm_ctx *c, int at_final)
{
    unsigned char t[BLOCK];
    int ok;

    if (c->g.ghash_dead || !c->g.seg_live)
        return 1;
    c->g.seg_live = 0;
    if (c->g.seg_bytes == 0)
        return 1;
    /* Cannot happen (a GPU piece starts block-aligned), but would give a wrong tag. */
    ok = (at_final || c->g.seg_bytes % BLOCK == 0) && seg_result(c, c->g.seg_bytes, t);
    if (ok)
        y_fold(c, (c->g.seg_bytes + BLOCK - 1) / BLOCK, t);
    OPENSSL_cleanse(t, sizeof(t));
    if (!ok)
        c->g.ghash_dead = 1;          /* the segment is lost: no tag may come out */
    return ok;
}

/* The keystream block of a partial block: the default provider's AES-ECB. */
static int cpu_keystream_block(gcm_ctx *c, unsigned char ek[BLOCK])
{
    size_t outl;
    int ok = c->ecb->update(c->g.ecbctx, ek, &outl, BLOCK, c->g.ctr, BLOCK) && outl == BLOCK;

    gpuaes_ctr32_add(c->g.ctr, 1);
    return ok;
}

/*
 * Whole blocks on the CPU: the default provider's AES-CTR (its AES-NI code
 * and XOR; ECB over counters and a byte loop ran at a fraction of that),
 * restarted at counter block ctr, advanced (ASSUME_REINIT_KEEPS_SCHEDULE).
 * GCM's inc32 wraps the low 32 bits where CTR would carry into the rest, so
 * a piece that crosses the wrap is cut there.
 */
static int cpu_ctr32(gcm_ctx *c, unsigned char ctr[BLOCK], unsigned char *out,
                     const unsigned char *in, size_t len)
{
    while (len > 0) {
        uint64_t to_wrap = gpuaes_ctr32_to_wrap(ctr);
        size_t n = len / BLOCK <= to_wrap ? len : (size_t)(to_wrap * BLOCK), outl;

        if (!c->ctr->einit(c->g.ctrctx, NULL, 0, ctr, BLOCK, NULL)
            || !c->ctr->update(c->g.ctrctx, out, &outl, n, in, n) || outl != n)
            return 0;
        gpuaes_ctr32_add(ctr, n / BLOCK);
        out += n;
        in += n;
        len -= n;
    }
    return 1;
}

/* Key the auxiliary contexts and compute H and E0 once per key. */
static int engine_key(gcm_ctx *c)
{
    unsigned char blocks[2 * BLOCK] = { 0 }, enc[2 * BLOCK];
    unsigned int pad = 0;
    OSSL_PARAM nopad[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &pad), OSSL_PARAM_END };
    size_t outl;
    int ok;

    if (c->g.keyed)
        return 1;
    if (c->g.seg == NULL && (c->g.seg = c->fb->newctx(c->prov->fallback_provctx)) == NULL)
        return 0;
    if (c->g.ecbctx == NULL && (c->g.ecbctx = c->ecb->newctx(c->prov->fallback_provctx)) == NULL)
        return 0;
    if (c->g.ctrctx == NULL && (c->g.ctrctx = c->ctr->newctx(c->prov->fallback_provctx)) == NULL)
        return 0;
    blocks[2 * BLOCK - 1] = 1;        /* 0^128, then the zero IV's J0 = 0^96 || 0^31 || 1 */
    ok = c->ecb->einit(c->g.ecbctx, c->key, c->var->keylen, NULL, 0, nopad)
        && c->ecb->update(c->g.ecbctx, enc, &outl, sizeof(blocks), blocks, sizeof(blocks))
        && outl == sizeof(blocks)
        && c->fb->einit(c->g.seg, c->key, c->var->keylen, NULL, 0, NULL)
        && c->ctr->einit(c->g.ctrctx, c->key, c->var->keylen, NULL, 0, NULL);
    if (ok) {
        memcpy(c->g.h, enc, BLOCK);
        memcpy(c->g.e0, enc + BLOCK, BLOCK);
        c->g.pow_ok = 0;
        c->g.seg_live = 0;            /* the key went in without an IV: restart on use */
        c->g.keyed = 1;
    }
    OPENSSL_cleanse(enc, sizeof(enc));
    return ok;
}

/* Start gpuaes's engine for this message: counter, E_K(J0), stashed AAD. */
static int engine_start(gcm_ctx *c)
{
    size_t outl;

    if (!engine_key(c))
        return 0;
    if (!seg_feed(c, c->aad, c->naad))
        return 0;
    c->g.aadlen += c->naad;
    c->naad = 0;
    if (c->ivlen == 12) {
        memcpy(c->g.ctr, c->iv, 12);
        memset(c->g.ctr + 12, 0, 3);
        c->g.ctr[15] = 1;
    } else {
        gcm_j0_from_iv(c->g.ctr, c->g.h, c->iv, c->ivlen);
    }
    /* J0 masks the tag; data starts at inc32(J0) */
    if (!c->ecb->update(c->g.ecbctx, c->g.ekj0, &outl, BLOCK, c->g.ctr, BLOCK) || outl != BLOCK)
        return 0;
    gpuaes_ctr32_add(c->g.ctr, 1);
    c->g.mres = 0;
    c->msg = MSG_GPU;
    return 1;
}

/* AAD of an undecided message: stash it; too much for the stash goes to the segment now. */
static int undecided_aad(gcm_ctx *c, const unsigned char *in, size_t inl)
{
    if (c->naad + inl <= AAD_STASH) {
        memcpy(c->aad + c->naad, in, inl);
        c->naad += inl;
        return 1;
    }
    /* No engine to keep it for.  (A GPU not started yet is not started for AAD:
     * only data worth the GPU starts it.) */
    if (offload_ruled_out(OFFLOAD_GCM)) {
        c->msg = MSG_FALLBACK;
        return 1;
    }
    if (!engine_key(c))
        return 0;
    if (!seg_feed(c, c->aad, c->naad) || !seg_feed(c, in, inl))
        return 0;
    c->g.aadlen += c->naad + inl;
    c->naad = 0;
    return 1;
}

/* Whole blocks on the CPU from our counter, their ciphertext into the
 * segment (decrypting: before in place overwrites it). */
static int cpu_blocks(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len)
{
    return (c->enc || seg_feed(c, in, len)) && cpu_ctr32(c, c->g.ctr, out, in, len)
        && (!c->enc || seg_feed(c, out, len));
}

/* The caller's share of a GPU piece (gpuaes_cpu_share_fn): the default
 * provider's AES-CTR from the piece's counter, and (gh) the GHASH of its
 * ciphertext from zero, times H, through a segment of its own (the message's
 * is closed while the GPU piece runs). */
typedef struct gcm_share_arg {
    gcm_ctx *c;
    int gh;
    int failed;
} gcm_share_arg;

static int seg_ghash(gcm_ctx *c, const unsigned char *p, size_t n, unsigned char y[BLOCK])
{
    static const unsigned char zero_iv[12];
    size_t outl;

    return c->fb->einit(c->g.seg, NULL, 0, zero_iv, sizeof(zero_iv), NULL)
        && c->fb->update(c->g.seg, NULL, &outl, n, p, n) && seg_result(c, n, y);
}

static int gcm_share(void *arg, const unsigned char *in, unsigned char *out, size_t n,
                     const unsigned char state[BLOCK], unsigned char ghash[BLOCK])
{
    gcm_share_arg *a = arg;
    gcm_ctx *c = a->c;
    unsigned char ctr[BLOCK];
    int ok;

    memcpy(ctr, state, BLOCK);
    ok = (!a->gh || c->enc || seg_ghash(c, in, n, ghash)) && cpu_ctr32(c, ctr, out, in, n)
        && (!a->gh || !c->enc || seg_ghash(c, out, n, ghash));
    OPENSSL_cleanse(ctr, sizeof(ctr));
    if (!ok)
        a->failed = 1;
    return ok;
}

/* A GPU piece: mid whole blocks from a block boundary, the calling thread
 * taking pieces from its end (gpu_cpu_share).  *done: how many are done
 * (keystream and GHASH): the GPU's prefix, or all of mid once the tail is
 * done and the gap between them (after a GPU failure) completed here; the
 * rest is the caller's. */
static int gpu_piece(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t mid,
                     size_t *done)
{
    int gh = !c->g.ghash_dead;        /* after a failed final, no GHASH is kept */
    gpuaes_job job = { .op = !gh ? GPUAES_CTR32 : c->enc ? GPUAES_GCM_ENCRYPT : GPUAES_GCM_DECRYPT,
                       .in = in, .out = out, .len = mid };
    gcm_share_arg share = { c, gh, 0 };
    size_t from;
    int ok = 1;

    *done = 0;
    if (c->g.gpukey == NULL)
        c->g.gpukey = gpuaes_key_new(c->key, c->var->keylen);
    if (c->g.gpukey == NULL)
        return 1;                     /* the CPU does it all */
    if (!seg_close(c, 0))             /* Y up to the GPU piece's first block */
        return 0;
    job.key = c->g.gpukey;
    memcpy(job.iv, c->g.ctr, BLOCK);
    memcpy(job.h, c->g.h, BLOCK);
    if (c->prov->cpu_share == CPU_SHARE_ALL) {   /* not measured to help GCM yet */
        job.cpu_share = gcm_share;
        job.cpu_share_arg = &share;
    }
    *done = offload_run(&job);
    from = job.cpu_from;
    memcpy(c->g.ctr, job.iv, BLOCK);
    if (gh && *done > 0)              /* Y = Y * H^n ^ S * H */
        y_fold(c, *done / BLOCK, job.ghash);
    if (share.failed) {               /* output in place may be lost: the update fails */
        ERR_raise_data(ERR_LIB_PROV, ERR_R_OPERATION_FAIL, "gpuaes: the CPU share of a GPU job failed");
        ok = 0;
    } else if (from < mid) {
        /* The gap, then the tail: Y = Y * H^t ^ Y_tail. */
        ok = cpu_blocks(c, out + *done, in + *done, from - *done) && seg_close(c, 0);
        if (ok && !c->g.ghash_dead)
            y_fold(c, (mid - from) / BLOCK, job.ghash_tail);
        memcpy(c->g.ctr, job.iv_end, BLOCK);
        *done = mid;
    }
    OPENSSL_cleanse(job.iv, BLOCK);
    OPENSSL_cleanse(job.iv_end, BLOCK);
    OPENSSL_cleanse(job.h, BLOCK);
    OPENSSL_cleanse(job.ghash, BLOCK);
    OPENSSL_cleanse(job.ghash_tail, BLOCK);
    return ok;
}

/*
 * Keystream XOR and GHASH of the ciphertext on gpuaes's engine: the rest of
 * the partial block, whole blocks (GPU for a large piece), a new partial
 * block.  CPU-hashed ciphertext goes into the segment: when decrypting
 * before it is decrypted (in place it is overwritten), after encrypting.
 */
static int engine_update(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len)
{
    static const unsigned char zero[BLOCK];
    size_t head = 0, mid, done = 0, total = len;

    if (c->g.datalen == 0 && c->g.aadlen % BLOCK != 0
        && !seg_feed(c, zero, BLOCK - c->g.aadlen % BLOCK))
        return 0;
    if (c->g.mres > 0) {
        head = BLOCK - c->g.mres < len ? BLOCK - c->g.mres : len;
        if (!c->enc && !seg_feed(c, in, head))
            return 0;
        for (size_t i = 0; i < head; i++)
            out[i] = in[i] ^ c->g.ek[c->g.mres + i];
        if (c->enc && !seg_feed(c, out, head))
            return 0;
        c->g.mres = (c->g.mres + head) % BLOCK;
    }
    out += head;
    in += head;
    len -= head;
    mid = len & ~(size_t)(BLOCK - 1);
    /* Dispatch chose this engine at the message's first data; from then on
     * its pieces go to the GPU whenever it takes them: the engine's own CPU
     * path is slower than the default provider's stitched GCM, which cannot
     * take over in the middle of a message. */
    if (mid >= BLOCK && mid >= c->prov->offload_min[OFFLOAD_GCM] && offload_possible(OFFLOAD_GCM)
        && !gpu_piece(c, out, in, mid, &done))
        return 0;
    /* The rest on the CPU: in[done..len) is untouched by the GPU piece. */
    if (!c->enc && !seg_feed(c, in + done, len - done))
        return 0;
    if (!cpu_ctr32(c, c->g.ctr, out + done, in + done, mid - done))
        return 0;
    if (len > mid) {                  /* a new partial block */
        if (!cpu_keystream_block(c, c->g.ek))
            return 0;
        for (size_t i = mid; i < len; i++)
            out[i] = in[i] ^ c->g.ek[i - mid];
        c->g.mres = len - mid;
    }
    if (c->enc && !seg_feed(c, out + done, len - done))
        return 0;
    c->g.datalen += total;
    return 1;
}

static int engine_final(gcm_ctx *c)
{
    unsigned char tag[BLOCK], l[BLOCK];
    int ok;

    if (!c->enc && c->taglen == 0)
        return 0;                     /* no tag, no final (yet): ASSUME_GCM_DECRYPT_NEEDS_TAG */
    if (c->g.ghash_dead)
        return 0;
    if (!seg_close(c, 1))             /* the last segment, its partial block zero-padded */
        return 0;
    /* tag = Y ^ L * H ^ E_K(J0) */
    gcm_len_block(l, c->g.aadlen * 8, c->g.datalen * 8);
    gf128_mul(l, c->g.h);
    for (int i = 0; i < BLOCK; i++)
        tag[i] = c->g.y[i] ^ l[i] ^ c->g.ekj0[i];
    if (c->enc) {
        memcpy(c->tag, tag, BLOCK);
        c->taglen = BLOCK;
        c->tag_ours = 1;
        ok = 1;
    } else {
        ok = CRYPTO_memcmp(tag, c->tag, c->taglen) == 0;
    }
    /* Only a successful final ends the message (as in the default provider:
     * ASSUME_GCM_FINISHED_UNTIL_IV, ASSUME_GCM_FAILED_FINAL_CONTINUES). */
    c->g.finished = ok;
    c->g.ghash_dead = !ok;
    OPENSSL_cleanse(tag, sizeof(tag));
    if (ok) {                         /* after a failed final, data may still flow */
        OPENSSL_cleanse(&c->g.ek, sizeof(c->g.ek));
        OPENSSL_cleanse(&c->g.y, sizeof(c->g.y));
    }
    return ok;
}

/* ---- dispatch ---- */

/* The default provider's GCM; data calls of DISPATCH_SAMPLE or more are
 * timed for dispatch's estimate of the CPU (AAD and small calls are not). */
static int fb_update_timed(gcm_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                           const unsigned char *in, size_t inl)
{
    uint64_t t0;
    int ok;

    if (out == NULL || inl < DISPATCH_SAMPLE || c->tls)
        return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    t0 = dispatch_now_ns();
    ok = c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    if (ok)
        dispatch_cpu_done(OFFLOAD_GCM, c->var->keylen, inl, dispatch_now_ns() - t0);
    return ok;
}

static int gpu_possible(const gcm_ctx *c)
{
    return !c->tls && c->key_set && c->iv_set;   /* offload_wanted() asks for the GPU */
}

static __attribute__((noinline)) int update_engine(gcm_ctx *c, unsigned char *out, size_t *outl,
                                                   size_t outsize, const unsigned char *in,
                                                   size_t inl)
{
    switch (c->msg) {
    case MSG_FALLBACK:
        return fb_update_timed(c, out, outl, outsize, in, inl);
    case MSG_UNDECIDED:
        if (out == NULL) {            /* AAD: both engines may need it */
            if (!c->fb->update(c->fbctx, out, outl, outsize, in, inl))
                return 0;
            return undecided_aad(c, in, inl);
        }
        /* The first data decides; the dispatcher is asked last (it counts). */
        if (inl == 0 || !gpu_possible(c)
            || !offload_wanted(c->prov, OFFLOAD_GCM, c->var->keylen, inl)) {
            /* Refused (no key yet, output too small): the message has not
             * started, the IV stays buffered and a later key may still take it. */
            if (!fb_update_timed(c, out, outl, outsize, in, inl))
                return 0;
            if (inl > 0)
                c->msg = MSG_FALLBACK;
            return 1;
        }
        if (!engine_start(c)) {
            ERR_raise(ERR_LIB_PROV, PROV_R_CIPHER_OPERATION_FAILED);
            return 0;
        }
        /* fall through: the first data of a message on gpuaes's engine */
    case MSG_GPU:
        break;
    }
    if (inl == 0) {                   /* before any state check: ASSUME_GCM_EMPTY_UPDATE_OK */
        *outl = 0;
        return 1;
    }
    if (c->g.finished) {
        ERR_raise(ERR_LIB_PROV, PROV_R_CIPHER_OPERATION_FAILED);
        return 0;
    }
    if (out == NULL) {                /* AAD after data refused: ASSUME_GCM_AAD_BEFORE_DATA */
        if (c->g.datalen > 0 || !seg_feed(c, in, inl)) {
            ERR_raise(ERR_LIB_PROV, PROV_R_CIPHER_OPERATION_FAILED);
            return 0;
        }
        c->g.aadlen += inl;
        *outl = inl;
        return 1;
    }
    if (outsize < inl) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (c->g.datalen + inl > GCM_MAX_DATA || c->g.datalen + inl < c->g.datalen
        || !engine_update(c, out, in, inl)) {
        ERR_raise(ERR_LIB_PROV, PROV_R_CIPHER_OPERATION_FAILED);
        return 0;
    }
    *outl = inl;
    return 1;
}

/* The hot path: a message on the default provider is a tail call into it. */
int gcm_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
               const unsigned char *in, size_t inl)
{
    gcm_ctx *c = vctx;

    if (c->msg == MSG_FALLBACK && inl < DISPATCH_SAMPLE)
        return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    return update_engine(c, out, outl, outsize, in, inl);
}

int gcm_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    gcm_ctx *c = vctx;

    if (c->msg != MSG_GPU) {
        c->msg = MSG_FALLBACK;        /* its state now says what may follow */
        c->tag_ours = 0;
        return c->fb->final(c->fbctx, out, outl, outsize);
    }
    if (c->g.finished)
        return 0;
    *outl = 0;
    return engine_final(c);
}

/* EVP_Cipher(): in == NULL is final, out == NULL is AAD (libssl's TLS 1.2 path;
 * ASSUME_GCM_CIPHER_FORMS). */
int gcm_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
               const unsigned char *in, size_t inl)
{
    gcm_ctx *c = vctx;

    if (c->msg != MSG_GPU) {
        c->msg = MSG_FALLBACK;
        return c->fb->cipher(c->fbctx, out, outl, outsize, in, inl);
    }
    if (in == NULL)
        return gcm_final(c, out, outl, outsize);
    return gcm_update(c, out, outl, outsize, in, inl);
}

int gcm_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    gcm_ctx *c = vctx;
    OSSL_PARAM *tag;
    int ok;

    /* EVP asks for ivlen on every init: keep this path short. */
    if (!c->tag_ours || (tag = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_AEAD_TAG)) == NULL)
        return c->fb->get_ctx_params(c->fbctx, params);
    /* The last tag was made by our engine: it is ours; the rest is the fallback's.
     * (ASSUME_GCM_TAG_GET; the renamed entry: ASSUME_UNKNOWN_PARAMS_IGNORED) */
    if (tag->data_size == 0 || tag->data_size > BLOCK || !c->enc) {
        ERR_raise(ERR_LIB_PROV, PROV_R_INVALID_TAG);
        return 0;
    }
    if (!OSSL_PARAM_set_octet_string(tag, c->tag, tag->data_size))
        return 0;
    {
        const char *key = tag->key;

        tag->key = "gpuaes-tag-answered";     /* hide it from the fallback */
        ok = c->fb->get_ctx_params(c->fbctx, params);
        tag->key = key;
    }
    return ok;
}

int gcm_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    gcm_ctx *c = vctx;

    if (!c->fb->set_ctx_params(c->fbctx, params))
        return 0;
    note_params(c, params);
    return 1;
}

/* One list for every GCM variant: ASSUME_SHARED_PARAM_TABLES. */
const OSSL_PARAM *gcm_gettable_params(void *provctx)
{
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[gpuaes_variant_count - 1].fallback->gettable_params(
        prov->fallback_provctx);
}

const OSSL_PARAM *gcm_gettable_ctx_params(void *vctx, void *provctx)
{
    const gcm_ctx *c = vctx;
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[gpuaes_variant_count - 1].fallback->gettable_ctx_params(
        c != NULL ? c->fbctx : NULL, prov->fallback_provctx);
}

const OSSL_PARAM *gcm_settable_ctx_params(void *vctx, void *provctx)
{
    const gcm_ctx *c = vctx;
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[gpuaes_variant_count - 1].fallback->settable_ctx_params(
        c != NULL ? c->fbctx : NULL, prov->fallback_provctx);
}
