/*
 * test_service.c - gpuaesd end to end (docs/SERVICE.md, "Tests").
 *
 *   test_service diff SERVICE [--gpu]   random jobs of every op, bit for bit
 *   test_service kill SERVICE           SIGKILL / SIGSTOP while a client waits
 *   test_service fuzz|uid|dir SERVICE   hostile input (test_service_hostile.c)
 *   test_service inflight SERVICE       several jobs in flight, throttling (the same file)
 *   test_service spare SERVICE          spare segments (test_service_spare.c)
 *
 * diff starts the service the way a client will (detached, from its path;
 * four clients at once, which must all get the one service) and checks every job against the default provider (service_util.c).
 * --gpu (the real service): skipped (77) when it has no usable GPU.
 * The kept client's segment must end registered for DMA and every job run
 * direct; with GPUAES_EMU_REGISTER_FAIL=1 (the emulated registration fails,
 * in the service, which inherits it) or GPUAESD_DMA=0 (the service does not
 * register) none, and every job still right.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "service_util.h"
#include "testutil.h"

int svc_run_fuzz(const char *service);
int svc_run_uid(const char *service);
int svc_run_dir(const char *service);
int svc_run_activation(const char *service);
int svc_run_inflight(const char *service);
int svc_run_load(const char *service);
int svc_run_spare(const char *service);
int svc_run_devices(const char *service);

#define SEG ((size_t)8 << 20)

static long long now_ms(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* SIGTERM to the service of dir (not our child), then until it is gone. */
static void stop_detached(const char *dir)
{
    gpuaesd_status_reply st;

    if (gpuaesd_query_status(dir, &st, 2000) == 0)
        kill((pid_t)st.service_pid, SIGTERM);
    CHECK(svc_wait_gone(dir, 20000) == 0);
}

/* 0 once the service's GPU is up and warm, 77 when it has none. */
static int gpu_ready(const char *dir)
{
    const int up = svc_wait_warm(dir, 30000);

    return up == GPUAESD_GPU_READY ? 0 : up == GPUAESD_GPU_NONE ? 77 : 1;
}

typedef struct { const char *dir, *service; gpuaesd_conn *c; } starter;

static void *start_one(void *arg)
{
    starter *s = arg;
    char err[256];

    s->c = gpuaesd_connect(s->dir, s->service, SEG, 20000, err, sizeof(err));
    if (s->c == NULL)
        fprintf(stderr, "connect: %s\n", err);
    return NULL;
}

/* Four clients start the service at once: all connect, to one service
 * (the lock decides; the others give way).  The first connection is kept. */
