/*
 * service_util.c - a gpuaesd for a test, and a job checked against the
 * default provider: ECB/CBC/CFB/CTR by their EVP ciphers; CTR32 (GCM's
 * inc32, random counters near the 2^32 wrap) by EVP ECB of the counter
 * blocks; GCM by EVP AES-GCM with a 96-bit IV (no AAD): the output bit for
 * bit, and the GHASH field Y = X_n * H (include/gpuaes_gpu.h, gpuaes_job)
 * from EVP's tag: T = E_K(J0) ^ (X_n ^ L) * H, so Y = T ^ E_K(J0) ^ L * H.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>

#include "gcm/gcm_math.h"
#include "gpuaes_counter.h"
#include "service_util.h"
#include "testutil.h"

void svc_tmpdir(char dir[64])
{
    strcpy(dir, "/tmp/gpuaesd-test-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
}

void svc_rmdir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];

    while (d != NULL && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
            unlink(p);
        }
    }
    if (d != NULL)
        closedir(d);
    rmdir(dir);
}

static void nap_ms(long ms)
{
    struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&t, NULL);
}

int svc_wait_warm(const char *dir, int ms)
{
    gpuaesd_status_reply st;

    for (int waited = 0;; waited += 10) {
        if (gpuaesd_query_status(dir, &st, 100) == 0 && st.gpu_up != GPUAESD_GPU_STARTING)
            return (int)st.gpu_up;
        if (waited >= ms)
            return -1;
        nap_ms(10);
    }
}

pid_t svc_start_fg(const char *service, const char *dir)
{
    pid_t pid = fork();

    if (pid == 0) {
        execl(service, "gpuaesd", "--socket-dir", dir, "--idle-exit", "0", "--foreground", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; pid > 0 && i < 2000; i++) {
        if (svc_wait_warm(dir, 100) >= 0)
            return pid;
        nap_ms(10);
    }
    fprintf(stderr, "the service did not start\n");
    exit(1);
}

unsigned svc_wait_spares(const char *dir, int ms)
{
    const char *env = getenv("GPUAESD_SPARE");
    unsigned want = env != NULL && strcmp(env, "0") == 0 ? 0 : 1;
    gpuaesd_status_reply st = { 0 };

    for (int i = 0; i < ms / 10; i++) {
        if (gpuaesd_query_status(dir, &st, 2000) == 0 && st.spares_ready == want)
            break;
        nap_ms(10);
    }
    return st.spares_ready;
}

int svc_stop(pid_t pid)
{
    int st;

    kill(pid, SIGTERM);
    for (int i = 0; i < 2000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        nap_ms(10);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

int svc_wait_gone(const char *dir, int ms)
{
    for (int i = 0; i < ms / 10; i++) {
        int fd = gpuaesd_dial(dir, 100);

        if (fd < 0)
            return 0;
        close(fd);
        nap_ms(10);
    }
    return -1;
}

static const EVP_CIPHER *fetch(const char *mode, size_t keylen)
{
    char name[32];
    EVP_CIPHER *c;

    snprintf(name, sizeof(name), "AES-%zu-%s", keylen * 8, mode);
    c = EVP_CIPHER_fetch(NULL, name, "provider=default");
    if (c == NULL) {
        fprintf(stderr, "fetch %s failed\n", name);
        exit(1);
    }
    return c;
}

/* out = mode(in) over len bytes, no padding; the IV may be NULL. */
static void evp(const char *mode, size_t keylen, int enc, const unsigned char *key, const unsigned char *iv,
                const unsigned char *in, unsigned char *out, size_t len)
{
    EVP_CIPHER *c = (EVP_CIPHER *)fetch(mode, keylen);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl = 0;

    if (x == NULL || !EVP_CipherInit_ex2(x, c, key, iv, enc, NULL) || !EVP_CIPHER_CTX_set_padding(x, 0)
        || (len > 0 && !EVP_CipherUpdate(x, out, &outl, in, (int)len)) || (size_t)outl != len) {
        fprintf(stderr, "EVP %s failed\n", mode);
        exit(1);
    }
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

/* GCM with a 96-bit IV: out and the tag. */
static void evp_gcm(size_t keylen, const unsigned char *key, const unsigned char iv[12],
                    const unsigned char *in, unsigned char *out, size_t len, unsigned char tag[16])
{
    EVP_CIPHER *c = (EVP_CIPHER *)fetch("GCM", keylen);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    int outl = 0, fl = 0;

    if (x == NULL || !EVP_EncryptInit_ex2(x, c, key, iv, NULL) || !EVP_EncryptUpdate(x, out, &outl, in, (int)len)
        || !EVP_EncryptFinal_ex(x, out + outl, &fl)
        || !EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag)) {
        fprintf(stderr, "EVP GCM failed\n");
        exit(1);
    }
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

void svc_make_request(gpuaesd_job_req *r, size_t seg_size)
{
    size_t half = seg_size / 2;

    memset(r, 0, sizeof(*r));
    r->op = 1 + (uint32_t)test_rand_below(GPUAESD_OP_LAST);
    r->keylen = 16 + 8 * (uint32_t)test_rand_below(3);
    test_rand_bytes(r->key, r->keylen);
    test_rand_bytes(r->iv, 16);
    r->len = 16 * (1 + test_rand_below(half / 16 - 1));
    r->in_off = test_rand_below(half - r->len + 1);
    r->out_off = test_rand_below(4) == 0 || r->op >= GPUAESD_OP_KEYSTREAM128
        ? r->in_off : half + test_rand_below(half - r->len + 1);
}

/* The expected output and states of request r on input in. */
typedef struct expect {
    unsigned char *out;
    unsigned char iv_end[16];
    unsigned char ghash[16];
} expect;

/* The expected result of r on in; may change r (CTR32 counters, GCM's
 * counter block and H) and, for GCM decryption, in (to a ciphertext). */
static void reference(gpuaesd_job_req *r, unsigned char *in, expect *e)
{
    size_t len = (size_t)r->len, kl = r->keylen, nb = len / 16;
    unsigned char zero[16] = { 0 }, j0[16], ej0[16], lh[16], tag[16];
    uint32_t op = r->op;
    unsigned char *zeros = NULL;

    memcpy(e->iv_end, r->iv, 16);
    memset(e->ghash, 0, 16);
    if (op == GPUAESD_OP_KEYSTREAM128 || op == GPUAESD_OP_KEYSTREAM32) {
        /* the keystream: CTR of zeros, whatever the segment held */
        if ((zeros = calloc(1, len)) == NULL)
            exit(1);
        in = zeros;
        op = op == GPUAESD_OP_KEYSTREAM128 ? GPUAESD_OP_CTR128 : GPUAESD_OP_CTR32;
    }
    switch (op) {
    case GPUAESD_OP_ECB_ENCRYPT: evp("ECB", kl, 1, r->key, NULL, in, e->out, len); break;
    case GPUAESD_OP_ECB_DECRYPT: evp("ECB", kl, 0, r->key, NULL, in, e->out, len); break;
    case GPUAESD_OP_CTR128:
        evp("CTR", kl, 1, r->key, r->iv, in, e->out, len);
        gpuaes_ctr128_add(e->iv_end, nb);
        break;
    case GPUAESD_OP_CTR32: {
        unsigned char *ks = malloc(len);

        if (test_rand_below(2)) {       /* near the wrap of the low 32 bits */
            memset(r->iv + 12, 0xff, 3);
            memcpy(e->iv_end, r->iv, 16);
        }
        for (size_t i = 0; i < nb; i++) {
            memcpy(ks + 16 * i, e->iv_end, 16);
            gpuaes_ctr32_add(e->iv_end, 1);
        }
        evp("ECB", kl, 1, r->key, NULL, ks, ks, len);
        for (size_t i = 0; i < len; i++)
            e->out[i] = in[i] ^ ks[i];
        free(ks);
        break;
    }
    case GPUAESD_OP_CBC_DECRYPT:
    case GPUAESD_OP_CFB128_DECRYPT:
        evp(r->op == GPUAESD_OP_CBC_DECRYPT ? "CBC" : "CFB", kl, 0, r->key, r->iv, in, e->out, len);
        memcpy(e->iv_end, in + len - 16, 16);
        break;
    case GPUAESD_OP_GCM_ENCRYPT:
    case GPUAESD_OP_GCM_DECRYPT:
        /* J0 = IV || 1; the job starts at J0 + 1. */
        memcpy(j0, r->iv, 12);
        memcpy(j0 + 12, "\0\0\0\1", 4);
        evp("ECB", kl, 1, r->key, NULL, zero, r->h, 16);
        evp("ECB", kl, 1, r->key, NULL, j0, ej0, 16);
        memcpy(r->iv, j0, 16);
        gpuaes_ctr32_add(r->iv, 1);
        memcpy(e->iv_end, r->iv, 16);
        gpuaes_ctr32_add(e->iv_end, nb);
        evp_gcm(kl, r->key, j0, in, e->out, len, tag);
        if (r->op == GPUAESD_OP_GCM_DECRYPT) {
            /* decrypt the ciphertext of the random input: swap the two */
            for (size_t i = 0; i < len; i++) {
                unsigned char t = in[i];

                in[i] = e->out[i];
                e->out[i] = t;
            }
        }
        gcm_len_block(lh, 0, (unsigned long long)len * 8);
        gf128_mul(lh, r->h);
        for (int i = 0; i < 16; i++)
            e->ghash[i] = tag[i] ^ ej0[i] ^ lh[i];
        break;
    }
    free(zeros);
}

void svc_expected(gpuaesd_job_req *r, unsigned char *in, unsigned char *out)
{
    expect e;

    e.out = out;
    reference(r, in, &e);
}

static int report(const char *what, const gpuaesd_job_req *r, const gpuaesd_job_reply *rep)
{
    fprintf(stderr, "job op %u keylen %u len %llu in %llu out %llu: %s (status %u, done %llu)\n", r->op,
            r->keylen, (unsigned long long)r->len, (unsigned long long)r->in_off,
            (unsigned long long)r->out_off, what, rep->status, (unsigned long long)rep->done);
    return 0;
}

int svc_job_check(gpuaesd_conn *c, unsigned op, size_t max_len, int need_ok, int timeout_ms)
{
    size_t seg_size, len;
    unsigned char *seg = gpuaesd_segment(c, &seg_size), *in;
    gpuaesd_job_req r;
    gpuaesd_job_reply rep;
    expect e;
    int ok = 1;

    svc_make_request(&r, seg_size);
    if (op != 0)
        r.op = op;
    if (r.len > max_len) {
        r.len = 16 * (1 + test_rand_below(max_len / 16));
        r.in_off = test_rand_below(seg_size / 2 - r.len + 1);
        if (r.out_off != r.in_off)
            r.out_off = seg_size / 2 + test_rand_below(seg_size / 2 - r.len + 1);
    }
    if (r.op >= GPUAESD_OP_KEYSTREAM128)
        r.out_off = r.in_off;          /* a keystream fill names one range */
    len = (size_t)r.len;
    in = malloc(len);
    e.out = malloc(len);
    if (in == NULL || e.out == NULL)
        exit(1);
    test_rand_bytes(in, len);
    reference(&r, in, &e);
    memcpy(seg + r.in_off, in, len);
    if (gpuaesd_submit(c, &r, &rep, timeout_ms) != 0) {
        ok = -1;
    } else if (need_ok && rep.status != GPUAESD_OK) {
        ok = report("not done", &r, &rep);
    } else if (rep.status == GPUAESD_OK || rep.status == GPUAESD_FAILED) {
        if (memcmp(seg + r.out_off, e.out, (size_t)rep.done) != 0)
            ok = report("output differs", &r, &rep);
        if (memcmp(rep.iv_end, e.iv_end, 16) != 0)
            ok = report("iv_end differs", &r, &rep);
        if (rep.status == GPUAESD_OK && (r.op == GPUAESD_OP_GCM_ENCRYPT || r.op == GPUAESD_OP_GCM_DECRYPT)
            && memcmp(rep.ghash, e.ghash, 16) != 0)
            ok = report("ghash differs", &r, &rep);
        if (rep.status == GPUAESD_OK && r.op != GPUAESD_OP_ECB_ENCRYPT && r.op != GPUAESD_OP_ECB_DECRYPT
            && memcmp(rep.iv, rep.iv_end, 16) != 0)
            ok = report("iv at done differs", &r, &rep);
    }
    free(in);
    free(e.out);
    return ok;
}
