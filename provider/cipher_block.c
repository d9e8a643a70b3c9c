/*
 * cipher_block.c - ECB, CBC, CFB128 and CTR.
 *
 * The default provider's context (`fb`) owns the mode: padding, partial
 * blocks, num, chaining IV, parameters, TLS.  An update that is worth it
 * gives the GPU the whole blocks in its middle:
 *
 *   [head on the CPU] [whole blocks on the GPU] [tail on the CPU]
 *
 * and then re-initialises the fallback context with the state after those
 * blocks (chaining block or counter, from the GPU job), so the next update,
 * on either path, continues exactly.  If the GPU stops early, the same
 * re-synchronisation happens at the point where it stopped.  What this
 * assumes of the default provider: provider/fallback_assumptions.h (ASSUME_*).
 */
#include <stdatomic.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "gpuaes.h"
#include "gpuaes_counter.h"

#define BLOCK 16

struct ks_state;

typedef struct block_ctx {
    /* Hot: all that a small update reads, in one cache line. */
    const fallback_cipher *fb;
    void *fbctx;                      /* the default provider's context */
    /* An update of at least hot_max bytes takes the slow path; others take
     * the fast one and subtract their length (so it also counts down the
     * keystream ramp).  0 while mirroring the fallback or in keystream mode. */
    size_t hot_max;
    size_t hot_set;                   /* hot_max when last set: hot_set - hot_max went fast */
    size_t gpu_min;                   /* updates this long may go to the GPU; SIZE_MAX: never */
    int track;                        /* mirror the fallback's block buffer (held) */
    const gpuaes_prov *prov;
    const gpuaes_variant *var;
    gpuaes_key *gpukey;               /* made on first GPU use */
    unsigned char key[32];            /* kept to make gpukey lazily; wiped on free */
    int key_set;
    int key_enc;                      /* the direction of the init that gave the key */
    int enc;
    int pad;                          /* ECB/CBC padding, as set through params */
    int tls;                          /* TLS record mode: everything on the fallback */
    unsigned char oiv[BLOCK];         /* IV given at init: the "iv" parameter */
    int oiv_set;
    int resynced;                     /* the fallback's own copy of that IV is gone */
    /* ECB and CBC: a copy of the bytes the fallback holds in its block buffer
     * (a partial block, or the last block held back for unpadding). */
    unsigned char held[BLOCK];
    size_t nheld;
    int held_known;                   /* 0 after a failed final: the fallback's buffer is its own */
    /* Keystream ahead (CTR): bytes still to go before the stream gets GPU
     * keystream windows (SIZE_MAX: never), and the windows once it has. */
    size_t ramp_left;
    struct ks_state *ks;
} block_ctx;

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

/* ECB and CBC buffer partial blocks; decryption with padding holds back a full one.
 * (ASSUME_BLOCK_BUFFER_RULE, as held_after and track_held.) */
static int buffers_blocks(const block_ctx *c)
{
    return c->var->mode == MODE_ECB || c->var->mode == MODE_CBC;
}

static size_t held_after(const block_ctx *c, size_t total)
{
    size_t keep = total % BLOCK;

    if (keep == 0 && total > 0 && !c->enc && c->pad)
        keep = BLOCK;
    return keep;
}

/* Mirrors the fallback's buffer after it consumes `in` (call before it
 * runs: in place, `in` is about to be overwritten). */
static void track_held(block_ctx *c, const unsigned char *in, size_t inl)
{
    size_t keep = held_after(c, c->nheld + inl);

    if (keep > inl) {                 /* old held bytes stay in front */
        memmove(c->held, c->held + c->nheld - (keep - inl), keep - inl);
        memcpy(c->held + keep - inl, in, inl);
    } else if (keep > 0) {
        memcpy(c->held, in + inl - keep, keep);
    }
    c->nheld = keep;
}

static offload_kind kind_of(const block_ctx *c)
{
    switch (c->var->mode) {
    case MODE_ECB: return c->enc ? OFFLOAD_ECB_ENC : OFFLOAD_ECB_DEC;
    case MODE_CBC: return OFFLOAD_CBC_DEC;
    case MODE_CFB: return OFFLOAD_CFB_DEC;
    default: return OFFLOAD_CTR;
    }
}

static void set_hot(block_ctx *c)
{
    size_t h = c->ks != NULL ? 0 : c->gpu_min;

    if (c->ramp_left < h)
        h = c->ramp_left;
    c->hot_max = c->hot_set = h;
}

