/*
 * gcm_engine.c - gpuaes's own GCM engine (gcm_ctx's `g`): counter, partial
 * block, lengths and GHASH state are ours, so a message can move between the
 * GPU and the CPU at every update (cipher_gcm.c chooses the engine).
 *
 * GHASH on this engine.  X is the usual accumulator (X = (X ^ B) * H per
 * block B of AAD || pad || C || pad); we keep Y = X * H instead, because
 * that is what both kinds of pieces deliver without a division by H:
 *  - the message so far, when the engine takes it from the default
 *    provider (at its first data or later: gcm_engine_adopt): Y from the
 *    tag of a finished copy; the AAD and its pad are in it.
 *  - CPU-hashed bytes (small updates' ciphertext) go, in order,
 *    into a "segment": a default-provider GCM context with the same key and
 *    the all-zero 96-bit IV, fed them as AAD (OpenSSL's fast GHASH).  For a
 *    segment of b bytes (k = ceil(b/16) blocks, zero-padded), GHASH from zero
 *    S_seg, and length block L' = [8b]_64 || [0]_64, its tag is
 *    tag' = (S_seg ^ L') * H ^ E0 with E0 = E_K(0^96 || 0^31 || 1), so
 *    S_seg * H = tag' ^ E0 ^ L' * H.  Appending it: X' = X * H^k ^ S_seg, so
 *    Y' = Y * H^k ^ tag' ^ E0 ^ L' * H.
 *  - a GPU piece of n blocks with GHASH S (from zero): Y' = Y * H^n ^ S * H.
 *  - a CPU run of 64 KiB or more of whole blocks (gcm_fused.c): the default
 *    provider's own GCM from our counter, one stitched pass; the same S * H.
 *  - final: tag = (X ^ L) * H ^ E_K(J0) = Y ^ L * H ^ E_K(J0),
 *    L = [8 * aadlen]_64 || [8 * datalen]_64.
 * A segment is closed before each GPU piece and stitched run (it then holds
 * whole blocks: they start block-aligned, after the partial block) and at
 * final (a trailing partial block is zero-padded by the segment's own final,
 * as AAD, which is what GCM's pad of C is).  Everything is
 * duplicable (dupctx).  (ASSUME_GCM_SEGMENT_GHASH; the other ASSUME_GCM_* of
 * provider/assume/fallback_assumptions.h are the default provider's message rules,
 * which this engine repeats.)
 */
#include <stdint.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "gcm_ctx.h"
#include "gcm_math.h"
#include "gpuaes_counter.h"
#include "prov_ctx.h"
#include "gpu/offload.h"
#include "gpu/gpu_backend.h"

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
        c->g.fused.gcm = c->fb;       /* keyed at its first use (fused_ready) */
        c->g.fused.ecb = c->ecb;
        c->g.fused.ecbctx = c->g.ecbctx;
        memcpy(c->g.fused.h, enc, BLOCK);
        c->g.fused.ready = 0;
        c->g.fused_off = 0;
        c->g.pow_ok = 0;
        c->g.seg_live = 0;            /* the key went in without an IV: restart on use */
        c->g.keyed = 1;
    }
    OPENSSL_cleanse(enc, sizeof(enc));
    return ok;
}

/* J0 of the message's IV: E_K(J0) masks the tag; data starts at inc32(J0). */
static int engine_j0(gcm_ctx *c)
{
    size_t outl;

    if (c->ivlen == 12) {
        memcpy(c->g.ctr, c->iv, 12);
        memset(c->g.ctr + 12, 0, 3);
        c->g.ctr[15] = 1;
    } else {
        gcm_j0_from_iv(c->g.ctr, c->g.h, c->iv, c->ivlen);
    }
    if (!c->ecb->update(c->g.ecbctx, c->g.ekj0, &outl, BLOCK, c->g.ctr, BLOCK) || outl != BLOCK)
        return 0;
    gpuaes_ctr32_add(c->g.ctr, 1);
    return 1;
}

