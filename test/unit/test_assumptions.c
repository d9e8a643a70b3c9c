/*
 * test_assumptions.c - every assumption of provider/assume/fallback_assumptions.h
 * against this libcrypto's default provider, loaded by gpuaes's own loader
 * (fallback.c) and called through the same dispatch functions.  CPU only:
 * no GPU, no gpuaes module.
 *
 * Each check also runs once per expectation it evaluates with that
 * expectation inverted, and must then fail: no check passes vacuously.  The
 * private library context's DRBG cannot be made: a check that draws random
 * numbers (a DRBG instantiated at every load) fails.
 *
 *   test_assumptions [NAME...]    (default: all; exit 1 naming each failure)
 */
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>

#include "prov_ctx.h"
#include "assume/fallback_assumptions.h"

/* The variants gpuaes registers (provider.c's table, without our dispatch). */
static fallback_cipher fb[15];
#define V(name, mode, keylen, i) \
    { name, mode, keylen, NULL, &fb[i], NULL, ((keylen) - 16) / 8, 9 + ((keylen) - 16) / 8 }
const gpuaes_variant gpuaes_variants[] = {
    V("AES-128-ECB", MODE_ECB, 16, 0),  V("AES-192-ECB", MODE_ECB, 24, 1),
    V("AES-256-ECB", MODE_ECB, 32, 2),  V("AES-128-CBC", MODE_CBC, 16, 3),
    V("AES-192-CBC", MODE_CBC, 24, 4),  V("AES-256-CBC", MODE_CBC, 32, 5),
    V("AES-128-CFB", MODE_CFB, 16, 6),  V("AES-192-CFB", MODE_CFB, 24, 7),
    V("AES-256-CFB", MODE_CFB, 32, 8),  V("AES-128-CTR", MODE_CTR, 16, 9),
    V("AES-192-CTR", MODE_CTR, 24, 10), V("AES-256-CTR", MODE_CTR, 32, 11),
    V("AES-128-GCM", MODE_GCM, 16, 12), V("AES-192-GCM", MODE_GCM, 24, 13),
    V("AES-256-GCM", MODE_GCM, 32, 14),
};
#undef V
const size_t gpuaes_variant_count = sizeof(gpuaes_variants) / sizeof(gpuaes_variants[0]);

static int wanted(const char *name, int argc, char **argv)
{
    if (argc < 2)
        return 1;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], name) == 0 || strcmp(argv[i], name + strlen("ASSUME_")) == 0)
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
    gpuaes_prov prov = { 0 };
    int failed = 0, ran = 0;

    if (!fallback_load(&prov, NULL)) {
        ERR_print_errors_fp(stderr);
        fprintf(stderr, "FAIL: cannot load the default provider\n");
        return 1;
    }
    /* The checks run at every load: a DRBG they instantiated would cost every
     * process 0.6 ms.  One that cannot be made fails any check that draws. */
    if (!RAND_set_DRBG_type(prov.fallback_libctx, "gpuaes-no-drbg-at-load", NULL, NULL, NULL)) {
        fprintf(stderr, "FAIL: cannot set the private DRBG type\n");
        return 1;
    }
    for (int a = 0; a < ASSUME_COUNT; a++) {
        const char *name = assume_name(a);
        assume_run r = { .provctx = prov.fallback_provctx, .fallbacks = prov.fallbacks };
        unsigned n;
        int live = 1;

        if (!wanted(name, argc, argv))
            continue;
        ran++;
        if (!assume_check(a, &r)) {
            printf("FAIL %s: %s\n", name, r.why);
            failed++;
            continue;
        }
        /* Each expectation inverted in turn: the check must then fail. */
        n = r.seen;
        for (unsigned k = 1; k <= n; k++) {
            assume_run f = { .provctx = prov.fallback_provctx, .fallbacks = prov.fallbacks, .flip = k };

            if (assume_check(a, &f)) {
                printf("FAIL %s: passes with expectation %u of %u inverted\n", name, k, n);
                live = 0;
            }
        }
        if (n == 0 || !live) {
            printf("FAIL %s: a check that cannot fail (%u expectations)\n", name, n);
            failed++;
            continue;
        }
        printf("ok   %s (%u expectations, each shown to fail when inverted)%s\n", name, n,
               assume_at_load(a) ? "; checked at load" : "");
    }
    fallback_unload(&prov);
    if (ran == 0) {
        fprintf(stderr, "no such assumption\n");
        return 2;
    }
    printf("%d of %d assumptions hold for %s\n", ran - failed, ran, OpenSSL_version(OPENSSL_VERSION));
    return failed != 0;
}
