/*
 * cipher_gcm.c - AES-GCM.
 *
 * A GCM message (IV .. final) runs on one of two engines, chosen at its first
 * data update:
 *  - the default provider's GCM context (`fbctx`): TLS records, messages that
 *    start small, every message when no GPU is usable.  Its GHASH state cannot
 *    be exported, but a finished copy's tag gives it: a message whose first
 *    data was large (MSG_FALLBACK_MOVABLE, its lengths counted) moves to our
 *    engine at the first block boundary where an update would go to the GPU
 *    (gcm_engine_adopt), e.g. once the GPU or the service is up.  Others
 *    (small first data: TLS records, the hot path counts nothing) finish there.
 *  - gpuaes's own GCM (`g`): counter, partial block, lengths and GHASH state
 *    are ours.  Large whole-block pieces go to the GPU (GPUAES_GCM_* op:
 *    keystream and the GHASH S of their ciphertext); small ones get their
 *    keystream from the default provider's AES-ECB, so later updates may
 *    switch freely (gcm_engine.c).
 * This file holds the context, its parameters, and the routing of each call
 * to the message's engine.  What this assumes of the default provider:
 * provider/assume/fallback_assumptions.h (ASSUME_GCM_*).
 */
#include <stdint.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "gcm_ctx.h"
#include "prov_ctx.h"
#include "gpu/offload.h"
#include "cipher_family.h"
#include "length_params.h"
#include "wipe.h"
#include "gpu/gpu_backend.h"

#define GCM_MAX_DATA ((1ULL << 36) - 32)   /* SP 800-38D's limit on one message */

void *gcm_newctx(void *provctx, const gpuaes_variant *var)
{
    gcm_ctx *c = OPENSSL_zalloc(sizeof(*c));
    const gpuaes_prov *prov = provctx;
    const size_t gpu_min = offload_threshold(prov, OFFLOAD_GCM);

    if (c == NULL)
        return NULL;
    c->prov = prov;
    c->var = var;
    c->fb = gpuaes_fallback(prov, var);
    c->fb_update = c->fb->update;
    c->fb_einit = c->fb->einit;
    c->fb_dinit = c->fb->dinit;
    c->fb_final = c->fb->final;
    c->fb_get = c->fb->get_ctx_params;
    c->fb_set = c->fb->set_ctx_params;
    c->fb_cipher = c->fb->cipher;
    c->ecb = &prov->fallbacks[var->ecb_variant];
    c->ctr = &prov->fallbacks[var->ctr_variant];
    c->ivlen = 12;                    /* the default's initial IV length: ASSUME_GCM_IVLEN_VOIDS_IV */
    c->tlspad = SIZE_MAX;             /* not known until a TLS AAD is taken */
    /* Invariant per provider (settings and assumptions are read at load). */
    c->iv_msg = gpu_min == SIZE_MAX ? MSG_FALLBACK : MSG_UNDECIDED;
    c->first_cpu = gpu_min < DISPATCH_SAMPLE ? gpu_min : DISPATCH_SAMPLE;
    c->first_cpu -= c->first_cpu > 0;     /* as inl - 1 < first_cpu: 1 .. min - 1 */
    gcm_engine_new_message(c);
    c->fbctx = c->fb->newctx(prov->fallback_provctx);
    if (c->fbctx == NULL) {
        OPENSSL_free(c);
        return NULL;
    }
    return c;
}

const gpuaes_prov *gcm_prov_of(const void *vctx)
{
    return ((const gcm_ctx *)vctx)->prov;
}

void gcm_freectx(void *vctx)
{
    gcm_ctx *c = vctx;

    if (c == NULL)
        return;
    c->fb->freectx(c->fbctx);
    gcm_engine_free(c);
    wipe_free(c, sizeof(*c));
}

void *gcm_dupctx(void *vctx)
{
    const gcm_ctx *src = vctx;
    gcm_ctx *c = OPENSSL_malloc(sizeof(*c));
    int engine_ok;

    if (c == NULL)
        return NULL;
    *c = *src;
    engine_ok = gcm_engine_dup(c, src);
    c->fbctx = src->fb->dupctx(src->fbctx);
    if (c->fbctx == NULL || !engine_ok) {
        gcm_freectx(c);
        return NULL;
    }
    return c;
}

