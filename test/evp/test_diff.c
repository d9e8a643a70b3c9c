/*
 * test_diff.c - differential test: every cipher of gpuaes against OpenSSL's
 * default provider on random keys, IVs, lengths, AAD and update cuts, in place
 * and out of place, then cross-decryption and tag forgery; plus long-lived
 * contexts (test_diff_stream.c) and huge buffers (test_diff_big.c).
 *
 * usage: test_diff [--gpu] [--max-bytes N] [--iterations N] [--threads N] [--big]
 *                  [--case CIPHER:SEED]
 *   --gpu         skip (77) without a GPU; require gpu-bytes to grow and gpu-errors not to
 *   --max-bytes   largest random message (default 4 MiB)
 *   --iterations  random cases per cipher, or per thread with --threads (default 100)
 *   --threads N   N threads with their own contexts run random cases concurrently
 *   --big         only the 64 MiB / 1 GiB in-place comparisons
 *   --migrate     only GCM messages that move from the CPU to the GPU mid-message
 *                 (GPUAES_OFFLOAD_MIN_BYTES above 64 KiB, GPUAES_DISPATCH=force;
 *                 --iterations per GCM cipher)
 *   --fused       also require gcm-fused-bytes to grow: GCM messages on gpuaes's engine
 *                 ran blocks on the CPU in the stitched pass (gcm_fused.c)
 *   --case C:S    rerun one random case (as printed by a failure) and nothing else
 * GPUAES_TEST_SEED=n changes the seed; GPUAES_OFFLOAD_MIN_BYTES with
 * GPUAES_DISPATCH=force selects the GPU path.
 */
#include "test_diff.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "size.h"

size_t diff_rand_len(rng_state *r, size_t max)
{
    size_t n;

    switch (rng_below(r, 10)) {
    case 0: n = 0; break;
    case 1: n = rng_below(r, 33); break;
    case 2: n = 16 * rng_below(r, 9) + rng_below(r, 3); n = n ? n - 1 : 0; break;
    case 3: n = 4096 + rng_below(r, 33) - 16; break;
    case 4: n = 65536 + rng_below(r, 65) - 32; break;
    case 5: case 6: n = rng_below(r, 70000); break;
    default: n = rng_below(r, max + 1); break;
    }
    return n < max ? n : max;
}

static kd_split rand_split(rng_state *r, size_t len)
{
    static const kd_split_style styles[] = { KD_ONE_SHOT, KD_TINY, KD_ODD, KD_MIXED, KD_BLOCKS };
    kd_split_style s = styles[rng_below(r, 5)];

    if (s == KD_TINY && len > (64u << 10))   /* bound the number of calls (GPU latency) */
        s = KD_MIXED;
    return kd_split_make(s, rng_next(r));
}

/* Buffers of one case, each at a random misalignment (the GPU path copies them). */
typedef struct {
    unsigned char *pt, *ct_ref, *ct_sub, *out, *aad;
    void *base[5];
    int n;
} bufs;

static unsigned char *alloc_misaligned(bufs *b, rng_state *r, size_t size)
{
    unsigned char *p = malloc(size + 16);

    b->base[b->n++] = p;
    return p + rng_below(r, 16);
}

static void compare_decrypt(diff_ctx *dc, rng_state *r, int i, const kd_op *base, size_t ctlen,
                            size_t ptlen, bufs *b, const char *desc);