/*
 * One compare on the hot path instead of every reason a context cannot use
 * the GPU.  The held bytes need mirroring only while the GPU may take an
 * update: every way back to a finite gpu_min goes through a re-init, which
 * empties the fallback's buffer.
 */
static void update_gpu_min(block_ctx *c)
{
    c->gpu_min = gpu_capable(c) && !c->tls && c->key_set && c->held_known
        ? c->prov->offload_min[kind_of(c)] : SIZE_MAX;
    c->track = buffers_blocks(c) && c->gpu_min != SIZE_MAX;
    c->ramp_left = c->var->mode == MODE_CTR && c->prov->ks_enabled && !c->tls && c->key_set
        && c->ks == NULL ? c->prov->ks_ramp : SIZE_MAX;
    set_hot(c);
}

static void ks_end(block_ctx *c);
static int ks_sync_fb(block_ctx *c);
static int ks_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                     const unsigned char *in, size_t inl);
static int ks_begin(block_ctx *c);

void *block_newctx(void *provctx, const gpuaes_variant *var)
{
    block_ctx *c = OPENSSL_zalloc(sizeof(*c));
    const gpuaes_prov *prov = provctx;

    if (c == NULL)
        return NULL;
    c->prov = prov;
    c->var = var;
    c->fb = var->fallback;
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

void block_freectx(void *vctx)
{
    block_ctx *c = vctx;

    if (c == NULL)
        return;
    ks_end(c);
    c->fb->freectx(c->fbctx);
    gpuaes_key_free(c->gpukey);
    OPENSSL_clear_free(c, sizeof(*c));
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
        OPENSSL_clear_free(c, sizeof(*c));
        return NULL;
    }
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

static int block_init(block_ctx *c, const unsigned char *key, size_t keylen,
                      const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[], int enc)
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = enc ? c->fb->einit : c->fb->dinit;

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
    c->enc = enc;
    c->nheld = 0;                     /* ASSUME_INIT_RESETS_STREAM */
    c->held_known = 1;
    note_params(c, params);
    if (key != NULL) {
        memcpy(c->key, key, c->var->keylen);
        c->key_set = 1;
        c->key_enc = enc;
        gpuaes_key_free(c->gpukey);
        c->gpukey = NULL;
    }
    if (iv != NULL && c->var->mode != MODE_ECB) {
        memcpy(c->oiv, iv, BLOCK);
        c->oiv_set = 1;
        c->resynced = 0;
    }
    update_gpu_min(c);
    return 1;
}

int block_einit(void *vctx, const unsigned char *key, size_t keylen,
                const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return block_init(vctx, key, keylen, iv, ivlen, params, 1);
}

int block_dinit(void *vctx, const unsigned char *key, size_t keylen,
                const unsigned char *iv, size_t ivlen, const OSSL_PARAM params[])
{
    return block_init(vctx, key, keylen, iv, ivlen, params, 0);
}

/* ---- talking to the fallback context ---- */

static int fb_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                     const unsigned char *in, size_t inl)
{
    if (c->track)
        track_held(c, in, inl);
    return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
}

static int fb_get_block(block_ctx *c, const char *key, unsigned char iv[BLOCK])
{
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(key, iv, BLOCK), OSSL_PARAM_END };

    return c->fb->get_ctx_params(c->fbctx, p);
}

static int fb_get_num(block_ctx *c, unsigned int *num)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, num), OSSL_PARAM_END };

    return c->fb->get_ctx_params(c->fbctx, p);
}

static int fb_set_num(block_ctx *c, unsigned int num)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &num), OSSL_PARAM_END };

    return c->fb->set_ctx_params(c->fbctx, p);
}

static int fb_set_padding(block_ctx *c, unsigned int pad)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &pad), OSSL_PARAM_END };

    return c->fb->set_ctx_params(c->fbctx, p);
}

/* Restart the fallback's stream at a block boundary with this chaining
 * block / counter (empty buffer, num 0).  Keeps key, padding, direction.
 * (ASSUME_REINIT_KEEPS_SCHEDULE, ASSUME_INIT_RESETS_STREAM,
 * ASSUME_INIT_KEEPS_PADDING, ASSUME_NUM_PARAM) */