/* A different IV length voids the IV (the default provider then refuses
 * data: ASSUME_GCM_IVLEN_VOIDS_IV). */
static void set_ivlen(gcm_ctx *c, size_t sz)
{
    if (sz == c->ivlen)
        return;
    c->ivlen = sz;
    c->iv_set = 0;
    if (!(c->msg == MSG_GPU && c->g.finished))
        c->msg = MSG_FALLBACK;
}

/* TLS mode, for good: every message on the fallback. */
static void set_tls(gcm_ctx *c)
{
    c->tls = 1;
    c->iv_msg = MSG_FALLBACK;
    c->msg = MSG_FALLBACK;
}

/*
 * The parameters the fallback has just taken, in one pass (it scanned them
 * already; a TLS 1.2 record sets one per record).  The first of each name
 * counts, as with OSSL_PARAM_locate.
 */
static void note_params(gcm_ctx *c, const OSSL_PARAM params[])
{
    const OSSL_PARAM *ivlen = NULL, *tag = NULL;
    size_t sz;

    if (params == NULL)
        return;
    for (const OSSL_PARAM *p = params; p->key != NULL; p++) {
        if (p->key[0] == 't' && p->key[1] == 'l') {
            if (param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD)) {
                /* Taken: the pad is the tag's length from now on
                 * (ASSUME_GCM_TLS_AAD_PAD). */
                c->tlspad = EVP_GCM_TLS_TAG_LEN;
                if (!c->tls)
                    set_tls(c);
            } else if (!c->tls && (param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED)
                                   || param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV))) {
                set_tls(c);               /* (in TLS mode they say nothing new) */
            }
        } else if (ivlen == NULL && param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_IVLEN)) {
            ivlen = p;
        } else if (tag == NULL && param_name_is(p->key, OSSL_CIPHER_PARAM_AEAD_TAG)) {
            tag = p;
        }
    }
    if (ivlen != NULL && OSSL_PARAM_get_size_t(ivlen, &sz))
        set_ivlen(c, sz);
    if (tag != NULL && tag->data != NULL && tag->data_size <= BLOCK) {
        memcpy(c->tag, tag->data, tag->data_size);
        c->taglen = tag->data_size;
        c->tag_ours = 0;              /* the fallback's tag buffer holds it too */
    }
}

/*
 * The fallback refused parameters part-way.  The default provider takes them
 * in a fixed order, tag, ivlen, tlsaad, tlsivfixed, tlsivinv, each until one
 * fails (ASSUME_GCM_PARAMS_IN_ORDER); what it kept is mirrored:
 *  - a tag's bytes are copied before it is checked; decrypting, a tag of 1..16
 *    bytes is taken;
 *  - the IV length is read back (a new one voids the IV);
 *  - a 13-byte TLS AAD reached puts the context in TLS mode even when its
 *    length field is refused.  Other TLS parameters only keep the GPU away,
 *    where the fallback holds the whole message.
 */
static void note_params_failed(gcm_ctx *c, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;
    size_t sz = 0;
    OSSL_PARAM q[2] = { OSSL_PARAM_size_t(OSSL_CIPHER_PARAM_AEAD_IVLEN, &sz), OSSL_PARAM_END };
    int reached = 1, tls;

    ERR_set_mark();
    if (c->fb->get_ctx_params(c->fbctx, q))
        set_ivlen(c, sz);
    ERR_pop_to_mark();
    if (params == NULL)
        return;
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TAG);
    if (p != NULL) {
        int copied = p->data_type == OSSL_PARAM_OCTET_STRING && p->data != NULL
                     && p->data_size <= BLOCK;

        if (copied)
            memcpy(c->tag, p->data, p->data_size);
        reached = copied && !c->enc && p->data_size > 0;
        if (reached) {
            c->taglen = p->data_size;
            c->tag_ours = 0;
        }
    }
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_IVLEN);
    if (p != NULL)
        reached = reached && OSSL_PARAM_get_size_t(p, &sz) && sz == c->ivlen;
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_AAD);
    tls = reached && p != NULL && p->data_type == OSSL_PARAM_OCTET_STRING
          && p->data_size == EVP_AEAD_TLS1_AAD_LEN;
    if (!(c->msg == MSG_GPU && !c->g.finished))
        tls = tls || p != NULL
              || OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_IV_FIXED) != NULL
              || OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_AEAD_TLS1_SET_IV_INV) != NULL;
    if (tls)
        set_tls(c);
}

