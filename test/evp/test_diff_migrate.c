/*
 * test_diff_migrate.c - a GCM message that begins on the CPU (the default
 * provider's context inside gpuaes) and moves to gpuaes's engine and the GPU
 * in the middle (cipher_gcm.c, gcm_engine_adopt), against the default
 * provider.  Run with GPUAES_OFFLOAD_MIN_BYTES = T > 64 KiB and
 * GPUAES_DISPATCH=force: a first update of 64 KiB .. T - 1 bytes goes to the
 * CPU with its lengths counted, the first update of T or more at a block
 * boundary moves the message.  Every
 * update's output, the tag (encrypt) and the verdict (decrypt) must agree,
 * and gpu-bytes must show where the message ran: nothing before the move,
 * nothing at an unaligned point, something at the first aligned large update.
 */
#include <stdlib.h>
#include <string.h>

#include "size.h"
#include "test_diff.h"

#define FIRST_MIN ((size_t)64 << 10)  /* DISPATCH_SAMPLE: a first update this large may move later */

typedef struct {
    EVP_CIPHER_CTX *c[2];             /* gpuaes, default */
    unsigned char *buf[2];            /* in place: each context's own copy */
    unsigned char *out[2];
    int in_place;
    const char *desc;
} mig;

/* n bytes at pos through both contexts; outputs compared.  Returns how much
 * gpu-bytes grew over gpuaes's update. */
static uint64_t mig_update(diff_ctx *dc, mig *m, const unsigned char *src, size_t pos, size_t n)
{
    uint64_t before = test_gpu_bytes(&dc->env);
    int outl[2], rv[2];

    for (int k = 0; k < 2; k++) {
        unsigned char *o = m->in_place ? m->buf[k] + pos : m->out[k] + pos;
        const unsigned char *i = m->in_place ? o : src + pos;

        outl[k] = 0;
        rv[k] = EVP_CipherUpdate(m->c[k], o, &outl[k], i, (int)n);
        if (k == 0)
            before = test_gpu_bytes(&dc->env) - before;
    }
    CHECKF(rv[0] == 1 && rv[1] == 1 && outl[0] == outl[1] && (size_t)outl[1] == n, "case: %s", m->desc);
    for (int k = 0; k < 2; k++)
        if (m->in_place)
            memcpy(m->out[k] + pos, m->buf[k] + pos, n);
    CHECKF(memcmp(m->out[0] + pos, m->out[1] + pos, n) == 0, "case: %s", m->desc);
    return before;
}

/* One message: AAD, CPU updates, a move at a block boundary, more, final.
 * enc: *tag gets the tag, ct the ciphertext; decrypting: src is ct, tag checked. */
