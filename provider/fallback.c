#define _POSIX_C_SOURCE 200809L  /* nanosleep (test hook) */
/*
 * fallback.c - OpenSSL's default provider, loaded into a private library
 * context so that it is there even when the application loaded only gpuaes.
 * Its cipher functions are called directly through its dispatch tables
 * (OSSL_PROVIDER_query_operation): no second EVP layer on the CPU path.
 * What gpuaes assumes of them beyond the provider API, and the checks that
 * pin it (also run at load): fallback_assumptions.h.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/provider.h>

#include "gpuaes.h"

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

int fallback_load(gpuaes_prov *prov)
{
    const OSSL_ALGORITHM *algs;
    int no_cache = 0, ok;
    size_t v;

    prov->fallback_libctx = OSSL_LIB_CTX_new();
    if (prov->fallback_libctx == NULL)
        goto err;
    prov->fallback_prov = OSSL_PROVIDER_load(prov->fallback_libctx, "default");
    if (prov->fallback_prov == NULL)
        goto err;
    prov->fallback_provctx = OSSL_PROVIDER_get0_provider_ctx(prov->fallback_prov);
    algs = OSSL_PROVIDER_query_operation(prov->fallback_prov, OSSL_OP_CIPHER, &no_cache);
    if (algs == NULL)
        goto err;
    /* The functions are libcrypto's, the same for every load: fill the
     * table once (a second load into another library context skips this). */
    pthread_once(&atfork_once, register_atfork); /* before the lock is first taken */
    pthread_mutex_lock(&table_lock);
    test_hold_table_lock();
    for (v = 0; !tables_filled && v < gpuaes_variant_count; v++) {
        const gpuaes_variant *var = &gpuaes_variants[v];
        const OSSL_ALGORITHM *a;

        for (a = algs; a->algorithm_names != NULL; a++)
            if (first_name_is(a->algorithm_names, var->name))
                break;
        if (a->algorithm_names == NULL) {
            GPUAES_RAISE_DATA(prov, ERR_R_INIT_FAIL,
                              "gpuaes: the default provider has no %s", var->name);
            break;
        }
        take_functions(var->fallback, a);
        if (!complete(var->fallback)) {
            GPUAES_RAISE_DATA(prov, ERR_R_INIT_FAIL,
                              "gpuaes: the default provider's %s lacks a function", var->name);
            break;
        }
    }
    if (v == gpuaes_variant_count)
        tables_filled = 1;
    ok = tables_filled;
    pthread_mutex_unlock(&table_lock);
    if (!ok)
        goto err;
    OSSL_PROVIDER_unquery_operation(prov->fallback_prov, OSSL_OP_CIPHER, algs);
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
    prov->fallback_prov = NULL;
    prov->fallback_libctx = NULL;
    prov->fallback_provctx = NULL;
}
