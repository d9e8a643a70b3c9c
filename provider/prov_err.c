/*
 * prov_err.c - gpuaes's errors on the core's queue (prov_err.h).
 */
#include <stdarg.h>
#include <openssl/err.h>

#include "prov_ctx.h"
#include "debug.h"

/*
 * Is the code at `a` in the same loaded object as the code at `b`?  The
 * core's upcalls are static functions of its libcrypto, so they compare by
 * object, not by address.  Unknown counts as the same: errors are then left
 * where they are, never put on a queue twice.
 */
static int same_object(const void *a, const void *b)
{
    uintptr_t ba, bb;

    if (a == NULL || !loaded_object(a, &ba, NULL) || !loaded_object(b, &bb, NULL))
        return 1;
    return ba == bb;
}

void err_core_init(gpuaes_core_err *e, const OSSL_DISPATCH *in)
{
    e->new_error = NULL;
    e->set_error_debug = NULL;
    e->vset_error = NULL;
    e->set_error_mark = NULL;
    e->pop_error_to_mark = NULL;
    for (; in->function_id != 0; in++) {
        switch (in->function_id) {
        case OSSL_FUNC_CORE_NEW_ERROR: e->new_error = OSSL_FUNC_core_new_error(in); break;
        case OSSL_FUNC_CORE_SET_ERROR_DEBUG:
            e->set_error_debug = OSSL_FUNC_core_set_error_debug(in); break;
        case OSSL_FUNC_CORE_VSET_ERROR: e->vset_error = OSSL_FUNC_core_vset_error(in); break;
        case OSSL_FUNC_CORE_SET_ERROR_MARK:
            e->set_error_mark = OSSL_FUNC_core_set_error_mark(in); break;
        case OSSL_FUNC_CORE_POP_ERROR_TO_MARK:
            e->pop_error_to_mark = OSSL_FUNC_core_pop_error_to_mark(in); break;
        }
    }
    if (e->new_error == NULL || e->set_error_debug == NULL || e->vset_error == NULL)
        e->new_error = NULL;          /* all three or none: the linked libcrypto's */
    /* Function pointers as addresses (POSIX allows the conversion). */
    e->foreign = e->new_error != NULL
        && !same_object((void *)(uintptr_t)e->new_error, (void *)(uintptr_t)&ERR_new);
}

/* One error on prov's core: reason carries its library (ERR_PACK), so the
 * core's libcrypto files it under that library, not the provider's own. */
static void core_verror(const gpuaes_prov *prov, const char *file, int line, const char *func,
                        uint32_t packed, const char *fmt, va_list ap)
{
    const gpuaes_core_err *e = &prov->err;

    e->new_error(prov->handle);
    e->set_error_debug(prov->handle, file, line, func);
    e->vset_error(prov->handle, packed, fmt, ap);
}

static void core_error(const gpuaes_prov *prov, const char *file, int line, const char *func,
                       uint32_t packed, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    core_verror(prov, file, line, func, packed, fmt, ap);
    va_end(ap);
}

void err_raise(const gpuaes_prov *prov, const char *file, int line, const char *func,
               int reason, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    if (prov != NULL && prov->err.new_error != NULL) {
        core_verror(prov, file, line, func, (uint32_t)ERR_PACK(ERR_LIB_PROV, 0, reason), fmt, ap);
    } else {
        ERR_new();
        ERR_set_debug(file, line, func);
        ERR_vset_error(ERR_LIB_PROV, reason, fmt, ap);
    }
    va_end(ap);
}

void err_set_mark(const gpuaes_prov *prov)
{
    ERR_set_mark();
    if (prov->err.foreign && prov->err.set_error_mark != NULL && prov->err.pop_error_to_mark != NULL)
        prov->err.set_error_mark(prov->handle);
}

void err_pop_to_mark(const gpuaes_prov *prov)
{
    ERR_pop_to_mark();
    if (prov->err.foreign && prov->err.set_error_mark != NULL && prov->err.pop_error_to_mark != NULL)
        prov->err.pop_error_to_mark(prov->handle);
}

void err_carry(const gpuaes_prov *prov)
{
    const char *file, *func, *data;
    int line, flags;
    unsigned long code;

    if (prov == NULL || !prov->err.foreign)
        return;
    while ((code = ERR_get_error_all(&file, &line, &func, &data, &flags)) != 0) {
        if (data != NULL && (flags & ERR_TXT_STRING) != 0)
            core_error(prov, file, line, func, (uint32_t)code, "%s", data);
        else
            core_error(prov, file, line, func, (uint32_t)code, NULL);
    }
}
