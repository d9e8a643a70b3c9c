/*
 * test_diff_stream.c - long-lived contexts, gpuaes against default:
 *  - switching: update sizes that straddle GPUAES_OFFLOAD_MIN_BYTES (run with
 *    4096 and GPUAES_DISPATCH=force) so that one context alternates between
 *    the CPU and the GPU path;
 *  - dupctx: EVP_CIPHER_CTX_copy in the middle of a stream, both copies go on;
 *  - reinit: EVP_CipherInit_ex2 with a NULL key or a NULL IV mid-stream, and
 *    a new message after final.
 * After every update the outputs must agree, and for CBC/CFB/CTR so must the
 * state a caller can read: num, IV and updated IV.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

#include "test_diff.h"

#define MAXCTX 4

/* Contexts fed identically; the last one is the reference (default). */
typedef struct {
    EVP_CIPHER_CTX *c[MAXCTX];
    int n;
    kd_mode m;
    int enc;
    unsigned char *out[MAXCTX];   /* scratch for one update each */
    const char *desc;
} ctxset;

static void set_free(ctxset *s)
{
    for (int k = 0; k < MAXCTX; k++) {
        EVP_CIPHER_CTX_free(s->c[k]);
        free(s->out[k]);
    }
}

/* sub and ref contexts for cipher i, initialised by op. */
static int set_open(ctxset *s, diff_ctx *dc, int i, const kd_op *op, size_t maxchunk,
                    const char *desc)
{
    memset(s, 0, sizeof(*s));
    s->n = 2;
    s->m = kd_ciphers[i].mode;
    s->enc = op->enc;
    s->desc = desc;
    for (int k = 0; k < MAXCTX; k++)
        s->out[k] = malloc(maxchunk + 32);
    for (int k = 0; k < 2; k++) {
        s->c[k] = EVP_CIPHER_CTX_new();
        if (s->c[k] == NULL || !kd_init(s->c[k], k == 0 ? dc->sub[i] : dc->ref[i], s->m, op)) {
            CHECKF(!"init", "case: %s", desc);
            return 0;
        }
    }
    return 1;
}

/* num, IV and updated IV of context k must equal the reference's. */
static void compare_state(ctxset *s, int k)
{
    unsigned int num[2] = { 0, 0 };
    unsigned char iv[2][16], oiv[2][16];
    int ok[2];

    if (s->m == KD_ECB || s->m == KD_GCM)
        return;
    memset(iv, 0, sizeof(iv));
    memset(oiv, 0, sizeof(oiv));
    for (int j = 0; j < 2; j++) {
        OSSL_PARAM p[4] = {
            OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &num[j]),
            OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_UPDATED_IV, iv[j], 16),
            OSSL_PARAM_octet_string(OSSL_CIPHER_PARAM_IV, oiv[j], 16),
            OSSL_PARAM_END
        };

        ok[j] = EVP_CIPHER_CTX_get_params(s->c[j == 0 ? k : s->n - 1], p);
    }
    CHECKF(ok[0] == ok[1] && num[0] == num[1], "case: %s", s->desc);
    CHECKF(memcmp(iv[0], iv[1], 16) == 0, "case: %s", s->desc);
    CHECKF(memcmp(oiv[0], oiv[1], 16) == 0, "case: %s", s->desc);
}

/* One update of n bytes on every context, in a random order; outputs compared. */
static void update_all(ctxset *s, rng_state *r, const unsigned char *in, size_t n)
{
    int outl[MAXCTX], rv[MAXCTX], first = (int)rng_below(r, (size_t)s->n);

    for (int j = 0; j < s->n; j++) {
        int k = (first + j) % s->n;

        outl[k] = 0;
        rv[k] = EVP_CipherUpdate(s->c[k], s->out[k], &outl[k], in, (int)n);
    }
    for (int k = 0; k < s->n - 1; k++) {
        CHECKF(rv[k] == rv[s->n - 1] && rv[k] == 1 && outl[k] == outl[s->n - 1], "case: %s", s->desc);
        CHECKF(memcmp(s->out[k], s->out[s->n - 1], (size_t)outl[s->n - 1]) == 0, "case: %s", s->desc);
        compare_state(s, k);
    }
}

