/*
 * test_service_devices.c - several GPUs (service/devices.c; docs/SERVICE.md,
 * "Several GPUs"), with two emulated devices (GPUAES_EMU_DEVICES=2, which
 * the service and its worker inherit):
 *  - the service starts a worker for device 1 once its own GPU is up;
 *  - connections are spread over both (least loaded at the first hello),
 *    and jobs on each are right, bit for bit;
 *  - STATUS adds up both processes, DEVICES and `--status` list each GPU;
 *  - a worker killed (SIGKILL) loses its clients' connections only: the
 *    others go on, new connections go to the GPU that is left;
 *  - GPUAESD_DEVICES=0 uses one GPU; a listed device that does not exist
 *    gets no client;
 *  - the service's exit ends its workers, and so does its death (SIGKILL).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service_util.h"
#include "testutil.h"

int svc_run_devices(const char *service);

enum { CLIENTS = 4, JOBS = 8 };

/* Running, not a zombie. */
static int alive(pid_t pid)
{
    char path[64], state = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    if (fscanf(f, "%*d (%*[^)]) %c", &state) != 1)
        state = 0;
    fclose(f);
    return state != 0 && state != 'Z';
}

/* Waits until DEVICES lists `want` GPUs, the last one past its start-up. */
static int wait_devices(const char *dir, gpuaesd_devices_reply *r, uint32_t want)
{
    for (int i = 0; i < 1000; i++) {
        if (gpuaesd_query_devices(dir, r, 2000) == 0 && r->n == want
            && r->dev[want - 1].gpu_up != GPUAESD_GPU_STARTING)
            return 0;
        usleep(10 * 1000);
    }
    return -1;
}

/* Waits until device 0 serves n connections (a closed one is counted out
 * once its thread sees the end): 0, or -1. */
static int wait_clients0(const char *dir, gpuaesd_devices_reply *r, uint32_t n)
{
    for (int i = 0; i < 500; i++) {
        if (gpuaesd_query_devices(dir, r, 2000) == 0 && r->dev[0].clients == n)
            return 0;
        usleep(10 * 1000);
    }
    return -1;
}

static void connect_all(const char *dir, gpuaesd_conn *c[CLIENTS])
{
    char err[256];

    for (int i = 0; i < CLIENTS; i++) {
        c[i] = gpuaesd_connect(dir, NULL, (size_t)1 << 20, 20000, err, sizeof(err));
        CHECK(c[i] != NULL);
    }
}

static void close_all(gpuaesd_conn *c[CLIENTS])
{
    for (int i = 0; i < CLIENTS; i++)
        gpuaesd_close(c[i]);
}

/* `gpuaesd --status` prints a line for device 1. */
static int status_lists_device1(const char *service, const char *dir)
{
    char cmd[512], line[512];
    int found = 0;
    FILE *p;

    snprintf(cmd, sizeof(cmd), "%s --socket-dir %s --status", service, dir);
    if ((p = popen(cmd, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), p) != NULL)
        found |= strncmp(line, "device 1 (pid ", 14) == 0;
    pclose(p);
    return found;
}

