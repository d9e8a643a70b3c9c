/*
 * block_ctx.h - what the block-mode files share: the context of ECB, CBC,
 * CFB128 and CTR, and the functions one file gives the others.
 *   cipher_block.c    the context, its EVP entry points, the per-call routing
 *                     and the mirror of the fallback's block buffer
 *   block_offload.c   the whole-job GPU path and re-synchronising the fallback
 *   block_keystream.c keystream ahead (CTR)
 */
#ifndef GPUAES_BLOCK_CTX_H
#define GPUAES_BLOCK_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "prov_ctx.h"
#include "gpu/offload.h"

#define BLOCK 16
enum { TRACK_WHOLE = 1, TRACK_LAST = 2 };

struct ctx_keystream;
/* Keystream windows a keystream context holds at most (block_keystream.c). */
#define KS_NWIN 3
/* The update that would begin keystream mode must be at least this long:
 * below it AES-NI beats keystream's XOR and bookkeeping (H200, 16 B CTR
 * updates through gpuaesd in keystream mode 0.89x the default provider,
 * 64 B 1.11x; bench/results/README.md, earlier runs: 2026-11-24-h200/s26-final);
 * such a context counts another ramp first. */
#define KS_MIN_UPDATE 64

typedef struct block_ctx {
    /* Hot: all that a small update reads, in the first 64 bytes. */
    const fallback_cipher *fb;
    void *fbctx;                      /* the default provider's context */
    OSSL_FUNC_cipher_update_fn *fb_update;   /* fb->update: one load less per update */
    /* An update of at least hot_max bytes takes the slow path; others take
     * the fast one, ECB/CBC/CTR subtracting their length (hot_set - hot_max:
     * ECB/CBC's bytes not yet in nheld, CTR's towards the keystream ramp).
     * 0 in keystream mode. */
    size_t hot_max;
    int track;                        /* mirror the fallback's block buffer (held): 0, or
                                         TRACK_LAST when decrypting with padding (the last
                                         whole block is held back), else TRACK_WHOLE */
    int held_stale;                   /* the fallback holds nheld bytes, not all of them in held */
    /* ECB and CBC: how many bytes the fallback holds in its block buffer (a
     * partial block, or the last block held back for unpadding) and, unless
     * held_stale, a copy of them. */
    unsigned char held[BLOCK];
    size_t nheld;
    /* The flags update_gpu_min reads, each 0 or 1, in one word it can
     * compare at once. */
    union {
        struct {
            uint8_t enc;
            uint8_t pad;              /* ECB/CBC padding, as set through params */
            uint8_t key_set;
            uint8_t key_enc;          /* the direction of the init that gave the key */
            uint8_t tls;              /* TLS record mode: everything on the fallback */
            uint8_t held_known;       /* 0 after a failed final: the fallback's buffer is its own */
            uint8_t flags_spare[2];   /* 0 */
        };
        uint64_t flags;
    };
    size_t hot_set;                   /* hot_max when last set: hot_set - hot_max went fast */
    size_t gpu_min;                   /* updates this long may go to the GPU; SIZE_MAX: never */
    const gpuaes_prov *prov;
    const gpuaes_variant *var;
    gpuaes_key *gpukey;               /* made on first GPU use */
    unsigned char key[32];            /* kept to make gpukey lazily; wiped on free */
    unsigned char oiv[BLOCK];         /* IV given at init: the "iv" parameter */
    int oiv_set;
    int resynced;                     /* the fallback's own copy of that IV is gone */
    /* Keystream ahead (CTR): bytes still to go before the context gets GPU
     * keystream windows (SIZE_MAX: never), and the windows once it has. */
    size_t ramp_left;
    struct ctx_keystream *ks;
    /* update_gpu_min's inputs when it last computed (0: never) and what it
     * computed then besides gpu_min and track: the ramp to restart from, and
     * the hot path's bound with it. */
    uint64_t gm_inputs;
    size_t ramp_start;
    size_t hot_start;                 /* set_hot's bound then (ks NULL) */
} block_ctx;

/* ECB and CBC buffer partial blocks; decryption with padding holds back a full one.
 * (ASSUME_BLOCK_BUFFER_RULE, as held_after and track_held.) */
static inline int buffers_blocks(const block_ctx *c)
{
    return c->var->mode == MODE_ECB || c->var->mode == MODE_CBC;
}

static inline size_t held_after(const block_ctx *c, size_t total)
{
    size_t keep = total % BLOCK;

    if (keep == 0 && total > 0 && !c->enc && c->pad)
        keep = BLOCK;
    return keep;
}

static inline offload_kind kind_of(const block_ctx *c)
{
    switch (c->var->mode) {
    case MODE_ECB: return c->enc ? OFFLOAD_ECB_ENC : OFFLOAD_ECB_DEC;
    case MODE_CBC: return OFFLOAD_CBC_DEC;
    case MODE_CFB: return OFFLOAD_CFB_DEC;
    default: return OFFLOAD_CTR;
    }
}

/* The hot path's bound: the GPU threshold, or the keystream ramp if nearer
 * (0 in keystream mode: every update takes the slow path).  Restarts the
 * count of the hot path's bytes: ECB/CBC's must be in nheld first. */
static inline void set_hot(block_ctx *c)
{
    size_t h = c->ks != NULL ? 0 : c->gpu_min;

    if (c->ramp_left < h)
        h = c->ramp_left;
    c->hot_max = c->hot_set = h;
}

/* cipher_block.c: an update of the fallback, its buffer mirrored (c->track). */
int block_fb_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl);

/* block_offload.c: the fallback's state, and whole jobs on the GPU. */
int block_fb_get_block(block_ctx *c, const char *key, unsigned char iv[BLOCK]);
int block_fb_get_num(block_ctx *c, unsigned int *num);
int block_fb_resync(block_ctx *c, const unsigned char iv[BLOCK]);
int block_gpu_update_ecb_cbc(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl);
int block_gpu_update_cfb_ctr(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl);

/* block_keystream.c: keystream ahead (CTR); c->ks != NULL in keystream mode. */
int ks_begin(block_ctx *c);
int ks_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl);
int ks_sync_fb(block_ctx *c);
void ks_end(block_ctx *c);

#endif