void diff_random_case(diff_ctx *dc, uint64_t seed, int i)
{
    const kd_cipher *kc = &kd_ciphers[i];
    kd_mode m = kc->mode;
    rng_state rs, *r = &rs;
    int block = kd_is_block_mode(m), padding;
    size_t len, ref_len = 0, sub_len = 0;
    unsigned char key[32], iv[128], tag_ref[16], tag_sub[16];
    kd_op op = { .enc = 1, .key = key, .taglen = 16 };
    bufs b;
    char desc[300];
    int rv;

    rs = rng_seeded(seed);                /* one seed per case, so that --case can rerun it */
    padding = block && (rng_next(r) & 1);
    len = diff_rand_len(r, dc->max_bytes);
    op.padding = padding;

    if (block && !padding)
        len -= len % 16;
    rng_bytes(r, key, sizeof(key));
    rng_bytes(r, iv, sizeof(iv));
    op.ivlen = m == KD_ECB ? 0 : m != KD_GCM ? 16 : (rng_next(r) & 1) ? 12 : 1 + rng_below(r, 128);
    op.iv = m == KD_ECB ? NULL : iv;
    if (m == KD_CTR && rng_below(r, 3) == 0) {  /* counter about to carry over 32, 64, 128 bits */
        size_t k = (size_t)4 << rng_below(r, 3);

        memset(iv + 16 - k, 0xff, k);
        iv[15] = (unsigned char)(0xff - rng_below(r, 4));
    }
    op.aadlen = m == KD_GCM && (rng_next(r) & 1) ? diff_rand_len(r, 5000) : 0;
    b.n = 0;
    b.pt = alloc_misaligned(&b, r, len + 16);
    b.ct_ref = alloc_misaligned(&b, r, len + 32);
    b.ct_sub = alloc_misaligned(&b, r, len + 32);
    b.out = alloc_misaligned(&b, r, len + 32);
    b.aad = alloc_misaligned(&b, r, op.aadlen + 1);
    rng_bytes(r, b.pt, len);
    rng_bytes(r, b.aad, op.aadlen);
    op.aad = b.aad;
    snprintf(desc, sizeof(desc), "--max-bytes %zu --case %s:%llu (len=%zu padding=%d ivlen=%zu"
             " aadlen=%zu)", dc->max_bytes, kc->name, (unsigned long long)seed, len, padding,
             op.ivlen, op.aadlen);

    /* Encrypt: default in one call is the reference; gpuaes gets random cuts. */
    op.tag = tag_ref;
    op.split = op.aad_split = kd_split_make(KD_ONE_SHOT, 0);
    rv = kd_run(dc->ref[i], m, &op, b.pt, len, b.ct_ref, &ref_len);
    CHECKF(rv == KD_OK, "case: %s", desc);
    op.tag = tag_sub;
    op.split = rand_split(r, len);
    op.aad_split = rand_split(r, op.aadlen);
    op.in_place = (int)(rng_next(r) & 1);
    op.key_then_iv = (int)(rng_next(r) & 1);
    rv = kd_run(dc->sub[i], m, &op, b.pt, len, b.ct_sub, &sub_len);
    CHECKF(rv == KD_OK, "case: %s", desc);
    CHECKF(sub_len == ref_len && memcmp(b.ct_sub, b.ct_ref, ref_len) == 0, "case: %s", desc);
    CHECKF(m != KD_GCM || memcmp(tag_sub, tag_ref, 16) == 0, "case: %s", desc);

    /* Decrypt each other's ciphertext, and random input, and forged messages. */
    op.tag = tag_ref;
    compare_decrypt(dc, r, i, &op, ref_len, len, &b, desc);
    for (int k = 0; k < b.n; k++)
        free(b.base[k]);
}