static int fb_resync(block_ctx *c, const unsigned char iv[BLOCK])
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = c->enc ? c->fb->einit : c->fb->dinit;
    unsigned int num = 0;

    c->nheld = 0;
    c->resynced = 1;
    /* ECB and CBC do not use num, but it is a parameter: re-init must not reset it. */
    if (buffers_blocks(c) && !fb_get_num(c, &num))
        return 0;
    if (!init(c->fbctx, NULL, 0, c->var->mode == MODE_ECB ? NULL : iv,
              c->var->mode == MODE_ECB ? 0 : BLOCK, NULL))
        return 0;
    return num == 0 || fb_set_num(c, num);
}

static gpuaes_op gpu_op(const block_ctx *c)
{
    switch (c->var->mode) {
    case MODE_ECB: return c->enc ? GPUAES_ECB_ENCRYPT : GPUAES_ECB_DECRYPT;
    case MODE_CBC: return GPUAES_CBC_DECRYPT;
    case MODE_CFB: return GPUAES_CFB128_DECRYPT;
    default: return GPUAES_CTR128;
    }
}

/* The caller's share of a GPU job (gpuaes_cpu_share_fn): whole blocks on the
 * fallback, restarted at the piece's chaining block / counter (padding is
 * off for the whole job: ASSUME_INIT_KEEPS_PADDING).  run_blocks
 * re-synchronises it afterwards. */
typedef struct block_share_arg {
    block_ctx *c;
    int failed;
} block_share_arg;

static int block_share(void *arg, const unsigned char *in, unsigned char *out, size_t n,
                       const unsigned char state[BLOCK], unsigned char ghash[BLOCK])
{
    block_share_arg *a = arg;
    size_t outl = 0;

    (void)ghash;
    if (fb_resync(a->c, state) && a->c->fb->update(a->c->fbctx, out, &outl, n, in, n) && outl == n)
        return 1;
    a->failed = 1;
    return 0;
}

/*
 * Whole blocks in[0..len) -> out on the GPU, starting from chaining block /
 * counter `iv`, the calling thread taking pieces from the end meanwhile
 * (gpu_cpu_share); whatever neither finishes (the gap after a GPU failure),
 * the fallback does, after being re-synchronised to the point where the GPU
 * stopped.  On return the fallback's state is the one after in[len], its
 * padding is c->pad and its buffer is empty.
 */
static int run_blocks(block_ctx *c, unsigned char *out, const unsigned char *in, size_t len,
                      const unsigned char iv[BLOCK])
{
    gpuaes_job job = { .op = gpu_op(c), .in = in, .out = out, .len = len };
    block_share_arg share = { c, 0 };
    size_t done = 0, from = len, outl = 0;
    int pad_off = 0, ok;

    memcpy(job.iv, iv, BLOCK);
    if (c->gpukey == NULL)
        c->gpukey = gpuaes_key_new(c->key, c->var->keylen);
    job.key = c->gpukey;
    if (job.key != NULL) {
        if (c->prov->cpu_share == CPU_SHARE_ALL
            || (c->prov->cpu_share == CPU_SHARE_CTR && c->var->mode == MODE_CTR)) {
            /* Pieces are whole blocks mid-stream (ASSUME_PADDING_MIDSTREAM). */
            if (!fb_set_padding(c, 0))
                return 0;
            pad_off = 1;
            job.cpu_share = block_share;
            job.cpu_share_arg = &share;
        }
        done = offload_run(&job);
        from = job.cpu_from;
    }
    /* A failed piece may have written part of its output (in place: its
     * input), so the update fails (the default provider's whole-block update
     * does not fail in practice). */
    if (share.failed)
        ERR_raise_data(ERR_LIB_PROV, ERR_R_OPERATION_FAIL, "gpuaes: the CPU share of a GPU job failed");
    ok = !share.failed && fb_resync(c, job.iv);
    if (ok && done < from) {
        ok = (pad_off || fb_set_padding(c, 0))
            && c->fb->update(c->fbctx, out + done, &outl, from - done, in + done, from - done)
            && outl == from - done;
        pad_off = 1;
    }
    if (ok && from < len)
        ok = fb_resync(c, job.iv_end);
    if (pad_off)
        ok = fb_set_padding(c, c->pad) && ok;
    OPENSSL_cleanse(job.iv, BLOCK);
    OPENSSL_cleanse(job.iv_end, BLOCK);
    return ok;
}

