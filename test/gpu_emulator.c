/*
 * gpu_emulator.c - the GPU interface (include/gpuaes_gpu.h) emulated on the
 * CPU with OpenSSL's AES, for a second build of the module (build/emu/gpuaes.so).
 *
 * Why: CI has no GPU, yet the provider's GPU-path logic (splitting updates,
 * re-synchronising the fallback, finishing a partial GPU job on the CPU) is
 * where the subtle bugs live.  With the emulator, the GPU-labelled tests run
 * everywhere.  It copies the real layer's contract: chunked work, `done` is a
 * prefix, job->iv is the state at in + done, GPUAES_FAULT=<stage> fails.
 * GCM ops: CTR32 plus a GHASH of the done prefix's ciphertext of its own,
 * independent of the provider's gcm_math.c: byte tables (fast enough for the
 * 1 GiB tests; an emulator need not be constant time) built with a bitwise
 * SP 800-38D multiply.
 */
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/provider.h>

#include "gpuaes_gpu.h"

#define EMU_CHUNK ((size_t)1 << 20)    /* small, so tests cross many chunk boundaries */

struct gpuaes_key {
    unsigned char key[32];
    size_t keylen;
};

gpuaes_key *gpuaes_key_new(const unsigned char *key, size_t keylen)
{
    gpuaes_key *k;

    if (keylen != 16 && keylen != 24 && keylen != 32)
        return NULL;
    k = OPENSSL_zalloc(sizeof(*k));
    if (k != NULL) {
        memcpy(k->key, key, keylen);
        k->keylen = keylen;
    }
    return k;
}

void gpuaes_key_free(gpuaes_key *key)
{
    OPENSSL_clear_free(key, sizeof(*key));
}

int gpuaes_gpu_available(void)
{
    static int available = -1;        /* racy but idempotent */

    if (available < 0) {
        const char *d = getenv("GPUAES_DISABLE_GPU");

        available = !(d != NULL && *d != '\0' && *d != '0');
    }
    return available;
}

const char *gpuaes_gpu_description(void)
{
    return gpuaes_gpu_available() ? "CPU emulation of the GPU layer (tests only)"
                                  : "disabled by GPUAES_DISABLE_GPU";
}

void gpuaes_gpu_release(void) {}

static OSSL_LIB_CTX *emu_libctx;
static CRYPTO_ONCE emu_once = CRYPTO_ONCE_STATIC_INIT;

static void emu_init(void)
{
    emu_libctx = OSSL_LIB_CTX_new();
    if (emu_libctx != NULL && OSSL_PROVIDER_load(emu_libctx, "default") == NULL) {
        OSSL_LIB_CTX_free(emu_libctx);
        emu_libctx = NULL;
    }
}

/* One AES block operation over n blocks with the default provider's ECB. */
static int ecb(const gpuaes_key *k, int enc, unsigned char *out, const unsigned char *in, size_t n)
{
    static const char *names[] = { "AES-128-ECB", "AES-192-ECB", "AES-256-ECB" };
    EVP_CIPHER *c = CRYPTO_THREAD_run_once(&emu_once, emu_init) && emu_libctx != NULL
        ? EVP_CIPHER_fetch(emu_libctx, names[(k->keylen - 16) / 8], NULL) : NULL;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int ok, outl;

    ok = c != NULL && x != NULL && EVP_CipherInit_ex2(x, c, k->key, NULL, enc, NULL)
        && EVP_CIPHER_CTX_set_padding(x, 0) && EVP_CipherUpdate(x, out, &outl, in, (int)n);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    return ok;
}

/* x = x * y in GCM's field, SP 800-38D algorithm 1, byte by byte. */
static void emu_gf_mul(unsigned char x[16], const unsigned char y[16])
{
    unsigned char z[16] = { 0 }, v[16];

    memcpy(v, y, 16);
    for (int i = 0; i < 128; i++) {
        unsigned char bit = (unsigned char)((x[i / 8] >> (7 - i % 8)) & 1);
        unsigned char lsb = v[15] & 1;

        for (int j = 0; j < 16; j++)
            z[j] ^= v[j] & (unsigned char)(0 - bit);
        for (int j = 15; j > 0; j--)
            v[j] = (unsigned char)((v[j] >> 1) | (v[j - 1] << 7));
        v[0] >>= 1;
        v[0] ^= (unsigned char)(0xe1 & (0 - lsb));
    }
    memcpy(x, z, 16);
}

/* x * H = XOR over byte positions i of t[i][x_i], t[i][v] = (v at byte i) * H. */
typedef struct { unsigned char t[16][256][16]; } emu_htab;

static void emu_htab_init(emu_htab *T, const unsigned char h[16])
{
    for (int i = 0; i < 16; i++) {
        memset(T->t[i][0], 0, 16);
        for (int j = 0; j < 8; j++) {            /* the single-bit values: e * H */
            unsigned char *b = T->t[i][1 << j];

            memset(b, 0, 16);
            b[i] = (unsigned char)(1 << j);
            emu_gf_mul(b, h);
        }
        for (int v = 3; v < 256; v++) {          /* the rest by linearity */
            int low = v & -v;

            if (v == low)
                continue;
            for (int k = 0; k < 16; k++)
                T->t[i][v][k] = T->t[i][v ^ low][k] ^ T->t[i][low][k];
        }
    }
}

