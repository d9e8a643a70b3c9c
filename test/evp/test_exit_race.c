/* test_exit_race.c - exit() from the main thread while other threads' updates
 * start the GPU and run on it (issue 19, item 1).  Every child must exit with
 * status 0, promptly: no hang, no crash.
 *
 *   ctr: one thread, AES-256-CTR 8 MiB updates, gpu_start_bytes 1M or 64M,
 *        exit after 0-600 ms;
 *   mix: six threads, 16 MiB updates (three AES-256-GCM, three AES-128-ECB),
 *        gpu_start_bytes 0, exit after 150-350 ms.
 *
 * usage: test_exit_race [RUNS [PARALLEL [cold]]]   both programs, RUNS children each
 *        test_exit_race --child ctr|mix DELAY_US
 * cold (the service backend, GPU machine soaks): each child gets a socket
 * directory of its own under a new temporary one (printed), so that it
 * starts its own gpuaesd and most often exits while that one starts; once the
 * child has ended, its service is SIGKILLed (found by its command line), so
 * that no more than PARALLEL services start CUDA at once (left to exit on
 * idle, a thousand of them queued in the driver: bench/results/README.md,
 * final-checks).  The directories are left behind.
 * The children load the providers into the default library context, whose
 * OpenSSL exit handler unloads them, as an application's would. */
#define _GNU_SOURCE
#include <dirent.h>
#include <openssl/evp.h>
#include <openssl/provider.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define HANG_MS 10000   /* a child still running this long after its exit() is hung */
#define MIB ((size_t)1 << 20)

static EVP_CIPHER *child_cipher[2];

/* A child exits with its threads inside OpenSSL on purpose: LeakSanitizer's
 * check (ASan builds) would count their buffers as leaks. */
static volatile int exiting_on_purpose;
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return exiting_on_purpose;
}

static void *child_worker(void *arg)
{
    const EVP_CIPHER *c = arg;
    size_t len = EVP_CIPHER_get_mode(c) == EVP_CIPH_CTR_MODE ? 8 * MIB : 16 * MIB;
    unsigned char *in = calloc(1, len), *out = malloc(len + 16);
    unsigned char key[32] = {3}, iv[16] = {4};
    EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
    int n;

    if (in == NULL || out == NULL || ctx == NULL || !EVP_EncryptInit_ex2(ctx, c, key, iv, NULL))
        _exit(4);
    for (;;)
        if (!EVP_EncryptUpdate(ctx, out, &n, in, (int)len))
            _exit(5);   /* a failed update is a failure too */
    return NULL;
}

static int child(const char *program, long delay_us)
{
    const char *dir = getenv("GPUAES_MODULE_DIR");
    int mix = strcmp(program, "mix") == 0;
    pthread_t t;

    test_trace_crashes();

    if (dir != NULL)
        OSSL_PROVIDER_set_default_search_path(NULL, dir);
    if (OSSL_PROVIDER_load(NULL, "gpuaes") == NULL || OSSL_PROVIDER_load(NULL, "default") == NULL)
        return 2;
    child_cipher[0] = EVP_CIPHER_fetch(NULL, mix ? "AES-256-GCM" : "AES-256-CTR", "provider=gpuaes");
    child_cipher[1] = EVP_CIPHER_fetch(NULL, "AES-128-ECB", "provider=gpuaes");
    if (child_cipher[0] == NULL || child_cipher[1] == NULL)
        return 3;
    for (int i = 0; i < (mix ? 6 : 1); i++)
        if (pthread_create(&t, NULL, child_worker, child_cipher[i % 2]) != 0)
            return 6;
    usleep((useconds_t)delay_us);
    exiting_on_purpose = 1;
    exit(0);
}

static double now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

typedef struct {
    pid_t pid;
    double deadline;
    long delay_us;
    int index;
} running;

/* Runs `runs` children of `program`, `parallel` at a time; returns the
 * number that hung or did not exit with status 0. */
static char cold_root[64];   /* cold: the children's socket directories go under it */

/* cold: SIGKILLs the gpuaesd started for `dir` (its arguments name it:
 * service/client.c start_service). */
