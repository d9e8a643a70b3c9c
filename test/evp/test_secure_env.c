/*
 * test_secure_env.c - a process with privileges its caller lacks (AT_SECURE:
 * setuid, setgid, file capabilities) has an environment its caller wrote.
 * gpuaes must take no knob from it and start nothing there: above all, it
 * must not spawn a GPUAES_SERVICE_PATH with the process's privileges.
 *
 * Run as root.  The same probe (this program, "probe" mode) runs twice with
 * an environment that names a service script leaving a mark when run, the
 * service backend, no start threshold and the knob keystream=off:
 *  - as root (no AT_SECURE), the control: the knob is in force and the
 *    script runs (so the test can see a spawn);
 *  - from a setuid-nobody copy of this program (AT_SECURE): keystream is
 *    still on, disable_gpu is on, and the script never runs.
 * Both compare 1 MiB of AES-128-CTR with the default provider's.  77 when not
 * root, or when the filesystem ignores the setuid bit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <openssl/core_names.h>
#include <openssl/params.h>

#include "testutil.h"

#define NOBODY 65534

/* The ASan+UBSan build: LeakSanitizer cannot trace a non-dumpable (setuid)
 * process, and the sanitizers read no options from the environment there. */
const char *__asan_default_options(void);
const char *__lsan_default_options(void);
const char *__asan_default_options(void) { return getauxval(AT_SECURE) ? "detect_leaks=0" : ""; }
const char *__lsan_default_options(void) { return getauxval(AT_SECURE) ? "detect_leaks=0" : ""; }

static int has_setting(const char *settings, const char *item)
{
    char want[96];

    snprintf(want, sizeof(want), ",%s,", item);
    return strstr(settings, want) != NULL;
}

/* Whether `path` exists within `ms` (the service starts in the background). */
static int appears(const char *path, int ms)
{
    for (int i = 0; i <= ms / 10; i++) {
        if (access(path, F_OK) == 0)
            return 1;
        nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
    }
    return 0;
}

/* The probe: 1 MiB of CTR through gpuaes against the default provider, then
 * the knobs in force.  Exit 0 when what it sees matches `secure`; not secure,
 * once the service script it starts in the background has left `mark`. */
static int probe(int secure, const char *mark)
{
    static unsigned char in[1 << 20], out_g[sizeof(in)], out_d[sizeof(in)];
    unsigned char key[16] = { 1 }, iv[16] = { 2 };
    char settings[2048] = ",";
    OSSL_PARAM p[2] = { OSSL_PARAM_utf8_string("settings", settings + 1, sizeof(settings) - 2), OSSL_PARAM_END };
    test_env env;

    if ((getauxval(AT_SECURE) != 0) != secure) {
        printf("SKIP: AT_SECURE is %lu here (the filesystem ignores setuid?)\n", getauxval(AT_SECURE));
        return TEST_SKIP;
    }
    if (!test_env_open(&env))
        return 1;
    for (int k = 0; k < 2; k++) {
        EVP_CIPHER *c = test_fetch(&env, "AES-128-CTR", k ? "gpuaes" : "default");
        EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int outl = 0;

        CHECK(c != NULL && ctx != NULL && EVP_EncryptInit_ex2(ctx, c, key, iv, NULL)
              && EVP_EncryptUpdate(ctx, k ? out_g : out_d, &outl, in, (int)sizeof(in))
              && outl == (int)sizeof(in));
        EVP_CIPHER_CTX_free(ctx);
        EVP_CIPHER_free(c);
    }
    CHECK(memcmp(out_g, out_d, sizeof(in)) == 0);
    CHECK(OSSL_PROVIDER_get_params(env.gpuaes, p));
    strcat(settings, ",");
    printf("%s: %s\n", secure ? "setuid nobody" : "root", settings);
    /* The environment's knob is read only where the caller is the process. */
    CHECK(has_setting(settings, secure ? "keystream=on" : "keystream=off"));
    CHECK(has_setting(settings, secure ? "disable_gpu=on" : "disable_gpu=off"));
    if (secure)   /* alive for a second: a start in the background would spawn meanwhile */
        CHECK(test_gpu_available(&env) == 0 && !appears(mark, 1000));
    else
        CHECK(appears(mark, 3000));   /* the control: a spawn is seen */
    test_env_close(&env);
    return test_failures == 0 ? 0 : 1;
}

