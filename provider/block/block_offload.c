/*
 * block_offload.c - ECB, CBC, CFB128 and CTR: whole jobs on the GPU.
 *
 * An update that is worth it gives the GPU the whole blocks in its middle:
 *
 *   [head on the CPU] [whole blocks on the GPU] [tail on the CPU]
 *
 * and then re-initialises the fallback context with the state after those
 * blocks (chaining block or counter, from the GPU job), so the next update,
 * on either path, continues exactly.  If the GPU stops early, the same
 * re-synchronisation happens at the point where it stopped.  What this
 * assumes of the default provider: provider/assume/fallback_assumptions.h (ASSUME_*).
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
#include "gpu/gpu_backend.h"

int block_fb_get_block(block_ctx *c, const char *key, unsigned char iv[BLOCK])
{
    OSSL_PARAM p[2] = { OSSL_PARAM_octet_string(key, iv, BLOCK), OSSL_PARAM_END };
    int ok;

    /* The default provider of OpenSSL 3.4 and later tries the pointer form
     * first: "param of incompatible type" on the queue even when the copy
     * then succeeds (the application's queue, with fallback = application). */
    err_set_mark(c->prov);
    ok = c->fb->get_ctx_params(c->fbctx, p);
    err_pop_to_mark(c->prov);
    return ok;
}

int block_fb_get_num(block_ctx *c, unsigned int *num)
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

/* Restarts the fallback at a block boundary with this chaining
 * block / counter (empty buffer, num 0).  Keeps key, padding, direction.
 * (ASSUME_REINIT_KEEPS_SCHEDULE, ASSUME_INIT_RESETS_STREAM,
 * ASSUME_INIT_KEEPS_PADDING, ASSUME_NUM_PARAM) */
int block_fb_resync(block_ctx *c, const unsigned char iv[BLOCK])
{
    OSSL_FUNC_cipher_encrypt_init_fn *init = c->enc ? c->fb->einit : c->fb->dinit;
    unsigned int num = 0;

    c->nheld = 0;
    c->resynced = 1;
    /* ECB and CBC do not use num, but it is a parameter: re-init must not reset it. */
    if (buffers_blocks(c) && !block_fb_get_num(c, &num))
        return 0;
    if (!init(c->fbctx, NULL, 0, c->var->mode == MODE_ECB ? NULL : iv,
              c->var->mode == MODE_ECB ? 0 : BLOCK, NULL))
        return 0;
    return num == 0 || fb_set_num(c, num);
}

/*
 * The block family's side of a GPU job (offload_finish): the fallback,
 * restarted wherever the job hands over, does the pieces the GPU does not:
 * the caller's share (from the piece's chaining block / counter) and the gap
 * after a GPU failure.  They are whole blocks mid-stream, so its padding is
 * off while it does them (ASSUME_PADDING_MIDSTREAM, ASSUME_INIT_KEEPS_PADDING).
 */
typedef struct block_job {
    block_ctx *c;
    int pad_off;
} block_job;

static int fb_blocks(block_job *b, unsigned char *out, const unsigned char *in, size_t n)
{
    size_t outl = 0;

    if (!b->pad_off && !fb_set_padding(b->c, 0))
        return 0;
    b->pad_off = 1;
    return b->c->fb->update(b->c->fbctx, out, &outl, n, in, n) && outl == n;
}

static int block_share(void *arg, const unsigned char *in, unsigned char *out, size_t n,
                       const unsigned char state[BLOCK], unsigned char ghash[BLOCK])
{
    block_job *b = arg;

    (void)ghash;
    return block_fb_resync(b->c, state) && fb_blocks(b, out, in, n);
}

static int block_stopped(void *arg, const gpuaes_job *job)
{
    return block_fb_resync(((block_job *)arg)->c, job->iv);
}

static int block_gap(void *arg, unsigned char *out, const unsigned char *in, size_t n)
{
    return fb_blocks(arg, out, in, n);
}

static int block_resumed(void *arg, const gpuaes_job *job)
{
    return block_fb_resync(((block_job *)arg)->c, job->iv_end);
}

