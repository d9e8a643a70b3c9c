/*
 * block_keystream.c - keystream ahead (CTR): the engine of a keystream
 * context, and the counters behind the keystream-made / keystream-used
 * provider parameters.
 *
 * Once a CTR context has passed the ramp (prov->ks_ramp bytes of small
 * updates), it is a "keystream context": the GPU computes its keystream
 * ahead into pinned windows (gpuaes_ks_*), and each update XORs its input
 * against whatever is ready (keystream_xor.c).  gpuaes then owns the
 * position: `pos` bytes past the counter block `base`.  Bytes whose
 * keystream is not ready go to the fallback at once, after bringing it to
 * `pos` (re-init with the counter, then pos % 16 bytes of scratch to
 * recreate the partial block); `fb_pos` says where the fallback is, so
 * consecutive CPU pieces need no re-sync.  Windows are filled in position
 * order (a ring of KS_NWIN); a window is only ever used by this context and
 * each byte of keystream at most once; skipped keystream is wasted, and the
 * waste is counted (keystream-made - keystream-used).
 */
#include <stdatomic.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/proverr.h>

#include "block_ctx.h"
#include "gpuaes_counter.h"
#include "gpu/offload.h"
#include "debug.h"
#include "keystream_xor.h"
#include "gpu/gpu_backend.h"

#define KS_FIRST_WINDOW ((size_t)1 << 20)

enum { KW_IDLE, KW_PENDING, KW_READY, KW_DRAINING };

typedef struct ks_win {
    gpuaes_ks_window *w;              /* NULL: none obtained (yet) */
    uint64_t start;                   /* position of data[0] (a multiple of 16) */
    size_t len;                       /* bytes of the fill */
    size_t used;                      /* bytes XORed from it */
    int state;
    int touched;                      /* the context reached it before it was ready */
} ks_win;

/* A CTR context's keystream ahead: its windows and where it stands in them. */
typedef struct ctx_keystream {
    unsigned char base[BLOCK];        /* counter block of position 0 */
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
} ctx_keystream;

/* A context whose keystream is mostly wasted (the GPU cannot keep ahead of it,
 * e.g. many contexts at once) leaves keystream mode and comes back after
 * KS_BACKOFF ramps of plain CPU bytes. */
#define KS_JUDGE 6
#define KS_BACKOFF 64

/* The fallback at position pos, exactly as if it had done every byte.
 * (ASSUME_CTR_SCRATCH_REBUILDS_PARTIAL) */
int ks_sync_fb(block_ctx *c)
{
    ctx_keystream *k = c->ks;
    unsigned char ctr[BLOCK], scratch[BLOCK] = { 0 };
    size_t o = 0, part;

    if (k == NULL || k->fb_pos == k->pos)
        return 1;
    memcpy(ctr, k->base, BLOCK);
    gpuaes_ctr128_add(ctr, k->pos / BLOCK);       /* as OpenSSL counts: ASSUME_CTR_128BIT_COUNTER */
    if (!block_fb_resync(c, ctr))
        return 0;
    part = (size_t)(k->pos % BLOCK);
    if (part > 0 && (!c->fb->update(c->fbctx, scratch, &o, BLOCK, scratch, part) || o != part))
        return 0;
    OPENSSL_cleanse(scratch, sizeof(scratch));
    k->fb_pos = k->pos;
    return 1;
}

/* Keystream bytes made and XORed, process-wide: the keystream-made /
 * keystream-used provider parameters (waste = made - used). */
static _Atomic uint64_t made, used;

static void ks_count_made(size_t n) { atomic_fetch_add_explicit(&made, n, memory_order_relaxed); }
static void ks_count_used(size_t n) { atomic_fetch_add_explicit(&used, n, memory_order_relaxed); }
uint64_t ks_bytes_made(void) { return atomic_load(&made); }
uint64_t ks_bytes_used(void) { return atomic_load(&used); }

/* Keystream contexts now, process-wide (keystream_max_contexts). */
static _Atomic size_t ks_contexts;

static int ks_context_claim(const block_ctx *c)
{
    size_t n = atomic_load(&ks_contexts);

    do {
        if (n >= c->prov->ks_max_contexts)
            return 0;
    } while (!atomic_compare_exchange_weak(&ks_contexts, &n, n + 1));
    return 1;
}

/* Hands every window back (wiped by the GPU layer); the fallback keeps going
 * from wherever ks_sync_fb() put it. */
void ks_end(block_ctx *c)
{
    ctx_keystream *k = c->ks;

    if (k == NULL)
        return;
    for (int i = 0; i < KS_NWIN; i++) {
        ks_count_used(k->win[i].used);
        gpu()->job.ks_window_free(k->win[i].w);
    }
    OPENSSL_clear_free(k, sizeof(*k));
    c->ks = NULL;
    /* Only now, with its windows back in the pool: a context that claims the
     * slot meanwhile would make new windows, and the pool would outgrow
     * 3 x keystream_max_contexts. */
    atomic_fetch_sub(&ks_contexts, 1);
}

static void ks_fail(block_ctx *c, const char *what, const char *error)
{
    /* Not a failure in a forked child or at exit: the GPU is just gone. */
    if (gpu()->job.available())
        offload_report_failure(c->prov, what, error);
    if (ks_sync_fb(c)) {
        ks_end(c);
        c->ramp_left = SIZE_MAX;      /* this context stays on the CPU */
        set_hot(c);
    }
}