/* Horner GHASH: x = (x ^ C) * H over len bytes of whole blocks. */
static void emu_ghash(unsigned char x[16], const emu_htab *T, const unsigned char *p, size_t len)
{
    for (size_t i = 0; i < len; i += 16) {
        unsigned char z[16] = { 0 };

        for (int j = 0; j < 16; j++)
            x[j] ^= p[i + j];
        for (int j = 0; j < 16; j++)
            for (int k = 0; k < 16; k++)
                z[k] ^= T->t[j][x[j]][k];
        memcpy(x, z, 16);
    }
}

static void add128(unsigned char c[16], size_t n, int wrap32)
{
    int stop = wrap32 ? 12 : 0;
    unsigned long long carry = n;

    for (int i = 15; i >= stop && carry; i--) {
        carry += c[i];
        c[i] = (unsigned char)carry;
        carry >>= 8;
    }
}

/* One chunk: out = op(in), iv advanced, GCM: x = GHASH state after it.
 * in and out may be the same. */
static int chunk(gpuaes_job *job, size_t off, size_t len, unsigned char x[16], const emu_htab *T)
{
    const unsigned char *in = job->in + off;
    unsigned char *out = job->out + off, *tmp = malloc(len), next[16];
    int ok = tmp != NULL;

    if (!ok)
        return 0;
    if (job->op == GPUAES_GCM_DECRYPT)           /* GHASH of the input, before in place overwrites it */
        emu_ghash(x, T, in, len);
    switch (job->op) {
    case GPUAES_ECB_ENCRYPT: ok = ecb(job->key, 1, out, in, len); break;
    case GPUAES_ECB_DECRYPT: ok = ecb(job->key, 0, out, in, len); break;
    case GPUAES_CTR128:
    case GPUAES_CTR32:
    case GPUAES_GCM_ENCRYPT:
    case GPUAES_GCM_DECRYPT:
        for (size_t i = 0; i < len; i += 16) {
            memcpy(tmp + i, job->iv, 16);
            add128(job->iv, 1, job->op != GPUAES_CTR128);
        }
        ok = ecb(job->key, 1, tmp, tmp, len);
        for (size_t i = 0; ok && i < len; i++)
            out[i] = in[i] ^ tmp[i];
        break;
    case GPUAES_CBC_DECRYPT:
    case GPUAES_CFB128_DECRYPT:
        memcpy(next, in + len - 16, 16);          /* before in place overwrites it */
        memcpy(tmp, job->iv, 16);
        memcpy(tmp + 16, in, len - 16);           /* the previous ciphertext blocks */
        if (job->op == GPUAES_CBC_DECRYPT) {
            unsigned char *p = malloc(len);
            ok = p != NULL && ecb(job->key, 0, p, in, len);
            for (size_t i = 0; ok && i < len; i++)
                out[i] = p[i] ^ tmp[i];
            free(p);
        } else {
            ok = ecb(job->key, 1, tmp, tmp, len);
            for (size_t i = 0; ok && i < len; i++)
                out[i] = in[i] ^ tmp[i];
        }
        memcpy(job->iv, next, 16);
        break;
    }
    if (ok && job->op == GPUAES_GCM_ENCRYPT)
        emu_ghash(x, T, out, len);
    OPENSSL_clear_free(tmp, len);
    return ok;
}

void gpuaes_gpu_run(gpuaes_job *job)
{
    const char *fault = getenv("GPUAES_FAULT");
    size_t nchunks = (job->len + EMU_CHUNK - 1) / EMU_CHUNK;
    /* A fault strikes the second chunk of a long job, else the first. */
    size_t fail_at = fault == NULL || *fault == '\0' ? (size_t)-1
        : strcmp(fault, "alloc") == 0 || nchunks < 3 ? 0 : 1;

    unsigned char x[16] = { 0 }, xc[16];     /* GCM: GHASH of the done prefix */
    int gcm = job->op == GPUAES_GCM_ENCRYPT || job->op == GPUAES_GCM_DECRYPT;
    emu_htab *T = NULL;

    job->done = 0;
    job->status = GPUAES_OK;
    memset(job->ghash, 0, sizeof(job->ghash));
    if (!gpuaes_gpu_available() || (job->len % 16) != 0) {
        job->status = GPUAES_BUSY;
        return;
    }
    if (gcm) {
        if ((T = OPENSSL_malloc(sizeof(*T))) == NULL) {
            job->status = GPUAES_BUSY;
            return;
        }
        emu_htab_init(T, job->h);
    }
    for (size_t i = 0; i < nchunks; i++) {
        size_t off = i * EMU_CHUNK, len = job->len - off < EMU_CHUNK ? job->len - off : EMU_CHUNK;

        memcpy(xc, x, 16);
        if (i == fail_at || !chunk(job, off, len, xc, T)) {
            job->status = GPUAES_FAILED;
            strcpy(job->error, i == fail_at ? "emulated fault injected by GPUAES_FAULT" : "emulator");
            break;
        }
        memcpy(x, xc, 16);                       /* the chunk is done: its GHASH counts */
        job->done += len;
    }
    if (gcm)
        memcpy(job->ghash, x, 16);
    OPENSSL_clear_free(T, T != NULL ? sizeof(*T) : 0);
    OPENSSL_cleanse(x, sizeof(x));
    OPENSSL_cleanse(xc, sizeof(xc));
}
