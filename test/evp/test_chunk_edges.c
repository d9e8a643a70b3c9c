/*
 * test_chunk_edges.c - one update per message, at lengths around the GPU
 * layer's staging-chunk boundaries: +-1 byte and +-1 block around 1, 2, 4,
 * 8 and 16 MiB.  cuda/staging/pipeline.cu (run with 1 MiB buffers and 3 lanes, see
 * kat_diff.cmake) cuts a job into chunks that ramp from 128 KiB up to
 * 1 MiB and down again, so these lengths give 4 to 24 chunks of varied
 * sizes, lanes wrapping; the emulator's chunks are 1 MiB.  For every GPU
 * operation, in place and
 * out of place, compared with the default provider byte for byte (and the
 * GCM tag).  Run with GPUAES_OFFLOAD_MIN_BYTES=0 and GPUAES_DISPATCH=force so
 * every length goes to the GPU; --gpu requires a GPU and checks that
 * gpu-bytes grew.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kat_diff_op.h"
#include "testutil.h"

static const size_t chunks[] = { (size_t)1 << 20, (size_t)4 << 20, (size_t)8 << 20 };
/* Offsets from a multiple of the chunk: whole blocks for ECB/CBC, any byte count otherwise. */
static const long block_offsets[] = { -16, 0, 16 };
static const long byte_offsets[] = { -17, -1, 0, 1, 17 };

typedef struct {
    kd_mode mode;
    int enc;
} gpu_op;

static const gpu_op ops[] = {
    { KD_ECB, 1 }, { KD_ECB, 0 }, { KD_CBC, 0 }, { KD_CFB, 0 }, { KD_CTR, 1 }, { KD_GCM, 1 }, { KD_GCM, 0 },
};

static int run_case(test_env *env, const gpu_op *g, size_t keylen, size_t len, int in_place)
{
    const kd_cipher *kc = kd_find(g->mode, keylen);
    EVP_CIPHER *cd = test_fetch(env, kc->name, "default"), *cg = test_fetch(env, kc->name, "gpuaes");
    unsigned char key[32], iv[16], aad[20], tag_d[16], tag_g[16];
    unsigned char *in = malloc(len + 16), *out_d = malloc(len + 32), *out_g = malloc(len + 32);
    size_t n_d = 0, n_g = 0;
    kd_op op = { 0 };
    int ok = 0, r_d, r_g;

    if (cd == NULL || cg == NULL || in == NULL || out_d == NULL || out_g == NULL)
        goto end;
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(aad, sizeof(aad));
    test_rand_bytes(in, len);
    op.key = key;
    op.iv = g->mode == KD_ECB ? NULL : iv;
    op.ivlen = g->mode == KD_GCM ? 12 : 16;
    op.padding = 0;
    op.split = kd_split_make(KD_ONE_SHOT, 1);
    op.aad_split = kd_split_make(KD_ONE_SHOT, 2);
    if (g->mode == KD_GCM) {
        op.aad = aad;
        op.aadlen = sizeof(aad);
        op.taglen = 16;
    }
    if (g->mode == KD_GCM && !g->enc) {
        /* Decrypt what the default provider encrypted, with its tag. */
        unsigned char *ct = malloc(len + 32);
        size_t n = 0;

        op.enc = 1;
        op.tag = tag_d;
        if (ct == NULL || kd_run(cd, g->mode, &op, in, len, ct, &n) != KD_OK) {
            free(ct);
            goto end;
        }
        op.enc = 0;
        op.in_place = in_place;
        r_g = kd_run(cg, g->mode, &op, ct, len, out_g, &n_g);
        op.in_place = 0;
        r_d = kd_run(cd, g->mode, &op, ct, len, out_d, &n_d);
        ok = r_g == KD_OK && r_d == KD_OK && n_g == len && n_d == len
            && memcmp(out_g, in, len) == 0 && memcmp(out_d, in, len) == 0;
        free(ct);
        goto end;
    }
    op.enc = g->enc;
    op.tag = tag_d;
    r_d = kd_run(cd, g->mode, &op, in, len, out_d, &n_d);
    op.tag = tag_g;
    op.in_place = in_place;
    r_g = kd_run(cg, g->mode, &op, in, len, out_g, &n_g);
    ok = r_d == KD_OK && r_g == KD_OK && n_d == n_g && memcmp(out_d, out_g, n_d) == 0
        && (g->mode != KD_GCM || memcmp(tag_d, tag_g, 16) == 0);
 end:
    if (!ok)
        fprintf(stderr, "%s %s len=%zu %s: differs from the default provider\n",
                kc != NULL ? kc->name : "?", g->enc ? "enc" : "dec", len,
                in_place ? "in place" : "out of place");
    EVP_CIPHER_free(cd);
    EVP_CIPHER_free(cg);
    free(in);
    free(out_d);
    free(out_g);
    return ok;
}

int main(int argc, char **argv)
{
    test_env env;
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0, ncases = 0;
    uint64_t before;

    test_seed(0x636875);
    if (!test_env_open(&env))
        return 1;
    if (gpu)
        test_require_gpu(&env);
    before = test_gpu_bytes(&env);
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
            const gpu_op *g = &ops[o];
            int blocks = kd_is_block_mode(g->mode);
            const long *offs = blocks ? block_offsets : byte_offsets;
            size_t noffs = blocks ? 3 : 5;

            for (size_t k = 0; k < noffs; k++) {
                for (size_t mult = 1; mult <= 2; mult++) {
                    size_t len = (size_t)((long)(chunks[c] * mult) + offs[k]);
                    size_t keylen = 16 + 8 * ((k + mult + o) % 3);

                    CHECK(run_case(&env, g, keylen, len, (int)((k + mult) & 1)));
                    ncases++;
                }
            }
        }
    }
    printf("%d cases around 1, 2, 4, 8 and 16 MiB\n", ncases);
    if (gpu)
        CHECK(test_gpu_bytes(&env) > before);
    test_env_close(&env);
    return test_report("chunk_edges");
}
