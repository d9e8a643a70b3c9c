/*
 * test_tls.c - TLS 1.2 and 1.3 through libssl, in memory (a BIO pair), with
 * gpuaes preferred ("?provider=gpuaes") in the library context.  Each suite
 * runs gpuaes<->gpuaes and against a default-only peer in both directions, so
 * a self-consistent but wrong cipher cannot pass.  Messages of 1..100000
 * bytes go both ways; TLS 1.3 also does a key update.
 */
#include "api_util.h"

#include <stdlib.h>
#include <string.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

typedef struct {
    const char *suite;
    int tls13;
    int ec;                            /* ECDSA certificate, else RSA */
    uint64_t opts;
} suite_t;

static const suite_t suites[] = {
    { "TLS_AES_128_GCM_SHA256", 1, 0, 0 },
    { "TLS_AES_256_GCM_SHA384", 1, 1, 0 },
    { "ECDHE-RSA-AES128-GCM-SHA256", 0, 0, 0 },
    { "ECDHE-ECDSA-AES256-GCM-SHA384", 0, 1, 0 },
    { "AES128-SHA256", 0, 0, 0 },                          /* CBC, encrypt-then-MAC */
    { "ECDHE-RSA-AES256-SHA384", 0, 0, 0 },                /* CBC, encrypt-then-MAC */
    { "ECDHE-RSA-AES256-SHA384", 0, 0, SSL_OP_NO_ENCRYPT_THEN_MAC },  /* CBC, MAC-then-encrypt */
};

static const size_t msg_sizes[] = { 1, 1000, 16384, 100000 };

typedef struct {
    const char *name;
    OSSL_LIB_CTX *libctx;
    EVP_PKEY *key[2];                  /* [0] RSA, [1] EC */
    X509 *cert[2];
} side_t;

static unsigned char *msg, *got;

static X509 *self_signed(OSSL_LIB_CTX *l, EVP_PKEY *pk)
{
    X509 *x = X509_new_ex(l, NULL);
    X509_NAME *n = x ? X509_get_subject_name(x) : NULL;
    int ok = x != NULL && X509_set_version(x, X509_VERSION_3)
             && ASN1_INTEGER_set(X509_get_serialNumber(x), 1)
             && X509_gmtime_adj(X509_getm_notBefore(x), -3600)
             && X509_gmtime_adj(X509_getm_notAfter(x), 86400)
             && X509_set_pubkey(x, pk)
             && X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                                           (const unsigned char *)"gpuaes-test", -1, -1, 0)
             && X509_set_issuer_name(x, n)
             && X509_sign(x, pk, EVP_sha256()) > 0;

    if (!ok) {
        X509_free(x);
        return NULL;
    }
    return x;
}

static int side_init(side_t *s, const char *name, OSSL_LIB_CTX *l)
{
    s->name = name;
    s->libctx = l;
    s->key[0] = EVP_PKEY_Q_keygen(l, NULL, "RSA", (size_t)2048);
    s->key[1] = EVP_PKEY_Q_keygen(l, NULL, "EC", "P-256");
    for (int i = 0; i < 2; i++)
        s->cert[i] = s->key[i] ? self_signed(l, s->key[i]) : NULL;
    return s->cert[0] != NULL && s->cert[1] != NULL;
}

static void side_free(side_t *s)
{
    for (int i = 0; i < 2; i++) {
        X509_free(s->cert[i]);
        EVP_PKEY_free(s->key[i]);
    }
}

static SSL_CTX *make_ctx(const side_t *s, const suite_t *su, int server)
{
    SSL_CTX *c = SSL_CTX_new_ex(s->libctx, NULL, server ? TLS_server_method() : TLS_client_method());
    int v = su->tls13 ? TLS1_3_VERSION : TLS1_2_VERSION, ok;

    if (c == NULL)
        return NULL;
    ok = SSL_CTX_set_min_proto_version(c, v) && SSL_CTX_set_max_proto_version(c, v)
         && (su->tls13 ? SSL_CTX_set_ciphersuites(c, su->suite) : SSL_CTX_set_cipher_list(c, su->suite));
    SSL_CTX_set_options(c, su->opts);
    SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE);
    if (server)
        ok = ok && SSL_CTX_use_certificate(c, s->cert[su->ec])
             && SSL_CTX_use_PrivateKey(c, s->key[su->ec]);
    if (!ok) {
        SSL_CTX_free(c);
        return NULL;
    }
    return c;
}

