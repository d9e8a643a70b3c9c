/*
 * assume_util.h - what the checks of provider/assume/fallback_assumptions.h share
 * (assume_block.c, assume_gcm.c): test keys, expectations that name what
 * differed, and contexts of the default provider's AES-128.  The table that
 * runs the checks is assumptions.c.
 */
#ifndef GPUAES_ASSUME_UTIL_H
#define GPUAES_ASSUME_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

#include "prov_ctx.h"
#include "fallback_assumptions.h"

#define BLOCK 16

static const unsigned char K1[16] = "assume-key-one!";
static const unsigned char K2[16] = "assume-key-two!";

/* The checks, one per assumption (check_REINIT_KEEPS_SCHEDULE, ...). */
#define ASSUME_CHECK_DECLARE(id, at_load) int check_##id(assume_run *r);
GPUAES_ASSUMPTIONS(ASSUME_CHECK_DECLARE)
#undef ASSUME_CHECK_DECLARE

/* ---- helpers: each failure names what differed or which call failed ---- */

/* An expectation: counted, so that a test can invert the flip-th one. */
static inline int expect(assume_run *r, int ok, const char *what)
{
    if (++r->seen == r->flip)
        ok = !ok;
    if (!ok && r->why[0] == '\0')
        snprintf(r->why, sizeof(r->why), "%s", what);
    return ok;
}

/* A call the check needs to succeed (not an expectation: a broken setup). */
static inline int need(assume_run *r, int ok, const char *what)
{
    if (!ok && r->why[0] == '\0')
        snprintf(r->why, sizeof(r->why), "call failed: %s", what);
    return ok;
}

static inline const fallback_cipher *cipher(const assume_run *r, gpuaes_mode mode)
{
    for (size_t v = 0; v < gpuaes_variant_count; v++)
        if (gpuaes_variants[v].mode == mode && gpuaes_variants[v].keylen == 16)
            return &r->fallbacks[v];
    return NULL;
}

/* A context of the default provider's AES-128 in `mode`. */
typedef struct fbc {
    const fallback_cipher *fb;
    void *ctx;
    size_t ivlen;
} fbc;

static inline int open_ctx(assume_run *r, fbc *c, gpuaes_mode mode)
{
    c->fb = cipher(r, mode);
    c->ctx = c->fb != NULL ? c->fb->newctx(r->provctx) : NULL;
    c->ivlen = mode == MODE_GCM ? 12 : BLOCK;
    return need(r, c->ctx != NULL, "newctx");
}

static inline void close_ctx(fbc *c)
{
    if (c->ctx != NULL)
        c->fb->freectx(c->ctx);
    c->ctx = NULL;
}

static inline int init(fbc *c, int enc, const unsigned char *key, const unsigned char *iv)
{
    return (enc ? c->fb->einit : c->fb->dinit)(c->ctx, key, key != NULL ? 16 : 0, iv,
                                                iv != NULL ? c->ivlen : 0, NULL);
}

/* A context of `mode`, initialised (enc) with key and iv. */
static inline int open_init(assume_run *r, fbc *c, gpuaes_mode mode, int enc,
                            const unsigned char *key, const unsigned char *iv)
{
    return open_ctx(r, c, mode) && need(r, init(c, enc, key, iv), "init");
}

/* An update that must succeed; returns its outl (or SIZE_MAX on failure). */
static inline size_t upd(fbc *c, unsigned char *out, const unsigned char *in, size_t inl)
{
    size_t outl = 0;

    return c->fb->update(c->ctx, out, &outl, inl + BLOCK, in, inl) ? outl : SIZE_MAX;
}

/* A size_t parameter of a context, got (SIZE_MAX first) or set. */
static inline int get_size(const fallback_cipher *fb, void *ctx, const char *key, size_t *v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(key, v), OSSL_PARAM_END };

    *v = SIZE_MAX;
    return fb->get_ctx_params(ctx, p);
}

static inline int set_size(const fallback_cipher *fb, void *ctx, const char *key, size_t v)
{
    OSSL_PARAM p[2] = { OSSL_PARAM_size_t(key, &v), OSSL_PARAM_END };

    return fb->set_ctx_params(ctx, p);
}

/* n bytes (a multiple of 16) through a fresh AES-128-ECB encryption. */
static inline int ecb(assume_run *r, const unsigned char *key, unsigned char *out,
               const unsigned char *in, size_t n)
{
    fbc e = { 0 };
    int ok = open_ctx(r, &e, MODE_ECB) && need(r, init(&e, 1, key, NULL), "ECB init")
        && need(r, upd(&e, out, in, n) == n, "ECB update");

    close_ctx(&e);
    return ok;
}

/* Deterministic test bytes. */
static inline void fill(unsigned char *p, size_t n, unsigned int seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)((seed + i) * 167 + (i >> 3));
}

#endif
