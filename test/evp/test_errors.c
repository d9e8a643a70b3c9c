/*
 * test_errors.c - gpuaes's errors, and its fallback's, reach the
 * application's error queue exactly once (prov_err.h).
 *
 * Under this libcrypto (the one gpuaes links), through EVP: a CBC final with
 * a wrong final block length, a bad padding, a GCM tag mismatch give what the
 * default provider gives (library, reason, count); gpuaes's own errors (num
 * >= 16 in CFB set_params, a bad knob value at load) are there once.
 *
 * Under another libcrypto: this program is the core itself.  It calls the
 * module's OSSL_provider_init with its own error upcalls, as a libcrypto
 * other than the linked one would (the `cryptography` wheels'): the same
 * errors must arrive through those upcalls, once each, and none stay on the
 * linked libcrypto's queue, where the application would never see them.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/core_dispatch.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/params.h>
#include <openssl/proverr.h>

#include "api_util.h"

#define MAXERR 16

typedef struct {
    unsigned long code;
    char data[256];
} error_rec;

typedef struct {
    int n;
    error_rec e[MAXERR];
} error_list;

/* Takes this thread's queue of the linked libcrypto. */
static void take_queue(error_list *l)
{
    const char *data;
    unsigned long code;
    int flags;

    l->n = 0;
    while ((code = ERR_get_error_all(NULL, NULL, NULL, &data, &flags)) != 0) {
        if (l->n == MAXERR)
            continue;
        l->e[l->n].code = code;
        snprintf(l->e[l->n].data, sizeof(l->e[l->n].data), "%s",
                 (flags & ERR_TXT_STRING) ? data : "");
        l->n++;
    }
}

static int same_errors(const error_list *a, const error_list *b)
{
    if (a->n != b->n)
        return 0;
    for (int i = 0; i < a->n; i++)
        if (ERR_GET_LIB(a->e[i].code) != ERR_GET_LIB(b->e[i].code)
            || ERR_GET_REASON(a->e[i].code) != ERR_GET_REASON(b->e[i].code))
            return 0;
    return 1;
}

/* Exactly one error, of library PROV with this reason, its data containing `text`. */
static int one_error(const error_list *l, int reason, const char *text)
{
    return l->n == 1 && ERR_GET_LIB(l->e[0].code) == ERR_LIB_PROV
        && ERR_GET_REASON(l->e[0].code) == ERR_GET_REASON(ERR_PACK(ERR_LIB_PROV, 0, reason))
        && (text == NULL || strstr(l->e[0].data, text) != NULL);
}

static const unsigned char key[32] = "errors-test-key-0123456789abcdef";
static const unsigned char iv[16] = "errors-test-iv-0";

/* ---- the application's own libcrypto: through EVP ---- */

/* CBC decryption of `len` bytes ending in a failed final. */
static void cbc_final_fails(test_env *env, const char *provider, size_t len, int pad,
                            error_list *l)
{
    EVP_CIPHER *c = api_fetch(env, "AES-128-CBC", provider);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned char in[64] = { 0 }, out[96];
    int o = 0, o2 = 0;

    ERR_clear_error();
    CHECK(EVP_DecryptInit_ex2(x, c, key, iv, NULL) && EVP_CIPHER_CTX_set_padding(x, pad));
    CHECK(EVP_DecryptUpdate(x, out, &o, in, (int)len));
    CHECK(!EVP_DecryptFinal_ex(x, out + o, &o2));
    take_queue(l);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

static void gcm_tag_mismatch(test_env *env, const char *provider, error_list *l)
{
    EVP_CIPHER *c = api_fetch(env, "AES-128-GCM", provider);
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned char in[40] = { 0 }, out[40], tag[16] = { 0 };
    int o = 0;

    ERR_clear_error();
    CHECK(EVP_DecryptInit_ex2(x, c, key, iv, NULL)
          && EVP_CIPHER_CTX_ctrl(x, EVP_CTRL_AEAD_SET_TAG, 16, tag) > 0);
    CHECK(EVP_DecryptUpdate(x, out, &o, in, sizeof(in)));
    CHECK(EVP_DecryptFinal_ex(x, out, &o) <= 0);
    take_queue(l);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
}

static void same_as_default(void)
{
    test_env env;
    error_list d, g;

    if (!test_env_open(&env))
        exit(1);
    cbc_final_fails(&env, "default", 20, 0, &d);
    cbc_final_fails(&env, "gpuaes", 20, 0, &g);
    CHECKF(one_error(&d, PROV_R_WRONG_FINAL_BLOCK_LENGTH, NULL) && same_errors(&d, &g),
           "wrong final block length: default %d errors, gpuaes %d", d.n, g.n);
    cbc_final_fails(&env, "default", 32, 1, &d);
    cbc_final_fails(&env, "gpuaes", 32, 1, &g);
    CHECKF(one_error(&d, PROV_R_BAD_DECRYPT, NULL) && same_errors(&d, &g),
           "bad decrypt: default %d errors, gpuaes %d", d.n, g.n);
    gcm_tag_mismatch(&env, "default", &d);
    gcm_tag_mismatch(&env, "gpuaes", &g);
    CHECKF(same_errors(&d, &g), "GCM tag mismatch: default %d errors, gpuaes %d", d.n, g.n);
    test_env_close(&env);
}

/* gpuaes's own: num >= 16 refused before the fallback sees it. */
static void cfb_num_refused(void)
{
    test_env env;
    EVP_CIPHER *c;
    EVP_CIPHER_CTX *x = EVP_CIPHER_CTX_new();
    unsigned int num = 16;
    OSSL_PARAM p[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &num), OSSL_PARAM_END };
    error_list l;

    if (!test_env_open(&env))
        exit(1);
    c = api_fetch(&env, "AES-128-CFB", "gpuaes");
    CHECK(EVP_EncryptInit_ex2(x, c, key, iv, NULL));
    ERR_clear_error();
    CHECK(!EVP_CIPHER_CTX_set_params(x, p));
    take_queue(&l);
    CHECKF(one_error(&l, ERR_R_PASSED_INVALID_ARGUMENT, "not below the block size"),
           "CFB num 16: %d errors (first: %s)", l.n, l.n > 0 ? l.e[0].data : "-");
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(c);
    test_env_close(&env);
}

