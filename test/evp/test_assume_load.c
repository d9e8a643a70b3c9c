/*
 * test_assume_load.c - the load-time self-check (assume_verify_at_load) on
 * the emulated module: with every assumption holding, a large update goes
 * to the (emulated) GPU; with one made to fail (GPUAES_TEST_BREAK_ASSUMPTION,
 * a hook of the emulated build only) the load leaves an error naming it, the
 * GPU path is off and the answers are still the default provider's.
 *
 *   test_assume_load            expect the GPU path on
 *   test_assume_load --broken   expect it off (GPUAES_TEST_BREAK_ASSUMPTION set)
 */
#include <stdio.h>
#include <string.h>
#include <openssl/err.h>

#include "api_util.h"

/* Does the queue hold gpuaes's "breaks ASSUME_..." error?  Clears it. */
static int load_error_seen(const char *name)
{
    const char *data = NULL;
    int flags = 0, seen = 0;

    while (ERR_get_error_all(NULL, NULL, NULL, &data, &flags) != 0)
        if ((flags & ERR_TXT_STRING) && data != NULL && strstr(data, "breaks") != NULL
            && strstr(data, name) != NULL)
            seen = 1;
    return seen;
}

int main(int argc, char **argv)
{
    int broken = argc > 1 && strcmp(argv[1], "--broken") == 0;
    const char *name = getenv("GPUAES_TEST_BREAK_ASSUMPTION");
    static unsigned char in[1 << 20], a[(1 << 20) + 32], b[(1 << 20) + 32];
    unsigned char key[16] = "load-check-key!", iv[16] = "load-check-iv!!";
    const char *const modes[] = { "AES-128-CTR", "AES-128-CBC", "AES-128-GCM" };
    test_env env;
    uint64_t before;

    if (broken && name == NULL) {
        fprintf(stderr, "--broken needs GPUAES_TEST_BREAK_ASSUMPTION\n");
        return 2;
    }
    ERR_clear_error();
    if (!test_env_open(&env))
        return 1;
    CHECKF(load_error_seen(broken ? name : "ASSUME_") == broken,
           "load error naming %s: expected %s", broken ? name : "an assumption", broken ? "yes" : "no");
    test_require_gpu(&env);
    test_rand_bytes(in, sizeof(in));
    before = test_gpu_bytes(&env);
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        EVP_CIPHER *g = api_fetch(&env, modes[m], "gpuaes"), *d = api_fetch(&env, modes[m], "default");
        unsigned char tg[16], td[16];
        size_t la = 0, lb = 0;

        /* Both directions of the same bytes, no padding (GCM: encryption only). */
        for (int enc = 1; enc >= (m == 2 ? 1 : 0); enc--) {
            int okd = api_crypt(d, enc, key, iv, NULL, 0, in, sizeof(in), a, &la, td, 0);
            int okg = api_crypt(g, enc, key, iv, NULL, 0, in, sizeof(in), b, &lb, tg, 0);

            CHECKF(okd == okg && la == lb && memcmp(a, b, la) == 0
                   && (m != 2 || memcmp(tg, td, 16) == 0),
                   "%s %s: gpuaes and the default provider differ", modes[m], enc ? "enc" : "dec");
        }
        EVP_CIPHER_free(g);
        EVP_CIPHER_free(d);
    }
    if (broken)
        CHECKF(test_gpu_bytes(&env) == before, "the GPU was used with an assumption broken");
    else
        CHECKF(test_gpu_bytes(&env) > before, "the GPU path is off though every assumption holds");
    test_env_close(&env);
    return test_report(broken ? "assume_load --broken" : "assume_load");
}
