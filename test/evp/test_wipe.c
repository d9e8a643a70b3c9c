/*
 * test_wipe.c - gpuaes leaves no key in memory it frees.  Every block freed
 * through OpenSSL's allocator (CRYPTO_set_mem_functions, set before anything
 * is allocated) is searched for the key's first 16 bytes, while each of the 15
 * ciphers is used and freed through each provider in turn: a context inited,
 * updated and finalised, copied, then freed; and messages whose init names the
 * cipher (EVP_EncryptInit_ex(ctx, cipher, ...): OpenSSL 3.0 frees and makes
 * the provider's context on each).  The default provider's turn is the
 * control: it must leave none either, or the search proves nothing about
 * gpuaes.
 */
#define _GNU_SOURCE                    /* memmem */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "api_util.h"

#define HEADER 16                      /* the block's size, ahead of it (keeps 16-byte alignment) */

static unsigned char key[32];
static int searching;                  /* key bytes set: search freed blocks */
static unsigned long found, freed;

static void *hook_malloc(size_t n, const char *file, int line)
{
    unsigned char *p = malloc(n + HEADER);

    (void)file, (void)line;
    if (p == NULL)
        return NULL;
    memcpy(p, &n, sizeof(n));
    return p + HEADER;
}

static void hook_free(void *ptr, const char *file, int line)
{
    unsigned char *p = ptr;
    size_t n;

    (void)file, (void)line;
    if (p == NULL)
        return;
    p -= HEADER;
    memcpy(&n, p, sizeof(n));
    if (searching) {
        freed++;
        if (memmem(p + HEADER, n, key, 16) != NULL)
            found++;
    }
    free(p);
}

static void *hook_realloc(void *ptr, size_t n, const char *file, int line)
{
    unsigned char *q;
    size_t old;

    if (ptr == NULL)
        return hook_malloc(n, file, line);
    if (n == 0) {
        hook_free(ptr, file, line);
        return NULL;
    }
    if ((q = hook_malloc(n, file, line)) == NULL)
        return NULL;
    memcpy(&old, (unsigned char *)ptr - HEADER, sizeof(old));
    memcpy(q, ptr, old < n ? old : n);
    hook_free(ptr, file, line);
    return q;
}

/* Every cipher through one provider; the number of freed blocks that held the key. */
static unsigned long run(test_env *env, const char *provider)
{
    unsigned char iv[16], in[100], out[200], tag[16];
    int outl, fl;

    found = freed = 0;
    test_rand_bytes(key, sizeof(key));
    test_rand_bytes(iv, sizeof(iv));
    test_rand_bytes(in, sizeof(in));
    searching = 1;
    for (int i = 0; i < API_NCIPHERS; i++) {
        EVP_CIPHER *c = api_fetch(env, api_ciphers[i], provider);
        int gcm = EVP_CIPHER_get_mode(c) == EVP_CIPH_GCM_MODE;
        EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new(), *y = EVP_CIPHER_CTX_new();

        CHECKF(x != NULL && y != NULL
               && EVP_EncryptInit_ex2(x, c, key, iv, NULL)
               && EVP_EncryptUpdate(x, out, &outl, in, sizeof(in))
               && EVP_CIPHER_CTX_copy(y, x)
               && EVP_EncryptFinal_ex(x, out + outl, &fl)
               && (!gcm || EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_GET_TAG, 16, tag) > 0),
               "%s through %s", api_ciphers[i], provider);
        EVP_CIPHER_CTX_free(y);
        for (int m = 0; m < 3; m++)       /* a new provider context per message */
            CHECKF(EVP_EncryptInit_ex(x, c, NULL, key, iv)
                   && EVP_EncryptUpdate(x, out, &outl, in, 16 * (m + 1))
                   && EVP_EncryptFinal_ex(x, out + outl, &fl),
                   "%s message %d through %s", api_ciphers[i], m, provider);
        EVP_CIPHER_CTX_free(x);
        EVP_CIPHER_free(c);
    }
    searching = 0;
    printf("%s: %lu freed blocks searched, %lu held the key\n", provider, freed, found);
    return found;
}

int main(void)
{
    test_env env;

    if (!CRYPTO_set_mem_functions(hook_malloc, hook_realloc, hook_free)) {
        fprintf(stderr, "FAIL: OpenSSL allocated before main: no allocator hook\n");
        return 1;
    }
    if (!test_env_open(&env))
        return 1;
    CHECKF(run(&env, "default") == 0, "the default provider left the key in freed memory");
    CHECKF(freed > 0, "nothing was freed: the search proves nothing");
    CHECKF(run(&env, "gpuaes") == 0, "gpuaes left the key in freed memory");
    test_env_close(&env);
    return test_report("wipe");
}