/*
 * Whole blocks in[0..len) -> out on the GPU, starting from chaining block /
 * counter `iv` (offload_job).  On return the fallback's state is the one
 * after in[len], its padding is c->pad and its buffer is empty.
 */
static int gpu_whole_blocks(block_ctx *c, unsigned char *out, const unsigned char *in, size_t len,
                            const unsigned char iv[BLOCK])
{
    static const offload_finish how = { block_share, block_stopped, block_gap, block_resumed };
    const offload_kind kind = kind_of(c);
    gpuaes_job job = { .op = offload_op(kind), .in = in, .out = out, .len = len };
    block_job b = { c, 0 };
    int ok;

    memcpy(job.iv, iv, BLOCK);
    ok = offload_job(c->prov, kind, &job, &c->gpukey, c->key, c->var->keylen, &how, &b);
    if (b.pad_off)
        ok = fb_set_padding(c, c->pad) && ok;
    return ok;
}

/* ECB and CBC decryption: the fallback may hold bytes from earlier updates. */
int block_gpu_update_ecb_cbc(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl)
{
    size_t total = c->nheld + inl, keep = held_after(c, total);
    size_t outlen = total - keep, first = 0, used = 0, o = 0;
    unsigned char chain[BLOCK] = { 0 }, block[BLOCK];

    if (outlen < (c->nheld > 0 ? 2 : 1) * BLOCK)   /* no whole block for the GPU */
        return block_fb_update(c, out, outl, outsize, in, inl);
    if (outsize < outlen) {
        GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    /* ASSUME_UPDATED_IV: the block before the held bytes */
    if (c->var->mode == MODE_CBC && !block_fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, chain))
        return 0;
    if (c->nheld > 0) {
        /* The first output block completes what the fallback holds: do it
         * there, restarted with padding off so it is not held back. */
        used = BLOCK - c->nheld;
        memcpy(block, c->held, c->nheld);
        memcpy(block + c->nheld, in, used);
        if (!block_fb_resync(c, chain) || !fb_set_padding(c, 0)
            || !c->fb->update(c->fbctx, out, &o, BLOCK, block, BLOCK) || o != BLOCK
            || !fb_set_padding(c, c->pad))
            return 0;
        memcpy(chain, block, BLOCK);
        first = BLOCK;
    }
    if (!gpu_whole_blocks(c, out + first, in + used, outlen - first, chain))
        return 0;
    /* The rest (< 1 block, or the held-back last block) waits in the fallback. */
    if (!block_fb_update(c, out + outlen, &o, outsize - outlen, in + used + outlen - first, keep)
        || o != 0)
        return 0;
    *outl = outlen;
    return 1;
}

/* CTR and CFB: stream modes with a position (num) inside the current block.
 * (ASSUME_NUM_PARAM; ASSUME_UPDATED_IV after the head) */
int block_gpu_update_cfb_ctr(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
                             const unsigned char *in, size_t inl)
{
    unsigned int num = 0;
    size_t head, mid, o = 0;
    unsigned char iv[BLOCK];

    if (outsize < inl) {
        GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (!block_fb_get_num(c, &num))
        return 0;
    head = num % BLOCK ? BLOCK - num % BLOCK : 0;
    if (head > inl)
        head = inl;
    mid = (inl - head) & ~(size_t)(BLOCK - 1);
    if (mid < BLOCK)
        return c->fb->update(c->fbctx, out, outl, outsize, in, inl);
    if (head > 0 && (!c->fb->update(c->fbctx, out, &o, outsize, in, head) || o != head))
        return 0;
    if (!block_fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, iv)
        || !gpu_whole_blocks(c, out + head, in + head, mid, iv))
        return 0;
    if (inl > head + mid
        && (!c->fb->update(c->fbctx, out + head + mid, &o, outsize - head - mid,
                           in + head + mid, inl - head - mid)
            || o != inl - head - mid))
        return 0;
    *outl = inl;
    return 1;
}