static int wants_io(SSL *s, int r)
{
    int e = SSL_get_error(s, r);

    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

static int handshake(SSL *c, SSL *s)
{
    for (int i = 0; i < 1000; i++) {
        int rc = SSL_do_handshake(c), rs = SSL_do_handshake(s);

        if (rc == 1 && rs == 1)
            return 1;
        if ((rc != 1 && !wants_io(c, rc)) || (rs != 1 && !wants_io(s, rs)))
            return 0;
    }
    return 0;
}

/* len bytes from w to r through the BIO pair; what arrives must be msg. */
static int transfer(SSL *w, SSL *r, size_t len)
{
    size_t sent = 0, recvd = 0, n;

    memset(got, 0, len);
    for (int spins = 0; recvd < len && spins < 100000; spins++) {
        if (sent < len) {
            if (SSL_write_ex(w, msg + sent, len - sent, &n))
                sent += n;
            else if (!wants_io(w, 0))
                return 0;
        }
        if (SSL_read_ex(r, got + recvd, len - recvd, &n))
            recvd += n;
        else if (!wants_io(r, 0))
            return 0;
    }
    return recvd == len && memcmp(got, msg, len) == 0;
}

static int exchange(SSL *c, SSL *s, const char *what)
{
    int ok = 1;

    for (size_t i = 0; i < sizeof(msg_sizes) / sizeof(msg_sizes[0]); i++) {
        int a = transfer(c, s, msg_sizes[i]), b = transfer(s, c, msg_sizes[i]);

        CHECKF(a && b, "%s: %zu bytes client->server %s, server->client %s", what, msg_sizes[i],
               a ? "ok" : "FAILED", b ? "ok" : "FAILED");
        ok &= a & b;
    }
    return ok;
}

static void run_pair(const suite_t *su, const side_t *cs, const side_t *ss)
{
    SSL_CTX *cc = make_ctx(cs, su, 0), *sc = make_ctx(ss, su, 1);
    SSL *c = NULL, *s = NULL;
    BIO *bc = NULL, *bs = NULL;
    char what[160];
    const char *name;

    snprintf(what, sizeof(what), "%s%s, client %s, server %s", su->suite,
             su->opts ? " (no EtM)" : "", cs->name, ss->name);
    CHECKF(cc != NULL && sc != NULL, "%s: SSL_CTX setup", what);
    if (cc == NULL || sc == NULL || !BIO_new_bio_pair(&bc, 0, &bs, 0))
        goto end;
    c = SSL_new(cc);
    s = SSL_new(sc);
    SSL_set_bio(c, bc, bc);
    SSL_set_bio(s, bs, bs);
    SSL_set_connect_state(c);
    SSL_set_accept_state(s);
    if (!handshake(c, s)) {
        CHECKF(0, "%s: handshake failed", what);
        goto end;
    }
    name = SSL_CIPHER_get_name(SSL_get_current_cipher(c));
    CHECKF(strcmp(name, su->suite) == 0, "%s: negotiated %s", what, name);
    CHECKF(SSL_version(c) == (su->tls13 ? TLS1_3_VERSION : TLS1_2_VERSION), "%s: version %s",
           what, SSL_get_version(c));
    if (exchange(c, s, what) && su->tls13) {
        /* new traffic keys: libssl re-initialises the cipher contexts */
        CHECKF(SSL_key_update(c, SSL_KEY_UPDATE_REQUESTED), "%s: key update", what);
        exchange(c, s, what);
        exchange(c, s, what);
    }
    /* close_notify both ways */
    if (SSL_shutdown(c) >= 0) {
        SSL_shutdown(s);
        CHECKF(SSL_shutdown(c) == 1, "%s: shutdown", what);
    }
    printf("ok  %s\n", what);
end:
    ERR_print_errors_fp(stderr);
    SSL_free(c);
    SSL_free(s);
    SSL_CTX_free(cc);
    SSL_CTX_free(sc);
}

int main(int argc, char **argv)
{
    static const char *const preferred[] = { "AES-128-GCM", "AES-256-GCM", "AES-128-CBC", "AES-256-CBC" };
    test_env env;
    OSSL_LIB_CTX *ld = OSSL_LIB_CTX_new();
    OSSL_PROVIDER *pd = OSSL_PROVIDER_load(ld, "default");
    side_t g, d;

    if (!test_env_open(&env))
        return 1;
    if (argc > 1 && strcmp(argv[1], "--gpu") == 0)
        test_require_gpu(&env);
    test_seed(3);
    CHECK(pd != NULL);
    /* gpuaes preferred, default for everything else (and as the fallback) */
    CHECK(EVP_set_default_properties(env.libctx, "?provider=gpuaes"));
    for (size_t i = 0; i < sizeof(preferred) / sizeof(preferred[0]); i++) {
        EVP_CIPHER *c = EVP_CIPHER_fetch(env.libctx, preferred[i], NULL);
        const char *p = c ? OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(c)) : "nothing";

        CHECKF(strcmp(p, "gpuaes") == 0, "%s with NULL propq comes from %s", preferred[i], p);
        EVP_CIPHER_free(c);
    }
    msg = malloc(100000);
    got = malloc(100000);
    test_rand_bytes(msg, 100000);
    if (!side_init(&g, "gpuaes", env.libctx) || !side_init(&d, "default", ld)) {
        fprintf(stderr, "cannot make keys and certificates\n");
        ERR_print_errors_fp(stderr);
        return 1;
    }
    for (size_t i = 0; i < sizeof(suites) / sizeof(suites[0]); i++) {
        run_pair(&suites[i], &g, &g);
        run_pair(&suites[i], &g, &d);
        run_pair(&suites[i], &d, &g);
    }
    /* informational: TLS records may legitimately stay on the fallback */
    printf("gpu-bytes: %llu\n", (unsigned long long)test_gpu_bytes(&env));
    side_free(&g);
    side_free(&d);
    free(msg);
    free(got);
    OSSL_PROVIDER_unload(pd);
    OSSL_LIB_CTX_free(ld);
    test_env_close(&env);
    return test_report("tls");
}
