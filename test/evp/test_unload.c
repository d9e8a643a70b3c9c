/*
 * test_unload.c - loading and unloading gpuaes gives everything back.
 *
 * 200 cycles of: a fresh library context, both providers loaded, the GPU
 * waited for and used (a CTR job and a keystream-ahead stream, checked
 * against the default provider), everything unloaded.  After a warm-up, the
 * process's threads and open files must not grow at all, its resident memory
 * by at most 16 MiB, and (with --gpu, where NVML is there to ask) the device
 * memory in use by at most 64 MiB: a leak of one slot or one CUDA context per
 * cycle would be 48 MiB to 500 MiB a cycle.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_util.h"

#define CYCLES 200
#define WARMUP 5
#define BIG ((size_t)2 << 20)

static long count_dir(const char *path)
{
    DIR *d = opendir(path);
    long n = 0;

    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f == NULL)
        return -1;
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
        rss = -1;
    fclose(f);
    return rss < 0 ? -1 : rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/* Device memory in use on GPU 0, in MiB, through NVML if present (-1: unknown). */
static long device_used_mib(void)
{
    typedef struct { unsigned long long total, free, used; } nvml_memory;
    static void *lib;
    static int (*init)(void), (*handle)(unsigned, void **), (*info)(void *, nvml_memory *);
    void *dev = NULL;
    nvml_memory m;

    if (lib == NULL) {
        if ((lib = dlopen("libnvidia-ml.so.1", RTLD_NOW)) == NULL)
            return -1;
        *(void **)&init = dlsym(lib, "nvmlInit_v2");
        *(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
        *(void **)&info = dlsym(lib, "nvmlDeviceGetMemoryInfo");
        if (init == NULL || handle == NULL || info == NULL || init() != 0)
            return -1;
    }
    if (handle == NULL || handle(0, &dev) != 0 || info(dev, &m) != 0)
        return -1;
    return (long)(m.used >> 20);
}

static void one_cycle(const unsigned char *in, unsigned char *a, unsigned char *b, int gpu)
{
    static const unsigned char key[16] = "unload-key-0123", iv[16] = "unload-iv-012345";
    test_env env;
    EVP_CIPHER *g, *d;
    EVP_CIPHER_CTX *x;
    size_t la = 0, lb = 0;
    int outl = 0;

    if (!test_env_open(&env))
        exit(1);
    if (gpu && !test_gpu_available(&env)) {      /* waits for the start-up */
        printf("SKIP: no usable GPU\n");
        exit(TEST_SKIP);
    }
    g = api_fetch(&env, "AES-128-CTR", "gpuaes");
    d = api_fetch(&env, "AES-128-CTR", "default");
    CHECK(api_crypt(g, 1, key, iv, NULL, 0, in, BIG, a, &la, NULL, 1));
    CHECK(api_crypt(d, 1, key, iv, NULL, 0, in, BIG, b, &lb, NULL, 1));
    CHECK(la == BIG && lb == BIG && memcmp(a, b, BIG) == 0);
    /* A stream of 16 KiB updates: past the ramp it takes keystream windows. */
    x = EVP_CIPHER_CTX_new();
    CHECK(x != NULL && EVP_EncryptInit_ex2(x, g, key, iv, NULL));
    for (size_t off = 0; off < BIG; off += 16384)
        CHECK(EVP_EncryptUpdate(x, a + off, &outl, in + off, 16384) && outl == 16384);
    CHECK(memcmp(a, b, BIG) == 0);
    EVP_CIPHER_CTX_free(x);
    EVP_CIPHER_free(g);
    EVP_CIPHER_free(d);
    test_env_close(&env);
}

int main(int argc, char **argv)
{
    int gpu = argc > 1 && strcmp(argv[1], "--gpu") == 0;
    /* The _emu twin runs the same command against the emulated module (its
     * directory, test/CMakeLists.txt): it makes no CUDA context, and NVML's
     * whole-device figure then only shows the other tests running. */
    const char *dir = getenv("GPUAES_MODULE_DIR");
    int emulated = dir != NULL && strstr(dir, "/emu") != NULL;
    unsigned char *in = malloc(BIG), *a = malloc(BIG), *b = malloc(BIG);
    long threads0 = 0, fds0 = 0, rss0 = 0, dev0 = -1;

    if (in == NULL || a == NULL || b == NULL)
        return 1;
    test_seed(11);
    test_rand_bytes(in, BIG);
    (void)device_used_mib();            /* NVML's own files open before the count */
    for (int i = 0; i < CYCLES && test_failures == 0; i++) {
        one_cycle(in, a, b, gpu);
        if (i == WARMUP - 1) {
            threads0 = count_dir("/proc/self/task");
            fds0 = count_dir("/proc/self/fd");
            rss0 = rss_kib();
            dev0 = device_used_mib();
        }
    }
    {
        long threads = count_dir("/proc/self/task"), fds = count_dir("/proc/self/fd");
        long rss = rss_kib(), dev = device_used_mib();

        printf("after %d cycles: threads %ld -> %ld, fds %ld -> %ld, RSS %ld -> %ld KiB, "
               "device %ld -> %ld MiB\n", CYCLES, threads0, threads, fds0, fds, rss0, rss, dev0, dev);
        CHECKF(threads == threads0, "threads grew: %ld -> %ld", threads0, threads);
        CHECKF(fds == fds0, "open files grew: %ld -> %ld", fds0, fds);
#if !defined(__SANITIZE_ADDRESS__)
        /* Under ASan freed memory sits in its quarantine, so RSS grows
         * regardless; LeakSanitizer checks what is left at exit instead. */
        CHECKF(rss - rss0 <= 16 * 1024, "RSS grew by %ld KiB", rss - rss0);
#endif
        /* Whole-device figures: meaningful only for the run that uses the
         * GPU, and only alone on it (api.cmake runs it serially). */
        if (gpu && !emulated && dev0 >= 0 && dev >= 0)
            CHECKF(dev - dev0 <= 64, "device memory grew by %ld MiB", dev - dev0);
    }
    free(in);
    free(a);
    free(b);
    return test_report("unload");
}