static gpuaesd_conn *start_race(const char *dir, const char *service)
{
    starter s[4];
    pthread_t t[4];
    gpuaesd_status_reply st;

    for (int i = 0; i < 4; i++) {
        s[i] = (starter){ dir, service, NULL };
        CHECK(pthread_create(&t[i], NULL, start_one, &s[i]) == 0);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    for (int i = 1; i < 4; i++) {
        CHECK(s[i].c != NULL);
        gpuaesd_close(s[i].c);
    }
    /* 4 + this query; the bound is for a loaded machine (TSan on 2 cores). */
    memset(&st, 0, sizeof(st));
    CHECK(gpuaesd_query_status(dir, &st, 10000) == 0);
    if (st.clients_total != 5)
        fprintf(stderr, "clients_total %llu, not 5\n", (unsigned long long)st.clients_total);
    CHECK(st.clients_total == 5);
    return s[0].c;
}

/* What the environment asks of the service's registration: 0 normal, 1
 * failing (emulated), 2 turned off. */
static int dma_mode(void)
{
    const char *f = getenv("GPUAES_EMU_REGISTER_FAIL"), *d = getenv("GPUAESD_DMA");

    if (d != NULL && strcmp(d, "0") == 0)
        return 2;
    return f != NULL && *f != '\0' && *f != '0';
}

/* Registration runs in the background: wait until the three clients that
 * left are gone and the kept one's registration is over, so that every job
 * after it must run direct. */
static void wait_dma_settled(const char *dir)
{
    gpuaesd_status_reply st;
    int mode = dma_mode();

    for (int i = 0; i < 400; i++) {
        if (gpuaesd_query_status(dir, &st, 10000) == 0 && st.clients == 2
            && (mode == 2 || st.segments_registered + st.register_failed == (mode == 0 ? 1 : 4)))
            return;
        usleep(50 * 1000);
    }
    CHECK(!"the registration did not settle within 20 s");
}

/* The DMA counters: the kept client registered (or, told to fail, all four
 * hellos failed), jobs direct; and `--status` prints them. */
static void check_dma(const gpuaesd_status_reply *st, const char *service, const char *dir)
{
    int fail = dma_mode() == 1, off = dma_mode() == 2;
    unsigned long long regs = ~0ull, failed = ~0ull, direct = ~0ull;
    char cmd[512], line[256];
    FILE *p;

    printf("dma: %llu registered, %llu failed, %llu jobs direct (%llu bytes)\n",
           (unsigned long long)st->segments_registered, (unsigned long long)st->register_failed,
           (unsigned long long)st->jobs_direct, (unsigned long long)st->bytes_direct);
    if (off) {                         /* registration turned off: nothing tried */
        CHECK(st->segments_registered == 0 && st->register_failed == 0 && st->jobs_direct == 0);
    } else if (fail) {
        CHECK(st->segments_registered == 0 && st->register_failed == 4 && st->jobs_direct == 0
              && st->bytes_direct == 0);
    } else {
        CHECK(st->segments_registered == 1 && st->register_failed == 0);
        CHECK(st->jobs_direct == st->jobs && st->bytes_direct == st->bytes_gpu);
    }
    snprintf(cmd, sizeof(cmd), "%s --socket-dir %s --status", service, dir);
    CHECK((p = popen(cmd, "r")) != NULL);
    while (p != NULL && fgets(line, sizeof(line), p) != NULL)
        if (strncmp(line, "dma: ", 5) == 0)
            CHECK(sscanf(line, "dma: %llu segments registered, %llu failed; %llu jobs direct", &regs, &failed,
                              &direct) == 3);
    if (p != NULL)
        CHECK(pclose(p) == 0);
    CHECK(regs == st->segments_registered && failed == st->register_failed && direct == st->jobs_direct);
}

/* The service started by the client library keeps only its share of the
 * starter's environment (client.c, service_env_keeps). */
static void check_service_env(const char *dir)
{
    gpuaesd_status_reply st;
    char path[64], env[65536];
    size_t n = 0;
    int own = 0, app = 0;
    FILE *f;

    CHECK(gpuaesd_query_status(dir, &st, 5000) == 0);
    snprintf(path, sizeof(path), "/proc/%u/environ", st.service_pid);
    if ((f = fopen(path, "r")) != NULL) {
        n = fread(env, 1, sizeof(env) - 1, f);
        fclose(f);
    }
    env[n] = '\0';
    for (size_t i = 0; i < n; i += strlen(env + i) + 1) {
        own |= strcmp(env + i, "GPUAESD_FOR_THE_SERVICE=1") == 0;
        app |= strncmp(env + i, "GPUAES_NOT_FOR_THE_SERVICE=", 27) == 0;
    }
    CHECK(n > 0 && own && !app);
}

/* Job rings on (1), or off at either end (GPUAESD_RING=0, GPUAES_SERVICE_RING=0). */
static int ring_mode(void)
{
    const char *svc = getenv("GPUAESD_RING"), *cli = getenv("GPUAES_SERVICE_RING");

    return !(svc != NULL && strcmp(svc, "0") == 0) && !(cli != NULL && strcmp(cli, "0") == 0);
}

static int run_diff(const char *service, int gpu)
{
    char dir[64], cmd[512], line[256];
    gpuaesd_conn *c;
    gpuaesd_status_reply st;
    FILE *p;
    int rc;

    svc_tmpdir(dir);
    setenv("GPUAES_NOT_FOR_THE_SERVICE", "1", 1);   /* an application's: not passed on */
    setenv("GPUAESD_FOR_THE_SERVICE", "1", 1);      /* the service's own: passed on */
    c = start_race(dir, service);
    unsetenv("GPUAES_NOT_FOR_THE_SERVICE");
    unsetenv("GPUAESD_FOR_THE_SERVICE");
    if (c == NULL)
        return 1;
    check_service_env(dir);
    if ((rc = gpu_ready(dir)) != 0) {   /* 77 (skipped) only for the real service, --gpu */
        gpuaesd_close(c);
        stop_detached(dir);
        svc_rmdir(dir);
        return gpu ? rc : 1;
    }
    wait_dma_settled(dir);
    for (unsigned op = 1; op <= GPUAESD_OP_LAST; op++)
        for (int i = 0; i < 12; i++)
            CHECK(svc_job_check(c, op, i < 8 ? (size_t)64 << 10 : (size_t)3 << 20, 1, 60000) == 1);
    for (int i = 0; i < 40; i++)
        CHECK(svc_job_check(c, 0, (size_t)256 << 10, 1, 60000) == 1);
    CHECK(gpuaesd_query_status(dir, &st, 2000) == 0);
    printf("%llu jobs, %llu bytes on the (emulated) GPU\n", (unsigned long long)st.jobs,
           (unsigned long long)st.bytes_gpu);
    CHECK(st.jobs == GPUAESD_OP_LAST * 12 + 40 && st.jobs_gpu == st.jobs && st.malformed == 0 && st.clients == 2);
    /* every job through the job ring, unless either end turned rings off */
    printf("%llu jobs through the ring\n", (unsigned long long)st.jobs_ring);
    CHECK(st.jobs_ring == (ring_mode() ? st.jobs : 0));
    check_dma(&st, service, dir);
    /* --status prints the same */
    snprintf(cmd, sizeof(cmd), "%s --socket-dir %s --status", service, dir);
    CHECK((p = popen(cmd, "r")) != NULL);
    CHECK(p != NULL && fgets(line, sizeof(line), p) != NULL && strncmp(line, "gpuaesd: serving", 16) == 0);
    if (p != NULL)
        CHECK(pclose(p) == 0);
    gpuaesd_close(c);
    stop_detached(dir);
    snprintf(cmd, sizeof(cmd), "%s --socket-dir %s --status >/dev/null", service, dir);
    CHECK(WEXITSTATUS(system(cmd)) == 3);   /* not running */
    svc_rmdir(dir);
    return test_report("service diff");
}

typedef struct { pid_t pid; int sig; long ms; } later;

static void *signal_later(void *arg)
{
    later *l = arg;

    usleep((useconds_t)l->ms * 1000);
    kill(l->pid, l->sig);
    return NULL;
}

/* A job while the service is killed (SIGKILL) or stopped (SIGSTOP) after ms:
 * the call must fail, in [min_ms, max_ms). */
static void fault_during_job(gpuaesd_conn *c, pid_t pid, int sig, int timeout_ms, long min_ms, long max_ms)
{
    later l = { pid, sig, 300 };
    pthread_t t;
    long long t0 = now_ms(), took;

    CHECK(pthread_create(&t, NULL, signal_later, &l) == 0);
    CHECK(svc_job_check(c, 0, (size_t)64 << 10, 1, timeout_ms) == -1);
    took = now_ms() - t0;
    pthread_join(t, NULL);
    if (took < min_ms || took >= max_ms)
        fprintf(stderr, "signal %d: the call failed after %lld ms, not in [%ld, %ld)\n", sig, took, min_ms, max_ms);
    CHECK(took >= min_ms && took < max_ms);
}

static pid_t service_pid(const char *dir)
{
    gpuaesd_status_reply st;

    return gpuaesd_query_status(dir, &st, 5000) == 0 ? (pid_t)st.service_pid : -1;
}

static int run_kill(const char *service)
{
    char dir[64], err[256];
    gpuaesd_conn *c;
    pid_t pid, pid2;

    svc_tmpdir(dir);
    setenv("GPUAES_EMU_JOB_DELAY_MS", "3000", 1);     /* the service inherits it: every job takes 3 s */
    setenv("GPUAESD_WARM", "0", 1);                   /* (and no warm-up of 8 such jobs) */
    c = gpuaesd_connect(dir, service, (size_t)1 << 20, 20000, err, sizeof(err));
    CHECK(c != NULL && (pid = service_pid(dir)) > 0);
    if (c == NULL)
        return test_report("service kill");
    /* killed at 300 ms: the client sees the socket close at once */
    fault_during_job(c, pid, SIGKILL, 20000, 250, 5000);
    CHECK(svc_job_check(c, 0, 4096, 1, 1000) == -1);   /* the connection stays dead */
    gpuaesd_close(c);
    /* a new service starts over the dead one's socket; stopped at 300 ms:
     * the client's timeout (1.5 s) bounds the call */
    c = gpuaesd_connect(dir, service, (size_t)1 << 20, 20000, err, sizeof(err));
    CHECK(c != NULL && (pid2 = service_pid(dir)) > 0 && pid2 != pid);
    if (c != NULL) {
        fault_during_job(c, pid2, SIGSTOP, 1500, 1500, 5000);
        kill(pid2, SIGKILL);
        kill(pid2, SIGCONT);
        gpuaesd_close(c);
    }
    /* and again, now without the delay: jobs are right */
    unsetenv("GPUAES_EMU_JOB_DELAY_MS");
    CHECK(svc_wait_gone(dir, 10000) == 0);
    c = gpuaesd_connect(dir, service, (size_t)1 << 20, 20000, err, sizeof(err));
    CHECK(c != NULL);
    for (int i = 0; c != NULL && i < 16; i++)
        CHECK(svc_job_check(c, 0, (size_t)64 << 10, 1, 20000) == 1);
    gpuaesd_close(c);
    stop_detached(dir);
    unsetenv("GPUAESD_WARM");
    svc_rmdir(dir);
    return test_report("service kill");
}

/* The service warms its GPU layer before it serves (service/warm.c): with
 * the emulated layer's first job of each op taking 2.5 s (a cold layer), no
 * client job may wait that long: jobs are answered BUSY at once while the
 * service warms up, STATUS says so, and once it says READY every op runs on
 * the GPU without the cold wait. */
static int run_warm(const char *service)
{
    enum { COLD_MS = 2500, BOUND_MS = 1200 };
    char dir[64], err[256];
    gpuaesd_status_reply st;
    gpuaesd_conn *c;
    int saw_warming = 0, ready = 0;
    long long worst = 0, t0;

    svc_tmpdir(dir);
    setenv("GPUAES_EMU_INIT_MS", "200", 1);   /* the service inherits both */
    setenv("GPUAES_EMU_COLD_MS", "2500", 1);
    c = gpuaesd_connect(dir, service, (size_t)1 << 20, 20000, err, sizeof(err));
    CHECK(c != NULL);
    unsetenv("GPUAES_EMU_COLD_MS");
    unsetenv("GPUAES_EMU_INIT_MS");
    if (c == NULL)
        return test_report("service warm");
    t0 = now_ms();
    while (!ready && now_ms() - t0 < 60000) {
        for (unsigned op = GPUAESD_OP_ECB_ENCRYPT; op <= GPUAESD_OP_LAST; op++) {
            long long t = now_ms();

            CHECK(svc_job_check(c, op, (size_t)64 << 10, 0, 20000) == 1);
            if (now_ms() - t > worst)
                worst = now_ms() - t;
        }
        CHECK(gpuaesd_query_status(dir, &st, 5000) == 0);
        if (st.gpu_up == GPUAESD_GPU_STARTING)
            saw_warming |= strcmp(st.gpu, "GPU warming up") == 0;
        ready = st.gpu_up == GPUAESD_GPU_READY;
        usleep(20 * 1000);
    }
    CHECK(ready);
    CHECK(saw_warming);
    /* warm: every op on the GPU, none of them cold */
    for (unsigned op = GPUAESD_OP_ECB_ENCRYPT; ready && op <= GPUAESD_OP_LAST; op++) {
        long long t = now_ms();

        CHECK(svc_job_check(c, op, (size_t)64 << 10, 1, 20000) == 1);
        if (now_ms() - t > worst)
            worst = now_ms() - t;
    }
    if (worst >= BOUND_MS)
        fprintf(stderr, "a job waited %lld ms (the cold layer's %d ms)\n", worst, COLD_MS);
    CHECK(worst < BOUND_MS);
    gpuaesd_close(c);
    stop_detached(dir);
    svc_rmdir(dir);
    return test_report("service warm");
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: test_service diff|kill|fuzz|uid|dir|activation|inflight|load|warm|spare|devices SERVICE [--gpu]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    test_seed(22);
    if (strcmp(argv[1], "diff") == 0)
        return run_diff(argv[2], argc > 3 && strcmp(argv[3], "--gpu") == 0);
    if (strcmp(argv[1], "kill") == 0)
        return run_kill(argv[2]);
    if (strcmp(argv[1], "fuzz") == 0)
        return svc_run_fuzz(argv[2]);
    if (strcmp(argv[1], "uid") == 0)
        return svc_run_uid(argv[2]);
    if (strcmp(argv[1], "dir") == 0)
        return svc_run_dir(argv[2]);
    if (strcmp(argv[1], "activation") == 0)
        return svc_run_activation(argv[2]);
    if (strcmp(argv[1], "load") == 0)
        return svc_run_load(argv[2]);
    if (strcmp(argv[1], "warm") == 0)
        return run_warm(argv[2]);
    if (strcmp(argv[1], "inflight") == 0)
        return svc_run_inflight(argv[2]);
    if (strcmp(argv[1], "spare") == 0)
        return svc_run_spare(argv[2]);
    if (strcmp(argv[1], "devices") == 0)
        return svc_run_devices(argv[2]);
    return 2;
}