static void feed_all(ctxset *s, rng_state *r, const unsigned char *in, size_t len, kd_split split)
{
    for (size_t pos = 0; pos < len;) {
        size_t n = kd_split_next(&split, len - pos);

        update_all(s, r, in + pos, n);
        pos += n;
    }
}

static void aad_all(ctxset *s, const unsigned char *aad, size_t len, kd_split split)
{
    for (size_t pos = 0; pos < len;) {
        size_t n = kd_split_next(&split, len - pos);

        for (int k = 0; k < s->n; k++) {
            int outl = 0;

            CHECKF(EVP_CipherUpdate(s->c[k], NULL, &outl, aad + pos, (int)n), "case: %s", s->desc);
        }
        pos += n;
    }
}

/* Final on every context: same verdict and output; GCM: same tag (enc) or tag set (dec). */
static int final_all(ctxset *s, const unsigned char *dec_tag, unsigned char *enc_tag)
{
    int outl[MAXCTX], rv[MAXCTX];
    unsigned char tags[MAXCTX][16];

    for (int k = 0; k < s->n; k++) {
        if (s->m == KD_GCM && !s->enc)
            CHECKF(kd_set_tag(s->c[k], dec_tag, 16), "case: %s", s->desc);
        outl[k] = 0;
        rv[k] = EVP_CipherFinal_ex(s->c[k], s->out[k], &outl[k]);
        memset(tags[k], 0, 16);
        if (s->m == KD_GCM && s->enc)
            CHECKF(kd_get_tag(s->c[k], tags[k], 16), "case: %s", s->desc);
    }
    for (int k = 0; k < s->n - 1; k++) {
        CHECKF(rv[k] == rv[s->n - 1] && outl[k] == outl[s->n - 1], "case: %s", s->desc);
        CHECKF(memcmp(s->out[k], s->out[s->n - 1], (size_t)outl[s->n - 1]) == 0, "case: %s", s->desc);
        CHECKF(memcmp(tags[k], tags[s->n - 1], 16) == 0, "case: %s", s->desc);
    }
    if (enc_tag != NULL)
        memcpy(enc_tag, tags[s->n - 1], 16);
    return rv[s->n - 1];
}

/* Random key, IV (GCM: 12 bytes or 1..128) and AAD for op; padding off. */
static void rand_op(kd_op *op, rng_state *r, kd_mode m, unsigned char *key, unsigned char *iv)
{
    memset(op, 0, sizeof(*op));
    rng_bytes(r, key, 32);
    rng_bytes(r, iv, 128);
    op->key = key;
    op->iv = m == KD_ECB ? NULL : iv;
    op->ivlen = m == KD_ECB ? 0 : m != KD_GCM ? 16 : (rng_next(r) & 1) ? 12 : 1 + rng_below(r, 128);
    op->key_then_iv = (int)(rng_next(r) & 1);
}

static kd_split shared_split(rng_state *r)
{
    return kd_split_make((rng_next(r) & 1) ? KD_MIXED : KD_ODD, rng_next(r));
}

