/*
 * tls_client.c - the client side of bench/tls_loopback.sh (issue 21): full
 * TLS handshakes, or fetches of a large file, against `openssl s_server
 * -WWW` over loopback, timed by the wall clock.  It links libssl only: the
 * providers come from OPENSSL_CONF, as for any unmodified program.
 *
 *   tls_client --connect HOST:PORT --tls 1.2|1.3 --suite NAME
 *              (--handshakes | --fetch /PATH --expect BYTES) [--seconds S]
 *
 * --suite: a TLS 1.3 ciphersuite (TLS_AES_128_GCM_SHA256) or a TLS 1.2
 * cipher (ECDHE-ECDSA-AES128-GCM-SHA256); the connection must negotiate it.
 * --handshakes: new TCP connection + full handshake (no resumption) +
 * close_notify, repeated for S seconds (1).  --fetch: connect, handshake,
 * "GET PATH", read to the end (at least BYTES, else an error), repeated for
 * S seconds, at least once.  Prints one line:
 *   handshakes=N seconds=S per_s=X         or   bytes=N fetches=K seconds=S mb_s=X
 * (MB = 10^6 bytes) and, before it, "# fetch AES-128-GCM: provider P" for
 * the two GCM ciphers: what libssl's fetch (default properties) resolves to.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <openssl/ssl.h>

#include "bench_stats.h"

static void die(const char *what)
{
    fprintf(stderr, "tls_client: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static struct addrinfo *target;

static int tcp_connect(void)
{
    int one = 1;
    int fd = socket(target->ai_family, SOCK_STREAM, 0);

    if (fd < 0)
        die("socket");
    if (connect(fd, target->ai_addr, target->ai_addrlen) != 0) {
        fprintf(stderr, "tls_client: connect: %s\n", strerror(errno));
        exit(1);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* A new connection with a full handshake; checks the negotiated suite. */
static SSL *handshake(SSL_CTX *ctx, const char *suite, int *fd)
{
    SSL *ssl = SSL_new(ctx);

    *fd = tcp_connect();
    if (ssl == NULL || !SSL_set_fd(ssl, *fd))
        die("SSL_new");
    if (SSL_connect(ssl) != 1)
        die("SSL_connect");
    if (strcmp(SSL_get_cipher_name(ssl), suite) != 0) {
        fprintf(stderr, "tls_client: negotiated %s, not %s\n", SSL_get_cipher_name(ssl), suite);
        exit(1);
    }
    return ssl;
}

/*
 * A clean close, as s_server expects it: our close_notify, then read to
 * theirs (TLS 1.3 session tickets on the way), then the TCP close.  A close
 * with unread data (a reset) left s_server waiting 0.5 s for our FIN after
 * its own shutdown(SHUT_WR) (do_server in apps/lib/s_socket.c).
 */
static void close_conn(SSL *ssl, int fd)
{
    unsigned char buf[4096];

    if (SSL_shutdown(ssl) == 0)
        while (SSL_read(ssl, buf, sizeof(buf)) > 0)
            ;
    ERR_clear_error();
    SSL_free(ssl);
    close(fd);
}

static size_t fetch(SSL_CTX *ctx, const char *suite, const char *path)
{
    static unsigned char buf[64 << 10];
    char req[512];
    size_t total = 0;
    int fd, n, len = snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\n\r\n", path);
    SSL *ssl = handshake(ctx, suite, &fd);

    if (len <= 0 || (size_t)len >= sizeof(req) || SSL_write(ssl, req, len) != len)
        die("SSL_write of the request");
    while ((n = SSL_read(ssl, buf, sizeof(buf))) > 0)
        total += (size_t)n;
    /* s_server -WWW ends with its close_notify */
    if (SSL_get_error(ssl, n) != SSL_ERROR_ZERO_RETURN)
        die("SSL_read");
    close_conn(ssl, fd);
    return total;
}

