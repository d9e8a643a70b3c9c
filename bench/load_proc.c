/*
 * load_proc.c - one process of load_matrix.py's "processes" workload: a fixed
 * amount of work through one provider, timed from a common start signal.
 *
 *   load_proc --provider default|gpuaes --cipher AES-128-CTR --dir enc
 *             --size 1M --bytes 1G [--provider-path DIR] [--wait-gpu]
 *
 * Setup (not timed): a library context with the default provider (and gpuaes
 * for --provider gpuaes, as openssl.cnf.example does), the cipher fetched with
 * provider=NAME, random key/IV, an input and a separate output buffer of
 * --size bytes filled with random data.  Then, when LOAD_PROC_READY_FD and
 * LOAD_PROC_GO_FD are set, it writes one byte to READY and blocks reading GO
 * until end of file: the parent closes GO once every process is ready, so all
 * start together.  Timed: ceil(--bytes / --size) EVP_CipherUpdate calls (one
 * message, one context), then EVP_CipherFinal for encryption.
 *
 * gpuaes is met as a user meets it: nothing waits for its GPU start-up, which
 * begins in the background at the first large call (updates until then run on
 * the CPU).  --wait-gpu asks the "gpu-available" parameter (which waits) during
 * setup instead.
 *
 * Prints one line to stdout:
 *   ok bytes=N t0=MONO t1=MONO cpu_s=S gpu_bytes=N max_call_s=S
 * t0/t1: CLOCK_MONOTONIC seconds (system-wide: comparable between processes)
 * at the first update and after the last; cpu_s: process CPU time (user+sys,
 * every thread, gpuaes's helpers included) over that window; gpu_bytes:
 * gpuaes's gpu-bytes counter after the work (-1 for the default provider);
 * max_call_s: the longest single EVP_CipherUpdate (a caller waiting for the
 * GPU's start-up shows here: load_matrix.py's fresh-cold workload).
 * LOAD_PROC_TRACE=1 prints each update's time to stderr.
 * Exit status 0 on success, 1 on a failed EVP call, 2 on bad usage.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "rng.h"           /* test/support: the seeded generator */
#include "size.h"          /* test/support: sizes as "64M" */

#ifndef GPUAES_DEFAULT_MODULE_DIR
#define GPUAES_DEFAULT_MODULE_DIR ""
#endif

static void usage_exit(const char *msg)
{
    if (msg != NULL)
        fprintf(stderr, "load_proc: %s\n", msg);
    fputs("usage: load_proc --provider default|gpuaes --cipher NAME --dir enc|dec --size N --bytes N\n"
          "                 [--provider-path DIR] [--wait-gpu]   (sizes: K/M/G = 2^10/2^20/2^30)\n",
          stderr);
    exit(2);
}

static void fail(const char *what)
{
    unsigned long e;
    char buf[256];
    fprintf(stderr, "load_proc: %s failed\n", what);
    while ((e = ERR_get_error()) != 0) {
        ERR_error_string_n(e, buf, sizeof(buf));
        fprintf(stderr, "  %s\n", buf);
    }
    exit(1);
}

static double now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int env_fd(const char *name)
{
    const char *s = getenv(name);
    return (s != NULL && *s != '\0') ? atoi(s) : -1;
}

