/*
 * test_support.c - the shared helpers of test/support/ themselves:
 *  - size.h parses what the tests and benches write ("4096", "16K", "64MiB", "1G")
 *    and refuses the rest (empty, signs, junk, overflow); size_format writes it back;
 *  - rng.h is splitmix64 (the published first outputs for seed 0), rng_at agrees
 *    with rng_next, rng_bytes and rng_below stay in range;
 *  - a failed CHECK counts and makes check_report fail (in a child, so that this
 *    test's own count stays clean).
 * CPU only; no GPU, no provider.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "rng.h"
#include "size.h"

static void sizes(void)
{
    static const struct { const char *s; size_t v; } good[] = {
        { "0", 0 }, { "4096", 4096 }, { "16K", 16384 }, { "16k", 16384 }, { "1KiB", 1024 },
        { "64M", (size_t)64 << 20 }, { "64MB", (size_t)64 << 20 }, { "1G", (size_t)1 << 30 },
        { "16B", 16 }, { " 64", 64 },
    };
    static const char *const bad[] = {
        "", "K", "-1", "+1", "1T", "1 K", "16K ", "0x10", "1iB", "12abc", "99999999999999999999",
        "17179869184G",
    };
    char buf[32];

    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        size_t v = 1;

        CHECKF(size_parse(good[i].s, &v) && v == good[i].v, "'%s': %zu", good[i].s, v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t v = 7;

        CHECKF(!size_parse(bad[i], &v) && v == 7, "'%s' taken as %zu", bad[i], v);
    }
    CHECK(strcmp(size_format((size_t)1 << 30, buf, sizeof(buf)), "1G") == 0);
    CHECK(strcmp(size_format((size_t)64 << 20, buf, sizeof(buf)), "64M") == 0);
    CHECK(strcmp(size_format(3072, buf, sizeof(buf)), "3K") == 0);
    CHECK(strcmp(size_format(4097, buf, sizeof(buf)), "4097") == 0);
    CHECK(strcmp(size_format(0, buf, sizeof(buf)), "0") == 0);
}

static void generator(void)
{
    rng_state r = rng_seeded(0), a = rng_seeded(42), b = rng_seeded(42);
    unsigned char bytes[13] = { 0 };
    uint64_t first[3];

    for (int i = 0; i < 3; i++)
        first[i] = rng_next(&r);
    CHECKF(first[0] == 0xe220a8397b1dcdafULL && first[1] == 0x6e789e6aa1b965f4ULL
           && first[2] == 0x06c45d188009454fULL, "splitmix64(0): %016llx", (unsigned long long)first[0]);
    for (uint64_t i = 0; i < 100; i++)
        CHECK(rng_at(42, i) == rng_next(&a));
    rng_bytes(&b, bytes, sizeof(bytes));
    CHECK(memcmp(bytes, (uint64_t[]){ rng_at(42, 0) }, 8) == 0);
    for (int i = 0; i < 1000; i++)
        CHECK(rng_below(&b, 10) < 10);
    CHECK(rng_below(&b, 0) == 0);
}

/* A failed check in a child: it must count, print, and fail the exit status. */
static void failing_check(void)
{
    int st = 0;
    pid_t pid = fork();

    if (pid == 0) {
        freopen("/dev/null", "w", stderr);
        CHECK(1 + 1 == 3);
        _exit(test_failures == 1 && check_report("child") == 1 ? 42 : 0);
    }
    CHECK(pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 42);
}

int main(void)
{
    sizes();
    generator();
    failing_check();
    return check_report("support");
}
