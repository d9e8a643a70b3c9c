/*
 * test_direct.c - registration for DMA in the GPU layer itself
 * (gpuaes_gpu_host_register, include/gpuaes_gpu.h): jobs whose in and out lie
 * in a registered memfd mapping (as gpuaesd's client segments) run "direct",
 * and must give exactly what the same job gives through the staging: output,
 * done, iv, iv_end, ghash, status, in place or not, for every op, at lengths
 * across the pipeline's chunk ramp; four threads at once in one range; an
 * unregister racing a running job; the registry's refusals.
 *
 *   test_direct [--fault alloc|copyin|launch|copyout|sync]
 *
 * With a fault (set before the GPU starts) both paths fail at the same
 * chunk: the same done prefix and state.  Built twice: against the real
 * layer (label gpu; 77 without a usable GPU) and the emulator.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gpuaes_gpu.h"
#include "testutil.h"

#define SEG ((size_t)96 << 20)

static unsigned char *seg;

typedef struct {
    gpuaes_op op;
    size_t len, in_off, out_off;   /* in the segment (direct) */
    unsigned char key[32], iv[16], h[16];
    size_t keylen;
} job_spec;

static void run(const job_spec *s, const gpuaes_key *k, const unsigned char *in, unsigned char *out, gpuaes_job *j)
{
    memset(j, 0, sizeof(*j));
    j->op = s->op;
    j->key = k;
    memcpy(j->iv, s->iv, 16);
    memcpy(j->h, s->h, 16);
    j->in = in;
    j->out = out;
    j->len = s->len;
    gpuaes_gpu_run(j);
}

/* One job staged (heap buffers) and direct (the segment); 1 when they agree. */
static int check_one(const job_spec *s, const unsigned char *input, int want_direct)
{
    gpuaes_key *k = gpuaes_key_new(s->key, s->keylen);
    int in_place = s->in_off == s->out_off, ok = 1;
    unsigned char *a = malloc(s->len), *b = in_place ? a : malloc(s->len);
    gpuaes_job js, jd;

    if (k == NULL || a == NULL || b == NULL) {
        CHECK(!"out of memory");
        ok = 0;
        goto out;
    }
    memcpy(a, input, s->len);
    memcpy(seg + s->in_off, input, s->len);
    run(s, k, a, b, &js);
    run(s, k, seg + s->in_off, seg + s->out_off, &jd);
    CHECK(js.direct == 0);
    if (jd.done > 0 && jd.direct != want_direct) {
        CHECK(jd.direct == want_direct);
        ok = 0;
    }
    if (js.status != jd.status || js.done != jd.done || memcmp(js.iv, jd.iv, 16) != 0
        || memcmp(js.iv_end, jd.iv_end, 16) != 0 || memcmp(js.ghash, jd.ghash, 16) != 0
        || memcmp(b, seg + s->out_off, js.done) != 0) {
        fprintf(stderr, "op %d len %zu in %zu out %zu: staged status %d done %zu, direct status %d done %zu (%s)\n",
                (int)s->op, s->len, s->in_off, s->out_off, (int)js.status, js.done, (int)jd.status, jd.done,
                jd.error);
        CHECK(!"direct and staged differ");
        ok = 0;
    }
out:
    gpuaes_key_free(k);
    if (b != a)
        free(b);
    free(a);
    return ok;
}

/* A random job of op (a random one when op < 0) of len bytes in [lo, lo + span). */
static void make_job(job_spec *s, int op, size_t len, size_t lo, size_t span, int in_place)
{
    static const size_t keylens[] = { 16, 24, 32 };

    memset(s, 0, sizeof(*s));
    s->op = (gpuaes_op)(op >= 0 ? op : (int)test_rand_below(GPUAES_GCM_DECRYPT + 1));
    if (!gpuaes_gpu_supports(s->op))
        s->op = GPUAES_CTR128;
    s->len = len;
    s->keylen = keylens[test_rand_below(3)];
    test_rand_bytes(s->key, s->keylen);
    test_rand_bytes(s->iv, 16);
    if (test_rand_below(4) == 0)
        memset(s->iv + 12, 0xff, 4);   /* counters about to wrap */
    if (s->op == GPUAES_GCM_ENCRYPT || s->op == GPUAES_GCM_DECRYPT)
        test_rand_bytes(s->h, 16);
    s->in_off = lo + 16 * test_rand_below((span / 2 - len) / 16 + 1);
    s->out_off = in_place ? s->in_off : lo + span / 2 + 16 * test_rand_below((span / 2 - len) / 16 + 1);
}

static unsigned char *random_input(size_t len)
{
    unsigned char *p = malloc(len);

    if (p != NULL)
        test_rand_bytes(p, len);
    return p;
}

/* Every op, lengths across the chunk ramp (256 KiB first chunk doubling to
 * 4 MiB: 1 to 12 chunks), in place and not. */
static void every_op(int want_direct)
{
    static const size_t lens[] = { 16, 4096, (256 << 10) + 16, (1 << 20) + 48, (3 << 20) + 32, (9 << 20) + 16,
                                   (24 << 20) };
    unsigned char *input = random_input((size_t)24 << 20);

    for (int op = 0; input != NULL && op <= GPUAES_GCM_DECRYPT; op++)
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
            for (int in_place = 0; in_place < 2; in_place++) {
                job_spec s;

                make_job(&s, op, lens[i], 0, SEG, in_place);
                check_one(&s, input, want_direct);
            }
    free(input);
}