/* The default provider has the IV buffered, not yet applied (its first
 * non-empty AAD or data update applies it): the message has not started.
 * (ASSUME_GCM_IV_BUFFERED) */
static int iv_buffered(const gcm_ctx *c)
{
    return c->msg == MSG_UNDECIDED && c->naad == 0 && c->g.aadlen == 0;
}

static void take_key(gcm_ctx *c, const unsigned char *key)
{
    memcpy(c->key, key, c->var->keylen);
    if (!c->key_set)                  /* the fallback refused all AAD before a key: */
        c->naad = 0;                  /* gcm_update counted it */
    c->key_set = 1;
    c->g.keyed = 0;
    gpu()->job.key_free(c->g.gpukey);
    c->g.gpukey = NULL;
}

/*
 * A failed init may have done part of its work in the fallback: the default
 * provider sets the direction, takes an IV of 1..128 bytes, a key of its
 * length, then the parameters (note_params_failed), until one fails.  A new
 * IV or key leaves the message to the fallback, which holds all of it; an
 * undecided one goes there too.
 */
static void init_failed(gcm_ctx *c, const unsigned char *key, size_t keylen,
                        const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    c->enc = enc;
    if (c->msg == MSG_UNDECIDED || c->msg == MSG_FALLBACK_MOVABLE)
        c->msg = MSG_FALLBACK;
    if (iv != NULL) {
        if (ivlen == 0 || ivlen > sizeof(c->iv))
            return;
        c->iv_set = 0;                /* its length is read back below */
        c->msg = MSG_FALLBACK;
    }
    if (key != NULL) {
        if (keylen != c->var->keylen) {
            /* Refused after an IV it may have taken: its length is read back. */
            note_params_failed(c, NULL);
            return;
        }
        take_key(c, key);
        if (!(c->msg == MSG_GPU && c->g.finished))
            c->msg = MSG_FALLBACK;
    }
    note_params_failed(c, params);
}

/* The message state of a new IV (its bytes and length set by the caller):
 * undecided only if the GPU could take this message at all. */
static inline void new_message(gcm_ctx *c)
{
    c->iv_set = 1;
    c->msg = c->iv_msg;
    c->naad = 0;
    if (c->g.dirty)
        gcm_engine_new_message(c);
}

/* A new IV, the fallback having taken it: a new message. */
static void new_iv(gcm_ctx *c, const unsigned char *iv, size_t ivlen)
{
    memcpy(c->iv, iv, ivlen);
    c->ivlen = ivlen;
    new_message(c);
}

static __attribute__((noinline)) int init_general(gcm_ctx *c, const unsigned char *key,
                                                  size_t keylen, const unsigned char *iv,
                                                  size_t ivlen, const OSSL_PARAM params[],
                                                  int enc)
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
        init_failed(c, key, keylen, iv, ivlen, params, enc);
        return 0;
    }
    c->enc = enc;
    if (key != NULL) {
        take_key(c, key);
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
    if (iv != NULL)
        new_iv(c, iv, ivlen);
    note_params(c, params);
    return 1;
}

/*
 * A new 12-byte IV alone (every TLS 1.3 record) is init_general's path for it
 * without the rest, as a tail call: the default provider takes such an init
 * in any state (ASSUME_GCM_IV_INIT_OK), so the new message is ours before it.
 */
