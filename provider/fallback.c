#define _POSIX_C_SOURCE 200809L  /* nanosleep (test hook) */
/*
 * fallback.c - OpenSSL's default provider, whose cipher functions gpuaes
 * calls directly through their dispatch tables (OSSL_PROVIDER_query_operation):
 * no second EVP layer on the CPU path.  Whose (docs/DESIGN.md, "Which OpenSSL
 * does the CPU work"): the application's own, seen through a child library
 * context of the core's (OSSL_LIB_CTX_new_child: the functions and provider
 * context are those of the libcrypto that loaded gpuaes, wherever it is), when
 * the application has it loaded; else one loaded privately into the libcrypto
 * gpuaes links, so that it is there even when the application loaded only
 * gpuaes (or only FIPS).  What gpuaes assumes of them beyond the provider
 * API, and the checks that pin it (also run at load): fallback_assumptions.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "prov_ctx.h"
#include "debug.h"
#include "assume/fallback_assumptions.h"

/* Does the colon-separated name list start with `name` (case-insensitively)? */
static int first_name_is(const char *names, const char *name)
{
    size_t n = strlen(name);

    return strncasecmp(names, name, n) == 0 && (names[n] == ':' || names[n] == '\0');
}

static void take_functions(fallback_cipher *fb, const OSSL_ALGORITHM *alg)
{
    const OSSL_DISPATCH *d;

    memset(fb, 0, sizeof(*fb));
    fb->names = alg->algorithm_names;
    for (d = alg->implementation; d->function_id != 0; d++) {
        switch (d->function_id) {
        case OSSL_FUNC_CIPHER_NEWCTX: fb->newctx = OSSL_FUNC_cipher_newctx(d); break;
        case OSSL_FUNC_CIPHER_FREECTX: fb->freectx = OSSL_FUNC_cipher_freectx(d); break;
        case OSSL_FUNC_CIPHER_DUPCTX: fb->dupctx = OSSL_FUNC_cipher_dupctx(d); break;
        case OSSL_FUNC_CIPHER_ENCRYPT_INIT: fb->einit = OSSL_FUNC_cipher_encrypt_init(d); break;
        case OSSL_FUNC_CIPHER_DECRYPT_INIT: fb->dinit = OSSL_FUNC_cipher_decrypt_init(d); break;
        case OSSL_FUNC_CIPHER_UPDATE: fb->update = OSSL_FUNC_cipher_update(d); break;
        case OSSL_FUNC_CIPHER_FINAL: fb->final = OSSL_FUNC_cipher_final(d); break;
        case OSSL_FUNC_CIPHER_CIPHER: fb->cipher = OSSL_FUNC_cipher_cipher(d); break;
        case OSSL_FUNC_CIPHER_GET_PARAMS: fb->get_params = OSSL_FUNC_cipher_get_params(d); break;
        case OSSL_FUNC_CIPHER_GET_CTX_PARAMS:
            fb->get_ctx_params = OSSL_FUNC_cipher_get_ctx_params(d); break;
        case OSSL_FUNC_CIPHER_SET_CTX_PARAMS:
            fb->set_ctx_params = OSSL_FUNC_cipher_set_ctx_params(d); break;
        case OSSL_FUNC_CIPHER_GETTABLE_PARAMS:
            fb->gettable_params = OSSL_FUNC_cipher_gettable_params(d); break;
        case OSSL_FUNC_CIPHER_GETTABLE_CTX_PARAMS:
            fb->gettable_ctx_params = OSSL_FUNC_cipher_gettable_ctx_params(d); break;
        case OSSL_FUNC_CIPHER_SETTABLE_CTX_PARAMS:
            fb->settable_ctx_params = OSSL_FUNC_cipher_settable_ctx_params(d); break;
        default: break;
        }
    }
}

