/* check.h - the one assertion family of the tests (C and C++).  A failed check prints where and
 * what (and OpenSSL's error queue, in a test linked with it), counts in test_failures and lets the
 * test go on, so that one run shows every failure; thread-safe.  check_report() turns the count
 * into the exit status. */
#ifndef GPUAES_SUPPORT_CHECK_H
#define GPUAES_SUPPORT_CHECK_H

#ifdef __cplusplus
extern "C" {
#endif

extern int test_failures;   /* failed checks so far (read it to stop a loop early) */

#define CHECK(cond) \
    do { if (!(cond)) check_failed(__FILE__, __LINE__, #cond); } while (0)
/* CHECK with a printf-style line that says what differed. */
#define CHECKF(cond, ...) \
    do { if (!(cond)) check_failedf(__FILE__, __LINE__, #cond, __VA_ARGS__); } while (0)

void check_failed(const char *file, int line, const char *what);
void check_failedf(const char *file, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Prints "<name>: ok" or "<name>: FAILED"; returns the exit status (0 or 1). */
int check_report(const char *name);

#ifdef __cplusplus
}
#endif

#endif