static inline int gcm_init(gcm_ctx *c, const unsigned char *key, size_t keylen,
                           const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[],
                           int enc)
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = enc ? c->fb_einit : c->fb_dinit;

    if (key != NULL || iv == NULL || params != NULL || ivlen != 12)
        return init_general(c, key, keylen, iv, ivlen, params, enc);
    memcpy(c->iv, iv, 12);
    c->enc = enc;
    c->ivlen = 12;
    new_message(c);
    return init(c->fbctx, key, keylen, iv, ivlen, params);   /* (NULL, 12, NULL: as given) */
}

FAMILY_INITS(gcm)

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
    return !c->tls && c->key_set && c->iv_set;   /* gcm_gate() asks for the GPU */
}

/* An undecided message's lengths, counted in the engine's state from here
 * on (its AAD so far: naad) for gcm_engine_adopt; datalen bytes of data went
 * to the fallback. */
static void count_lengths(gcm_ctx *c, size_t datalen)
{
    c->g.dirty = 1;                   /* a new IV resets the counts */
    c->g.aadlen += c->naad;
    c->naad = 0;
    c->g.datalen = datalen;
}

/* An undecided message whose first data (datalen bytes) went to the
 * fallback: it may move to our engine later. */
static void movable(gcm_ctx *c, size_t datalen)
{
    count_lengths(c, datalen);
    c->msg = gpu_possible(c) && datalen > 0 ? MSG_FALLBACK_MOVABLE : MSG_FALLBACK;
}

/* A MSG_FALLBACK_MOVABLE update on the fallback, counted.  If it fails, what
 * the fallback took is not known for sure: the message stays there. */
static int fb_update_counted(gcm_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl)
{
    if (!fb_update_timed(c, out, outl, outsize, in, inl)) {
        c->msg = MSG_FALLBACK;
        return 0;
    }
    if (out == NULL)                  /* (refused after data: ASSUME_GCM_AAD_BEFORE_DATA) */
        c->g.aadlen += inl;
    else
        c->g.datalen += inl;
    return 1;
}