static void mig_message(diff_ctx *dc, rng_state *r, int i, kd_op *op, size_t t, const unsigned char *aad,
                        size_t aadlen, const unsigned char *src, unsigned char *ct, size_t cap,
                        unsigned char tag[16], int wrong_tag)
{
    /* (Both passes draw the same numbers: the same lengths.) */
    mig m = { .in_place = (int)(rng_next(r) & 1) };
    char desc[200];
    size_t pos = 0, n, cut = rng_below(r, aadlen + 1);
    int moved = 0, ok = 1, early = (int)(rng_next(r) & 1);
    uint64_t grew;

    snprintf(desc, sizeof(desc), "migrate %s %s ivlen=%zu aad=%zu %s", kd_ciphers[i].name,
             op->enc ? "encrypt" : "decrypt", op->ivlen, aadlen, m.in_place ? "in place" : "");
    m.desc = desc;
    for (int k = 0; k < 2; k++) {
        m.c[k] = EVP_CIPHER_CTX_new();
        m.buf[k] = malloc(cap);
        m.out[k] = malloc(cap);
        ok = ok && m.c[k] != NULL && m.buf[k] != NULL && m.out[k] != NULL
             && kd_init(m.c[k], k == 0 ? dc->sub[i] : dc->ref[i], KD_GCM, op);
        if (ok && m.in_place)
            memcpy(m.buf[k], src, cap);
        if (ok && !op->enc && early)  /* the tag early, as some callers do */
            ok = kd_set_tag(m.c[k], tag, 16);
        for (size_t a = 0; ok && a < aadlen; a = a < cut ? cut : aadlen) {
            int outl = 0;

            ok = EVP_CipherUpdate(m.c[k], NULL, &outl, aad + a, (int)((a < cut ? cut : aadlen) - a));
        }
    }
    CHECKF(ok, "case: %s", desc);
    if (!ok)
        goto done;
    /* On the CPU: a first update the GPU does not take, then small ones. */
    n = FIRST_MIN + rng_below(r, t - FIRST_MIN);
    CHECKF(mig_update(dc, &m, src, pos, n) == 0, "case: %s", desc);
    pos += n;
    for (int j = (int)rng_below(r, 3); j > 0; j--) {
        n = rng_below(r, 5000);
        CHECKF(mig_update(dc, &m, src, pos, n) == 0, "case: %s", desc);
        pos += n;
    }
    /* Unaligned: a large update stays on the CPU; then the block is completed. */
    if (pos % 16 != 0) {
        if (rng_below(r, 2) == 0) {
            n = t + 16 * rng_below(r, t / 16);   /* keeps pos unaligned */
            CHECKF(mig_update(dc, &m, src, pos, n) == 0, "case: %s", desc);
            pos += n;
        }
        n = 16 - pos % 16 + 16 * rng_below(r, 3);
        CHECKF(mig_update(dc, &m, src, pos, n) == 0, "case: %s", desc);
        pos += n;
    }
    /* Aligned and large: the message moves, and this update runs on the GPU. */
    n = t + rng_below(r, t);
    grew = mig_update(dc, &m, src, pos, n);
    CHECKF(grew > 0, "case: %s", desc);
    moved = grew > 0;
    pos += n;
    /* On gpuaes's engine: any sizes. */
    for (int j = 1 + (int)rng_below(r, 3); j > 0; j--) {
        n = rng_below(r, 2) ? rng_below(r, 100) : t + rng_below(r, t);
        mig_update(dc, &m, src, pos, n);
        pos += n;
    }
    {
        unsigned char tags[2][16], bad[16];
        int rv[2], outl;

        memcpy(bad, tag, 16);
        bad[rng_below(r, 16)] ^= 1;
        for (int k = 0; k < 2; k++) {
            if (!op->enc)
                CHECKF(kd_set_tag(m.c[k], wrong_tag ? bad : tag, 16), "case: %s", desc);
            rv[k] = EVP_CipherFinal_ex(m.c[k], m.out[k] + pos, &outl);
            memset(tags[k], 0, 16);
            if (op->enc)
                CHECKF(kd_get_tag(m.c[k], tags[k], 16), "case: %s", desc);
        }
        CHECKF(rv[0] == rv[1] && rv[1] == (op->enc || !wrong_tag), "case: %s", desc);
        CHECKF(memcmp(tags[0], tags[1], 16) == 0, "case: %s", desc);
        if (op->enc) {
            memcpy(tag, tags[1], 16);
            memcpy(ct, m.out[1], pos);
        }
    }
    printf("%s: %zu bytes, moved: %s\n", desc, pos, moved ? "yes" : "NO");
 done:
    for (int k = 0; k < 2; k++) {
        EVP_CIPHER_CTX_free(m.c[k]);
        free(m.buf[k]);
        free(m.out[k]);
    }
}

void diff_migrate(diff_ctx *dc, rng_state *r)
{
    static const size_t aadlens[] = { 0, 5, 17, 300 };
    const char *e = getenv("GPUAES_OFFLOAD_MIN_BYTES");
    size_t t = 0, cap;
    unsigned char key[32], iv[128], aad[300], tag[16], *in, *ct;

    if (e == NULL || !size_parse(e, &t) || t <= FIRST_MIN + 5000) {
        CHECK(!"--migrate wants GPUAES_OFFLOAD_MIN_BYTES above 64 KiB + 5000");
        return;
    }
    cap = 12 * t + 16384;             /* more than the largest message mig_message makes */
    in = malloc(cap);
    ct = calloc(1, cap);
    for (int i = 0; i < KD_NCIPHERS; i++) {
        if (kd_ciphers[i].mode != KD_GCM)
            continue;
        for (int it = 0; it < dc->iterations; it++) {
            size_t aadlen = aadlens[it % 4];
            kd_op op = { .key = key, .iv = iv, .key_then_iv = (int)(rng_next(r) & 1) };

            rng_bytes(r, key, sizeof(key));
            rng_bytes(r, iv, sizeof(iv));
            rng_bytes(r, aad, sizeof(aad));
            rng_bytes(r, in, cap);
            op.ivlen = it % 2 == 0 ? 12 : 1 + rng_below(r, 128);
            /* the same random choices for both passes: the same lengths */
            {
                rng_state saved = *r;

                op.enc = 1;
                mig_message(dc, r, i, &op, t, aad, aadlen, in, ct, cap, tag, 0);
                *r = saved;
            }
            op.enc = 0;
            mig_message(dc, r, i, &op, t, aad, aadlen, ct, ct, cap, tag, it % 3 == 2);
        }
    }
    free(in);
    free(ct);
}