static void cold_kill_service(const char *dir)
{
    DIR *proc = opendir("/proc");
    struct dirent *e;

    while (proc != NULL && (e = readdir(proc)) != NULL) {
        char path[300], cmd[512];
        FILE *f;
        size_t n;

        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        n = fread(cmd, 1, sizeof(cmd) - 1, f);
        fclose(f);
        for (size_t i = 0; i < n; i++)   /* arguments are NUL-separated */
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        cmd[n] = '\0';
        if (strstr(cmd, "gpuaesd") != NULL && strstr(cmd, dir) != NULL)
            kill((pid_t)atol(e->d_name), SIGKILL);
    }
    if (proc != NULL)
        closedir(proc);
}

static int soak(const char *self, const char *program, int runs, int parallel)
{
    int mix = strcmp(program, "mix") == 0, started = 0, done = 0, bad = 0, hung = 0;
    running *r = calloc((size_t)parallel, sizeof(*r));

    while (done < runs) {
        for (int i = 0; i < parallel; i++) {
            if (r[i].pid == 0 && started < runs) {
                long d = mix ? 150000 + (long)test_rand_below(200001) : (long)test_rand_below(600001);
                char arg[32];

                snprintf(arg, sizeof(arg), "%ld", d);
                r[i].delay_us = d;
                r[i].index = started;
                r[i].deadline = now_ms() + d / 1e3 + HANG_MS;
                r[i].pid = fork();
                if (r[i].pid == 0) {
                    setenv("GPUAES_GPU_START_BYTES", mix ? "0" : (started % 2 ? "64M" : "1M"), 1);
                    if (cold_root[0] != '\0') {
                        char dir[128];

                        snprintf(dir, sizeof(dir), "%s/%s-%d/", cold_root, program, started);
                        setenv("GPUAES_SERVICE_DIR", dir, 1);
                    }
                    execl(self, self, "--child", program, arg, (char *)NULL);
                    _exit(127);
                }
                started++;
            }
            if (r[i].pid > 0) {
                int status, ended = 1;
                pid_t w = waitpid(r[i].pid, &status, WNOHANG);

                if (w == 0 && now_ms() > r[i].deadline) {
                    kill(r[i].pid, SIGKILL);
                    waitpid(r[i].pid, &status, 0);
                    fprintf(stderr, "%s: child hung (exit after %ld us)\n", program, r[i].delay_us);
                    hung++, bad++, done++;
                    r[i].pid = 0;
                } else if (w == r[i].pid) {
                    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                        fprintf(stderr, "%s: child status 0x%x (exit after %ld us)\n", program, status,
                                r[i].delay_us);
                        bad++;
                    }
                    done++;
                    r[i].pid = 0;
                } else {
                    ended = 0;
                }
                if (ended && cold_root[0] != '\0') {
                    char dir[128];

                    snprintf(dir, sizeof(dir), "%s/%s-%d/", cold_root, program, r[i].index);
                    cold_kill_service(dir);
                }
            }
        }
        usleep(2000);
    }
    printf("%s: %d runs, %d abnormal (%d hung)\n", program, runs, bad, hung);
    free(r);
    return bad;
}

int main(int argc, char **argv)
{
    test_env env;
    int runs, parallel;

    if (argc == 4 && strcmp(argv[1], "--child") == 0)
        return child(argv[2], atol(argv[3]));
    runs = argc > 1 ? atoi(argv[1]) : 20;
    parallel = argc > 2 ? atoi(argv[2]) : 2;
    if (runs <= 0 || parallel <= 0 || (argc > 3 && strcmp(argv[3], "cold") != 0))
        return 2;
    if (argc > 3) {
        snprintf(cold_root, sizeof(cold_root), "%s/exit_race.XXXXXX", "/tmp");
        if (mkdtemp(cold_root) == NULL)
            return 2;
        setenv("GPUAESD_IDLE_EXIT", "1", 1);
        printf("cold: socket directories under %s\n", cold_root);
    }
    if (!test_env_open(&env))
        return 1;
    test_require_gpu(&env);
    test_env_close(&env);
    test_seed(0);
    CHECK(soak(argv[0], "ctr", runs, parallel) == 0);
    CHECK(soak(argv[0], "mix", runs, parallel) == 0);
    return test_report("exit_race");
}