static void compare_decrypt(diff_ctx *dc, rng_state *r, int i, const kd_op *base, size_t ctlen,
                            size_t ptlen, bufs *b, const char *desc)
{
    kd_mode m = kd_ciphers[i].mode;
    int may_in_place = !(kd_is_block_mode(m) && base->padding);
    size_t outlen = 0, outlen2 = 0, rlen;
    unsigned char tag[16], *rnd;
    kd_op op = *base;
    int rv, rv2;

    op.enc = 0;
    op.taglen = 1 + rng_below(r, 16);          /* a truncated tag is a prefix of the full one */
    op.tag = tag;

    /* gpuaes decrypts default's ciphertext */
    memcpy(tag, base->tag, 16);
    op.split = rand_split(r, ctlen);
    op.aad_split = rand_split(r, op.aadlen);
    op.in_place = may_in_place && (rng_next(r) & 1);
    op.tag_early = (int)(rng_next(r) & 1);
    rv = kd_run(dc->sub[i], m, &op, b->ct_ref, ctlen, b->out, &outlen);
    CHECKF(rv == KD_OK && outlen == ptlen && memcmp(b->out, b->pt, ptlen) == 0, "case: %s", desc);

    /* default decrypts gpuaes's ciphertext (the same bytes if encryption agreed) */
    op.split = rand_split(r, ctlen);
    op.in_place = 0;
    rv = kd_run(dc->ref[i], m, &op, b->ct_sub, ctlen, b->out, &outlen);
    CHECKF(rv == KD_OK && outlen == ptlen && memcmp(b->out, b->pt, ptlen) == 0, "case: %s", desc);

    if (m == KD_GCM) {            /* one flipped bit in tag, ciphertext or AAD: final must fail */
        size_t where = rng_below(r, 3);
        unsigned char *ctcopy = malloc(ctlen + 1);

        memcpy(ctcopy, b->ct_ref, ctlen);
        if (where == 1 && ctlen > 0)
            ctcopy[rng_below(r, ctlen)] ^= (unsigned char)(1u << rng_below(r, 8));
        else if (where == 2 && op.aadlen > 0)
            b->aad[rng_below(r, op.aadlen)] ^= (unsigned char)(1u << rng_below(r, 8));
        else
            tag[rng_below(r, op.taglen)] ^= (unsigned char)(1u << rng_below(r, 8));
        op.split = rand_split(r, ctlen);
        op.in_place = (int)(rng_next(r) & 1);
        rv = kd_run(dc->sub[i], m, &op, ctcopy, ctlen, b->out, &outlen);
        /* The tag is truncated to op.taglen (1..16) bytes: a forgery passes with
         * probability 2^-(8 * taglen), in the default provider too, so the verdict
         * must be the default provider's; from 8 bytes on it must be a failure. */
        op.in_place = 0;
        rv2 = kd_run(dc->ref[i], m, &op, ctcopy, ctlen, b->out, &outlen2);
        if (rv != rv2 || (op.taglen >= 8 && rv != KD_FINAL_FAILED))
            fprintf(stderr, "flipped bit (%s), %zu-byte tag: gpuaes %d, default %d\n",
                    where == 1 ? "ciphertext" : where == 2 ? "aad" : "tag", op.taglen, rv, rv2);
        CHECKF(rv == rv2 && (op.taglen < 8 || rv == KD_FINAL_FAILED), "case: %s", desc);
        free(ctcopy);
    }

    /* Decrypting random bytes: same output and same verdict (bad padding, bad tag) */
    rlen = kd_is_block_mode(m) ? ctlen - ctlen % 16 : ctlen;
    rnd = malloc(rlen + 1);
    rng_bytes(r, rnd, rlen);
    rng_bytes(r, tag, sizeof(tag));
    op.split = op.aad_split = kd_split_make(KD_ONE_SHOT, 0);
    op.in_place = 0;
    rv = kd_run(dc->ref[i], m, &op, rnd, rlen, b->ct_sub, &outlen2);
    op.split = rand_split(r, rlen);
    op.aad_split = rand_split(r, op.aadlen);
    op.in_place = may_in_place && (rng_next(r) & 1);
    rv2 = kd_run(dc->sub[i], m, &op, rnd, rlen, b->out, &outlen);
    CHECKF(rv != KD_ERROR && rv2 == rv && outlen == outlen2, "case: %s", desc);
    CHECKF(memcmp(b->out, b->ct_sub, outlen < outlen2 ? outlen : outlen2) == 0, "case: %s", desc);
    free(rnd);
}

/* Options */
static int gpu, big, migrate, threads, fused;
static const char *one_case;

static int parse_args(diff_ctx *dc, int argc, char **argv)
{
    dc->max_bytes = 4u << 20;
    dc->iterations = 100;
    for (int a = 1; a < argc; a++) {
        const char *o = argv[a], *v = a + 1 < argc ? argv[a + 1] : NULL;

        if (strcmp(o, "--gpu") == 0)
            gpu = 1;
        else if (strcmp(o, "--big") == 0)
            big = 1;
        else if (strcmp(o, "--migrate") == 0)
            migrate = 1;
        else if (strcmp(o, "--fused") == 0)
            fused = 1;
        else if (strcmp(o, "--max-bytes") == 0 && v != NULL && ++a) {
            if (!size_parse(v, &dc->max_bytes)) {
                fprintf(stderr, "--max-bytes: bad size %s\n", v);
                return 0;
            }
        }
        else if (strcmp(o, "--iterations") == 0 && v != NULL && ++a)
            dc->iterations = atoi(v);
        else if (strcmp(o, "--threads") == 0 && v != NULL && ++a)
            threads = atoi(v);
        else if (strcmp(o, "--case") == 0 && v != NULL && ++a)
            one_case = v;
        else {
            fprintf(stderr, "unknown option %s\n", o);
            return 0;
        }
    }
    return 1;
}

/* Each cipher in turn: random cases, then the long-lived context tests. */
static void run_all(diff_ctx *dc, rng_state *r)
{
    for (int i = 0; i < KD_NCIPHERS; i++) {
        for (int it = 0; it < dc->iterations; it++)
            diff_random_case(dc, rng_next(r), i);
        diff_switching(dc, r, i);
        diff_dupctx(dc, r, i);
        diff_reinit(dc, r, i);
        if (i == KD_NCIPHERS - 1)
            diff_wrap(dc, r);
        printf("%-12s done, %d failures so far\n", kd_ciphers[i].name, test_failures);
        fflush(stdout);
    }
}