/* ECB and CBC decryption: the fallback may hold bytes from earlier updates. */
static int update_blocks(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                         const unsigned char *in, size_t inl)
{
    size_t total = c->nheld + inl, keep = held_after(c, total);
    size_t outlen = total - keep, first = 0, used = 0, o = 0;
    unsigned char chain[BLOCK] = { 0 }, block[BLOCK];

    if (outlen < (c->nheld > 0 ? 2 : 1) * BLOCK)   /* no whole block for the GPU */
        return fb_update(c, out, outl, outsize, in, inl);
    if (outsize < outlen) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    /* ASSUME_UPDATED_IV: the block before the held bytes */
    if (c->var->mode == MODE_CBC && !fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, chain))
        return 0;
    if (c->nheld > 0) {
        /* The first output block completes what the fallback holds: do it
         * there, restarted with padding off so it is not held back. */
        used = BLOCK - c->nheld;
        memcpy(block, c->held, c->nheld);
        memcpy(block + c->nheld, in, used);
        if (!fb_resync(c, chain) || !fb_set_padding(c, 0)
            || !c->fb->update(c->fbctx, out, &o, BLOCK, block, BLOCK) || o != BLOCK
            || !fb_set_padding(c, c->pad))
            return 0;
        memcpy(chain, block, BLOCK);
        first = BLOCK;
    }
    if (!run_blocks(c, out + first, in + used, outlen - first, chain))
        return 0;
    /* The rest (< 1 block, or the held-back last block) waits in the fallback. */
    if (!fb_update(c, out + outlen, &o, outsize - outlen, in + used + outlen - first, keep)
        || o != 0)
        return 0;
    *outl = outlen;
    return 1;
}

/* CTR and CFB: stream modes with a position (num) inside the current block.
 * (ASSUME_NUM_PARAM; ASSUME_UPDATED_IV after the head) */
static int update_stream(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                         const unsigned char *in, size_t inl)
{
    unsigned int num = 0;
    size_t head, mid, o = 0;
    unsigned char iv[BLOCK];

    if (outsize < inl) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (!fb_get_num(c, &num))
        return 0;
    head = num % BLOCK ? BLOCK - num % BLOCK : 0;
    if (head > inl)
        head = inl;
    mid = (inl - head) & ~(size_t)(BLOCK - 1);
    if (mid < BLOCK)
        return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    if (head > 0 && (!c->fb->update(c->fbctx, out, &o, outsize, in, head) || o != head))
        return 0;
    if (!fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, iv)
        || !run_blocks(c, out + head, in + head, mid, iv))
        return 0;
    if (inl > head + mid
        && (!c->fb->update(c->fbctx, out + head + mid, &o, outsize - head - mid,
                           in + head + mid, inl - head - mid)
            || o != inl - head - mid))
        return 0;
    *outl = inl;
    return 1;
}

/* ---- Keystream ahead (CTR) ----
 *
 * Once a CTR stream has passed the ramp (prov->ks_ramp bytes), the GPU
 * computes its keystream ahead into pinned windows (gpuaes_ks_*), and each
 * update XORs its input against whatever is ready.  gpuaes then owns the
 * position: `pos` bytes past the counter block `base`.  Bytes whose
 * keystream is not ready go to the fallback at once, after bringing it to
 * `pos` (re-init with the counter, then pos % 16 bytes of scratch to
 * recreate the partial block); `fb_pos` says where the fallback is, so
 * consecutive CPU pieces need no re-sync.  Windows are filled in stream
 * order (a ring of KS_NWIN); a window is only ever used by this context and
 * each byte of keystream at most once; skipped keystream is wasted, and the
 * waste is counted (keystream-made - keystream-used).
 */
#define KS_NWIN 3
#define KS_FIRST_WINDOW ((size_t)1 << 20)

enum { KW_IDLE, KW_PENDING, KW_READY, KW_DRAINING };

typedef struct ks_win {
    gpuaes_ks_window *w;              /* NULL: none obtained (yet) */
    uint64_t start;                   /* stream position of data[0] (a multiple of 16) */
    size_t len;                       /* bytes of the fill */
    size_t used;                      /* bytes XORed from it */
    int state;
    int touched;                      /* the stream reached it before it was ready */
} ks_win;

typedef struct ks_state {
    unsigned char base[BLOCK];        /* counter block of stream position 0 */
    uint64_t pos;                     /* bytes consumed since base */
    uint64_t fb_pos;                  /* where the fallback is (UINT64_MAX: elsewhere) */
    uint64_t next_req;                /* where the next window starts at the earliest */
    uint64_t lead;                    /* how far ahead of pos to place a new window */
    size_t win_next;                  /* size of the next fill */
    int head, count;                  /* ring of filled windows, oldest first */
    int ahead;                        /* windows kept filled: earned by using them (KS_NWIN at most) */
    ks_win win[KS_NWIN];
    /* Back-off: of the last KS_JUDGE retired windows, bytes made and used. */
    uint64_t judged_len, judged_used;
    int judged;
    int give_up;                      /* mostly wasted: leave keystream mode after this update */
} ks_state;