/*
 * A message the fallback ran so far (aadlen bytes of AAD, datalen bytes of
 * data, a multiple of 16: 0 when our engine takes a message at its first
 * data) goes on on our engine.  A copy of the fallback's context, finished,
 * gives the tag of the message so far,
 * tag' = (X ^ L) * H ^ E_K(J0), L = [8 * aadlen]_64 || [8 * datalen]_64, so
 * Y = X * H = tag' ^ E_K(J0) ^ L * H, and the counter is inc32(J0) advanced
 * by datalen / 16 blocks.  Exact, any IV length; at datalen 0, X is the
 * GHASH of the AAD with its zero pad, where the data's blocks go on.  A
 * decrypting copy is made an encrypting one first (an init without key or
 * IV sets only the direction): the default provider gives no tag to a
 * decrypting context,
 * and its GHASH of the ciphertext is the same either way.
 * (ASSUME_GCM_DUP_FINAL_TAG)
 */
int gcm_engine_adopt(gcm_ctx *c)
{
    unsigned char t[BLOCK], l[BLOCK];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_AEAD_TAG, t, BLOCK),
                        OSSL_PARAM_END };
    void *d;
    size_t outl;
    int ok;

    if (c->g.datalen % BLOCK != 0 || !engine_key(c))
        return 0;
    ERR_set_mark();                   /* a refusal keeps the message where it is, silently */
    d = c->fb->dupctx(c->fbctx);
    ok = d != NULL && c->fb->einit(d, NULL, 0, NULL, 0, NULL)
        && c->fb->final(d, NULL, &outl, 0) && c->fb->get_ctx_params(d, p)
        && engine_j0(c);
    ERR_pop_to_mark();
    if (d != NULL)
        c->fb->freectx(d);            /* the default provider wipes its contexts */
    if (ok) {
        gcm_len_block(l, c->g.aadlen * 8, c->g.datalen * 8);
        gf128_mul(l, c->g.h);
        for (int i = 0; i < BLOCK; i++)
            c->g.y[i] = t[i] ^ c->g.ekj0[i] ^ l[i];
        gpuaes_ctr32_add(c->g.ctr, c->g.datalen / BLOCK);
        c->g.y_zero = 0;
        c->g.seg_live = 0;
        c->g.seg_bytes = 0;
        c->g.mres = 0;
        c->g.finished = 0;
        c->g.ghash_dead = 0;
        c->g.dirty = 1;
        c->msg = MSG_GPU;
    }
    OPENSSL_cleanse(t, sizeof(t));
    OPENSSL_cleanse(l, sizeof(l));
    return ok;
}

/* The stitched CPU path (gcm_fused.c) for this key, keyed at its first use;
 * 0 when it cannot be had (then AES-CTR and the segment, as before). */
static int fused_ready(gcm_ctx *c)
{
    if (!c->g.fused.ready && !c->g.fused_off
        && !gcm_fused_key(&c->g.fused, c->prov->fallback_provctx, c->key, c->var->keylen))
        c->g.fused_off = 1;
    return c->g.fused.ready;
}

/* Whole blocks on the CPU from our counter: one stitched pass folded into Y
 * (the segment closed first: it holds whole blocks here), or AES-CTR with
 * the ciphertext into the segment (decrypting: before in place overwrites it). */
static int cpu_blocks(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len)
{
    unsigned char sh[BLOCK];
    uint64_t t0;
    int ok;

    if (len < gcm_fused_min() || c->g.ghash_dead || !fused_ready(c))
        return (c->enc || seg_feed(c, in, len)) && cpu_ctr32(c, c->g.ctr, out, in, len)
            && (!c->enc || seg_feed(c, out, len));
    t0 = dispatch_now_ns();
    ok = seg_close(c, 0) && gcm_fused_run(&c->g.fused, c->enc, c->g.ctr, out, in, len, sh);
    if (ok) {
        y_fold(c, len / BLOCK, sh);
        gpuaes_ctr32_add(c->g.ctr, len / BLOCK);
        dispatch_cpu_done(OFFLOAD_GCM, c->var->keylen, len, dispatch_now_ns() - t0);
        offload_count_gcm_fused(len);
    } else {
        c->g.ghash_dead = 1;          /* out may be partly written: no tag may come out */
    }
    OPENSSL_cleanse(sh, sizeof(sh));
    return ok;
}

