/*
 * gcm_ctx.h - what the GCM files share: the context, and gpuaes's own GCM
 * engine as cipher_gcm.c calls it.
 *   cipher_gcm.c  the context, its EVP entry points, parameters, and which
 *                 engine runs each message
 *   gcm_engine.c  gpuaes's own GCM engine (GHASH segments, Y, GPU pieces, tag)
 */
#ifndef GPUAES_GCM_CTX_H
#define GPUAES_GCM_CTX_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "gcm_fused.h"
#include "prov_ctx.h"
#include "gpu/offload.h"
#include "cipher_family.h"

#define BLOCK 16

/* MSG_FALLBACK_MOVABLE: on the fallback, its lengths counted in g.aadlen and
 * g.datalen, so it may move to our engine at a block boundary
 * (gcm_engine_adopt).  A message whose first data is small stays MSG_FALLBACK:
 * the hot path (gcm_update's tail call) counts nothing. */
typedef enum { MSG_FALLBACK, MSG_UNDECIDED, MSG_GPU, MSG_FALLBACK_MOVABLE } msg_engine;

typedef struct gcm_ctx {
    /* Hot: what a small record's calls read, in the first cache line. */
    const fallback_cipher *fb;        /* default provider's AES-GCM */
    void *fbctx;
    /* fb's entries, one load less per call */
    OSSL_FUNC_cipher_update_fn *fb_update;
    OSSL_FUNC_cipher_encrypt_init_fn *fb_einit;
    OSSL_FUNC_cipher_decrypt_init_fn *fb_dinit;
    OSSL_FUNC_cipher_final_fn *fb_final;
    OSSL_FUNC_cipher_get_ctx_params_fn *fb_get;
    OSSL_FUNC_cipher_set_ctx_params_fn *fb_set;
    OSSL_FUNC_cipher_cipher_fn *fb_cipher;
    union {
        struct {
            uint8_t msg;              /* a msg_engine */
            uint8_t tag_ours;         /* the last tag made was our engine's (else the fallback's) */
        };
        uint16_t msg_tag;             /* both, tested at once on the hot paths (MSG_TAG) */
    };
    uint8_t tls;                      /* TLS params seen: records stay on the fallback */
    int enc;
    size_t naad;                      /* AAD bytes of an undecided message (the fallback's) */
    msg_engine iv_msg;                /* a new IV's message: MSG_FALLBACK in TLS mode or
                                         with the GPU path off, else MSG_UNDECIDED */
    size_t first_cpu;                 /* a message's first data of 1..first_cpu bytes goes
                                         to the fallback: below DISPATCH_SAMPLE and the GPU
                                         threshold (cipher_gcm.c, update_undecided) */
    const gpuaes_prov *prov;
    const gpuaes_variant *var;
    const fallback_cipher *ecb;       /* default provider's AES-ECB of the same key size */
    const fallback_cipher *ctr;       /* ... and AES-CTR */
    int key_set;
    int iv_set;
    size_t ivlen;
    size_t tlspad;                    /* the fallback's TLS AAD pad: 16 once a TLS AAD was
                                         taken (ASSUME_GCM_TLS_AAD_PAD), else SIZE_MAX: not known */
    unsigned char key[32];
    unsigned char iv[128];
    unsigned char tag[BLOCK];         /* decrypt: expected; encrypt: computed at final */
    size_t taglen;
    /* gpuaes's own GCM engine (msg == MSG_GPU) */
    struct {
        void *seg;                    /* default GCM, zero IV: GHASH of a segment, as AAD */
        void *ecbctx;                 /* default AES-ECB: H, E_K(J0), a partial block's keystream */
        void *ctrctx;                 /* default AES-CTR: short runs of whole blocks on the CPU */
        gcm_fused fused;              /* longer ones: one stitched pass (gcm_fused.c) */
        int fused_off;                /* gcm_fused_key failed for this key: CTR + segment */
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
        unsigned long long aadlen, datalen;   /* also counted on MSG_FALLBACK_MOVABLE */
        int finished;
        int ghash_dead;               /* a final failed: as in the default provider, data
                                         still flows but no tag will verify */
        uint8_t dirty;                /* the engine took part in the message (start, AAD
                                         overflow): a new IV must reset the state above */
    } g;
} gcm_ctx;

/* The value of msg_tag for these msg and tag_ours. */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define MSG_TAG(msg, tag_ours) ((uint16_t)((msg) | (tag_ours) << 8))
#else
#define MSG_TAG(msg, tag_ours) ((uint16_t)((msg) << 8 | (tag_ours)))
#endif

/* The gate (offload.c) for len bytes of this message's data; the CPU's
 * first estimate is the fallback's encryption with a 12-byte IV.  A CPU
 * answer binds the message unless it is on gpuaes's engine, whose CPU
 * blocks (the stitched pass, gcm_fused.c) may go back to the GPU at the next
 * update. */
static inline offload_gate_answer gcm_gate(const gcm_ctx *c, size_t len)
{
    const offload_call call = { c->fb, OFFLOAD_GCM, c->var->keylen, 12, 1, c->msg != MSG_GPU };

    return offload_gate(c->prov, &call, len);
}

/* gcm_engine.c: gpuaes's own GCM engine (c->g).  Each returns 1 on success. */
/* The engine's message state afresh (cannot fail).  A new IV needs it only
 * when the engine took part in the last message (g.dirty): most messages,
 * every TLS 1.3 record's, never reach it. */
static inline void gcm_engine_new_message(gcm_ctx *c)
{
    c->g.dirty = 0;
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
/* Takes over a message the fallback ran so far (undecided at its first
 * data, or MSG_FALLBACK_MOVABLE, its data a whole number of blocks; lengths
 * in g.aadlen, g.datalen): c->msg = MSG_GPU.  0: it stays there (nothing
 * changed, no error queued). */
int gcm_engine_adopt(gcm_ctx *c);
/* len bytes of data in -> out (whole blocks on the GPU when large and
 * dispatch says so; asked: it already did, for this update, deciding the
 * message's engine: not asked twice, which would spend an exploration). */
int gcm_engine_update(gcm_ctx *c, unsigned char *out, const unsigned char *in, size_t len, int asked);
/* The tag: made (encrypting) or checked (decrypting). */
int gcm_engine_final(gcm_ctx *c);
/* c is a copy of src (dupctx): its own copies of the engine's contexts;
 * 0 if one could not be made (those made are then c's to free). */
int gcm_engine_dup(gcm_ctx *c, const gcm_ctx *src);
void gcm_engine_free(gcm_ctx *c);

#endif