/* Four threads at once, each in its own quarter of the one range (gpuaesd
 * with several jobs in flight per client). */
static pthread_mutex_t rand_lock = PTHREAD_MUTEX_INITIALIZER; /* testutil's generator is not thread-safe */

static void *quarter_main(void *arg)
{
    size_t q = (size_t)(uintptr_t)arg, quarter = SEG / 4;
    unsigned char *input;

    pthread_mutex_lock(&rand_lock);
    input = random_input((size_t)8 << 20);
    pthread_mutex_unlock(&rand_lock);
    for (int i = 0; input != NULL && i < 12; i++) {
        job_spec s;

        pthread_mutex_lock(&rand_lock);
        make_job(&s, -1, 16 * (1 + test_rand_below(((size_t)8 << 20) / 16)), q * quarter, quarter,
                 test_rand_below(2));
        pthread_mutex_unlock(&rand_lock);
        check_one(&s, input, 1);
    }
    free(input);
    return NULL;
}

typedef struct { const job_spec *s; const gpuaes_key *k; gpuaes_job j; } bg_job;

static void *bg_main(void *arg)
{
    bg_job *b = arg;

    run(b->s, b->k, seg + b->s->in_off, seg + b->s->out_off, &b->j);
    return NULL;
}

/* Unregister while a 32 MiB job runs in the range: the call waits for it (or
 * comes first, and the job runs staged); the job is right either way. */
static void unregister_race(void)
{
    size_t len = (size_t)32 << 20;
    unsigned char *input = random_input(len), *want = malloc(len);
    job_spec s;
    gpuaes_key *k;
    gpuaes_job ref;
    bg_job b;
    pthread_t t;
    char err[160];

    make_job(&s, GPUAES_CTR128, len, 0, 2 * len, 0);
    s.in_off = 0;
    s.out_off = len;
    k = gpuaes_key_new(s.key, s.keylen);
    CHECK(input != NULL && want != NULL && k != NULL);
    if (input == NULL || want == NULL || k == NULL)
        goto out;
    run(&s, k, input, want, &ref);
    memcpy(seg, input, len);
    b.s = &s;
    b.k = k;
    CHECK(pthread_create(&t, NULL, bg_main, &b) == 0);
    usleep(1000);
    CHECK(gpuaes_gpu_host_unregister(seg, err) == 0);
    pthread_join(t, NULL);
    printf("unregister race: the job ran %s\n", b.j.direct ? "direct (unregister waited)" : "staged");
    CHECK(b.j.status == ref.status && b.j.done == ref.done && memcmp(seg + len, want, ref.done) == 0);
    /* no longer registered: staged, and still right */
    run(&s, k, seg, seg + len, &b.j);
    CHECK(b.j.direct == 0 && b.j.done == ref.done && memcmp(seg + len, want, ref.done) == 0);
out:
    gpuaes_key_free(k);
    free(input);
    free(want);
}

static int register_seg(char err[160])
{
    int rc;

    while ((rc = gpuaes_gpu_host_register(seg, SEG, err)) == 1)   /* the GPU is starting */
        usleep(10 * 1000);
    return rc;
}

static gpuaes_fault fault_of(const char *name)
{
    static const char *names[] = { "none", "alloc", "copyin", "launch", "copyout", "sync" };

    for (int i = 0; i < 6; i++)
        if (strcmp(name, names[i]) == 0)
            return (gpuaes_fault)i;
    fprintf(stderr, "unknown fault %s\n", name);
    exit(2);
}

int main(int argc, char **argv)
{
    gpuaes_gpu_settings st = GPUAES_GPU_SETTINGS_DEFAULT;
    char err[160];
    pthread_t t[4];
    int fd;

    if (argc == 3 && strcmp(argv[1], "--fault") == 0)
        st.fault = fault_of(argv[2]);
    gpuaes_gpu_configure(&st);
    test_seed(2222);
    if (!gpuaes_gpu_wait()) {
        printf("skipped: %s\n", gpuaes_gpu_description());
        return 77;
    }
    fd = memfd_create("gpuaes-test", MFD_CLOEXEC);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)SEG) == 0);
    seg = mmap(NULL, SEG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(seg != MAP_FAILED);
    if (fd < 0 || seg == MAP_FAILED)
        return test_report("direct");
    close(fd);

    /* the registry's refusals */
    CHECK(gpuaes_gpu_host_register(NULL, 4096, err) == -1);
    CHECK(gpuaes_gpu_host_unregister(seg, err) == -1);          /* not registered */
    CHECK(register_seg(err) == 0);
    printf("registered %zu MiB%s%s\n", SEG >> 20, err[0] ? ": " : "", err);
    CHECK(gpuaes_gpu_host_register(seg + 4096, 4096, err) == -1); /* overlaps */
    CHECK(gpuaes_gpu_host_unregister(seg + 4096, err) == -1);    /* not a registered base */

    every_op(1);
    for (uintptr_t i = 0; i < 4; i++)
        CHECK(pthread_create(&t[i], NULL, quarter_main, (void *)i) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    unregister_race();
    /* registered again at once (the range is free), then unregistered for good */
    CHECK(register_seg(err) == 0);
    CHECK(gpuaes_gpu_host_unregister(seg, err) == 0);
    munmap(seg, SEG);
    gpuaes_gpu_shutdown();
    return test_report("direct");
}