/* A bad knob value: one error at load naming the knob (README, "Knobs"). */
static void bad_knob(void)
{
    test_env env;
    error_list l;

    setenv("GPUAES_OFFLOAD_MIN_BYTES", "bogus", 1);
    ERR_clear_error();
    if (!test_env_open(&env))
        exit(1);
    take_queue(&l);
    CHECKF(one_error(&l, PROV_R_INVALID_CONFIG_DATA, "GPUAES_OFFLOAD_MIN_BYTES"),
           "bad knob: %d errors (first: %s)", l.n, l.n > 0 ? l.e[0].data : "-");
    test_env_close(&env);
    unsetenv("GPUAES_OFFLOAD_MIN_BYTES");
}

/* ---- another libcrypto: this program is the core ---- */

static error_list core_errors;        /* what reached "the application" through the upcalls */

static void core_new_error(const OSSL_CORE_HANDLE *h)
{
    if (core_errors.n < MAXERR)
        memset(&core_errors.e[core_errors.n], 0, sizeof(core_errors.e[0]));
    core_errors.n++;
}

static void core_set_error_debug(const OSSL_CORE_HANDLE *h, const char *file, int line,
                                 const char *func)
{
    (void)h; (void)file; (void)line; (void)func;
}

static void core_vset_error(const OSSL_CORE_HANDLE *h, uint32_t reason, const char *fmt,
                            va_list args)
{
    error_rec *r;

    if (core_errors.n == 0 || core_errors.n > MAXERR)
        return;
    r = &core_errors.e[core_errors.n - 1];
    r->code = reason;
    if (fmt != NULL)
        vsnprintf(r->data, sizeof(r->data), fmt, args);
}

static int core_get_params(const OSSL_CORE_HANDLE *h, OSSL_PARAM params[])
{
    return 1;                         /* no openssl.cnf section */
}

/* One of the module's ciphers with every function this test calls. */
static int find_cipher(const OSSL_ALGORITHM *algs, const char *name, api_raw_cipher *f)
{
    return api_raw_cipher_find(algs, name, f) && f->newctx && f->freectx && f->init[1] && f->init[0]
           && f->update && f->final && f->set;
}

/* Errors through the upcalls since the last call: exactly those, and none
 * left on the linked libcrypto's queue. */
static error_list took_from_core(int *linked_left)
{
    error_list l = core_errors;

    if (l.n > MAXERR)
        l.n = MAXERR;
    memset(&core_errors, 0, sizeof(core_errors));
    *linked_left = ERR_peek_error() != 0;
    ERR_clear_error();
    return l;
}