/* Fills idle windows, in position order, as far as the ring allows. */
static void ks_topup(block_ctx *c)
{
    ctx_keystream *k = c->ks;
    char err[GPUAES_ERROR_SIZE] = "";

    while (k != NULL && k->count < k->ahead) {
        ks_win *x = &k->win[(k->head + k->count) % KS_NWIN];
        unsigned char ctr[BLOCK];
        uint64_t start = (k->pos + k->lead + BLOCK - 1) & ~(uint64_t)(BLOCK - 1);
        gpuaes_status st;

        if (x->w == NULL && (x->w = gpu()->job.ks_window_new(c->prov->ks_max_window)) == NULL)
            return;                   /* pinned-memory limit: fewer windows */
        if (x->state == KW_DRAINING) {
            int r = gpu()->job.ks_ready(x->w, err);

            if (r == 0)
                return;               /* its old fill is still in flight */
            x->state = KW_IDLE;
        }
        if (start < k->next_req)
            start = k->next_req;
        memcpy(ctr, k->base, BLOCK);
        gpuaes_ctr128_add(ctr, start / BLOCK);
        st = gpu()->job.ks_fill(x->w, c->gpukey, ctr, k->win_next, 0, err);
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
int ks_begin(block_ctx *c)
{
    ctx_keystream *k;
    unsigned int num = 0;
    unsigned char iv[BLOCK];

    if (atomic_load(&ks_contexts) >= c->prov->ks_max_contexts)
        return 0;                     /* cheap refusal: as many contexts as the GPU feeds */
    if (!offload_gpu_up(c->prov, c->prov->ks_ramp) || !block_fb_get_num(c, &num)
        || !block_fb_get_block(c, OSSL_CIPHER_PARAM_UPDATED_IV, iv) || num >= BLOCK)
        return 0;
    if (c->gpukey == NULL)
        c->gpukey = gpu()->job.key_new(c->key, c->var->keylen);
    if (c->gpukey == NULL || !ks_context_claim(c))
        return 0;
    if ((k = OPENSSL_zalloc(sizeof(*k))) == NULL) {
        atomic_fetch_sub(&ks_contexts, 1);
        return 0;
    }
    /* With num > 0 the fallback's counter is already that of the next block
     * (ASSUME_UPDATED_IV). */
    if (num > 0)
        gpuaes_ctr128_sub1(iv);
    memcpy(k->base, iv, BLOCK);
    k->pos = k->fb_pos = num;
    k->next_req = 0;
    k->ahead = 1;                     /* one window until the context shows it uses them */
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
    gpuaes_debug("CTR context ramped: keystream ahead, windows up to %zu bytes",
                 c->prov->ks_max_window);
    return 1;
}

/* Retires the oldest window (the context is past it). */
static void ks_retire(ctx_keystream *k)
{
    ks_win *x = &k->win[k->head];

    ks_count_used(x->used);
    /* Mostly used: the context consumes keystream, one more window ahead. */
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

/* Leaves keystream mode; the context ramps again after `ramp` CPU bytes. */
static void ks_leave(block_ctx *c, size_t ramp)
{
    ks_end(c);
    c->ramp_left = ramp;
    set_hot(c);
}

/*
 * After a whole-job update: the windows the context jumped over are retired
 * unused (wasted, and judged by the back-off), and none is made in their
 * place: keystream is made only for contexts of small updates.  With none
 * left ahead the context leaves keystream mode (giving its claim back) and
 * ramps again, so a context of large updates wastes at most one window set.
 */
static void ks_jumped(block_ctx *c)
{
    ctx_keystream *k = c->ks;

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
    ctx_keystream *k = c->ks;
    size_t o = 0;

    if (!ks_sync_fb(c) || !c->fb->update(c->fbctx, out, &o, n, in, n) || o != n)
        return 0;
    k->pos += n;
    k->fb_pos = k->pos;
    return 1;
}

int ks_update(block_ctx *c, unsigned char *out, size_t *outl, size_t outsize,
              const unsigned char *in, size_t inl)
{
    ctx_keystream *k = c->ks;
    size_t done = 0;
    char err[GPUAES_ERROR_SIZE] = "";

    if (outsize < inl) {
        GPUAES_RAISE(c->prov, PROV_R_OUTPUT_BUFFER_TOO_SMALL);
        return 0;
    }
    if (inl >= c->gpu_min && gpu()->job.available()) {
        /* A large update: the whole-job GPU path, from the true position.
         * (Not asked of dispatch: a keystream context has the GPU
         * already, and this path retires the windows it jumps over.) */
        if (!ks_sync_fb(c) || !block_gpu_update_cfb_ctr(c, out, outl, outsize, in, inl))
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
            int r = gpu()->job.ks_pin(x->w, &ks, err);

            if (r > 0) {
                uint64_t off = k->pos - x->start;

                if (x->state == KW_PENDING) {
                    /* Adapt the lead: a window the context reached before it was
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
                gpu()->job.ks_unpin(x->w);
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
            /* A gap before the next window (it was placed ahead of the context). */
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
            gpuaes_debug("CTR context: keystream mostly wasted; on the CPU for a while");
            ks_leave(c, c->prov->ks_ramp < SIZE_MAX / KS_BACKOFF
                     ? c->prov->ks_ramp * KS_BACKOFF : SIZE_MAX - 1);
        }
    } else if (k != NULL && k->count < k->ahead) {
        ks_topup(c);
    }
    *outl = inl;
    return 1;
}