static int complete(const fallback_cipher *fb)
{
    return fb->newctx && fb->freectx && fb->dupctx && fb->einit && fb->dinit && fb->update
        && fb->final && fb->cipher && fb->get_params && fb->get_ctx_params
        && fb->set_ctx_params && fb->gettable_params && fb->gettable_ctx_params
        && fb->settable_ctx_params;
}

/* The variants' shared tables (prov_ctx.h): filled by the first load. */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static int tables_filled;

/* A fork while another thread fills the tables would leave table_lock held
 * in the child for good: the child gets a fresh one (an unfinished fill is
 * not marked filled, so the child's first load redoes it). */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static void on_fork_child(void) { pthread_mutex_init(&table_lock, NULL); }
static void register_atfork(void) { (void)pthread_atfork(NULL, NULL, on_fork_child); }

#ifdef GPUAES_TEST_HOOKS
/* The emulated module only (test_fork --locks): hold table_lock this long,
 * so that a fork lands while it is held. */
static void test_hold_table_lock(void)
{
    const char *ms = getenv("GPUAES_TEST_TABLE_LOCK_MS");
    struct timespec ts;

    if (ms == NULL)
        return;
    ts.tv_sec = 0;
    ts.tv_nsec = atol(ms) % 1000 * 1000000L;
    nanosleep(&ts, NULL);
}
#else
static void test_hold_table_lock(void) {}
#endif

/* Fills prov->fallbacks from the loaded provider. */
static int fill_tables(gpuaes_prov *prov)
{
    const OSSL_ALGORITHM *algs;
    int no_cache = 0, ok = 1;
    size_t v;

    prov->fallback_provctx = OSSL_PROVIDER_get0_provider_ctx(prov->fallback_prov);
    algs = OSSL_PROVIDER_query_operation(prov->fallback_prov, OSSL_OP_CIPHER, &no_cache);
    if (algs == NULL)
        return 0;
    for (v = 0; ok && v < gpuaes_variant_count; v++) {
        const gpuaes_variant *var = &gpuaes_variants[v];
        const OSSL_ALGORITHM *a;

        for (a = algs; a->algorithm_names != NULL; a++)
            if (first_name_is(a->algorithm_names, var->name))
                break;
        if (a->algorithm_names == NULL) {
            GPUAES_RAISE_DATA(prov, ERR_R_INIT_FAIL,
                              "gpuaes: the default provider has no %s", var->name);
            ok = 0;
        } else {
            take_functions(&prov->fallbacks[v], a);
            if (!complete(&prov->fallbacks[v])) {
                GPUAES_RAISE_DATA(prov, ERR_R_INIT_FAIL,
                                  "gpuaes: the default provider's %s lacks a function", var->name);
                ok = 0;
            }
        }
    }
    OSSL_PROVIDER_unquery_operation(prov->fallback_prov, OSSL_OP_CIPHER, algs);
    return ok;
}

/* The first load (of whichever route) fills the variants' shared tables. */
static void share_tables(const gpuaes_prov *prov)
{
    pthread_once(&atfork_once, register_atfork); /* before the lock is first taken */
    pthread_mutex_lock(&table_lock);
    test_hold_table_lock();
    for (size_t v = 0; !tables_filled && v < gpuaes_variant_count; v++)
        *gpuaes_variants[v].fallback = prov->fallbacks[v];
    tables_filled = 1;
    pthread_mutex_unlock(&table_lock);
}

/* The application's default provider through a child library context, or
 * NULL where it has none loaded (only gpuaes, or FIPS) or no child can be made. */
