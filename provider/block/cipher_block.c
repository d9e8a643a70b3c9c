/*
 * cipher_block.c - ECB, CBC, CFB128 and CTR: the context, its EVP entry
 * points, and the routing of each call.
 *
 * The default provider's context (`fb`) owns the mode: padding, partial
 * blocks, num, chaining IV, parameters, TLS.  A small update is a tail call
 * into it (block_update and its siblings); a large one may go to the GPU as a whole job
 * (block_offload.c), and a CTR context of many small updates may get its
 * keystream computed ahead (block_keystream.c).  For ECB and CBC this file
 * mirrors the bytes the fallback holds in its block buffer, which the GPU
 * path must complete.  What this assumes of the default provider:
 * provider/assume/fallback_assumptions.h (ASSUME_*).
 */
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "block_ctx.h"
#include "prov_ctx.h"
#include "gpu/offload.h"
#include "cipher_family.h"
#include "length_params.h"
#include "wipe.h"
#include "gpu/gpu_backend.h"

/*
 * Can this context send work to the GPU now?  CBC/CFB encryption is serial.
 * ECB and CBC: only in the direction the key was given for.  The default
 * provider's AES builds their key schedule for that direction alone, and a
 * re-init without a key that flips the direction keeps it: its output is then
 * whatever that schedule gives (it depends on the AES code underneath), which
 * the GPU cannot reproduce.  CFB and CTR use the encryption schedule both ways.
 */
static int gpu_capable(const block_ctx *c)
{
    switch (c->var->mode) {
    case MODE_ECB: return c->enc == c->key_enc;
    case MODE_CTR: return 1;
    case MODE_CBC: return !c->enc && !c->key_enc;
    case MODE_CFB: return !c->enc;
    default: return 0;
    }
}

/* Mirrors the fallback's buffer after it consumes `in` (call before it
 * runs: in place, `in` is about to be overwritten). */
static void track_held(block_ctx *c, const unsigned char *in, size_t inl)
{
    size_t keep = held_after(c, c->nheld + inl);

    if (keep > inl) {                 /* old held bytes stay in front (stale or not) */
        memmove(c->held, c->held + c->nheld - (keep - inl), keep - inl);
        memcpy(c->held + keep - inl, in, inl);
    } else {
        memcpy(c->held, in + inl - keep, keep);
        c->held_stale = 0;
    }
    c->nheld = keep;
}

/*
 * The hot path only counts what it gives the fallback (hot_set - hot_max):
 * the count becomes nheld here, at the start of every other entry point that
 * uses nheld or resets the count.  The bytes themselves were not mirrored.
 */
static void sync_held(block_ctx *c)
{
    size_t fast = c->hot_set - c->hot_max;

    if (!c->track || fast == 0)       /* CTR's count is its ramp's: never tracked */
        return;
    c->nheld = held_after(c, c->nheld + fast);   /* ASSUME_BLOCK_BUFFER_RULE */
    c->held_stale = c->nheld > 0;
    c->hot_set = c->hot_max;
}

/*
 * One compare on the hot path instead of every reason a context cannot use
 * the GPU.  The held bytes need mirroring only while the GPU may take an
 * update: every way back to a finite gpu_min goes through a re-init, which
 * empties the fallback's buffer.
 */
/* gpu_min, track and the ramp's start for these inputs (update_gpu_min's). */
static __attribute__((noinline)) void gpu_min_compute(block_ctx *c, uint64_t inputs)
{
    c->gm_inputs = inputs;
    c->gpu_min = gpu_capable(c) && !c->tls && c->key_set && c->held_known
        ? offload_threshold(c->prov, kind_of(c)) : SIZE_MAX;
    c->track = !buffers_blocks(c) || c->gpu_min == SIZE_MAX ? 0
               : !c->enc && c->pad ? TRACK_LAST : TRACK_WHOLE;
    c->ramp_start = c->var->mode == MODE_CTR && offload_keystream_on(c->prov) && !c->tls && c->key_set
        && c->ks == NULL ? c->prov->ks_ramp : SIZE_MAX;
    /* set_hot's bound right after: 0 in keystream mode */
    c->hot_start = c->ks != NULL ? 0 : c->ramp_start < c->gpu_min ? c->ramp_start : c->gpu_min;
}

