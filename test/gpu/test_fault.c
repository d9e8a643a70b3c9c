/*
 * test_fault.c - run with GPUAES_FAULT=<stage>, GPUAES_OFFLOAD_MIN_BYTES=0
 * and GPUAES_DISPATCH=force: every GPU job fails at that stage.  Every call must still give default's
 * output (the fallback completes it, also after a partial GPU prefix), leave
 * an error on the queue, count in gpu-errors, and the next call must work too.
 */
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>

#define MiB ((size_t)1 << 20)

static const size_t sizes[] = { 16, MiB + 16, 40 * MiB };

/* The GPU-capable directions: ECB both ways, CTR, CBC/CFB decryption, GCM both ways. */
static const struct { const char *name; int enc; } modes[] = {
    { "AES-128-ECB", 1 }, { "AES-256-ECB", 0 }, { "AES-128-CTR", 1 }, { "AES-192-CTR", 0 },
    { "AES-192-CBC", 0 }, { "AES-256-CFB", 0 }, { "AES-128-GCM", 1 }, { "AES-256-GCM", 0 },
};

static unsigned char key[32], iv[16], aad[24];
/* Failures per size and kind, summed up at the end (the log stops after 50). */
static const char *const kinds[] = { "wrong output/tag", "no error queued", "gpu-errors did not grow" };
static int fails[sizeof(sizes) / sizeof(sizes[0])][3];

/* One update of the whole buffer plus final; returns 1 on success.  *erred:
 * an error was on the queue after the update (where the GPU work is done). */
static int crypt_once(const EVP_CIPHER *c, int enc, const unsigned char *in, unsigned char *out,
                      size_t len, unsigned char tag[16], int *erred)
{
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int gcm = EVP_CIPHER_get_mode(c) == EVP_CIPH_GCM_MODE, n = 0, m = 0, ok;

    ok = EVP_CipherInit_ex2(x, c, key, iv, enc, NULL) && EVP_CIPHER_CTX_set_padding(x, 0)
         && (!gcm || EVP_CipherUpdate(x, NULL, &n, aad, sizeof(aad)));
    ERR_clear_error();
    ok = ok && EVP_CipherUpdate(x, out, &n, in, (int)len) && (size_t)n == len;
    *erred = ERR_peek_error() != 0;
    ERR_clear_error();
    if (ok && gcm && !enc)
        ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0;
    ok = ok && EVP_CipherFinal_ex(x, out + n, &m) && m == 0;
    if (ok && gcm && enc)
        ok = EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0;
    ERR_clear_error();
    EVP_CIPHER_CTX_free(x);
    return ok;
}

static void check_mode(test_env *env, const char *name, int enc, unsigned char *in,
                       unsigned char *ref, unsigned char *buf)
{
    EVP_CIPHER *g = api_fetch(env, name, "gpuaes"), *d = api_fetch(env, name, "default");

    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        size_t len = sizes[s];
        unsigned char reftag[16], tag[16];
        int erred, ok;

        /* GCM decryption needs a real tag: take default's encryption as input. */
        if (EVP_CIPHER_get_mode(d) == EVP_CIPH_GCM_MODE && !enc) {
            CHECK(crypt_once(d, 1, in, buf, len, reftag, &erred));
            memcpy(in, buf, len);
        }
        CHECK(crypt_once(d, enc, in, ref, len, reftag, &erred));
        for (int inplace = 0; inplace < 2; inplace++)
            for (int call = 0; call < 2; call++) {      /* the second call: still working */
                uint64_t errs = test_gpu_errors(env);

                memcpy(tag, reftag, 16);
                if (inplace)
                    memcpy(buf, in, len);
                ok = crypt_once(g, enc, inplace ? buf : in, buf, len, tag, &erred);
                fails[s][0] += !(ok && memcmp(buf, ref, len) == 0 && memcmp(tag, reftag, 16) == 0);
                fails[s][1] += !erred;
                fails[s][2] += !(test_gpu_errors(env) > errs);
                CHECKF(ok && memcmp(buf, ref, len) == 0 && memcmp(tag, reftag, 16) == 0,
                       "%s %s %zu bytes %s call %d: %s", name, enc ? "enc" : "dec", len,
                       inplace ? "in place" : "out of place", call + 1,
                       ok ? "output or tag differs" : "failed");
                CHECKF(erred, "%s %s %zu bytes %s call %d: no error on the queue%s", name,
                       enc ? "enc" : "dec", len, inplace ? "in place" : "out of place", call + 1,
                       len < 32 ? " (GPUAES_OFFLOAD_MIN_BYTES=0, forced: even one block goes to the GPU)" : "");
                CHECKF(test_gpu_errors(env) > errs, "%s %s %zu bytes %s call %d: gpu-errors did not grow",
                       name, enc ? "enc" : "dec", len, inplace ? "in place" : "out of place", call + 1);
            }
    }
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
}

int main(void)
{
    test_env env;
    unsigned char *in, *ref, *buf;
    const char *fault = getenv("GPUAES_FAULT");

    if (!test_env_open(&env))
        return 1;
    test_require_gpu(&env);
    if (fault == NULL || *fault == '\0') {
        fprintf(stderr, "GPUAES_FAULT is not set: nothing to test\n");
        return 1;
    }
    printf("fault stage: %s\n", fault);
    test_seed(5);
    in = malloc(40 * MiB);
    ref = malloc(40 * MiB);
    buf = malloc(40 * MiB);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(aad, sizeof(aad));
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        test_rand_bytes(in, 40 * MiB);
        check_mode(&env, modes[m].name, modes[m].enc, in, ref, buf);
    }
    printf("gpu-errors: %llu\n", (unsigned long long)test_gpu_errors(&env));
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++)
        for (int k = 0; k < 3; k++)
            if (fails[s][k])
                printf("%zu bytes: %s in %d of %d calls\n", sizes[s], kinds[k], fails[s][k],
                       (int)(sizeof(modes) / sizeof(modes[0])) * 4);
    free(in);
    free(ref);
    free(buf);
    test_env_close(&env);
    return test_report("fault");
}