static void two_gpus(const char *service)
{
    char dir[64];
    gpuaesd_conn *c[CLIENTS];
    gpuaesd_devices_reply *r = calloc(1, sizeof(*r));
    gpuaesd_status_reply st;
    pid_t pid, worker;
    uint32_t on1;
    int ok = 0, dead = 0;

    svc_tmpdir(dir);
    pid = svc_start_fg(service, dir);
    CHECK(r != NULL && wait_devices(dir, r, 2) == 0);
    if (r == NULL || r->n != 2) {
        svc_stop(pid);
        svc_rmdir(dir);
        free(r);
        return;
    }
    CHECK(r->dev[0].device == 0 && r->dev[1].device == 1 && r->dev[0].pid == (uint32_t)pid);
    CHECK(r->dev[1].gpu_up == GPUAESD_GPU_READY && r->dev[1].pid != r->dev[0].pid);
    worker = (pid_t)r->dev[1].pid;
    connect_all(dir, c);
    for (int i = 0; i < CLIENTS; i++)
        for (int j = 0; c[i] != NULL && j < JOBS; j++)
            CHECK(svc_job_check(c[i], 0, (size_t)256 << 10, 1, 20000) == 1);
    /* Spread: both GPUs serve some (two each, unless a query's connection
     * was still counted on device 0 when one came). */
    CHECK(gpuaesd_query_devices(dir, r, 2000) == 0 && r->n == 2);
    on1 = r->dev[1].clients;
    fprintf(stderr, "device 0: %u clients (this query's included), %llu jobs; device 1: %u clients, %llu jobs\n",
            r->dev[0].clients, (unsigned long long)r->dev[0].jobs_gpu, on1, (unsigned long long)r->dev[1].jobs_gpu);
    CHECK(on1 >= 1 && on1 <= CLIENTS - 1);
    CHECK(r->dev[0].jobs_gpu >= JOBS && r->dev[1].jobs_gpu >= JOBS * on1);
    CHECK(r->dev[0].jobs_gpu + r->dev[1].jobs_gpu >= JOBS * CLIENTS);
    CHECK(gpuaesd_query_status(dir, &st, 2000) == 0);
    CHECK(st.jobs_gpu >= JOBS * CLIENTS && strstr(st.gpu, "and 1 more GPU") != NULL);
    CHECK(status_lists_device1(service, dir));
    /* The worker killed: its two clients' connections die, the others work. */
    kill(worker, SIGKILL);
    for (int i = 0; i < CLIENTS; i++) {
        int rc = c[i] != NULL ? svc_job_check(c[i], 0, (size_t)64 << 10, 1, 5000) : -2;

        ok += rc == 1;
        dead += rc == -1;
    }
    CHECK(ok == CLIENTS - (int)on1 && dead == (int)on1);
    close_all(c);
    CHECK(wait_devices(dir, r, 2) == 0 && r->dev[1].gpu_up == GPUAESD_GPU_NONE);
    connect_all(dir, c);               /* all on device 0 now */
    for (int i = 0; i < CLIENTS; i++)
        CHECK(c[i] != NULL && svc_job_check(c[i], 0, (size_t)64 << 10, 1, 20000) == 1);
    CHECK(wait_clients0(dir, r, CLIENTS + 1) == 0);
    close_all(c);
    CHECK(svc_stop(pid) == 0);
    CHECK(!alive(worker));        /* the service waited for it */
    svc_rmdir(dir);
    free(r);
}

/* GPUAESD_DEVICES=list: `want` GPUs listed, the second (if any) absent. */
static void listed(const char *service, const char *list, uint32_t want)
{
    char dir[64];
    gpuaesd_conn *c[CLIENTS];
    gpuaesd_devices_reply *r = calloc(1, sizeof(*r));
    pid_t pid, worker = 0;

    svc_tmpdir(dir);
    setenv("GPUAESD_DEVICES", list, 1);
    pid = svc_start_fg(service, dir);
    unsetenv("GPUAESD_DEVICES");
    if (want == 1)
        usleep(300 * 1000);            /* a worker would have been started by now */
    CHECK(r != NULL && wait_devices(dir, r, want) == 0);
    if (r != NULL && want == 2 && r->n == 2) {
        CHECK(r->dev[1].gpu_up == GPUAESD_GPU_NONE && strstr(r->dev[1].gpu, "no usable GPU") != NULL);
        worker = (pid_t)r->dev[1].pid;
    }
    connect_all(dir, c);
    for (int i = 0; i < CLIENTS; i++)
        CHECK(c[i] != NULL && svc_job_check(c[i], 0, (size_t)64 << 10, 1, 20000) == 1);
    CHECK(r != NULL && wait_clients0(dir, r, CLIENTS + 1) == 0 && r->n == want);
    close_all(c);
    if (worker != 0) {                 /* the service killed: its worker ends by itself */
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        for (int i = 0; i < 1000 && alive(worker); i++)
            usleep(10 * 1000);
        CHECK(!alive(worker));
    } else {
        CHECK(svc_stop(pid) == 0);
    }
    svc_rmdir(dir);
    free(r);
}

int svc_run_devices(const char *service)
{
    setenv("GPUAES_EMU_DEVICES", "2", 1);
    two_gpus(service);
    listed(service, "0", 1);
    listed(service, "0,5", 2);
    unsetenv("GPUAES_EMU_DEVICES");
    return test_report("service devices");
}