/* The ramp and the hot count start over, from what gpu_min_compute found. */
static inline void restart_hot(block_ctx *c)
{
    c->ramp_left = c->ramp_start;
    c->hot_max = c->hot_set = c->hot_start;
}

static inline void update_gpu_min(block_ctx *c)
{
    /* Every input that varies (the mode and the provider's settings do not
     * after load): a re-init that changed none of them, as a DRBG's re-keying
     * on every call, only restarts the ramp and the hot count. */
    const uint64_t inputs = c->flags | (uint64_t)(c->ks != NULL) << 62 | (uint64_t)1 << 63;

    if (inputs != c->gm_inputs)
        gpu_min_compute(c, inputs);
    restart_hot(c);
}

void *block_newctx(void *provctx, const gpuaes_variant *var)
{
    block_ctx *c = OPENSSL_zalloc(sizeof(*c));
    const gpuaes_prov *prov = provctx;

    if (c == NULL)
        return NULL;
    c->prov = prov;
    c->var = var;
    c->fb = gpuaes_fallback(prov, var);
    c->fb_update = c->fb->update;
    c->pad = 1;
    c->gpu_min = SIZE_MAX;
    c->ramp_left = SIZE_MAX;
    set_hot(c);
    c->fbctx = c->fb->newctx(prov->fallback_provctx);
    if (c->fbctx == NULL) {
        OPENSSL_free(c);
        return NULL;
    }
    return c;
}

const gpuaes_prov *block_prov_of(const void *vctx)
{
    return ((const block_ctx *)vctx)->prov;
}

void block_freectx(void *vctx)
{
    block_ctx *c = vctx;

    if (c == NULL)
        return;
    ks_end(c);
    c->fb->freectx(c->fbctx);
    gpu()->job.key_free(c->gpukey);
    wipe_free(c, sizeof(*c));
}

void *block_dupctx(void *vctx)
{
    const block_ctx *src = vctx;
    block_ctx *c = OPENSSL_malloc(sizeof(*c));

    if (c == NULL)
        return NULL;
    /* In keystream mode gpuaes owns the position: bring the fallback there
     * first.  The copy starts without windows and ramps on its own. */
    if (src->ks != NULL && !ks_sync_fb((block_ctx *)src)) {
        OPENSSL_free(c);
        return NULL;
    }
    *c = *src;
    c->gpukey = NULL;                 /* remade on first use */
    c->ks = NULL;
    c->fbctx = src->fb->dupctx(src->fbctx);
    if (c->fbctx == NULL) {
        wipe_free(c, sizeof(*c));
        return NULL;
    }
    sync_held(c);
    update_gpu_min(c);
    return c;
}

/* Our own view of the parameters the fallback will apply (it validates them). */
static void note_params(block_ctx *c, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;
    unsigned int u;

    if (params == NULL)
        return;
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_PADDING);
    if (p != NULL && OSSL_PARAM_get_uint(p, &u))
        c->pad = u != 0;
    p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION);
    if (p != NULL && OSSL_PARAM_get_uint(p, &u)) {
        if (c->tls && u == 0)
            c->held_known = 0;        /* not mirrored in TLS mode: wait for a re-init */
        c->tls = u != 0;
    }
}

/*
 * The fallback refused parameters part-way: the default provider applies them
 * in order until one fails.  Padding is read back; a TLS mode asked for is
 * assumed (that only keeps the GPU away), leaving one is not.
 */
