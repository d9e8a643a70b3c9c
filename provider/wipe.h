/*
 * wipe.h - zeroing memory that held secrets, at memset's speed.
 *
 * OpenSSL 3.0 frees and makes the provider's context on every init that names
 * the cipher (EVP_EncryptInit_ex(ctx, cipher, ...) per message, as many
 * programs write it), so a context's wipe is on that path.  OPENSSL_cleanse
 * stores eight bytes a loop: ~400 instructions for a GCM context, where
 * libc's memset takes ~30.  Called through a volatile pointer, memset can be
 * neither dropped as a dead store nor expanded inline (gcc's inline form of a
 * 648-byte memset, `rep stosq`, cost ~30 ns a context on the CPU machine's
 * EPYC) - the construction of OpenSSL's own portable OPENSSL_cleanse.
 */
#ifndef GPUAES_WIPE_H
#define GPUAES_WIPE_H

#include <stddef.h>
#include <string.h>
#include <openssl/crypto.h>

static void *(*const volatile wipe_memset)(void *, int, size_t) = memset;

static inline void wipe(void *p, size_t n)
{
    wipe_memset(p, 0, n);
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