/*
 * The engine's side of a GPU piece (offload_finish).  The caller's share:
 * the default provider's AES-CTR from the piece's counter, and (gh) the
 * GHASH of its ciphertext from zero, times H, through a segment of its own
 * (the message's is closed while the GPU piece runs).  The GPU's prefix and
 * the share's tail fold into Y; the gap between them goes the CPU's way.
 */
typedef struct gcm_job {
    gcm_ctx *c;
    int gh;
} gcm_job;

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
    gcm_job *g = arg;
    gcm_ctx *c = g->c;
    unsigned char ctr[BLOCK];
    int ok;

    memcpy(ctr, state, BLOCK);
    if (g->gh && n >= gcm_fused_min() && fused_ready(c)) {
        ok = gcm_fused_run(&c->g.fused, c->enc, ctr, out, in, n, ghash);
        if (ok)
            offload_count_gcm_fused(n);
    } else {
        ok = (!g->gh || c->enc || seg_ghash(c, in, n, ghash)) && cpu_ctr32(c, ctr, out, in, n)
            && (!g->gh || !c->enc || seg_ghash(c, out, n, ghash));
    }
    OPENSSL_cleanse(ctr, sizeof(ctr));
    return ok;
}

static int gcm_stopped(void *arg, const gpuaes_job *job)
{
    gcm_job *g = arg;

    memcpy(g->c->g.ctr, job->iv, BLOCK);
    if (g->gh && job->done > 0)       /* Y = Y * H^n ^ S * H */
        y_fold(g->c, job->done / BLOCK, job->ghash);
    return 1;
}

static int gcm_gap(void *arg, unsigned char *out, const unsigned char *in, size_t n)
{
    gcm_job *g = arg;

    return cpu_blocks(g->c, out, in, n) && seg_close(g->c, 0);
}

static int gcm_resumed(void *arg, const gpuaes_job *job)
{
    gcm_job *g = arg;

    if (!g->c->g.ghash_dead)          /* Y = Y * H^t ^ Y_tail */
        y_fold(g->c, (job->len - job->cpu_from) / BLOCK, job->ghash_tail);
    memcpy(g->c->g.ctr, job->iv_end, BLOCK);
    return 1;
}

/* A GPU piece: mid whole blocks from a block boundary (offload_job).  On
 * failure GHASH has lost bytes: no tag may come out. */
static int gpu_piece(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t mid)
{
    static const offload_finish how = { gcm_share, gcm_stopped, gcm_gap, gcm_resumed };
    gcm_job g = { c, !c->g.ghash_dead };   /* after a failed final, no GHASH is kept */
    gpuaes_job job = { .op = !g.gh ? GPUAES_CTR32 : c->enc ? GPUAES_GCM_ENCRYPT : GPUAES_GCM_DECRYPT,
                       .in = in, .out = out, .len = mid };

    if (!seg_close(c, 0))             /* Y up to the GPU piece's first block */
        return 0;
    memcpy(job.iv, c->g.ctr, BLOCK);
    memcpy(job.h, c->g.h, BLOCK);
    if (offload_job(c->prov, OFFLOAD_GCM, &job, &c->g.gpukey, c->key, c->var->keylen, &how, &g))
        return 1;
    c->g.ghash_dead = 1;
    return 0;
}

/*
 * Keystream XOR and GHASH of the ciphertext on gpuaes's engine: the rest of
 * the partial block, whole blocks (GPU for a large piece), a new partial
 * block.  CPU-hashed ciphertext goes into the segment: when decrypting
 * before it is decrypted (in place it is overwritten), after encrypting.
 */
