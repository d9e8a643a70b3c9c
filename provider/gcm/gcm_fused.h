/*
 * gcm_fused.h - whole blocks of a GCM message on the CPU in one pass of the
 * default provider's AES-GCM (its stitched AES + GHASH code), from any
 * counter block: how gpuaes's engine (gcm_engine.c) runs the blocks it keeps
 * on the CPU, at the default provider's own speed.
 */
#ifndef GPUAES_GCM_FUSED_H
#define GPUAES_GCM_FUSED_H

#include <stddef.h>

#include "prov_ctx.h"

typedef struct gcm_fused {
    const fallback_cipher *gcm;       /* the default provider's AES-GCM and AES-ECB */
    const fallback_cipher *ecb;       /* of the key's size */
    void *ctx;                        /* its AES-GCM context: the key, 16-byte IVs */
    void *ecbctx;                     /* an AES-ECB context of the same key, no padding */
    unsigned char h[16], hinv[16];    /* H = E_K(0^128) and H^-1 */
    int ready;                        /* ctx keyed, hinv made: 0 until gcm_fused_key */
} gcm_fused;

/* The shortest run worth the stitched pass (shorter: AES-CTR and a second
 * GHASH pass cost less). */
size_t gcm_fused_min(void);

/* f->ctx (a new context of f->gcm if NULL) keyed with key for 16-byte IVs,
 * H^-1 from f->h; f->gcm, f->ecb, f->ecbctx (keyed) and f->h set by the
 * caller.  0: not usable (H = 0 has no inverse, or the default provider
 * refused), f->ready stays 0. */
int gcm_fused_key(gcm_fused *f, void *provctx, const unsigned char *key, size_t keylen);

/* len bytes (a multiple of 16) in -> out, the first block's counter block
 * ctr (GCM's inc32 counting, wrapping as the message does); sh := S * H,
 * S the GHASH from zero of the ciphertext (in when decrypting, out when
 * encrypting), as a GPU piece gives it.  in == out is fine.  0 on failure
 * (out may be partly written). */
int gcm_fused_run(gcm_fused *f, int enc, const unsigned char ctr[16], unsigned char *out,
                  const unsigned char *in, size_t len, unsigned char sh[16]);

void gcm_fused_free(gcm_fused *f);

#endif
