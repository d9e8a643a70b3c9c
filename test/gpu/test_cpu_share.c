/*
 * test_cpu_share.c - the caller's share of GPU jobs (gpu_cpu_share): the
 * thread that drives a GPU job processes pieces from its end through the
 * default provider while the GPU works from the front.  Run with
 * GPUAES_OFFLOAD_MIN_BYTES=0 and GPUAES_DISPATCH=force (every update of whole
 * blocks is a GPU job).
 *
 * Every cipher and key size, both directions, in place and not, lengths
 * from 16 bytes to 9 MiB (odd ones where the mode allows): output and GCM
 * tag must equal the default provider's, GCM decryption of its output must
 * verify.  --all (GPUAES_GPU_CPU_SHARE=all): the share must have run
 * (cpu-share-bytes grew) for CTR, the other block modes and GCM; --ctr (the
 * default policy): for CTR only; --off: for none.  The GPU must have taken
 * bytes in every group.  Both runs equal to the default
 * provider: the share changes no output.  Against the emulator every job
 * gets a different split (test/gpu/gpu_emulator.c: pieces of 16 bytes up to the
 * whole rest, meeting the GPU prefix anywhere, at chunk ends too).
 */
#include "api_util.h"

#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
/* A later round's extra length: past gpuaesd's 64 MiB segment, whose slots a
 * job of up to ~54 MiB claims at once with the default 8 MiB pieces, leaving
 * no unclaimed end for a share (remote_pipeline.c); in process, many more
 * chunks for the caller to fall idle between. */
#define BIG (72 * MiB + 16)

static unsigned char key[32], iv[16], aad[20];

/* One cipher, one direction: a few lengths, in place and not. */
static void run_cipher(test_env *env, const char *name, int enc, unsigned char *in, unsigned char *ref,
                       unsigned char *buf, unsigned char *ct, size_t big)
{
    EVP_CIPHER *g = api_fetch(env, name, "gpuaes"), *d = api_fetch(env, name, "default");
    int mode = EVP_CIPHER_get_mode(d), gcm = mode == EVP_CIPH_GCM_MODE;
    int whole = mode == EVP_CIPH_ECB_MODE || mode == EVP_CIPH_CBC_MODE;
    size_t lens[] = { 16, 4096 + 32, MiB + 48, 3 * MiB, 9 * MiB - 16, 0, big };

    lens[5] = 2 * MiB + 16 * test_rand_below(65536) + (whole ? 0 : test_rand_below(16));
    for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]) - (big == 0); k++) {
        size_t len = lens[k], rl, gl;
        unsigned char rtag[16], gtag[16];
        const unsigned char *src = in;

        test_rand_bytes(iv, sizeof(iv));
        if (gcm && !enc) {             /* decrypt default's encryption, with its tag */
            CHECK(api_crypt(d, 1, key, iv, aad, sizeof(aad), in, len, ct, &rl, rtag, 0));
            src = ct;
        }
        CHECK(api_crypt(d, enc, key, iv, aad, sizeof(aad), src, len, ref, &rl, rtag, 0));
        for (int inplace = 0; inplace < 2; inplace++) {
            int ok;

            memcpy(gtag, rtag, 16);
            if (inplace)
                memcpy(buf, src, len);
            ok = api_crypt(g, enc, key, iv, aad, sizeof(aad), inplace ? buf : src, len, buf, &gl,
                           gtag, 0);
            CHECKF(ok && gl == rl && memcmp(buf, ref, len) == 0 && (!gcm || memcmp(gtag, rtag, 16) == 0),
                   "%s %s %zu bytes%s: differs from the default provider", name, enc ? "enc" : "dec",
                   len, inplace ? " in place" : "");
        }
    }
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
}

int main(int argc, char **argv)
{
    /* The groups: CTR, the other block modes, GCM; which of them the share
     * must have run for under --all, --ctr (the default policy) and --off. */
    static const char *const group[3] = { "CTR", "ECB/CBC/CFB", "GCM" };
    const char *policy = argc > 1 ? argv[1] : "--all";
    int want[3] = { 1, 1, 1 };
    size_t max = BIG;
    unsigned char *in = malloc(max), *ref = malloc(max), *buf = malloc(max), *ct = malloc(max);
    uint64_t share[3] = { 0, 0, 0 }, jobs[3] = { 0, 0, 0 };
    test_env env;

    if (strcmp(policy, "--off") == 0) {
        want[0] = want[1] = want[2] = 0;
    } else if (strcmp(policy, "--ctr") == 0) {
        want[1] = want[2] = 0;
    } else if (strcmp(policy, "--all") != 0) {
        fprintf(stderr, "usage: test_cpu_share [--all|--ctr|--off]\n");
        return 2;
    }
    if (!test_env_open(&env) || in == NULL || ref == NULL || buf == NULL || ct == NULL)
        return 1;
    test_require_gpu(&env);
    test_seed(0x5eed);
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(aad, sizeof(aad));
    test_rand_bytes(in, max);
    /* The caller takes a piece only when the pipeline leaves it idle with
     * blocks unclaimed: on a real GPU beside other busy processes (ctest -j16)
     * a group's jobs may all end before that, and through gpuaesd a job of
     * 9 MiB is claimed whole at once.  A group that should have seen the
     * share and did not runs again, up to 4 more times, with a job of BIG too. */
    for (int round = 0; round < 5; round++) {
        int again = 0;

        for (size_t i = 0; i < API_NCIPHERS; i++)
            for (int enc = 0; enc < 2; enc++) {
                int g = strstr(api_ciphers[i], "GCM") != NULL ? 2 : strstr(api_ciphers[i], "CTR") != NULL ? 0 : 1;
                uint64_t s0 = test_cpu_share_bytes(&env), j0 = test_gpu_bytes(&env);

                if (round > 0 && !(want[g] && share[g] == 0))
                    continue;
                run_cipher(&env, api_ciphers[i], enc, in, ref, buf, ct, round > 0 ? BIG : 0);
                share[g] += test_cpu_share_bytes(&env) - s0;
                jobs[g] += test_gpu_bytes(&env) - j0;
            }
        for (int g = 0; g < 3; g++)
            again |= want[g] && share[g] == 0;
        if (!again)
            break;
        printf("round %d: a group's share did not run yet; again\n", round + 1);
    }
    for (int g = 0; g < 3; g++) {
        printf("GPU jobs, %s: %llu bytes (%llu by the callers' shares)\n", group[g],
               (unsigned long long)jobs[g], (unsigned long long)share[g]);
        CHECKF(jobs[g] > 0, "%s: no GPU job ran", group[g]);
        if (want[g])
            CHECKF(share[g] > 0, "%s: the share never ran (%s)", group[g], policy);
        else
            CHECKF(share[g] == 0, "%s: the share ran under %s", group[g], policy);
    }
    free(in);
    free(ref);
    free(buf);
    free(ct);
    test_env_close(&env);
    return test_report("cpu_share");
}