static int run(const char *exe, const char *mode, const char *mark)
{
    int st;
    pid_t pid = fork();

    if (pid == 0) {
        execl(exe, exe, "probe", mode, mark, (char *)NULL);
        _exit(127);
    }
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A copy of `from` at `to`, owned by nobody, with `mode`. */
static int copy_file(const char *from, const char *to, mode_t mode)
{
    char buf[65536];
    ssize_t n;
    int in = open(from, O_RDONLY | O_CLOEXEC), out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    int ok = in >= 0 && out >= 0;

    while (ok && (n = read(in, buf, sizeof(buf))) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = 0;
    return ok && chown(to, NOBODY, NOBODY) == 0 && chmod(to, mode) == 0;
}

int main(int argc, char **argv)
{
    char dir[] = "/tmp/gpuaes-secure-XXXXXX", exe[64], script[64], mark[64], sock[64], mdir[64];
    char from[4096], to[128];
    static const char *const modules[] = { "gpuaes.so", "gpuaes_gpu.so" };
    const char *mod = getenv("GPUAES_MODULE_DIR");
    FILE *f;
    int rc;

    if (argc == 4 && strcmp(argv[1], "probe") == 0)
        return probe(atoi(argv[2]), argv[3]);
    if (geteuid() != 0) {
        printf("SKIP: needs root (to make a setuid-nobody copy of itself)\n");
        return TEST_SKIP;
    }
    if (mod == NULL || access(mod, R_OK | X_OK) != 0) {
        printf("FAIL: GPUAES_MODULE_DIR unset or unreadable\n");
        return 1;
    }
    if (mkdtemp(dir) == NULL || chmod(dir, 0777) != 0)
        return 1;
    snprintf(exe, sizeof(exe), "%s/probe", dir);
    snprintf(script, sizeof(script), "%s/gpuaesd", dir);
    snprintf(mark, sizeof(mark), "%s/spawned", dir);
    snprintf(sock, sizeof(sock), "%s/s", dir);
    snprintf(mdir, sizeof(mdir), "%s/mod", dir);
    /* The modules beside the probe: nobody may not be able to read the build tree. */
    if (mkdir(mdir, 0755) != 0)
        return 1;
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
        snprintf(from, sizeof(from), "%s/%s", mod, modules[i]);
        snprintf(to, sizeof(to), "%s/%s", mdir, modules[i]);
        if (!copy_file(from, to, 0644)) {
            printf("FAIL: cannot copy %s: %s\n", from, strerror(errno));
            return 1;
        }
    }
    setenv("GPUAES_MODULE_DIR", mdir, 1);
    if (!copy_file("/proc/self/exe", exe, 04755) || (f = fopen(script, "w")) == NULL) {
        printf("FAIL: cannot set up %s: %s\n", dir, strerror(errno));
        return 1;
    }
    fprintf(f, "#!/bin/sh\ntouch %s\n", mark);
    if (fclose(f) != 0 || chmod(script, 0755) != 0)
        return 1;
    setenv("GPUAES_SERVICE_PATH", script, 1);
    setenv("GPUAES_SERVICE_DIR", sock, 1);
    setenv("GPUAES_GPU_BACKEND", "service", 1);
    setenv("GPUAES_GPU_START_BYTES", "0", 1);
    setenv("GPUAES_OFFLOAD_MIN_BYTES", "0", 1);
    setenv("GPUAES_DISPATCH", "force", 1);
    setenv("GPUAES_SERVICE_CONNECT_WAIT_MS", "0", 1);
    setenv("GPUAES_KEYSTREAM", "off", 1);

    /* The control: root reads its own environment, and gpuaes spawns the script. */
    rc = run("/proc/self/exe", "0", mark);
    CHECK(rc == 0);
    unlink(mark);

    rc = run(exe, "1", mark);
    if (rc == TEST_SKIP) {
        printf("SKIP: no AT_SECURE from a setuid copy in %s\n", dir);
    } else {
        CHECK(rc == 0);
        CHECK(!appears(mark, 500));
    }
    unlink(mark);
    unlink(script);
    unlink(exe);
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
        snprintf(to, sizeof(to), "%s/%s", mdir, modules[i]);
        unlink(to);
    }
    rmdir(mdir);
    rmdir(sock);
    rmdir(dir);
    if (rc == TEST_SKIP && test_failures == 0)
        return TEST_SKIP;
    return test_report("secure_env");
}