static void say_provider(const char *cipher)
{
    EVP_CIPHER *c = EVP_CIPHER_fetch(NULL, cipher, NULL);

    printf("# fetch %s: provider %s\n", cipher,
           c != NULL ? OSSL_PROVIDER_get0_name(EVP_CIPHER_get0_provider(c)) : "(none)");
    EVP_CIPHER_free(c);
}

static void usage(void)
{
    fprintf(stderr, "usage: tls_client --connect HOST:PORT --tls 1.2|1.3 --suite NAME "
                    "(--handshakes | --fetch /PATH --expect BYTES) [--seconds S]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *connect_to = NULL, *tls = NULL, *suite = NULL, *path = NULL;
    double seconds = 1.0, t0, t;
    long long expect = -1;
    int handshakes = 0, version;
    SSL_CTX *ctx;
    char host[256], *colon;
    struct addrinfo hints = { .ai_socktype = SOCK_STREAM };

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

        if (strcmp(a, "--handshakes") == 0) {
            handshakes = 1;
            continue;
        }
        if (v == NULL)
            usage();
        if (strcmp(a, "--connect") == 0)
            connect_to = v;
        else if (strcmp(a, "--tls") == 0)
            tls = v;
        else if (strcmp(a, "--suite") == 0)
            suite = v;
        else if (strcmp(a, "--fetch") == 0)
            path = v;
        else if (strcmp(a, "--expect") == 0)
            expect = atoll(v);
        else if (strcmp(a, "--seconds") == 0)
            seconds = atof(v);
        else
            usage();
        i++;
    }
    if (connect_to == NULL || tls == NULL || suite == NULL || handshakes == (path != NULL)
        || (path != NULL && expect < 0) || !(seconds > 0))
        usage();
    if (strcmp(tls, "1.2") == 0)
        version = TLS1_2_VERSION;
    else if (strcmp(tls, "1.3") == 0)
        version = TLS1_3_VERSION;
    else
        usage();
    colon = strrchr(connect_to, ':');
    if (colon == NULL || (size_t)(colon - connect_to) >= sizeof(host))
        usage();
    memcpy(host, connect_to, (size_t)(colon - connect_to));
    host[colon - connect_to] = '\0';
    signal(SIGPIPE, SIG_IGN);               /* a peer's early close is an error return */
    if (getaddrinfo(host, colon + 1, &hints, &target) != 0)
        die("getaddrinfo");

    ctx = SSL_CTX_new(TLS_client_method());   /* loads OPENSSL_CONF first */
    if (ctx == NULL || !SSL_CTX_set_min_proto_version(ctx, version)
        || !SSL_CTX_set_max_proto_version(ctx, version))
        die("SSL_CTX_new");
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    if (version == TLS1_3_VERSION ? !SSL_CTX_set_ciphersuites(ctx, suite)
                                  : !SSL_CTX_set_cipher_list(ctx, suite))
        die("no such suite");
    say_provider("AES-128-GCM");
    say_provider("AES-256-GCM");

    if (handshakes) {
        long long n = 0;

        t0 = bench_mono_s();
        do {
            int fd;
            SSL *ssl = handshake(ctx, suite, &fd);

            close_conn(ssl, fd);
            n++;
        } while ((t = bench_mono_s()) - t0 < seconds);
        printf("handshakes=%lld seconds=%.4f per_s=%.1f\n", n, t - t0, (double)n / (t - t0));
    } else {
        unsigned long long bytes = 0, fetches = 0;

        t0 = bench_mono_s();
        do {
            size_t got = fetch(ctx, suite, path);

            if ((long long)got < expect) {
                fprintf(stderr, "tls_client: fetched %zu bytes, expected at least %lld\n", got, expect);
                return 1;
            }
            bytes += got;
            fetches++;
        } while ((t = bench_mono_s()) - t0 < seconds);
        printf("bytes=%llu fetches=%llu seconds=%.4f mb_s=%.1f\n", bytes, fetches, t - t0,
               (double)bytes / 1e6 / (t - t0));
    }
    SSL_CTX_free(ctx);
    freeaddrinfo(target);
    return 0;
}