static __attribute__((noinline)) int update_engine(gcm_ctx *c, unsigned char *out, size_t *outl,
                                                   size_t outsize, const unsigned char *in,
                                                   size_t inl)
{
    int asked = 0;                    /* dispatch already chose the GPU for this update */

    if (in == NULL && inl > 0) {      /* a final, before any GPU decision: ASSUME_GCM_CIPHER_FORMS */
        if (c->msg != MSG_GPU) {
            c->msg = MSG_FALLBACK;
            c->tag_ours = 0;
            return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
        }
        if (outsize < inl) {
            GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
            return 0;
        }
        *outl = 0;
        if (c->g.finished || !gcm_engine_final(c)) {
            GPUAES_RAISE(c->prov, PROV_R_CIPHER_OPERATION_FAILED);
            return 0;
        }
        return 1;
    }
    switch (c->msg) {
    case MSG_FALLBACK:
        return fb_update_timed(c, out, outl, outsize, in, inl);
    case MSG_FALLBACK_MOVABLE:
        /* The GPU would take this update, at a block boundary, and has it to
         * itself: the message moves to our engine (the same questions as a
         * message's first data).  Not beside other threads of large calls nor
         * to look again: moving costs a finished copy (gcm_engine_adopt),
         * and 4 threads of 8 MiB GCM on the H200 ran 0.71x when every
         * exploration moved its message (when the engine's CPU blocks still
         * ran at half the default provider's speed, before gcm_fused.c).
         * Moving beside other threads and processes too (by the estimates,
         * not to look again) was measured on the H200 through gpuaesd: 4
         * threads x 64 MiB 1.07-1.11x against 1.61-1.85x (encryption), 4
         * processes within their noise (bench/results/README.md, earlier runs: session36-34d43d2
         * call E). */
        if (out == NULL || inl == 0 || c->g.datalen % BLOCK != 0 || outsize < inl
            || !gpu_possible(c) || gpuaes_overlap_partial(in, inl, out, inl)
            || gcm_gate(c, inl) != GATE_GPU || !dispatch_gpu_alone())
            return fb_update_counted(c, out, outl, outsize, in, inl);
        if (!gcm_engine_adopt(c)) {
            c->msg = MSG_FALLBACK;    /* it finishes there, as before */
            return fb_update_timed(c, out, outl, outsize, in, inl);
        }
        asked = 1;
        break;
    case MSG_UNDECIDED:
        /* (Its AAD: gcm_update, update_undecided; an empty one without
         * input comes here and decides nothing.)  The first data decides; the
         * dispatcher is asked last (it counts).  Partly overlapping buffers:
         * the default provider's bytes.  Data it refuses untouched (too little
         * room, too much) stays there: it still takes AAD after that, unpadded. */
        if (inl == 0 || outsize < inl || inl > GCM_MAX_DATA || !gpu_possible(c)
            || gpuaes_overlap_partial(in, inl, out, inl) || gcm_gate(c, inl) != GATE_GPU) {
            /* Refused (no key yet, output too small): the message has not
             * started, the IV stays buffered and a later key may still take it. */
            if (!fb_update_timed(c, out, outl, outsize, in, inl))
                return 0;
            if (inl > 0)
                movable(c, out != NULL ? inl : 0);
            return 1;
        }
        /* Our engine takes the message from the fallback, which had all of
         * its AAD (gcm_engine_adopt at data length 0); should that fail, the
         * fallback keeps it. */
        count_lengths(c, 0);
        if (!gcm_engine_adopt(c)) {
            c->msg = MSG_FALLBACK;
            return fb_update_timed(c, out, outl, outsize, in, inl);
        }
        /* the first data of a message on gpuaes's engine: dispatch chose the
         * GPU for it just now */
        asked = 1;
        break;
    case MSG_GPU:
        break;
    }
    if (inl == 0) {                   /* before any state check: ASSUME_GCM_EMPTY_UPDATE_OK */
        *outl = 0;
        return 1;
    }
    if (c->g.finished) {
        GPUAES_RAISE(c->prov, PROV_R_CIPHER_OPERATION_FAILED);
        return 0;
    }
    if (out == NULL) {                /* AAD after data refused: ASSUME_GCM_AAD_BEFORE_DATA */
        GPUAES_RAISE(c->prov, PROV_R_CIPHER_OPERATION_FAILED);   /* (ours starts at data) */
        return 0;
    }
    if (outsize < inl) {
        GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (c->g.datalen + inl > GCM_MAX_DATA || c->g.datalen + inl < c->g.datalen
        || !gcm_engine_update(c, out, in, inl, asked)) {
        GPUAES_RAISE(c->prov, PROV_R_CIPHER_OPERATION_FAILED);
        return 0;
    }
    *outl = inl;
    return 1;
}

/*
 * An undecided message (a new IV, the GPU in reach): its AAD goes to the
 * fallback, counted (a message our engine takes starts from the fallback's
 * GHASH of it: gcm_engine_adopt); its first data, if too small for the GPU,
 * to the fallback, which then has the message.  The rest: update_engine.
 */
static __attribute__((noinline)) int update_undecided(gcm_ctx *c, unsigned char *out,
                                                      size_t *outl, size_t outsize,
                                                      const unsigned char *in, size_t inl)
{
    int ok;

    if (out == NULL) {                /* AAD: counted only once the fallback took it */
        if (!c->fb->update(c->fbctx, out, outl, outsize, in, inl))
            return 0;
        c->naad += inl;
        return 1;
    }
    /* The first data: update_engine's way, unless gcm_gate() refuses it
     * by its size and the CPU call is too short to be timed. */
    if (inl == 0 || inl >= DISPATCH_SAMPLE || inl >= offload_threshold(c->prov, OFFLOAD_GCM))
        return update_engine(c, out, outl, outsize, in, inl);
    ok = c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    if (ok)
        c->msg = MSG_FALLBACK;
    return ok;
}

/* Every update the hot path below leaves: routed by the message's engine. */
static __attribute__((noinline)) int update_routed(gcm_ctx *c, unsigned char *out, size_t *outl,
                                                   size_t outsize, const unsigned char *in,
                                                   size_t inl)
{
    if (in == NULL)                   /* a final's form: ASSUME_GCM_CIPHER_FORMS */
        return update_engine(c, out, outl, outsize, in, inl);
    if (c->msg == MSG_FALLBACK) {
        if (inl >= DISPATCH_SAMPLE)
            return update_engine(c, out, outl, outsize, in, inl);
    } else if (c->msg != MSG_UNDECIDED) {
        return update_engine(c, out, outl, outsize, in, inl);
    } else if (out == NULL) {
        if (inl > outsize)
            return update_undecided(c, out, outl, outsize, in, inl);
        c->naad += inl;
    } else if (inl - 1 < c->first_cpu) {
        c->msg = MSG_FALLBACK;
    } else {
        return update_undecided(c, out, outl, outsize, in, inl);
    }
    return c->fb_update(c->fbctx, out, outl, outsize, in, inl);
}

/*
 * The hot path: a message on the default provider is a tail call into it,
 * after one test of msg and tag_ours together.  With no tag of ours to
 * forget, a final's form (in == NULL: ASSUME_GCM_CIPHER_FORMS) on the
 * fallback's message, or as an undecided message's small data, needs
 * nothing of update_routed (update_engine would set msg = MSG_FALLBACK and
 * call the fallback); the rest goes there.
 */
int gcm_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
               const unsigned char *in, size_t inl)
{
    gcm_ctx *c = vctx;
    OSSL_FUNC_cipher_update_fn *update;
    uint16_t s = c->msg_tag;

    if (s == MSG_TAG(MSG_FALLBACK, 0)) {
        if (inl >= DISPATCH_SAMPLE)   /* timed, or the GPU's */
            return update_routed(c, out, outl, outsize, in, inl);
    } else if (s != MSG_TAG(MSG_UNDECIDED, 0)) {
        return update_routed(c, out, outl, outsize, in, inl);
    } else if (out == NULL) {
        /* AAD, counted for gcm_engine_adopt, as a tail call.  The default
         * provider refuses it untouched, and then only for too little room
         * (update_undecided's) or without a key (take_key drops that count). */
        if (in == NULL || inl > outsize)
            return update_routed(c, out, outl, outsize, in, inl);
        c->naad += inl;
    } else if (inl - 1 < c->first_cpu) {
        /* update_undecided's small first data, as a tail call: the fallback
         * has the message whether or not it takes this update (it had all of
         * its AAD; one it refuses leaves the GPU out of the message, no more). */
        c->msg = MSG_FALLBACK;
    } else {
        return update_routed(c, out, outl, outsize, in, inl);
    }
    /* The empty asm is no code: gcc then loads fbctx straight into place. */
    update = c->fb_update;
    __asm__ volatile("" ::: "memory");
    return update(c->fbctx, out, outl, outsize, in, inl);
}