static void note_params_failed(block_ctx *c, const OSSL_PARAM params[])
{
    unsigned int pad = 1, u;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &pad), OSSL_PARAM_END };
    const OSSL_PARAM *tls = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_TLS_VERSION);

    if (tls != NULL && OSSL_PARAM_get_uint(tls, &u) && u != 0)
        c->tls = 1;
    ERR_set_mark();
    if (c->fb->get_ctx_params(c->fbctx, p))
        c->pad = pad != 0;
    ERR_pop_to_mark();
}

/*
 * num >= 16 for CFB and CTR: the default provider of OpenSSL 3.0 takes it and
 * then indexes its block with it (out of bounds; CFB with 17 crashes), and the
 * GPU path would take num % 16.  gpuaes refuses it before applying anything,
 * at init or set_params.  ECB and CBC do not use num: the default provider's
 * answer stands.
 */
static int num_refused(const block_ctx *c, const OSSL_PARAM params[])
{
    const OSSL_PARAM *p;
    unsigned int num;

    if (params == NULL || buffers_blocks(c)
        || (p = OSSL_PARAM_locate_const(params, OSSL_CIPHER_PARAM_NUM)) == NULL
        || !OSSL_PARAM_get_uint(p, &num) || num < BLOCK)
        return 0;                     /* a value it cannot read: the fallback's error */
    GPUAES_RAISE_DATA(c->prov, ERR_R_PASSED_INVALID_ARGUMENT,
                      "gpuaes: num %u is not below the block size (16)", num);
    return 1;
}

/*
 * A failed init may have done part of its work in the fallback: the default
 * provider sets the direction and empties its buffer first, then takes the
 * IV, the key, the parameters.  GPU updates wait for the next successful init
 * (for one with a key, if this one had a key); the IV is read back, as a
 * later init without one restarts from the fallback's.
 */
static void init_failed(block_ctx *c, int had_key, const unsigned char *iv,
                        const OSSL_PARAM params[])
{
    unsigned char oiv[BLOCK];
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, oiv, BLOCK), OSSL_PARAM_END };

    c->held_known = 0;
    if (had_key)
        c->key_set = 0;
    note_params_failed(c, params);
    ERR_set_mark();
    if (iv != NULL && c->var->mode != MODE_ECB && c->fb->get_ctx_params(c->fbctx, p)
        && memcmp(oiv, iv, BLOCK) == 0) {
        memcpy(c->oiv, iv, BLOCK);        /* it took this IV */
        c->oiv_set = 1;
        c->resynced = 0;
    }
    ERR_pop_to_mark();
    update_gpu_min(c);
}

/* A key of 16, 24 or 32 bytes into c->key, without a call. */
static inline void copy_key(unsigned char dst[32], const unsigned char *key, size_t keylen)
{
    memcpy(dst, key, 16);
    if (keylen == 24)
        memcpy(dst + 16, key + 16, 8);
    else if (keylen == 32)
        memcpy(dst + 16, key + 16, 16);
}

/* What a successful init sets of the flags update_gpu_min reads. */
static inline void init_flags(block_ctx *c, const unsigned char *key, int enc)
{
    c->enc = enc;
    c->held_known = 1;
    if (key != NULL) {
        c->key_set = 1;
        c->key_enc = enc;
    }
}

/* What it copies and empties (iv: NULL for ECB, which has none). */
static inline void init_copies(block_ctx *c, const unsigned char *key, const unsigned char *iv)
{
    c->nheld = 0;                     /* ASSUME_INIT_RESETS_STREAM */
    c->held_stale = 0;
    if (key != NULL)
        copy_key(c->key, key, c->var->keylen);
    if (iv != NULL) {
        memcpy(c->oiv, iv, BLOCK);
        c->oiv_set = 1;
        c->resynced = 0;
    }
}

