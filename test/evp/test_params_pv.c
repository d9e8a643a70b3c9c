/* test_params_pv.c - read any OSSL_PARAM generically, for comparing providers. */
#include "test_params.h"

#include <stdio.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>

static OSSL_PARAM pv_param(const char *key, unsigned type, pval *v, void **ptr)
{
    OSSL_PARAM p = { key, type, v->data, sizeof(v->data), OSSL_PARAM_UNMODIFIED };

    memset(v, 0, sizeof(*v));
    if (type == OSSL_PARAM_INTEGER || type == OSSL_PARAM_UNSIGNED_INTEGER)
        p.data_size = sizeof(uint64_t);   /* wide enough for int, uint, size_t */
    if (type == OSSL_PARAM_UTF8_PTR || type == OSSL_PARAM_OCTET_PTR) {
        *ptr = NULL;
        p.data = ptr;
        p.data_size = 0;
    }
    return p;
}

/* Copies the result out of p into v (pointer targets by value). */
static void pv_finish(const OSSL_PARAM *p, int ok, pval *v, void *ptr)
{
    v->ok = ok > 0;
    v->size = OSSL_PARAM_modified(p) ? p->return_size : (size_t)-1;
    if (p->data_type == OSSL_PARAM_UTF8_PTR || p->data_type == OSSL_PARAM_OCTET_PTR) {
        memset(v->data, 0, sizeof(v->data));
        if (ok > 0 && ptr != NULL && v->size != (size_t)-1 && v->size <= sizeof(v->data))
            memcpy(v->data, ptr, v->size);
    }
}

void pv_cipher(const EVP_CIPHER *c, const char *key, unsigned type, pval *v)
{
    void *ptr = NULL;
    OSSL_PARAM p[2] = { pv_param(key, type, v, &ptr), OSSL_PARAM_END };

    pv_finish(&p[0], EVP_CIPHER_get_params((EVP_CIPHER *)c, p), v, ptr);
}

void pv_ctx(EVP_CIPHER_CTX *x, const char *key, unsigned type, pval *v)
{
    void *ptr = NULL;
    OSSL_PARAM p[2] = { pv_param(key, type, v, &ptr), OSSL_PARAM_END };

    pv_finish(&p[0], EVP_CIPHER_CTX_get_params(x, p), v, ptr);
}

int pv_equal(const pval *a, const pval *b)
{
    size_t n;

    if (a->ok != b->ok || a->size != b->size)
        return 0;
    if (!a->ok || a->size == (size_t)-1)
        return 1;
    n = a->size < sizeof(a->data) ? a->size : sizeof(a->data);
    return memcmp(a->data, b->data, n) == 0;
}

void pv_print(const char *who, const pval *v)
{
    size_t n = v->size == (size_t)-1 ? 0 : v->size;

    fprintf(stderr, "  %s: ok=%d size=%lld data=", who, v->ok,
            v->size == (size_t)-1 ? -1LL : (long long)v->size);
    for (size_t i = 0; i < n && i < 32; i++)
        fprintf(stderr, "%02x", v->data[i]);
    fputc('\n', stderr);
}

int pv_ctx_differences(EVP_CIPHER_CTX *x0, EVP_CIPHER_CTX *x1,
                       void (*report)(const char *key, void *arg), void *arg)
{
    const OSSL_PARAM *list = EVP_CIPHER_CTX_gettable_params(x0);
    int n = 0;

    for (const OSSL_PARAM *p = list; p != NULL && p->key != NULL; p++) {
        pval a, b;

        /* tag: compared at final; tlsivgen: has side effects; tls-mac: TLS only */
        if (strcmp(p->key, OSSL_CIPHER_PARAM_AEAD_TAG) == 0
            || strcmp(p->key, OSSL_CIPHER_PARAM_AEAD_TLS1_GET_IV_GEN) == 0
            || strcmp(p->key, OSSL_CIPHER_PARAM_TLS_MAC) == 0)
            continue;
        pv_ctx(x0, p->key, p->data_type, &a);
        pv_ctx(x1, p->key, p->data_type, &b);
        if (!pv_equal(&a, &b)) {
            report(p->key, arg);
            pv_print("default", &a);
            pv_print("gpuaes ", &b);
            n++;
        }
    }
    ERR_clear_error();
    return n;
}
