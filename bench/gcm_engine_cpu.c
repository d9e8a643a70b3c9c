/*
 * gcm_engine_cpu.c - what a GCM message on gpuaes's own engine costs when its
 * updates run on the CPU, against the default provider's own GCM, all in one
 * process, interleaved.  Needs the emulated module (build/emu: its test
 * hooks): a first 8 MiB update goes to the (emulated) GPU, so the engine
 * takes the message (GPUAES_DISPATCH=force); the timed updates are below
 * GPUAES_OFFLOAD_MIN_BYTES (8M, set here) and run on the CPU, either in one
 * stitched pass of the default provider's GCM (gcm_fused.c;
 * GPUAES_TEST_FUSED_MIN=16) or as AES-CTR plus a second GHASH pass (the
 * engine's path before; the hook set past every size).
 *
 *   gcm_engine_cpu [--provider-path build/emu] [--sizes 4K,16K,64K,1M] [--rounds 15]
 *
 * Prints GB/s per size: default provider, stitched, CTR + GHASH (median of
 * the rounds; each round runs the three for ~20 ms each, in turn).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>
#include <openssl/provider.h>

#include "size.h"          /* test/support: sizes as "64M" */
#include "bench_stats.h"

#define BIG ((size_t)8 << 20)
#define MAX_ROUNDS 101

static void die(const char *what)
{
    fprintf(stderr, "gcm_engine_cpu: %s failed\n", what);
    exit(1);
}

/* A context whose message is on the engine (gpuaes) or the default provider's. */
static EVP_CIPHER_CTX *start(EVP_CIPHER *c, unsigned char *buf)
{
    static const unsigned char key[32] = "gcm-engine-cpu-bench-key-0123456", iv[12] = "gcm-iv-01234";
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl;

    if (x == NULL || !EVP_EncryptInit_ex2(x, c, key, iv, NULL)
        || !EVP_EncryptUpdate(x, buf, &outl, buf, (int)BIG))
        die("the message's start");
    return x;
}

/* GB/s of n-byte updates for ~20 ms. */
static double run(EVP_CIPHER_CTX *x, unsigned char *buf, size_t n)
{
    double t0 = bench_mono_s(), t;
    long k = 0;
    int outl;

    do {
        for (int i = 0; i < 8; i++, k++)
            if (!EVP_EncryptUpdate(x, buf, &outl, buf, (int)n))
                die("update");
        t = bench_mono_s() - t0;
    } while (t < 0.02);
    return (double)k * (double)n / t / 1e9;
}

int main(int argc, char **argv)
{
    const char *dir = "build/emu", *sizes = "4K,16K,64K,1M";
    int rounds = 15;
    static double r[3][MAX_ROUNDS];
    static const char *const hook[3] = { NULL, "16", "1000000000000" };
    OSSL_LIB_CTX *lc;
    EVP_CIPHER *c[2];
    unsigned char *buf;
    char *list, *s;

    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--provider-path") == 0)
            dir = argv[i + 1];
        else if (strcmp(argv[i], "--sizes") == 0)
            sizes = argv[i + 1];
        else if (strcmp(argv[i], "--rounds") == 0)
            rounds = atoi(argv[i + 1]);
    }
    if (rounds < 1 || rounds > MAX_ROUNDS)
        die("--rounds (1..101)");
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "8M", 1);
    setenv("GPUAES_DISPATCH", "force", 1);     /* the first 8 MiB update: the GPU, surely */
    if ((lc = OSSL_LIB_CTX_new()) == NULL || !OSSL_PROVIDER_set_default_search_path(lc, dir)
        || OSSL_PROVIDER_load(lc, "default") == NULL || OSSL_PROVIDER_load(lc, "gpuaes") == NULL
        || (c[0] = EVP_CIPHER_fetch(lc, "AES-256-GCM", "provider=default")) == NULL
        || (c[1] = EVP_CIPHER_fetch(lc, "AES-256-GCM", "provider=gpuaes")) == NULL
        || (buf = calloc(1, BIG)) == NULL)
        die("loading the providers (the emulated module: --provider-path build/emu)");
    printf("# gcm_engine_cpu: %s; AES-256-GCM encrypt updates, GB/s, median of %d rounds\n",
           OpenSSL_version(OPENSSL_VERSION), rounds);
    printf("%8s %10s %10s %10s %10s\n", "size", "default", "stitched", "ctr+ghash", "stitched/2p");
    list = strdup(sizes);
    for (s = strtok(list, ","); s != NULL; s = strtok(NULL, ",")) {
        size_t n = 0;
        EVP_CIPHER_CTX *x[3];

        if (!size_parse(s, &n) || n == 0 || n >= BIG || n % 16 != 0)
            die("--sizes (multiples of 16 below 8M)");
        for (int v = 0; v < 3; v++)
            x[v] = start(c[v > 0], buf);
        for (int i = 0; i < rounds; i++)
            for (int v = 0; v < 3; v++) {
                if (hook[v] != NULL)
                    setenv("GPUAES_TEST_FUSED_MIN", hook[v], 1);
                r[v][i] = run(x[v], buf, n);
            }
        for (int v = 0; v < 3; v++) {
            bench_sort(r[v], rounds);
            EVP_CIPHER_CTX_free(x[v]);
        }
        printf("%8zu %10.2f %10.2f %10.2f %10.3f\n", n, r[0][rounds / 2], r[1][rounds / 2], r[2][rounds / 2],
               r[1][rounds / 2] / r[2][rounds / 2]);
    }
    free(list);
    free(buf);
    return 0;
}