typedef struct {
    diff_ctx *dc;
    uint64_t seed;
    pthread_t tid;
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    rng_state r;

    r = rng_seeded(w->seed);
    for (int it = 0; it < w->dc->iterations; it++) {
        int i = (int)rng_below(&r, KD_NCIPHERS);

        switch (rng_below(&r, 16)) {
        case 0: case 1: diff_switching(w->dc, &r, i); break;
        case 2: case 3: diff_dupctx(w->dc, &r, i); break;
        case 4: case 5: diff_reinit(w->dc, &r, i); break;
        case 6: diff_wrap(w->dc, &r); break;
        default: diff_random_case(w->dc, rng_next(&r), i); break;
        }
    }
    return NULL;
}

static void run_threads(diff_ctx *dc, rng_state *r)
{
    worker *w = calloc((size_t)threads, sizeof(*w));

    for (int t = 0; t < threads; t++) {
        w[t].dc = dc;
        w[t].seed = rng_next(r);
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0) {
            CHECK(!"pthread_create");
            threads = t;
        }
    }
    for (int t = 0; t < threads; t++)
        pthread_join(w[t].tid, NULL);
    free(w);
}

static void rerun_case(diff_ctx *dc, const char *spec)
{
    char name[32] = "";
    unsigned long long seed = 0;

    if (sscanf(spec, "%31[^:]:%llu", name, &seed) != 2) {
        CHECK(!"--case wants CIPHER:SEED");
        return;
    }
    for (int i = 0; i < KD_NCIPHERS; i++)
        if (strcmp(kd_ciphers[i].name, name) == 0) {
            diff_random_case(dc, seed, i);
            return;
        }
    CHECK(!"--case: unknown cipher");
}

int main(int argc, char **argv)
{
    static diff_ctx dc;
    uint64_t gpu_before = 0, errors_before = 0, fused_before = 0;
    rng_state r;

    if (!parse_args(&dc, argc, argv))
        return 2;
    test_seed(0x64696666);
    r = rng_seeded(test_rand64());
    if (!test_env_open(&dc.env))
        return 1;
    for (int i = 0; i < KD_NCIPHERS; i++) {
        dc.sub[i] = test_fetch(&dc.env, kd_ciphers[i].name, "gpuaes");
        dc.ref[i] = test_fetch(&dc.env, kd_ciphers[i].name, "default");
        if (dc.sub[i] == NULL || dc.ref[i] == NULL
            || strcmp(OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(dc.sub[i])), "gpuaes") != 0) {
            fprintf(stderr, "cannot fetch %s from both providers\n", kd_ciphers[i].name);
            return 1;
        }
    }
    if (gpu) {
        test_require_gpu(&dc.env);
        gpu_before = test_gpu_bytes(&dc.env);
        errors_before = test_gpu_errors(&dc.env);
        fused_before = test_u64_param(&dc.env, "gcm-fused-bytes");
    }
    printf("max-bytes %zu, iterations %d, threads %d%s\n", dc.max_bytes, dc.iterations, threads,
           big ? ", big" : "");
    if (one_case != NULL)
        rerun_case(&dc, one_case);
    else if (big)
        diff_big(&dc, &r);
    else if (migrate)
        diff_migrate(&dc, &r);
    else if (threads > 0)
        run_threads(&dc, &r);
    else
        run_all(&dc, &r);
    if (gpu) {
        uint64_t after = test_gpu_bytes(&dc.env), errors = test_gpu_errors(&dc.env);

        printf("gpu-bytes %llu -> %llu, gpu-errors %llu -> %llu\n",
               (unsigned long long)gpu_before, (unsigned long long)after,
               (unsigned long long)errors_before, (unsigned long long)errors);
        CHECK(after > gpu_before);          /* the GPU really did part of the work */
        CHECK(errors == errors_before);     /* and no GPU failure was papered over */
        if (fused) {
            uint64_t f = test_u64_param(&dc.env, "gcm-fused-bytes");

            printf("gcm-fused-bytes %llu -> %llu\n", (unsigned long long)fused_before,
                   (unsigned long long)f);
            CHECK(f > fused_before);        /* the stitched CPU pass really ran */
        }
    }
    for (int i = 0; i < KD_NCIPHERS; i++) {
        EVP_CIPHER_free(dc.sub[i]);
        EVP_CIPHER_free(dc.ref[i]);
    }
    test_env_close(&dc.env);
    return test_report("diff");
}