int main(int argc, char **argv)
{
    const char *prov = NULL, *cipher_name = NULL, *dir = NULL;
    const char *path = getenv("GPUAES_MODULE_DIR");
    unsigned long long size = 0, total = 0;
    int enc = -1, wait_gpu = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--wait-gpu") == 0) {
            wait_gpu = 1;
            continue;
        }
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0)
            usage_exit(NULL);
        if (i + 1 >= argc)
            usage_exit("missing value or unknown option");
        const char *v = argv[++i];
        if (strcmp(a, "--provider") == 0)
            prov = v;
        else if (strcmp(a, "--cipher") == 0)
            cipher_name = v;
        else if (strcmp(a, "--dir") == 0)
            dir = v;
        else if (strcmp(a, "--size") == 0 || strcmp(a, "--bytes") == 0) {
            size_t n;

            if (!size_parse(v, &n))
                usage_exit("bad size (e.g. 4096, 64K, 64M, 1G)");
            if (strcmp(a, "--size") == 0)
                size = n;
            else
                total = n;
        }
        else if (strcmp(a, "--provider-path") == 0)
            path = v;
        else
            usage_exit("unknown option");
    }
    if (prov == NULL || (strcmp(prov, "default") != 0 && strcmp(prov, "gpuaes") != 0))
        usage_exit("--provider must be default or gpuaes");
    if (cipher_name == NULL)
        usage_exit("--cipher is required");
    if (dir != NULL && strcmp(dir, "enc") == 0)
        enc = 1;
    else if (dir != NULL && strcmp(dir, "dec") == 0)
        enc = 0;
    else
        usage_exit("--dir must be enc or dec");
    if (size == 0 || size % 16 != 0 || size > (1ULL << 30))
        usage_exit("--size: a multiple of 16, at most 1G");
    if (total < size)
        usage_exit("--bytes must be at least --size");
    if (path == NULL || *path == '\0')
        path = GPUAES_DEFAULT_MODULE_DIR;

    /* ---- setup (not timed) */
    OSSL_LIB_CTX *lc = OSSL_LIB_CTX_new();
    if (lc == NULL)
        fail("OSSL_LIB_CTX_new");
    if (*path != '\0' && !OSSL_PROVIDER_set_default_search_path(lc, path))
        fail("OSSL_PROVIDER_set_default_search_path");
    OSSL_PROVIDER *pdef = OSSL_PROVIDER_load(lc, "default"), *pgpu = NULL;
    if (pdef == NULL)
        fail("loading the default provider");
    if (strcmp(prov, "gpuaes") == 0 && (pgpu = OSSL_PROVIDER_load(lc, "gpuaes")) == NULL)
        fail("loading gpuaes");
    char propq[32];
    snprintf(propq, sizeof(propq), "provider=%s", prov);
    EVP_CIPHER *cipher = EVP_CIPHER_fetch(lc, cipher_name, propq);
    if (cipher == NULL)
        fail("EVP_CIPHER_fetch");
    const int gcm = EVP_CIPHER_get_mode(cipher) == EVP_CIPH_GCM_MODE;

    unsigned char key[32], iv[16], tag[16];
    /* A key of its own per process and run. */
    rng_state rng = rng_seeded((uint64_t)getpid() * RNG_GAMMA ^ (uint64_t)(now(CLOCK_REALTIME) * 1e6));
    rng_bytes(&rng, key, sizeof(key));
    rng_bytes(&rng, iv, sizeof(iv));
    unsigned char *in = NULL, *out = NULL;
    if (posix_memalign((void **)&in, 4096, size) != 0 || posix_memalign((void **)&out, 4096, size) != 0) {
        fprintf(stderr, "load_proc: out of memory\n");
        return 1;
    }
    /* Random 64 KiB repeated (AES does not care; a fresh-* process's wall time
     * should not be spent making data), and the output pre-faulted. */
    const size_t pat = size < (64u << 10) ? (size_t)size : (64u << 10);
    rng_bytes(&rng, in, pat);
    for (size_t off = pat; off < size; off += pat)
        memcpy(in + off, in, size - off < pat ? size - off : pat);
    memset(out, 0x5a, size);
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    if (ctx == NULL || !EVP_CipherInit_ex2(ctx, cipher, key, EVP_CIPHER_get_iv_length(cipher) ? iv : NULL, enc, NULL))
        fail("EVP_CipherInit_ex2");
    if (!EVP_CIPHER_CTX_set_padding(ctx, 0))
        fail("EVP_CIPHER_CTX_set_padding");
    if (wait_gpu && pgpu != NULL) {
        int avail = -1;
        OSSL_PARAM q[] = { OSSL_PARAM_int("gpu-available", &avail), OSSL_PARAM_END };
        if (!OSSL_PROVIDER_get_params(pgpu, q))
            ERR_clear_error();
        if (avail != 1)
            fprintf(stderr, "load_proc: gpuaes reports no usable GPU (gpu-available = %d)\n", avail);
    }

    /* ---- start together */
    int ready_fd = env_fd("LOAD_PROC_READY_FD"), go_fd = env_fd("LOAD_PROC_GO_FD");
    if (ready_fd >= 0) {
        char b = 'r';
        if (write(ready_fd, &b, 1) != 1)
            perror("load_proc: write ready");
        close(ready_fd);
    }
    if (go_fd >= 0) {
        char b;
        ssize_t r;
        while ((r = read(go_fd, &b, 1)) != 0)
            if (r < 0 && errno != EINTR)
                break; /* EOF (the parent closed it) = go */
        close(go_fd);
    }

    /* LOAD_PROC_TRACE=1: each update's time on stderr (where a fresh process's time goes) */
    const int trace = getenv("LOAD_PROC_TRACE") != NULL && strcmp(getenv("LOAD_PROC_TRACE"), "1") == 0;

    /* ---- timed */
    const double c0 = now(CLOCK_PROCESS_CPUTIME_ID);
    const double t0 = now(CLOCK_MONOTONIC);
    unsigned long long done = 0;
    double max_call = 0, tc = t0;
    int outl;
    while (done < total) {
        if (!EVP_CipherUpdate(ctx, out, &outl, in, (int)size))
            fail("EVP_CipherUpdate");
        const double tn = now(CLOCK_MONOTONIC);
        if (tn - tc > max_call)
            max_call = tn - tc;
        if (trace)
            fprintf(stderr, "load_proc: update %llu: %.3f ms\n", done / size, (tn - tc) * 1e3);
        tc = tn;
        if ((unsigned long long)outl != size) {
            fprintf(stderr, "load_proc: EVP_CipherUpdate returned %d bytes for %llu\n", outl, size);
            return 1;
        }
        done += size;
    }
    if (enc && !EVP_CipherFinal_ex(ctx, out, &outl))
        fail("EVP_CipherFinal_ex");
    const double t1 = now(CLOCK_MONOTONIC);
    const double c1 = now(CLOCK_PROCESS_CPUTIME_ID);
    if (gcm && enc && !EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, 16, tag))
        fail("getting the GCM tag");

    long long gpu_bytes = -1;
    if (pgpu != NULL) {
        uint64_t v = 0;
        OSSL_PARAM q[] = { OSSL_PARAM_uint64("gpu-bytes", &v), OSSL_PARAM_END };
        if (OSSL_PROVIDER_get_params(pgpu, q) && OSSL_PARAM_modified(&q[0]))
            gpu_bytes = (long long)v;
        else
            ERR_clear_error();
    }
    printf("ok bytes=%llu t0=%.9f t1=%.9f cpu_s=%.6f gpu_bytes=%lld max_call_s=%.6f\n", done, t0, t1, c1 - c0,
           gpu_bytes, max_call);
    fflush(stdout);

    EVP_CIPHER_CTX_free(ctx);
    EVP_CIPHER_free(cipher);
    free(in);
    free(out);
    if (pgpu != NULL)
        OSSL_PROVIDER_unload(pgpu);
    OSSL_PROVIDER_unload(pdef);
    OSSL_LIB_CTX_free(lc);
    return 0;
}