/* The fallback's final (its state now says what may follow), with the
 * bookkeeping gcm_final's tail call skips when there is none to do. */
static __attribute__((noinline)) int final_fallback(gcm_ctx *c, unsigned char *out,
                                                    size_t *outl, size_t outsize)
{
    c->msg = MSG_FALLBACK;
    c->tag_ours = 0;
    return c->fb_final(c->fbctx, out, outl, outsize);
}

int gcm_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    gcm_ctx *c = vctx;

    if (c->msg_tag == MSG_TAG(MSG_FALLBACK, 0)) {
        OSSL_FUNC_cipher_final_fn *final = c->fb_final;

        __asm__ volatile("" ::: "memory");   /* no code: fbctx then loads straight into place */
        return final(c->fbctx, out, outl, outsize);
    }
    if (c->msg != MSG_GPU)
        return final_fallback(c, out, outl, outsize);
    if (c->g.finished)
        return 0;
    *outl = 0;
    return gcm_engine_final(c);
}

/* EVP_Cipher(): in == NULL is final, out == NULL is AAD (libssl's TLS 1.2 path;
 * ASSUME_GCM_CIPHER_FORMS). */
int gcm_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
               const unsigned char *in, size_t inl)
{
    gcm_ctx *c = vctx;

    if (c->msg_tag == MSG_TAG(MSG_FALLBACK, 0)) {   /* nothing to note: a tail call */
        OSSL_FUNC_cipher_cipher_fn *cipher = c->fb_cipher;

        __asm__ volatile("" ::: "memory");
        return cipher(c->fbctx, out, outl, outsize, in, inl);
    }
    if (c->msg != MSG_GPU) {
        c->msg = MSG_FALLBACK;
        if (in == NULL)
            c->tag_ours = 0;          /* the fallback's final makes the tag */
        return c->fb_cipher(c->fbctx, out, outl, outsize, in, inl);
    }
    if (in == NULL)
        return gcm_final(c, out, outl, outsize);
    return gcm_update(c, out, outl, outsize, in, inl);
}