/* A stream whose keystream is mostly wasted (the GPU cannot keep ahead of it,
 * e.g. many streams at once) leaves keystream mode and comes back after
 * KS_BACKOFF ramps of plain CPU bytes. */
#define KS_JUDGE 6
#define KS_BACKOFF 64

/* The fallback at stream position pos, exactly as if it had done every byte.
 * (ASSUME_CTR_SCRATCH_REBUILDS_PARTIAL) */
static int ks_sync_fb(block_ctx *c)
{
    ks_state *k = c->ks;
    unsigned char ctr[BLOCK], scratch[BLOCK] = { 0 };
    size_t o = 0, part;

    if (k == NULL || k->fb_pos == k->pos)
        return 1;
    memcpy(ctr, k->base, BLOCK);
    gpuaes_ctr128_add(ctr, k->pos / BLOCK);       /* as OpenSSL counts: ASSUME_CTR_128BIT_COUNTER */
    if (!fb_resync(c, ctr))
        return 0;
    part = (size_t)(k->pos % BLOCK);
    if (part > 0 && (!c->fb->update(c->fbctx, scratch, &o, BLOCK, scratch, part) || o != part))
        return 0;
    OPENSSL_cleanse(scratch, sizeof(scratch));
    k->fb_pos = k->pos;
    return 1;
}

/* Streams in keystream mode now, process-wide (keystream_max_streams). */
static _Atomic size_t ks_streams;

static int ks_stream_claim(const block_ctx *c)
{
    size_t n = atomic_load(&ks_streams);

    do {
        if (n >= c->prov->ks_max_streams)
            return 0;
    } while (!atomic_compare_exchange_weak(&ks_streams, &n, n + 1));
    return 1;
}

/* Hands every window back (wiped by the GPU layer); the fallback keeps going
 * from wherever ks_sync_fb() put it. */
static void ks_end(block_ctx *c)
{
    ks_state *k = c->ks;

    if (k == NULL)
        return;
    for (int i = 0; i < KS_NWIN; i++) {
        ks_count_used(k->win[i].used);
        gpuaes_ks_window_free(k->win[i].w);
    }
    OPENSSL_clear_free(k, sizeof(*k));
    c->ks = NULL;
    /* Only now, with its windows back in the pool: a stream that claims the
     * slot meanwhile would make new windows, and the pool would outgrow
     * 3 x keystream_max_streams. */
    atomic_fetch_sub(&ks_streams, 1);
}

static void ks_fail(block_ctx *c, const char *what, const char *error)
{
    /* Not a failure in a forked child or at exit: the GPU is just gone. */
    if (gpuaes_gpu_available())
        offload_report_failure(what, error);
    if (ks_sync_fb(c)) {
        ks_end(c);
        c->ramp_left = SIZE_MAX;      /* this stream stays on the CPU */
        set_hot(c);
    }
}