static __attribute__((noinline)) int block_init_general(block_ctx *c, const unsigned char *key, size_t keylen,
                                                        const unsigned char *iv, size_t ivlen,
                                                        const OSSL_PARAM params[], int enc)
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = enc ? c->fb->einit : c->fb->dinit;

    if (num_refused(c, params))
        return 0;
    /* The fallback's "original IV" is overwritten by every re-synchronisation,
     * so a re-init that keeps the IV (CBC/CFB restart from it) gets ours.
     * (ASSUME_REINIT_RESTORES_IV) */
    if (iv == NULL && c->oiv_set && (c->var->mode == MODE_CBC || c->var->mode == MODE_CFB)) {
        iv = c->oiv;
        ivlen = BLOCK;
    }
    /* Pending keystream is discarded; a CTR re-init without an IV goes on
     * from the fallback's counter, so that must be the true one first. */
    if (c->ks != NULL) {
        int synced = ks_sync_fb(c);

        ks_end(c);
        if (!synced)
            return 0;
    }
    if (!init(c->fbctx, key, keylen, iv, ivlen, params)) {
        init_failed(c, key != NULL, iv, params);
        return 0;
    }
    note_params(c, params);
    init_flags(c, key, enc);
    if (key != NULL && c->gpukey != NULL) {
        gpu()->job.key_free(c->gpukey);
        c->gpukey = NULL;
    }
    init_copies(c, key, c->var->mode != MODE_ECB ? iv : NULL);
    update_gpu_min(c);
    return 1;
}

/* block_init_general with six arguments, for a tail call from block_init
 * (a seventh would go on the stack: a frame in every init). */
static __attribute__((noinline)) int init_general_enc(block_ctx *c, const unsigned char *key, size_t keylen,
                                                      const unsigned char *iv, size_t ivlen,
                                                      const OSSL_PARAM params[])
{
    return block_init_general(c, key, keylen, iv, ivlen, params, 1);
}

static __attribute__((noinline)) int init_general_dec(block_ctx *c, const unsigned char *key, size_t keylen,
                                                      const unsigned char *iv, size_t ivlen,
                                                      const OSSL_PARAM params[])
{
    return block_init_general(c, key, keylen, iv, ivlen, params, 0);
}

/*
 * The common init (a re-key, a new IV: a DRBG does both on every call)
 * without parameters, a key of the variant's length or none, a 16-byte IV
 * or none (ECB: none), outside keystream mode and not CBC/CFB's restart
 * from our IV: it cannot fail (ASSUME_INIT_OK), so our side is brought to
 * the state after it first and the fallback's init is a tail call.  No call
 * on the way either (no frame): a GPU key to free, or inputs of
 * update_gpu_min that changed, take block_init_general.
 */
static inline int block_init(block_ctx *c, const unsigned char *key, size_t keylen,
                             const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    OSSL_FUNC_cipher_encrypt_init_fn *init;
    uint64_t was = c->flags;

    if (params != NULL || c->ks != NULL || (key != NULL && (keylen != c->var->keylen || c->gpukey != NULL))
        || (iv != NULL ? ivlen != BLOCK || c->var->mode == MODE_ECB
                       : c->oiv_set && (c->var->mode == MODE_CBC || c->var->mode == MODE_CFB)))
        return (enc ? init_general_enc : init_general_dec)(c, key, keylen, iv, ivlen, params);
    init_flags(c, key, enc);
    if ((c->flags | (uint64_t)1 << 63) != c->gm_inputs) {
        c->flags = was;               /* as it was: the general path redoes it all */
        return (enc ? init_general_enc : init_general_dec)(c, key, keylen, iv, ivlen, params);
    }
    init_copies(c, key, iv);          /* (no IV for ECB here) */
    restart_hot(c);                   /* update_gpu_min with its inputs unchanged */
    init = enc ? c->fb->einit : c->fb->dinit;
    return init(c->fbctx, key, keylen, iv, ivlen, NULL);
}

FAMILY_INITS(block)

/* An update of the fallback, its buffer mirrored first (in place, `in` is about
 * to be overwritten). */
int block_fb_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                    const unsigned char *in, size_t inl)
{
    if (c->track)
        track_held(c, in, inl);
    return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
}