static void foreign_core(const error_list *wrong_final_default)
{
    static const OSSL_DISPATCH in[] = {
        { OSSL_FUNC_CORE_GET_PARAMS, (void (*)(void))core_get_params },
        { OSSL_FUNC_CORE_NEW_ERROR, (void (*)(void))core_new_error },
        { OSSL_FUNC_CORE_SET_ERROR_DEBUG, (void (*)(void))core_set_error_debug },
        { OSSL_FUNC_CORE_VSET_ERROR, (void (*)(void))core_vset_error },
        { 0, NULL }
    };
    static int handle;
    const char *dir = getenv("GPUAES_MODULE_DIR");
    char path[4096];
    void *lib, *provctx = NULL;
    OSSL_provider_init_fn *init;
    const OSSL_DISPATCH *out = NULL;
    OSSL_FUNC_provider_query_operation_fn *query = NULL;
    OSSL_FUNC_provider_teardown_fn *teardown = NULL;
    const OSSL_ALGORITHM *algs;
    api_raw_cipher cbc, cfb;
    unsigned char buf[64] = { 0 }, outb[96];
    unsigned int zero = 0, num = 16;
    OSSL_PARAM nopad[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_PADDING, &zero), OSSL_PARAM_END };
    OSSL_PARAM badnum[2] = { OSSL_PARAM_uint(OSSL_CIPHER_PARAM_NUM, &num), OSSL_PARAM_END };
    error_list l;
    size_t o = 0, o2 = 0;
    int no_cache = 0, left = 0;
    void *x;

    snprintf(path, sizeof(path), "%s/gpuaes.so", dir != NULL ? dir : ".");
    if ((lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
    *(void **)&init = dlsym(lib, "OSSL_provider_init");
    CHECK(init != NULL);

    /* A bad knob at load: gpuaes's own error, through the upcalls. */
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "bogus", 1);
    ERR_clear_error();
    memset(&core_errors, 0, sizeof(core_errors));
    if (init == NULL || !init((const OSSL_CORE_HANDLE *)&handle, in, &out, &provctx)) {
        fprintf(stderr, "OSSL_provider_init failed\n");
        exit(1);
    }
    unsetenv("GPUAES_OFFLOAD_MIN_BYTES");
    l = took_from_core(&left);
    CHECKF(one_error(&l, PROV_R_INVALID_CONFIG_DATA, "GPUAES_OFFLOAD_MIN_BYTES") && !left,
           "foreign core, bad knob: %d errors through the core (first: %s), %s on the linked queue",
           l.n, l.n > 0 ? l.e[0].data : "-", left ? "some" : "none");
    for (; out->function_id != 0; out++) {
        if (out->function_id == OSSL_FUNC_PROVIDER_QUERY_OPERATION)
            query = OSSL_FUNC_provider_query_operation(out);
        if (out->function_id == OSSL_FUNC_PROVIDER_TEARDOWN)
            teardown = OSSL_FUNC_provider_teardown(out);
    }
    if (query == NULL || teardown == NULL
        || (algs = query(provctx, OSSL_OP_CIPHER, &no_cache)) == NULL
        || !find_cipher(algs, "AES-128-CBC", &cbc) || !find_cipher(algs, "AES-128-CFB", &cfb)) {
        fprintf(stderr, "the module's cipher table is incomplete\n");
        exit(1);
    }

    /* The fallback's error (wrong final block length), carried over. */
    x = cbc.newctx(provctx);
    CHECK(x != NULL && cbc.init[0](x, key, 16, iv, 16, nopad));
    CHECK(cbc.update(x, outb, &o, sizeof(outb), buf, 20));
    CHECK(!cbc.final(x, outb + o, &o2, sizeof(outb) - o));
    l = took_from_core(&left);
    CHECKF(same_errors(&l, wrong_final_default) && !left,
           "foreign core, wrong final block length: %d errors through the core, %s on the linked queue",
           l.n, left ? "some" : "none");
    cbc.freectx(x);

    /* gpuaes's own error (num >= 16), through the upcalls. */
    x = cfb.newctx(provctx);
    CHECK(x != NULL && cfb.init[1](x, key, 16, iv, 16, NULL));
    (void)took_from_core(&left);
    CHECK(!cfb.set(x, badnum));
    l = took_from_core(&left);
    CHECKF(one_error(&l, ERR_R_PASSED_INVALID_ARGUMENT, "not below the block size") && !left,
           "foreign core, CFB num 16: %d errors through the core (first: %s), %s on the linked queue",
           l.n, l.n > 0 ? l.e[0].data : "-", left ? "some" : "none");
    cfb.freectx(x);

    teardown(provctx);
    dlclose(lib);
}

int main(void)
{
    test_env env;
    error_list wrong_final;

    same_as_default();
    cfb_num_refused();
    bad_knob();
    if (!test_env_open(&env))
        return 1;
    cbc_final_fails(&env, "default", 20, 0, &wrong_final);
    test_env_close(&env);
    foreign_core(&wrong_final);
    return test_report("errors");
}