/* Fills idle windows, in stream order, as far as the ring allows. */
static void ks_topup(block_ctx *c)
{
    ks_state *k = c->ks;
    char err[160] = "";

    while (k != NULL && k->count < k->ahead) {
        ks_win *x = &k->win[(k->head + k->count) % KS_NWIN];
        unsigned char ctr[BLOCK];
        uint64_t start = (k->pos + k->lead + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        gpuaes_status st;

        if (x->w == NULL && (x->w = gpuaes_ks_window_new(c->prov->ks_max_window)) == NULL)
            return;                   /* pinned-memory limit: fewer windows */
        if (x->state == KW_DRAINING) {
            int r = gpuaes_ks_ready(x->w, err);

            if (r == 0)
                return;               /* its old fill is still in flight */
            x->state = KW_IDLE;
        }
        if (start < k->next_req)
            start = k->next_req;
        memcpy(ctr, k->base, BLOCK);
        gpuaes_ctr128_add(ctr, start / BLOCK);
        st = gpuaes_ks_fill(x->w, c->gpukey, ctr, k->win_next, 0, err);
        if (st == GPUAES_BUSY)
            return;
        if (st != GPUAES_OK) {
            ks_fail(c, "keystream fill", err);
            return;
        }
        ks_count_made(k->win_next);
        x->start = start;
        x->len = k->win_next;
        x->used = 0;
        x->touched = 0;
        x->state = KW_PENDING;
        k->count++;
        k->next_req = start + x->len;
        if (k->win_next < c->prov->ks_max_window)
            k->win_next = k->win_next * 2 < c->prov->ks_max_window
                ? k->win_next * 2 : c->prov->ks_max_window;
    }
}

/* Enters keystream mode at the fallback's current position. */
static int ks_begin(block_ctx *c)
{
    ks_state *k;
    unsigned int num = 0;
    unsigned char iv[BLOCK];

    if (atomic_load(&ks_streams) >= c->prov->ks_max_streams)
        return 0;                     /* cheap refusal: as many streams as the GPU feeds */
    if (!offload_gpu_up(c->prov, c->prov->ks_ramp) || !fb_get_num(c, &num)
        || !fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, iv) || num >= BLOCK)
        return 0;
    if (c->gpukey == NULL)
        c->gpukey = gpuaes_key_new(c->key, c->var->keylen);
    if (c->gpukey == NULL || !ks_stream_claim(c))
        return 0;
    if ((k = OPENSSL_zalloc(sizeof(*k))) == NULL) {
        atomic_fetch_sub(&ks_streams, 1);
        return 0;
    }
    /* With num > 0 the fallback's counter is already that of the next block
     * (ASSUME_UPDATED_IV). */
    if (num > 0)
        gpuaes_ctr128_sub1(iv);
    memcpy(k->base, iv, BLOCK);
    k->pos = k->fb_pos = num;
    k->next_req = 0;
    k->ahead = 1;                     /* one window until the stream shows it uses them */
    k->win_next = KS_FIRST_WINDOW < c->prov->ks_max_window ? KS_FIRST_WINDOW
                                                           : c->prov->ks_max_window;
    c->ks = k;
    ks_topup(c);
    if (c->ks == NULL)
        return 0;                     /* failed (reported) */
    if (k->count == 0) {
        ks_end(c);
        return 0;
    }
    gpuaes_debug("CTR stream ramped: keystream ahead, windows up to %zu bytes",
                 c->prov->ks_max_window);
    return 1;
}

/* Retires the oldest window (the stream is past it). */
static void ks_retire(ks_state *k)
{
    ks_win *x = &k->win[k->head];

    ks_count_used(x->used);
    /* Mostly used: the stream consumes keystream, one more window ahead. */
    if (x->used * 2 >= x->len && k->ahead < KS_NWIN)
        k->ahead++;
    k->judged_len += x->len;
    k->judged_used += x->used;
    if (++k->judged >= KS_JUDGE) {
        if (k->judged_used * 2 < k->judged_len)
            k->give_up = 1;
        k->judged = 0;
        k->judged_len = k->judged_used = 0;
    }
    x->used = 0;
    x->state = x->state == KW_READY ? KW_IDLE : KW_DRAINING;
    k->head = (k->head + 1) % KS_NWIN;
    k->count--;
}

/* Leaves keystream mode; the stream ramps again after `ramp` CPU bytes. */
static void ks_leave(block_ctx *c, size_t ramp)
{
    ks_end(c);
    c->ramp_left = ramp;
    set_hot(c);
}

/*
 * After a whole-job update: the windows the stream jumped over are retired
 * unused (wasted, and judged by the back-off), and none is made in their
 * place: keystream is made only for streams of small updates.  With none
 * left ahead the stream leaves keystream mode (giving its claim back) and
 * ramps again, so a stream of large updates wastes at most one window set.
 */
static void ks_jumped(block_ctx *c)
{
    ks_state *k = c->ks;

    while (k->count > 0 && k->win[k->head].start + k->win[k->head].len <= k->pos)
        ks_retire(k);
    k->ahead = 1;
    if (k->give_up)
        ks_leave(c, c->prov->ks_ramp < SIZE_MAX / KS_BACKOFF
                 ? c->prov->ks_ramp * KS_BACKOFF : SIZE_MAX - 1);
    else if (k->count == 0)
        ks_leave(c, c->prov->ks_ramp);
}

/* bytes on the CPU, from position pos */
static int ks_cpu(block_ctx *c, unsigned char *out, const unsigned char *in, size_t n)
{
    ks_state *k = c->ks;
    size_t o = 0;

    if (!ks_sync_fb(c) || !c->fb->update(c->fbctx, out, &o, n, in, n) || o != n)
        return 0;
    k->pos += n;
    k->fb_pos = k->pos;
    return 1;
}

