/*
 * test_diff_big.c - --big: a 64 MiB and a 1 GiB buffer through every GPU
 * operation (ECB both ways, CTR, CBC and CFB decryption, GCM both ways) and
 * every key size, in place, gpuaes against default.  At most two 1 GiB
 * buffers are alive at a time; GCM's round trip is checked against a SHA-256
 * of the plaintext instead of a third copy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "test_diff.h"

static double now(void)
{
    struct timespec ts;

    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int sha256(diff_ctx *dc, const unsigned char *p, size_t n, unsigned char md[32])
{
    size_t mdlen = 0;

    return EVP_Q_digest(dc->env.libctx, "SHA256", NULL, p, n, md, &mdlen) && mdlen == 32;
}

/* Runs op in place on a (gpuaes, cut by split) and on b (default, one call) and
 * compares.  tag: GCM decryption's input; GCM encryption leaves default's tag there. */
static void run_pair(diff_ctx *dc, int i, kd_op *op, kd_split split, unsigned char *a,
                     unsigned char *b, size_t len, unsigned char tag[16], const char *desc)
{
    unsigned char tag_a[16], tag_b[16];
    size_t la = 0, lb = 0;
    double t0, t1, t2;
    int ra, rb;

    memcpy(tag_a, tag, 16);
    memcpy(tag_b, tag, 16);
    op->in_place = 1;
    op->split = split;
    op->aad_split = split;
    op->tag = tag_a;
    t0 = now();
    ra = kd_run(dc->sub[i], kd_ciphers[i].mode, op, a, len, a, &la);
    t1 = now();
    op->split = op->aad_split = kd_split_make(KD_ONE_SHOT, 0);
    op->tag = tag_b;
    rb = kd_run(dc->ref[i], kd_ciphers[i].mode, op, b, len, b, &lb);
    t2 = now();
    CHECKF(ra == KD_OK && rb == KD_OK && la == len && lb == len, "case: %s", desc);
    CHECKF(memcmp(a, b, len) == 0, "case: %s", desc);
    CHECKF(memcmp(tag_a, tag_b, 16) == 0, "case: %s", desc);
    memcpy(tag, tag_b, 16);
    printf("  %-36s gpuaes %6.2f s, default %6.2f s\n", desc, t1 - t0, t2 - t1);
    fflush(stdout);
}

void diff_big(diff_ctx *dc, rng_state *r)
{
    static const struct { kd_mode m; int enc; } ops[] = {
        { KD_ECB, 1 }, { KD_ECB, 0 }, { KD_CTR, 1 }, { KD_CBC, 0 }, { KD_CFB, 0 }, { KD_GCM, 1 },
    };
    static const size_t sizes[] = { 64u << 20, 1u << 30 };

    for (size_t s = 0; s < 2; s++) {
        size_t len = sizes[s];
        unsigned char *a = malloc(len + 32), *b = malloc(len + 32);

        if (a == NULL || b == NULL) {
            CHECKF(!"out of memory", "case: %s", "big");
            free(a);
            free(b);
            return;
        }
        for (size_t k = 16; k <= 32; k += 8)
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
                kd_mode m = ops[o].m;
                const kd_cipher *kc = kd_find(m, k);
                int i = (int)(kc - kd_ciphers);
                unsigned char key[32], iv[16], aad[32], tag[16] = { 0 }, md[2][32];
                kd_op op = { .enc = ops[o].enc, .key = key, .iv = m == KD_ECB ? NULL : iv,
                             .ivlen = m == KD_ECB ? 0 : m == KD_GCM ? 12 : 16, .aad = aad,
                             .aadlen = m == KD_GCM ? sizeof(aad) : 0, .taglen = 16 };
                /* 64 MiB: gpuaes gets mixed cuts; 1 GiB: one call, as an application would */
                kd_split split = kd_split_make(s == 0 ? KD_MIXED : KD_ONE_SHOT, rng_next(r));
                char desc[96];

                rng_bytes(r, key, sizeof(key));
                rng_bytes(r, iv, sizeof(iv));
                rng_bytes(r, aad, sizeof(aad));
                rng_bytes(r, a, len);
                memcpy(b, a, len);
                snprintf(desc, sizeof(desc), "%s %s %zu MiB", kc->name,
                         op.enc ? "encrypt" : "decrypt", len >> 20);
                if (m == KD_GCM)
                    CHECKF(sha256(dc, a, len, md[0]), "case: %s", desc);
                run_pair(dc, i, &op, split, a, b, len, tag, desc);
                if (m != KD_GCM)
                    continue;
                /* GCM decryption of that ciphertext, with its tag: the plaintext again */
                op.enc = 0;
                snprintf(desc, sizeof(desc), "%s decrypt %zu MiB", kc->name, len >> 20);
                run_pair(dc, i, &op, kd_split_make(s == 0 ? KD_ODD : KD_ONE_SHOT, rng_next(r)),
                         a, b, len, tag, desc);
                CHECKF(sha256(dc, a, len, md[1]) && memcmp(md[0], md[1], 32) == 0, "case: %s", desc);
            }
        free(a);
        free(b);
    }
}