/* The last tag was made by our engine: it is ours; the rest is the fallback's.
 * (ASSUME_GCM_TAG_GET; the renamed entry: ASSUME_UNKNOWN_PARAMS_IGNORED) */
static __attribute__((noinline)) int get_params_our_tag(gcm_ctx *c, OSSL_PARAM params[])
{
    OSSL_PARAM *tag = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_AEAD_TAG);
    const char *key;
    int ok;

    if (tag == NULL || tag->data == NULL)  /* no bytes of ours to give: its answer */
        return c->fb->get_ctx_params(c->fbctx, params);
    if (tag->data_size == 0 || tag->data_size > BLOCK || !c->enc) {
        GPUAES_RAISE(c->prov, PROV_R_INVALID_TAG);
        return 0;
    }
    if (!OSSL_PARAM_set_octet_string(tag, c->tag, tag->data_size))
        return 0;
    key = tag->key;
    tag->key = "gpuaes-tag-answered";  /* hide it from the fallback */
    ok = c->fb->get_ctx_params(c->fbctx, params);
    tag->key = key;
    return ok;
}

int gcm_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    gcm_ctx *c = vctx;

    /* EVP asks for the IV or key length on every init (OpenSSL 3.0), and for
     * the TLS AAD pad after every TLS 1.2 record's AAD: ours to answer, unless
     * the fallback broke an assumption at load.  In TLS mode set_ctx_params
     * mirrors nothing (the IV length included: the fallback's). */
    if (!c->prov->gpu_path_off
        && length_param_answered(params, c->var->keylen, c->tls ? SIZE_MAX : c->ivlen, c->tlspad))
        return 1;
    /* The tag of every record: a tail call, no frame, unless our engine made
     * the tag. */
    if (!c->tag_ours) {
        OSSL_FUNC_cipher_get_ctx_params_fn *get = c->fb_get;

        __asm__ volatile("" ::: "memory");   /* no code: fbctx then loads straight into place */
        return get(c->fbctx, params);
    }
    return get_params_our_tag(c, params);
}

static __attribute__((noinline)) int set_params_noted(gcm_ctx *c, const OSSL_PARAM params[])
{
    if (!c->fb_set(c->fbctx, params)) {
        note_params_failed(c, params);
        return 0;
    }
    note_params(c, params);
    return 1;
}

int gcm_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    gcm_ctx *c = vctx;

    /* In TLS mode with no tag of ours and the TLS AAD pad known, a tail call
     * (every TLS 1.2 record sets its AAD): TLS mode is for good and keeps
     * every message on the fallback (msg stays MSG_FALLBACK), so what
     * note_params and note_params_failed would mirror, taken or refused, is
     * read by nothing: the IV length and iv_set serve only our engine, the
     * tag's bytes only our engine and get_params_our_tag (tag_ours is 0
     * already), and the pad, once known, stays (ASSUME_GCM_TLS_AAD_PAD). */
    if (c->tls && !c->tag_ours && c->tlspad != SIZE_MAX) {
        OSSL_FUNC_cipher_set_ctx_params_fn *set = c->fb_set;

        __asm__ volatile("" ::: "memory");
        return set(c->fbctx, params);
    }
    return set_params_noted(c, params);
}

/* One list for every GCM variant: ASSUME_SHARED_PARAM_TABLES. */
FAMILY_PARAM_TABLES(gcm, gcm_ctx, gpuaes_variant_count - 1)
