/*
 * wipe.h - zeroing memory that held secrets, at memset's speed.
 *
 * OpenSSL 3.0 frees and makes the provider's context on every init that names
 * the cipher (EVP_EncryptInit_ex(ctx, cipher, ...) per message, as many
 * programs write it), so a context's wipe is on that path.  OPENSSL_cleanse
 * stores eight bytes a loop: ~400 instructions for a GCM context, where
 * memset takes ~30.  The empty asm, told that it reads the memory, keeps the
 * compiler from dropping the memset as a dead store (the construction
 * BoringSSL's OPENSSL_cleanse uses).
 */
#ifndef GPUAES_WIPE_H
#define GPUAES_WIPE_H

#include <stddef.h>
#include <string.h>
#include <openssl/crypto.h>

static inline void wipe(void *p, size_t n)
{
    memset(p, 0, n);
    __asm__ __volatile__("" : : "r"(p) : "memory");
}

/* wipe, then OPENSSL_free (NULL: nothing). */
static inline void wipe_free(void *p, size_t n)
{
    if (p == NULL)
        return;
    wipe(p, n);
    OPENSSL_free(p);
}

#endif