/* An update without output: only AEAD ciphers take data so (AAD), and the
 * default provider would crash; an empty one is the fallback's to answer. */
static __attribute__((noinline, cold)) int null_output(block_ctx *c, unsigned char *out, size_t *outl,
                                                       size_t outsize, const unsigned char *in, size_t inl)
{
    if (inl == 0)
        return c->fb_update(c->fbctx, out, outl, outsize, in, inl);
    GPUAES_RAISE(c->prov, ERR_R_PASSED_NULL_PARAMETER);
    return 0;
}

/* A large update on the CPU, timed for dispatch's estimate of the CPU. */
static int fb_update_timed(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                           const unsigned char *in, size_t inl)
{
    uint64_t t0 = dispatch_now_ns();
    int ok = block_fb_update(c, out, outl, outsize, in, inl);

    if (ok)
        dispatch_cpu_done(kind_of(c), c->var->keylen, inl, dispatch_now_ns() - t0);
    return ok;
}

/* Ends keystream mode, the fallback at gpuaes's position (0: it could not be brought there). */
static int ks_stop(block_ctx *c)
{
    int synced;

    if (c->ks == NULL)
        return 1;
    synced = ks_sync_fb(c);
    ks_end(c);
    update_gpu_min(c);
    return synced;
}

/*
 * Input and output share bytes without lining up.  The GPU paths (whole jobs
 * in chunks, the caller's share from the job's end, keystream XOR) read and
 * write in another order than the default provider, so such a call gets the
 * fallback's bytes, from the true position.  ECB/CBC put the held bytes'
 * output first: input byte k comes out at out + nheld + k, so "in place" is
 * out + nheld == in there (and out == in with bytes held is not).  nheld
 * is mirrored whenever the GPU may take the update.
 */
static int overlap_partial(const block_ctx *c, const unsigned char *out,
                           const unsigned char *in, size_t inl)
{
    uintptr_t o = (uintptr_t)out + (buffers_blocks(c) ? c->nheld : 0);

    return gpuaes_overlap_partial(in, inl, (const void *)o, inl);
}

static __attribute__((noinline, cold)) int update_overlapping(block_ctx *c, unsigned char *out,
                                                              size_t *outl, size_t outsize,
                                                              const unsigned char *in, size_t inl)
{
    int r = ks_stop(c) && block_fb_update(c, out, outl, outsize, in, inl);

    if (c->track)
        set_hot(c);                   /* nheld may have changed (CTR keeps its ramp count) */
    return r;
}

/*
 * An ECB/CBC update for the GPU while the fallback holds bytes gpuaes has not
 * seen (small updates went straight to it).  The fallback first gets just
 * enough of this input to be left holding only bytes of it (nothing, or the
 * block held back for unpadding), one output block; the GPU path goes on from
 * there with everything mirrored.  (ASSUME_BLOCK_BUFFER_RULE)
 */