static int ks_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                     const unsigned char *in, size_t inl)
{
    ks_state *k = c->ks;
    size_t done = 0;
    char err[160] = "";

    if (outsize < inl) {
        ERR_raise(ERR_LIB_PROV, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (inl >= c->gpu_min && gpuaes_gpu_available()) {
        /* A large update: the whole-job GPU path, from the true position.
         * (Not asked of dispatch: a stream in keystream mode has the GPU
         * already, and this path retires the windows it jumps over.) */
        if (!ks_sync_fb(c) || !update_stream(c, out, outl, outsize, in, inl))
            return 0;
        k->pos += inl;
        k->fb_pos = k->pos;
        ks_jumped(c);
        return 1;
    }
    while (done < inl) {
        ks_win *x = k->count > 0 ? &k->win[k->head] : NULL;
        size_t n = inl - done;

        if (x != NULL && x->start + x->len <= k->pos) {
            ks_retire(k);
            ks_topup(c);
            if ((k = c->ks) == NULL)
                break;                /* failed and ended: the rest on the fallback */
            continue;
        }
        if (x != NULL && x->start <= k->pos) {
            const unsigned char *ks = NULL;
            /* Pinned while XORed: the exit-time release cannot wipe it under us. */
            int r = gpuaes_ks_pin(x->w, &ks, err);

            if (r > 0) {
                uint64_t off = k->pos - x->start;

                if (x->state == KW_PENDING) {
                    /* Adapt the lead: a window the stream reached before it was
                     * ready was placed too close; one that was waiting, far enough. */
                    if (x->touched && off > 0)
                        k->lead += off;
                    else if (!x->touched)
                        k->lead /= 2;
                    if (k->lead > 4 * (uint64_t)c->prov->ks_max_window)
                        k->lead = 4 * (uint64_t)c->prov->ks_max_window;
                    x->state = KW_READY;
                }
                if (n > x->len - off)
                    n = (size_t)(x->len - off);
                ks_xor(out + done, in + done, ks + off, n);
                gpuaes_ks_unpin(x->w);
                x->used += n;
                k->pos += n;
                done += n;
                continue;
            }
            if (r < 0) {
                ks_fail(c, "keystream", err);
                if (c->ks != NULL)
                    return 0;         /* the fallback could not be re-synchronised */
                k = NULL;
                break;                /* the rest below, on the fallback */
            }
            x->touched = 1;           /* not ready: this update's rest on the CPU */
        } else if (x != NULL) {
            /* A gap before the next window (it was placed ahead of the stream). */
            if (n > x->start - k->pos)
                n = (size_t)(x->start - k->pos);
        }
        if (!ks_cpu(c, out + done, in + done, n))
            return 0;
        done += n;
    }
    if (done < inl) {                 /* keystream mode ended in this update */
        size_t o = 0;

        if (!c->fb->update(c->fbctx, out + done, &o, inl - done, in + done, inl - done)
            || o != inl - done)
            return 0;
    } else if (k != NULL && k->give_up) {
        if (ks_sync_fb(c)) {
            gpuaes_debug("CTR stream: keystream mostly wasted; on the CPU for a while");
            ks_leave(c, c->prov->ks_ramp < SIZE_MAX / KS_BACKOFF
                     ? c->prov->ks_ramp * KS_BACKOFF : SIZE_MAX - 1);
        }
    } else if (k != NULL && k->count < k->ahead) {
        ks_topup(c);
    }
    *outl = inl;
    return 1;
}

/* Only AEAD ciphers take data without output (AAD); the default provider would crash. */
static __attribute__((noinline, cold)) int null_output(void)
{
    ERR_raise(ERR_LIB_PROV, ERR_R_PASSED_NULL_PARAMETER);
    return 0;
}

/* A large update on the CPU, timed for dispatch's estimate of the CPU. */
static int fb_update_timed(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                           const unsigned char *in, size_t inl)
{
    uint64_t t0 = dispatch_now_ns();
    int ok = fb_update(c, out, outl, outsize, in, inl);

    if (ok)
        dispatch_cpu_done(kind_of(c), c->var->keylen, inl, dispatch_now_ns() - t0);
    return ok;
}

/* Everything but the plainest update: the GPU, or mirroring the fallback's buffer. */
static int update_plain(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                        const unsigned char *in, size_t inl)
{
    if (inl < c->gpu_min || !offload_gpu_up(c->prov, inl))
        return fb_update(c, out, outl, outsize, in, inl);
    if (!dispatch_to_gpu(c->prov, kind_of(c), c->var->keylen, inl))
        return fb_update_timed(c, out, outl, outsize, in, inl);
    if (buffers_blocks(c))
        return update_blocks(c, out, outl, outsize, in, inl);
    return update_stream(c, out, outl, outsize, in, inl);
}

static __attribute__((noinline)) int update_offload(block_ctx *c, unsigned char *out,
                                                    size_t *outl, size_t outsize,
                                                    const unsigned char *in, size_t inl)
{
    size_t fast = c->hot_set - c->hot_max;    /* bytes that went the fast way since set_hot */
    int r;

    if (c->ks != NULL)
        return ks_update(c, out, outl, outsize, in, inl);
    if (c->ramp_left != SIZE_MAX) {
        c->ramp_left = fast < c->ramp_left ? c->ramp_left - fast : 0;
        if (inl >= c->ramp_left && inl < c->gpu_min) {
            if (ks_begin(c)) {
                set_hot(c);
                return ks_update(c, out, outl, outsize, in, inl);
            }
            c->ramp_left = c->prov->ks_ramp;   /* no GPU or no window now: try again later */
        } else if (inl < c->gpu_min) {
            /* Only small updates ramp: keystream ahead is for streams of them. */
            c->ramp_left = inl < c->ramp_left ? c->ramp_left - inl : 0;
        }
    }
    r = update_plain(c, out, outl, outsize, in, inl);
    set_hot(c);
    return r;
}

/*
 * The hot path of every small update: one compare, then a tail call into
 * the default provider (the GPU path lives out of line, so this function
 * needs no stack frame).
 */
int block_update(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                 const unsigned char *in, size_t inl)
{
    block_ctx *c = vctx;

    if (out == NULL && inl > 0)
        return null_output();
    if (inl >= c->hot_max)
        return update_offload(c, out, outl, outsize, in, inl);
    if (c->track) {
        /* Whole blocks after whole blocks: the fallback then holds the last
         * block (decryption with padding) or nothing.  Anything else: the
         * general mirror, out of line.  (ASSUME_BLOCK_BUFFER_RULE) */
        if (((inl | c->nheld) & (BLOCK - 1)) != 0 || inl == 0)
            return update_offload(c, out, outl, outsize, in, inl);
        if (!c->enc && c->pad) {
            memcpy(c->held, in + inl - BLOCK, BLOCK);   /* before in place overwrites it */
            c->nheld = BLOCK;
        } else {
            c->nheld = 0;
        }
    }
    c->hot_max -= inl;
    return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
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

int block_final(void *vctx, unsigned char *out, size_t *outl, size_t outsize)
{
    block_ctx *c = vctx;

    /* A finished stream gives its windows and its keystream claim back. */
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
    return 1;
}

/* EVP_Cipher(): whole buffers, no buffering (libssl's record layer uses it). */
int block_cipher(void *vctx, unsigned char *out, size_t *outl, size_t outsize,
                 const unsigned char *in, size_t inl)
{
    block_ctx *c = vctx;

    if (out == NULL && inl > 0) {
        ERR_raise(ERR_LIB_PROV, ERR_R_PASSED_NULL_PARAMETER);
        return 0;
    }
    /* Rare (EVP_Cipher on a stream that ramped): the CPU, from the true position. */
    if (!ks_stop(c))
        return 0;
    return c->fb->cipher(c->fbctx, out, outl, outsize, in, inl);
}

int block_get_ctx_params(void *vctx, OSSL_PARAM params[])
{
    block_ctx *c = vctx;
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

int block_set_ctx_params(void *vctx, const OSSL_PARAM params[])
{
    block_ctx *c = vctx;

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
const OSSL_PARAM *block_gettable_params(void *provctx)
{
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[0].fallback->gettable_params(prov->fallback_provctx);
}

const OSSL_PARAM *block_gettable_ctx_params(void *vctx, void *provctx)
{
    const block_ctx *c = vctx;
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[0].fallback->gettable_ctx_params(c != NULL ? c->fbctx : NULL,
                                                            prov->fallback_provctx);
}

const OSSL_PARAM *block_settable_ctx_params(void *vctx, void *provctx)
{
    const block_ctx *c = vctx;
    const gpuaes_prov *prov = provctx;

    return gpuaes_variants[0].fallback->settable_ctx_params(c != NULL ? c->fbctx : NULL,
                                                            prov->fallback_provctx);
}