void diff_switching(diff_ctx *dc, rng_state *r, int i)
{
    /* straddle a 4 KiB threshold every time: small, large, tiny, huge, ... */
    static const size_t seq[] = { 100, 65536 + 5, 7, 3u << 20, 16, 4095, 4096, 4097, 1,
                                  16000, 33, 70001, 15, 1u << 20, 4111 };
    kd_mode m = kd_ciphers[i].mode;
    size_t total = 0, pos;
    unsigned char key[32], iv[128], aad[77], tag[16] = { 0 }, *in, *ct;
    char desc[160];
    kd_op op;

    for (size_t j = 0; j < sizeof(seq) / sizeof(seq[0]); j++)
        total += seq[j] < dc->max_bytes ? seq[j] : dc->max_bytes;
    total += 16;                             /* room to round up to whole blocks */
    in = malloc(total);
    ct = malloc(total + 32);
    rand_op(&op, r, m, key, iv);
    rng_bytes(r, aad, sizeof(aad));
    rng_bytes(r, in, total);
    for (int enc = 1; enc >= 0; enc--) {
        ctxset s;

        op.enc = enc;
        snprintf(desc, sizeof(desc), "switching %s %s ivlen=%zu", kd_ciphers[i].name,
                 enc ? "encrypt" : "decrypt", op.ivlen);
        if (!set_open(&s, dc, i, &op, total, desc)) {
            set_free(&s);
            break;
        }
        if (m == KD_GCM)
            aad_all(&s, aad, sizeof(aad), kd_split_make(KD_TINY, rng_next(r)));
        pos = 0;
        for (size_t j = 0; j < sizeof(seq) / sizeof(seq[0]); j++) {
            size_t n = seq[j] < dc->max_bytes ? seq[j] : dc->max_bytes;

            update_all(&s, r, enc || m != KD_GCM ? in + pos : ct + pos, n);
            if (enc && m == KD_GCM)          /* keep the ciphertext to decrypt next */
                memcpy(ct + pos, s.out[1], n);
            pos += n;
        }
        if (kd_is_block_mode(m) && pos % 16 != 0) {
            update_all(&s, r, in + pos, 16 - pos % 16);
            pos += 16 - pos % 16;
        }
        /* whole blocks, padding off, GCM ciphertext with its own tag: final must succeed */
        CHECKF(final_all(&s, tag, tag) == 1, "case: %s", desc);
        set_free(&s);
    }
    free(in);
    free(ct);
}

void diff_dupctx(diff_ctx *dc, rng_state *r, int i)
{
    kd_mode m = kd_ciphers[i].mode;
    size_t len = diff_rand_len(r, dc->max_bytes < (2u << 20) ? dc->max_bytes : (2u << 20)), cut;
    unsigned char key[32], iv[128], aad[40], tag[16], *in, *gcm_ct;
    char desc[160];
    kd_op op;

    if (kd_is_block_mode(m))
        len -= len % 16;
    cut = rng_below(r, 4) == 0 ? 0 : rng_below(r, len + 1);
    in = malloc(len + 1);
    gcm_ct = malloc(len + 32);
    rand_op(&op, r, m, key, iv);
    rng_bytes(r, aad, sizeof(aad));
    rng_bytes(r, in, len);
    for (int enc = 1; enc >= 0; enc--) {
        const unsigned char *src = enc || m != KD_GCM ? in : gcm_ct;
        kd_split split = shared_split(r);
        ctxset s;
        int ok = 1;

        op.enc = enc;
        snprintf(desc, sizeof(desc), "dupctx %s %s len=%zu copied at %zu ivlen=%zu",
                 kd_ciphers[i].name, enc ? "encrypt" : "decrypt", len, cut, op.ivlen);
        if (!set_open(&s, dc, i, &op, len, desc)) {
            set_free(&s);
            break;
        }
        if (m == KD_GCM)
            aad_all(&s, aad, sizeof(aad), kd_split_make(KD_TINY, rng_next(r)));
        feed_all(&s, r, src, cut, split);
        /* order: sub, sub's copy, ref, ref's copy; the last one is the reference */
        s.c[2] = s.c[1];
        s.c[1] = EVP_CIPHER_CTX_new();
        s.c[3] = EVP_CIPHER_CTX_new();
        s.n = 4;
        ok = s.c[1] != NULL && s.c[3] != NULL
             && EVP_CIPHER_CTX_copy(s.c[1], s.c[0]) && EVP_CIPHER_CTX_copy(s.c[3], s.c[2]);
        CHECKF(ok, "case: %s", desc);
        if (ok) {
            feed_all(&s, r, src + cut, len - cut, split);
            ok = final_all(&s, tag, enc ? tag : NULL);
            if (enc && m == KD_GCM) {      /* the ciphertext for the decrypt pass */
                kd_op e = op;
                size_t outlen;

                e.enc = 1;
                e.aad = aad;
                e.aadlen = sizeof(aad);
                e.tag = tag;
                e.taglen = 16;
                e.split = e.aad_split = kd_split_make(KD_ONE_SHOT, 0);
                CHECKF(kd_run(dc->ref[i], m, &e, in, len, gcm_ct, &outlen) == KD_OK, "case: %s", desc);
            }
            CHECKF(ok == 1, "case: %s", desc);
        }
        set_free(&s);
    }
    free(in);
    free(gcm_ct);
}

