/* test_params.h - shared between test_params.c and test_params_ctx.c. */
#ifndef GPUAES_TEST_PARAMS_H
#define GPUAES_TEST_PARAMS_H

#include <openssl/evp.h>
#include <openssl/params.h>
#include "testutil.h"

/* One parameter's value as read back: pointer types are copied by value, so
 * two providers' answers compare with memcmp. */
typedef struct {
    int ok;                  /* the get call's result */
    size_t size;             /* return_size, or (size_t)-1 when untouched */
    unsigned char data[512];
} pval;

/* Read `key` of `type` (an OSSL_PARAM_* data type) from a cipher or a ctx. */
void pv_cipher(const EVP_CIPHER *c, const char *key, unsigned type, pval *v);
void pv_ctx(EVP_CIPHER_CTX *x, const char *key, unsigned type, pval *v);
int pv_equal(const pval *a, const pval *b);
void pv_print(const char *who, const pval *v);
/* Compares every gettable ctx parameter of x0 (default) and x1 (gpuaes) that has
 * no side effects; prints both values of each that differs and calls
 * report(key, arg) for it.  Returns the number of differences. */
int pv_ctx_differences(EVP_CIPHER_CTX *x0, EVP_CIPHER_CTX *x1,
                       void (*report)(const char *key, void *arg), void *arg);

/* The context-level checks (test_params_ctx.c), random API sequences (test_params_fuzz.c)
 * and the num parameter (test_params_num.c). */
void params_ctx_tests(test_env *env);
void params_fuzz_tests(test_env *env);
void params_num_tests(test_env *env);

#endif
