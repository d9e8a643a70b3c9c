/*
 * test_kat.c - known-answer tests: NIST CAVP (AESAVS KAT/MMT, GCMVS), RFC 3686,
 * FIPS 197, SP 800-38A, the GCM spec and Wycheproof, in both directions, through
 * gpuaes and (as a check of the parser and the vectors) through default.
 *
 * usage: test_kat [--gpu]     (vectors from $GPUAES_VECTORS)
 * --gpu: skip (77) without a GPU, and require gpu-bytes to grow; run it with
 * GPUAES_OFFLOAD_MIN_BYTES=0 and GPUAES_DISPATCH=force so that even these
 * short vectors go to the GPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kat_diff_op.h"
#include "kat_vectors.h"
#include "testutil.h"

static test_env env;
static EVP_CIPHER *fetched[2][KD_NCIPHERS];   /* [0] gpuaes, [1] default */
static const char *const provs[2] = { "gpuaes", "default" };

static EVP_CIPHER *cipher_for(int prov, const kd_cipher *kc)
{
    int i = (int)(kc - kd_ciphers);

    if (fetched[prov][i] == NULL) {
        EVP_CIPHER *c = test_fetch(&env, kc->name, provs[prov]);

        /* a fetch that fell through to another provider would test the wrong code */
        if (c != NULL && strcmp(OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(c)), provs[prov]) != 0) {
            EVP_CIPHER_free(c);
            c = NULL;
        }
        fetched[prov][i] = c;
    }
    return fetched[prov][i];
}

static void report(const kat_vector *v, const char *prov, const char *what)
{
    fprintf(stderr, "  %s:%d (%s, %s): %s\n", v->file, v->line, v->cipher->name, prov, what);
}

/* One direction of one vector, cut by `split`; checks output (and the tag). */
static void run_dir(int prov, const kat_vector *v, int enc, kd_split_style split, int in_place)
{
    kd_mode mode = v->cipher->mode;
    const unsigned char *in = enc ? v->pt : v->ct, *want = enc ? v->ct : v->pt;
    size_t len = enc ? v->ptlen : v->ctlen, outlen = 0;
    unsigned char *out = malloc(len + 32), tag[16] = { 0 };
    kd_op op = {
        .enc = enc, .padding = 0, .key = v->key, .iv = v->ivlen ? v->iv : NULL, .ivlen = v->ivlen,
        .aad = v->aad, .aadlen = v->aadlen, .tag = enc ? tag : (unsigned char *)v->tag,
        .taglen = v->taglen, .in_place = in_place,
        .split = kd_split_make(split, test_rand64()), .aad_split = kd_split_make(split, test_rand64()),
        .tag_early = (int)(test_rand64() & 1), .key_then_iv = (int)(test_rand64() & 1),
    };
    int rv = kd_run(cipher_for(prov, v->cipher), mode, &op, in, len, out, &outlen);

    if (v->fail) {                    /* only decryption; it must fail at the final call */
        if (rv != KD_FINAL_FAILED) {
            report(v, provs[prov], rv == KD_OK ? "forged tag accepted" : "error before final");
            CHECK(rv == KD_FINAL_FAILED);
        }
    } else if (rv != KD_OK) {
        report(v, provs[prov], enc ? "encrypt failed" : "decrypt failed");
        CHECK(rv == KD_OK);
    } else if (outlen != len || memcmp(out, want, len) != 0) {
        report(v, provs[prov], enc ? "wrong ciphertext" : "wrong plaintext");
        CHECK(outlen == len && memcmp(out, want, len) == 0);
    } else if (enc && mode == KD_GCM && memcmp(tag, v->tag, v->taglen) != 0) {
        report(v, provs[prov], "wrong tag");
        CHECK(memcmp(tag, v->tag, v->taglen) == 0);
    }
    free(out);
}

static void run_vector(const kat_vector *v)
{
    for (int prov = 0; prov < 2; prov++) {
        if (cipher_for(prov, v->cipher) == NULL) {
            report(v, provs[prov], "cannot fetch");
            CHECK(0);
            return;
        }
        for (int enc = v->fail ? 0 : 1; enc >= 0; enc--) {
            run_dir(prov, v, enc, KD_ONE_SHOT, 0);
            /* the same answer with the data cut into random update sizes */
            run_dir(prov, v, enc, KD_TINY, (int)(test_rand64() & 1));
            run_dir(prov, v, enc, KD_MIXED, (int)(test_rand64() & 1));
        }
    }
}

int main(int argc, char **argv)
{
    const char *dir = getenv("GPUAES_VECTORS");
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    uint64_t gpu_before = 0, errors_before = 0;
    size_t total = 0;

    test_seed(0x6b6174);
    if (dir == NULL) {
        fprintf(stderr, "GPUAES_VECTORS is not set\n");
        return 1;
    }
    if (!test_env_open(&env))
        return 1;
    if (gpu) {
        test_require_gpu(&env);
        gpu_before = test_gpu_bytes(&env);
        errors_before = test_gpu_errors(&env);
    }
    for (const kat_file *f = kat_files; f->path != NULL; f++) {
        kat_list list;
        size_t fails = 0;

        if (!kat_load(dir, f, &list)) {
            CHECK(!"vector file unreadable or malformed");
            continue;
        }
        for (size_t i = 0; i < list.n; i++) {
            run_vector(&list.v[i]);
            fails += list.v[i].fail;
        }
        printf("%-32s %5zu vectors (%zu must-fail)\n", f->path, list.n, fails);
        if (list.n == 0) {             /* a file that tests nothing is a defect */
            fprintf(stderr, "%s: no vectors\n", f->path);
            CHECK(list.n > 0);
        }
        total += list.n;
        kat_free(&list);
    }
    printf("total %zu vectors\n", total);
    if (gpu) {
        uint64_t after = test_gpu_bytes(&env);

        printf("gpu-bytes %llu -> %llu\n", (unsigned long long)gpu_before, (unsigned long long)after);
        CHECK(after > gpu_before);                       /* the GPU did run */
        CHECK(test_gpu_errors(&env) == errors_before);   /* and never failed */
    }
    for (int p = 0; p < 2; p++)
        for (int i = 0; i < KD_NCIPHERS; i++)
            EVP_CIPHER_free(fetched[p][i]);
    test_env_close(&env);
    return test_report("kat");
}