void diff_reinit(diff_ctx *dc, rng_state *r, int i)
{
    kd_mode m = kd_ciphers[i].mode;
    size_t cap = dc->max_bytes < (1u << 20) ? dc->max_bytes : (1u << 20);
    size_t a = diff_rand_len(r, cap), b = diff_rand_len(r, cap);
    unsigned char key[32], key2[32], iv[128], iv2[128], aad[24], tag[16], *in;
    char desc[200];
    kd_op op;

    in = malloc(a + b + 32);
    rand_op(&op, r, m, key, iv);
    rng_bytes(r, key2, sizeof(key2));
    rng_bytes(r, iv2, sizeof(iv2));
    rng_bytes(r, aad, sizeof(aad));
    rng_bytes(r, in, a + b + 32);
    rng_bytes(r, tag, sizeof(tag));
    /* 0: NULL key + new IV, 1: key + NULL IV, 2: NULL + NULL, 3: new key + new IV,
     * 4: like 0 but after final (a second message on the same context) */
    for (int variant = 0; variant < 5; variant++) {
        int after_final = variant == 4, v = after_final ? 0 : variant;
        const unsigned char *k2 = v == 1 ? key : v == 3 ? key2 : NULL;
        const unsigned char *i2 = m == KD_ECB || v == 1 || v == 2 ? NULL : iv2;

        if (m == KD_GCM && i2 == NULL)     /* GCM without a fresh IV: behaviour is not defined */
            continue;
        for (int enc = 1; enc >= 0; enc--) {
            size_t pos = 0;
            int rv[2];
            ctxset s;

            op.enc = enc;
            snprintf(desc, sizeof(desc), "reinit %s %s variant=%d a=%zu b=%zu ivlen=%zu",
                     kd_ciphers[i].name, enc ? "encrypt" : "decrypt", variant, a, b, op.ivlen);
            if (!set_open(&s, dc, i, &op, a + b + 32, desc)) {
                set_free(&s);
                return;
            }
            if (m == KD_GCM)
                aad_all(&s, aad, sizeof(aad), shared_split(r));
            feed_all(&s, r, in, a, shared_split(r));
            pos = a;
            if (after_final) {
                if (kd_is_block_mode(m) && pos % 16 != 0) {
                    update_all(&s, r, in + pos, 16 - pos % 16);
                    pos += 16 - pos % 16;
                }
                final_all(&s, tag, NULL);
            }
            for (int k = 0; k < s.n; k++)        /* default must accept it, gpuaes likewise */
                rv[k] = EVP_CipherInit_ex2(s.c[k], NULL, k2, i2, -1, NULL);
            CHECKF(rv[1] == 1 && rv[0] == rv[1], "case: %s", desc);
            if (m == KD_GCM)
                aad_all(&s, aad + 3, sizeof(aad) - 3, shared_split(r));
            feed_all(&s, r, in + pos, b, shared_split(r));
            pos += b;
            if (kd_is_block_mode(m) && b % 16 != 0)  /* re-init dropped any partial block */
                update_all(&s, r, in + pos, 16 - b % 16);
            final_all(&s, tag, NULL);        /* GCM decrypt: a random tag, both must reject */
            set_free(&s);
        }
    }
    free(in);
}
