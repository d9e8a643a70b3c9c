/* check.c - the shared failure count and report of check.h. */
#include "check.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

/* Weak: tests of OpenSSL calls print its error queue, tests without OpenSSL (test_counter) link none. */
extern void ERR_print_errors_fp(FILE *fp) __attribute__((weak));

/* A broken build fails thousands of checks: the first ones say why, the rest are only counted. */
#define CHECK_PRINT_MAX 50

int test_failures;
static pthread_mutex_t check_lock = PTHREAD_MUTEX_INITIALIZER;

static void report(const char *file, int line, const char *what, const char *fmt, va_list *ap)
{
    pthread_mutex_lock(&check_lock);
    if (test_failures++ < CHECK_PRINT_MAX) {
        fprintf(stderr, "FAIL %s:%d: %s", file, line, what);
        if (fmt != NULL) {
            fputs(": ", stderr);
            vfprintf(stderr, fmt, *ap);
        }
        fputc('\n', stderr);
        if (ERR_print_errors_fp != NULL)
            ERR_print_errors_fp(stderr);   /* this thread's, e.g. why an EVP call refused */
    }
    pthread_mutex_unlock(&check_lock);
}

void check_failed(const char *file, int line, const char *what)
{
    report(file, line, what, NULL, NULL);
}

void check_failedf(const char *file, int line, const char *what, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report(file, line, what, fmt, &ap);
    va_end(ap);
}

int check_report(const char *name)
{
    printf("%s: %s\n", name, test_failures ? "FAILED" : "ok");
    return test_failures ? 1 : 0;
}