static __attribute__((noinline)) int gpu_update_stale(block_ctx *c, unsigned char *out,
                                                      size_t *outl, size_t outsize,
                                                      const unsigned char *in, size_t inl)
{
    size_t head = (BLOCK - c->nheld % BLOCK) % BLOCK + (c->track == TRACK_LAST ? BLOCK : 0);
    size_t total = c->nheld + inl, outlen = total - held_after(c, total), o = 0, o2 = 0;

    if (inl <= head)
        return block_fb_update(c, out, outl, outsize, in, inl);
    if (outsize < outlen) {           /* as block_gpu_update_ecb_cbc, before any work */
        GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (!block_fb_update(c, out, &o, outsize, in, head)
        || !block_gpu_update_ecb_cbc(c, out + o, &o2, outsize - o, in + head, inl - head))
        return 0;
    *outl = o + o2;
    return 1;
}

/* Everything but the plainest update: the GPU, or mirroring the fallback's buffer. */
static int update_plain(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                        const unsigned char *in, size_t inl)
{
    const offload_call call = { c->fb, kind_of(c), c->var->keylen,
                                c->var->mode == MODE_ECB ? 0 : BLOCK, c->enc, 0 };

    switch (inl < c->gpu_min ? GATE_CPU : offload_gate(c->prov, &call, inl)) {
    case GATE_CPU:
        return block_fb_update(c, out, outl, outsize, in, inl);
    case GATE_CPU_CHOSEN:
        return fb_update_timed(c, out, outl, outsize, in, inl);
    case GATE_GPU:
        break;
    }
    if (buffers_blocks(c))
        return c->held_stale ? gpu_update_stale(c, out, outl, outsize, in, inl)
                             : block_gpu_update_ecb_cbc(c, out, outl, outsize, in, inl);
    return block_gpu_update_cfb_ctr(c, out, outl, outsize, in, inl);
}

static __attribute__((noinline)) int update_offload(block_ctx *c, unsigned char *out,
                                                    size_t *outl, size_t outsize,
                                                    const unsigned char *in, size_t inl)
{
    size_t fast;                      /* bytes that went the fast way since set_hot */
    int r;

    sync_held(c);
    fast = c->hot_set - c->hot_max;
    if (overlap_partial(c, out, in, inl))
        return update_overlapping(c, out, outl, outsize, in, inl);
    if (c->ks != NULL)
        return ks_update(c, out, outl, outsize, in, inl);
    if (c->ramp_left != SIZE_MAX) {
        c->ramp_left = fast < c->ramp_left ? c->ramp_left - fast : 0;
        if (inl >= c->ramp_left && inl < c->gpu_min) {
            if (inl >= KS_MIN_UPDATE && ks_begin(c)) {
                set_hot(c);
                return ks_update(c, out, outl, outsize, in, inl);
            }
            c->ramp_left = c->prov->ks_ramp;   /* tiny, no GPU or no window now: try again later */
        } else if (inl < c->gpu_min) {
            /* Only small updates ramp: keystream ahead is for contexts of them. */
            c->ramp_left = inl < c->ramp_left ? c->ramp_left - inl : 0;
        }
    }
    r = update_plain(c, out, outl, outsize, in, inl);
    set_hot(c);
    return r;
}

/*
 * The hot path of every small update: a few compares, then a tail call into
 * the default provider (the GPU path lives out of line, so this function
 * needs no stack frame).  Each mode family has its own entry point
 * (provider.c's table), so each does only what its mode needs:
 *  counted: ECB, CBC and CTR subtract their length from hot_max.  ECB/CBC:
 *           sync_held makes that count the fallback's buffer length (any
 *           size goes this way; the bytes are not mirrored); CTR: it counts
 *           down the keystream ramp.  CFB needs neither.
 */
static inline int update_hot(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl, int counted)
{
    OSSL_FUNC_cipher_update_fn *update;

    if (__builtin_expect(out == NULL, 0))   /* laid out so the common path takes no branch */
        return null_output(c, out, outl, outsize, in, inl);
    if (inl >= c->hot_max)
        return update_offload(c, out, outl, outsize, in, inl);
    /* The empty asm statements are no code: they make gcc compare and
     * subtract in memory and load fbctx straight into place (callgrind: 3
     * instructions less per update than without). */
    if (counted) {
        __asm__ volatile("" ::: "memory");
        c->hot_max -= inl;
    }
    update = c->fb_update;
    __asm__ volatile("" ::: "memory");
    return update(c->fbctx, out, outl, outsize, in, inl);
}

/* ECB and CBC. */
int block_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                 const unsigned char *in, size_t inl)
{
    return update_hot(vctx, out, outl, outsize, in, inl, 1);
}

/* CFB: never tracked (update_gpu_min: track stays 0), never ramps. */
int block_update_cfb(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                     const unsigned char *in, size_t inl)
{
    return update_hot(vctx, out, outl, outsize, in, inl, 0);
}