static OSSL_PROVIDER *application_default(gpuaes_prov *prov, const OSSL_DISPATCH *in)
{
    OSSL_PROVIDER *null, *dflt = NULL;

    prov->fallback_libctx = OSSL_LIB_CTX_new_child(prov->handle, in);
    if (prov->fallback_libctx == NULL)
        return NULL;
    /* The child mirrors the application's providers (gpuaes among them: never
     * fetched from here).  Only a mirrored "default": the child must not load
     * one of its own, which would be the private one under another name:
     * _available and _do_all activate a library context's fallbacks (its own
     * "default") unless a provider was loaded into it without retaining them,
     * so the built-in "null" is, first; _load then finds the mirrored one. */
    null = OSSL_PROVIDER_try_load(prov->fallback_libctx, "null", 0);
    if (null == NULL)
        return NULL;
    if (OSSL_PROVIDER_available(prov->fallback_libctx, "default"))
        dflt = OSSL_PROVIDER_load(prov->fallback_libctx, "default");
    OSSL_PROVIDER_unload(null);
    return dflt;
}

/* "application 3.5.6 (/path/of/its/code)": which OpenSSL does the CPU work;
 * `note`: why not the application's, or "". */
static void describe(gpuaes_prov *prov, const char *note)
{
    const char *version = "?";
    OSSL_PARAM p[] = { OSSL_PARAM_utf8_ptr("version", (char **)&version, 0), OSSL_PARAM_END };
    const char *path = NULL;

    (void)OSSL_PROVIDER_get_params(prov->fallback_prov, p);
    (void)loaded_object((void *)(uintptr_t)prov->fallbacks[0].newctx, NULL, &path);
    snprintf(prov->fallback_desc, sizeof(prov->fallback_desc), "%s %s (%s)%s",
             prov->fallback_app ? "application" : "private", version, path != NULL ? path : "?", note);
}

int fallback_load(gpuaes_prov *prov, const OSSL_DISPATCH *in)
{
    char note[200] = "";
    assume_run r;
    int a;

    prov->fallbacks = OPENSSL_zalloc(gpuaes_variant_count * sizeof(*prov->fallbacks));
    if (prov->fallbacks == NULL)
        goto err;
    if (in != NULL && prov->fallback_want == FALLBACK_APPLICATION) {
        /* Whatever fails on the way only means the private one (the debug
         * log says why): nothing for the application's queue, nor for the
         * linked one, which err_carry would later move there. */
        err_set_mark(prov);
        prov->fallback_prov = application_default(prov, in);
        prov->fallback_app = prov->fallback_prov != NULL && fill_tables(prov);
        /* One that behaves otherwise than gpuaes assumes (a newer OpenSSL's
         * change): the private one, whose GPU path can stay on. */
        if (prov->fallback_app && (a = assume_first_failure(prov, &r)) >= 0) {
            snprintf(note, sizeof(note), "; the application's breaks %s (%s)",
                     assume_name((gpuaes_assumption)a), r.why);
            prov->fallback_app = 0;
        }
        err_pop_to_mark(prov);
        if (!prov->fallback_app) {
            gpuaes_debug("not the application's default provider: the private one%s", note);
            OSSL_PROVIDER_unload(prov->fallback_prov);
            OSSL_LIB_CTX_free(prov->fallback_libctx);
            prov->fallback_prov = NULL;
        }
    }
    if (!prov->fallback_app) {
        prov->fallback_libctx = OSSL_LIB_CTX_new();
        if (prov->fallback_libctx == NULL)
            goto err;
        prov->fallback_prov = OSSL_PROVIDER_load(prov->fallback_libctx, "default");
        if (prov->fallback_prov == NULL || !fill_tables(prov))
            goto err;
    }
    share_tables(prov);
    describe(prov, note);
    gpuaes_debug("CPU path: the default provider %s", prov->fallback_desc);
    return 1;
 err:
    gpuaes_debug("cannot load the default provider as fallback");
    fallback_unload(prov);
    return 0;
}

void fallback_unload(gpuaes_prov *prov)
{
    OSSL_PROVIDER_unload(prov->fallback_prov);
    OSSL_LIB_CTX_free(prov->fallback_libctx);
    OPENSSL_free(prov->fallbacks);
    prov->fallback_prov = NULL;
    prov->fallback_libctx = NULL;
    prov->fallback_provctx = NULL;
    prov->fallbacks = NULL;
    prov->fallback_app = 0;
}