static int engine_update(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len,
                         int gpu_ok, int asked)
{
    size_t head = 0, mid, total = len;

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
    /* Dispatch chose this engine at the message's first data (or moved the
     * message here: gcm_engine_adopt).  Its whole blocks then go where
     * dispatch says, update by update, as a block mode's do: on the CPU they
     * take the default provider's stitched pass too (cpu_blocks).  Only
     * where that cannot be had do they go to the GPU whenever it takes them
     * (AES-CTR and the segment run at a fraction of the stitched speed). */
    if (gpu_ok && mid >= BLOCK && mid >= offload_threshold(c->prov, OFFLOAD_GCM)
        && offload_possible(OFFLOAD_GCM)
        && (asked || c->g.ghash_dead || !fused_ready(c) || gcm_gate(c, mid) == GATE_GPU)) {
        if (!gpu_piece(c, out, in, mid))
            return 0;
    } else if (!cpu_blocks(c, out, in, mid)) {
        return 0;
    }
    if (len > mid) {                  /* a new partial block */
        if (!c->enc && !seg_feed(c, in + mid, len - mid))
            return 0;
        if (!cpu_keystream_block(c, c->g.ek))
            return 0;
        for (size_t i = mid; i < len; i++)
            out[i] = in[i] ^ c->g.ek[i - mid];
        c->g.mres = len - mid;
        if (c->enc && !seg_feed(c, out + mid, len - mid))
            return 0;
    }
    c->g.datalen += total;
    return 1;
}

/*
 * Partly overlapping input and output (in place is not) stay on the CPU and
 * read a copy of the input: the bytes of a memmove-like call.  The default
 * provider gives those when out is below in; above it, its bytes depend on
 * the order of its loads and stores (the message's first update goes to it
 * and so gets them; a later one on this engine cannot).
 */
int gcm_engine_update(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len, int asked)
{
    unsigned char *copy;
    int ok;

    if (!gpuaes_overlap_partial(in, len, out, len))
        return engine_update(c, out, in, len, 1, asked);
    if ((copy = OPENSSL_malloc(len)) == NULL)
        return 0;
    memcpy(copy, in, len);
    ok = engine_update(c, out, copy, len, 0, 0);
    OPENSSL_clear_free(copy, len);
    return ok;
}

int gcm_engine_final(gcm_ctx *c)
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
    /* L * H gives H away; no final may follow, so Y and E_K(J0) go too */
    OPENSSL_cleanse(tag, sizeof(tag));
    OPENSSL_cleanse(l, sizeof(l));
    OPENSSL_cleanse(c->g.y, sizeof(c->g.y));
    OPENSSL_cleanse(c->g.ekj0, sizeof(c->g.ekj0));
    if (ok)                           /* after a failed final, data may still flow */
        OPENSSL_cleanse(c->g.ek, sizeof(c->g.ek));
    return ok;
}

int gcm_engine_dup(gcm_ctx *c, const gcm_ctx *src)
{
    c->g.gpukey = NULL;               /* remade on first use */
    c->g.seg = src->g.seg != NULL ? src->fb->dupctx(src->g.seg) : NULL;
    c->g.ecbctx = src->g.ecbctx != NULL ? src->ecb->dupctx(src->g.ecbctx) : NULL;
    c->g.ctrctx = src->g.ctrctx != NULL ? src->ctr->dupctx(src->g.ctrctx) : NULL;
    c->g.fused.ctx = NULL;            /* its own, keyed at its first use */
    c->g.fused.ecbctx = c->g.ecbctx;
    c->g.fused.ready = 0;
    return !((src->g.seg != NULL && c->g.seg == NULL)
             || (src->g.ecbctx != NULL && c->g.ecbctx == NULL)
             || (src->g.ctrctx != NULL && c->g.ctrctx == NULL));
}

void gcm_engine_free(gcm_ctx *c)
{
    if (c->g.seg != NULL)
        c->fb->freectx(c->g.seg);
    if (c->g.ecbctx != NULL)
        c->ecb->freectx(c->g.ecbctx);
    if (c->g.ctrctx != NULL)
        c->ctr->freectx(c->g.ctrctx);
    gcm_fused_free(&c->g.fused);
    gpu()->job.key_free(c->g.gpukey);
}