/* CTR: never tracked; ramps to keystream ahead (block_keystream.c). */
int block_update_ctr(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                     const unsigned char *in, size_t inl)
{
    return update_hot(vctx, out, outl, outsize, in, inl, 1);
}

int block_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    block_ctx *c = vctx;

    /* A finished message gives its windows and its keystream claim back. */
    if (!ks_stop(c))
        return 0;
    if (!c->fb->final(c->fbctx, out, outl, outsize)) {
        /* The default provider may keep (even transform) its buffer: GPU
         * updates need our mirror of it, so they wait for a re-init. */
        c->held_known = 0;
        update_gpu_min(c);
        return 0;
    }
    c->nheld = 0;
    c->held_stale = 0;
    if (c->track)
        set_hot(c);                   /* the hot path's count restarts from the empty buffer */
    return 1;
}

/* EVP_Cipher(): whole buffers, no buffering (libssl's record layer uses it). */
int block_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                 const unsigned char *in, size_t inl)
{
    block_ctx *c = vctx;

    if (out == NULL && inl > 0) {
        GPUAES_RAISE(c->prov, ERR_R_PASSED_NULL_PARAMETER);
        return 0;
    }
    /* Rare (EVP_Cipher on a context that ramped): the CPU, from the true position. */
    if (!ks_stop(c))
        return 0;
    return c->fb->cipher(c->fbctx, out, outl, outsize, in, inl);
}

static __attribute__((noinline)) int get_params_ours(block_ctx *c, OSSL_PARAM params[])
{
    OSSL_PARAM *p;

    /* num and the updated IV: the fallback is brought to gpuaes's position. */
    if (c->ks != NULL && !ks_sync_fb(c))
        return 0;
    if (!c->fb->get_ctx_params(c->fbctx, params))
        return 0;
    /* "iv" is the IV given at init; after a re-sync the fallback has another
     * (ASSUME_IV_PARAM_IS_ORIGINAL).  (EVP asks for ivlen on every init: the
     * common path stays short.) */
    if (!c->resynced)
        return 1;
    p = OSSL_PARAM_locate(params, OSSL_CIPHER_PARAM_IV);
    if (p != NULL && c->oiv_set
        && !OSSL_PARAM_set_octet_string(p, c->oiv, BLOCK)
        && !OSSL_PARAM_set_octet_ptr(p, c->oiv, BLOCK))
        return 0;
    return 1;
}

int block_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    block_ctx *c = vctx;

    /* EVP asks for the key or IV length on every init (OpenSSL 3.0): ours to
     * answer, unless the fallback broke an assumption at load. */
    if (!c->prov->gpu_path_off
        && length_param_answered(params, c->var->keylen, c->var->mode == MODE_ECB ? 0 : BLOCK,
                                 SIZE_MAX))
        return 1;
    /* The rest, with nothing of ours to answer: the fallback's answer, as a
     * tail call. */
    if (c->ks == NULL && !c->resynced) {
        OSSL_FUNC_cipher_get_ctx_params_fn *get = c->fb->get_ctx_params;

        __asm__ volatile("" ::: "memory");   /* no code: fbctx then loads straight into place */
        return get(c->fbctx, params);
    }
    return get_params_ours(c, params);
}

int block_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    block_ctx *c = vctx;

    if (num_refused(c, params))
        return 0;
    sync_held(c);                     /* under the padding the bytes went in with */
    if (c->ks != NULL && params != NULL && params[0].key != NULL) {
        /* e.g. a new num: the position is the fallback's again. */
        int synced = ks_sync_fb(c);

        ks_end(c);
        if (!synced)
            return 0;
    }
    if (!c->fb->set_ctx_params(c->fbctx, params)) {
        note_params_failed(c, params);
        update_gpu_min(c);
        return 0;
    }
    note_params(c, params);
    update_gpu_min(c);
    return 1;
}

/* One list for every block-mode variant: ASSUME_SHARED_PARAM_TABLES. */
FAMILY_PARAM_TABLES(block, block_ctx, 0)
