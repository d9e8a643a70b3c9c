/*
 * prov_err.h - gpuaes's errors, on the error queue of the libcrypto that
 * loaded it (the core).  That need not be the libcrypto gpuaes links: a
 * program may bring its own (the `cryptography` wheels link OpenSSL
 * statically), whose queue ERR_raise() from here would never reach.  So
 * gpuaes raises through the core's error upcalls, and carries over the
 * errors its private fallback (fallback.c, on the linked libcrypto) raised.
 */
#ifndef GPUAES_PROV_ERR_H
#define GPUAES_PROV_ERR_H

#include <openssl/core.h>
#include <openssl/core_dispatch.h>
#include <openssl/crypto.h>

struct gpuaes_prov;

/* The core's error upcalls, from OSSL_provider_init's `in` table. */
typedef struct gpuaes_core_err {
    OSSL_FUNC_core_new_error_fn *new_error;
    OSSL_FUNC_core_set_error_debug_fn *set_error_debug;
    OSSL_FUNC_core_vset_error_fn *vset_error;
    OSSL_FUNC_core_set_error_mark_fn *set_error_mark;
    OSSL_FUNC_core_pop_error_to_mark_fn *pop_error_to_mark;
    /* The core is another libcrypto than the one gpuaes links: the
     * fallback's errors land on a queue the application never reads. */
    int foreign;
} gpuaes_core_err;

/* Takes the upcalls from the core's table and tells whether the core is foreign. */
void err_core_init(gpuaes_core_err *e, const OSSL_DISPATCH *in);

/* One error of library ERR_LIB_PROV with reason `reason` (ERR_R_* or
 * PROV_R_*, so its text is libcrypto's), optional printf-style data; through
 * prov's core, or the linked libcrypto when there is none yet (prov NULL or
 * no upcalls).  Use GPUAES_RAISE / GPUAES_RAISE_DATA. */
void err_raise(const struct gpuaes_prov *prov, const char *file, int line, const char *func,
               int reason, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 6, 7)))
#endif
    ;
#define GPUAES_RAISE(prov, reason) \
    err_raise((prov), OPENSSL_FILE, OPENSSL_LINE, OPENSSL_FUNC, (reason), NULL)
#define GPUAES_RAISE_DATA(prov, reason, ...) \
    err_raise((prov), OPENSSL_FILE, OPENSSL_LINE, OPENSSL_FUNC, (reason), __VA_ARGS__)

/* A mark on both queues, the core's and the linked libcrypto's, and back to it:
 * the application's default provider (fallback.c) raises on the core's. */
void err_set_mark(const struct gpuaes_prov *prov);
void err_pop_to_mark(const struct gpuaes_prov *prov);

/* A foreign core only: moves every error on this thread's queue of the linked
 * libcrypto (the fallback's) to the core's, oldest first, with its location
 * and data.  Under the core's own libcrypto they are where they belong already. */
void err_carry(const struct gpuaes_prov *prov);

/* `ok`, after carrying the errors over when it is 0: for a failed call's return. */
static inline int err_carry_failed(const struct gpuaes_prov *prov, int ok)
{
    if (!ok)
        err_carry(prov);
    return ok;
}

#endif
