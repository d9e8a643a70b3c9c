/*
 * main.c - gpuaesd: the per-user GPU service (docs/SERVICE.md).
 *
 *   gpuaesd [--socket-dir DIR] [--idle-exit SECONDS] [--jobs N] [--devices LIST] [--foreground]
 *   gpuaesd [--socket-dir DIR] --status
 *
 * --jobs N (1..64; default GPUAESD_JOBS from the environment, else 4): jobs
 * of one client connection run at once.  --idle-exit SECONDS (default
 * GPUAESD_IDLE_EXIT, else 60; 0: never): the service a provider starts keeps
 * its starter's GPUAESD_* variables, so this one sets it for those too.  --devices LIST ("all", the default,
 * or CUDA device numbers "0,2"; else GPUAESD_DEVICES): the GPUs it uses, one
 * process each (devices.c).  `--worker DEVICE` is such a process, started
 * by the service itself with its control socket as fd 3.
 *
 * One service per user and socket directory: a lock file in the directory
 * (flock, released by the kernel however the service ends) decides which of
 * two starting at once serves; the other exits 0.  Detached (the default),
 * the first process returns once the service listens (exit 0) or failed
 * (exit 1), so a starter knows when to connect.  Under a systemd socket
 * unit (service/systemd/) it serves the socket systemd passes instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuaes_gpu.h"
#include "gpuaesd_client.h"
#include "mono_clock.h"
#include "service.h"
#include "sockdir.h"

static int log_on = 1;

void gpuaesd_log(const char *fmt, ...)
{
    va_list ap;

    if (!log_on)
        return;
    va_start(ap, fmt);
    fprintf(stderr, "gpuaesd[%ld]: ", (long)getpid());
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static void usage(void)
{
    fprintf(stderr, "usage: gpuaesd [--socket-dir DIR] [--idle-exit SECONDS] [--jobs N] [--devices LIST] "
                    "[--foreground] [--status]\n");
    exit(2);
}

static int print_status(const char *dir)
{
    gpuaesd_status_reply st;

    if (gpuaesd_query_status(dir, &st, 2000) != 0) {
        printf("gpuaesd: not running\n");
        return 3;
    }
    printf("gpuaesd: serving, pid %u, up %llu.%03llu s\n", st.service_pid,
           (unsigned long long)(st.uptime_ms / 1000), (unsigned long long)(st.uptime_ms % 1000));
    printf("clients: %u now (this query included), %llu in all, %llu refused (another uid)\n", st.clients,
           (unsigned long long)st.clients_total, (unsigned long long)st.refused);
    printf("jobs: %llu answered, %llu on the GPU (%llu bytes), %llu malformed\n",
           (unsigned long long)st.jobs, (unsigned long long)st.jobs_gpu, (unsigned long long)st.bytes_gpu,
           (unsigned long long)st.malformed);
    printf("dma: %llu segments registered, %llu failed; %llu jobs direct (%llu bytes)\n",
           (unsigned long long)st.segments_registered, (unsigned long long)st.register_failed,
           (unsigned long long)st.jobs_direct, (unsigned long long)st.bytes_direct);
    printf("spare: %llu segments handed out, %u ready\n", (unsigned long long)st.segments_given,
           st.spares_ready);
    printf("rings: %llu jobs through job rings\n", (unsigned long long)st.jobs_ring);
    printf("gpu: %s\n", st.gpu);
    gpuaesd_devices_reply *d = calloc(1, sizeof(*d));
    if (d != NULL && gpuaesd_query_devices(dir, d, 2000) == 0 && d->n > 1)
        for (uint32_t i = 0; i < d->n; i++) {
            const gpuaesd_device_load *g = &d->dev[i];
            static const char *const up[] = { "starting", "serving", "no GPU" };

            printf("device %u (pid %u): %s, %u clients, %u jobs running, %u queued (%llu bytes), "
                   "%llu jobs on the GPU (%llu bytes): %s\n", g->device, g->pid, up[g->gpu_up], g->clients,
                   g->jobs_running, g->jobs_queued, (unsigned long long)g->bytes_inflight,
                   (unsigned long long)g->jobs_gpu, (unsigned long long)g->bytes_gpu, g->gpu);
        }
    free(d);
    return 0;
}

/* Detaches: the caller's process waits for the service's word on a pipe and
 * exits with it; the service goes on in a new session, cwd /, no inherited
 * descriptor, stdin/out/err on /dev/null.  Returns the pipe's write end
 * (in the service). */
static int detach(void)
{
    int p[2], null;
    pid_t pid;
    char ok = 0;

    if (pipe2(p, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
        perror("gpuaesd: fork");
        exit(1);
    }
    if (pid > 0) {
        close(p[1]);
        while (read(p[0], &ok, 1) < 0 && errno == EINTR)
            ;
        _exit(ok == 1 ? 0 : 1);
    }
    close(p[0]);
    setsid();
    if (chdir("/") != 0)
        _exit(1);
    if ((null = open("/dev/null", O_RDWR | O_NOCTTY)) < 0)
        _exit(1);
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2)
        close(null);
    log_on = 0;
    return p[1];
}

/* The directory's lock, held until exit (the kernel drops it however we
 * end): 0, or -1 when not taken (*held: another service holds it). */
static int take_lock(const char *dir, int *held)
{
    char lock[120];
    int lfd;

    *held = 0;
    if (gpuaesd_dir_file(dir, GPUAESD_LOCK_NAME, lock, sizeof(lock)) != 0)
        return -1;
    lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lfd < 0)
        return -1;
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        *held = errno == EWOULDBLOCK;
        close(lfd);
        return -1;
    }
    return 0;                          /* lfd stays open (and locked) until exit */
}

/* The lock, then the socket: systemd's (*activated), or one bound and
 * listening here; -1 when another service holds the lock (*held). */
static int listen_on(const char *dir, int *held, int *activated)
{
    struct sockaddr_un sa;
    int fd;

    *activated = 0;
    if (take_lock(dir, held) != 0 || gpuaesd_sock_addr(dir, &sa) != 0)
        return -1;
    fd = gpuaesd_activated_socket(dir);
    if (fd != -1) {
        *activated = fd >= 0;
        return fd;
    }
    unlink(sa.sun_path);               /* a dead service's socket */
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(sa.sun_path, 0600) != 0
        || listen(fd, 64) != 0) {
        gpuaesd_log("socket %s: %s", sa.sun_path, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* A new connection: only our own uid is served. */
static void accept_one(int lfd)
{
    struct ucred cr;
    socklen_t l = sizeof(cr);
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);

    if (fd < 0)
        return;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) != 0 || l != sizeof(cr) || cr.uid != geteuid()) {
        gpuaesd_count_refused();
        gpuaesd_log("refused a connection of uid %ld (pid %ld)", (long)cr.uid, (long)cr.pid);
        close(fd);
        return;
    }
    gpuaesd_serve(fd, cr.pid);
}

/* The GPU layer's settings: those of the service's life, for `device`. */
static void configure_layer(long idle_s, int device)
{
    gpuaes_gpu_settings gs = GPUAES_GPU_SETTINGS_DEFAULT;
    /* The layer keeps what the warm-up made while the service lives (an
     * idle service exits and gives it all back). */
    const long keep_s = idle_s == 0 || idle_s > 3600 ? 3600 : idle_s;   /* 0: never exits */
    if (keep_s * 1000 > (long)gs.idle_release_ms)
        gs.idle_release_ms = (unsigned)keep_s * 1000;
    gs.device = device;
    /* A/B switches for measurements (as GPUAESD_DMA): the layer's staging
     * chunk (MiB) and lanes, and the stage trace of the N-th job (to stderr:
     * with --foreground), out-of-range values ignored. */
    const char *chunk_mb = getenv("GPUAESD_STAGING_CHUNK_MB"), *lanes = getenv("GPUAESD_STAGING_LANES");
    const char *trace = getenv("GPUAESD_STAGING_TRACE");
    if (chunk_mb != NULL && strtoul(chunk_mb, NULL, 10) >= 1
        && (size_t)strtoul(chunk_mb, NULL, 10) << 20 <= GPUAES_STAGING_CHUNK_MAX)
        gs.staging_chunk = (size_t)strtoul(chunk_mb, NULL, 10) << 20;
    if (lanes != NULL && strtol(lanes, NULL, 10) >= GPUAES_STAGING_LANES_MIN
        && strtol(lanes, NULL, 10) <= GPUAES_STAGING_LANES_MAX)
        gs.staging_lanes = (int)strtol(lanes, NULL, 10);
    if (trace != NULL && strtol(trace, NULL, 10) > 0 && strtol(trace, NULL, 10) <= GPUAES_STAGING_TRACE_MAX)
        gs.staging_trace = strtol(trace, NULL, 10);
    gpuaes_gpu_configure(&gs);
}

/* The GPU layer's end, once no job can come. */
static void layer_stop(void)
{
    gpuaesd_warm_stop();
    gpuaesd_spare_stop();              /* its registrations: before the layer's shutdown */
    if (gpuaesd_clients_stop(5000) == 0)
        gpuaes_gpu_shutdown();         /* wipes and frees what the layer holds */
}

/* A worker of another GPU (devices.c): serves what the service hands it
 * over fd 3 until the service ends. */
static int worker_main(int device, unsigned jobs, long idle_s, int sfd)
{
    gpuaesd_devices_serve_as(device);
    unsigned per_client = gpuaesd_serve_init(jobs);
    configure_layer(idle_s, device);
    gpuaesd_warm_start(per_client);
    gpuaesd_log("worker of device %d", device);
    int rc = gpuaesd_worker_serve(3, sfd);
    close(3);
    layer_stop();
    return rc == 0 ? 0 : 1;
}

/* An idle exit: 0 (never) to a year of seconds.  0, or -1 (*s unchanged). */
static int parse_seconds(const char *text, long *s)
{
    char *end;
    long v = strtol(text, &end, 10);

    if (*end != '\0' || v < 0 || v > 86400 * 365)
        return -1;
    *s = v;
    return 0;
}

int main(int argc, char **argv)
{
    const char *dir_arg = NULL, *devices = getenv("GPUAESD_DEVICES");
    char dir[108], err[256];
    long idle_s = 60, jobs = 0, worker = -1;
    const char *jobs_env = getenv("GPUAESD_JOBS"), *idle_env = getenv("GPUAESD_IDLE_EXIT");
    int foreground = 0, status = 0, ready = -1, held, activated, lfd, sfd;
    sigset_t sigs;

    if (idle_env != NULL && *idle_env != '\0')   /* ignored unless a number of seconds */
        (void)parse_seconds(idle_env, &idle_s);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--socket-dir") == 0 && i + 1 < argc) {
            dir_arg = argv[++i];
        } else if (strcmp(argv[i], "--idle-exit") == 0 && i + 1 < argc) {
            if (parse_seconds(argv[++i], &idle_s) != 0)
                usage();
        } else if (strcmp(argv[i], "--jobs") == 0 && i + 1 < argc) {
            char *end;

            jobs = strtol(argv[++i], &end, 10);
            if (*end != '\0' || jobs < 1 || jobs > (long)GPUAESD_INFLIGHT_MAX)
                usage();
        } else if (strcmp(argv[i], "--devices") == 0 && i + 1 < argc) {
            devices = argv[++i];
            if (gpuaesd_devices_parse(devices) != 0)
                usage();
        } else if (strcmp(argv[i], "--worker") == 0 && i + 1 < argc) {
            char *end;

            worker = strtol(argv[++i], &end, 10);
            if (*end != '\0' || worker < 0 || worker > GPUAES_DEVICE_MAX)
                usage();
        } else if (strcmp(argv[i], "--foreground") == 0) {
            foreground = 1;
        } else if (strcmp(argv[i], "--status") == 0) {
            status = 1;
        } else {
            usage();
        }
    }
    if (dir_arg != NULL && strlen(dir_arg) < sizeof(dir))
        strcpy(dir, dir_arg);
    else if (dir_arg != NULL || gpuaesd_default_dir(dir, sizeof(dir)) != 0)
        usage();
    if (status)
        return print_status(dir);
    if (devices != NULL && gpuaesd_devices_parse(devices) != 0) {
        fprintf(stderr, "gpuaesd: GPUAESD_DEVICES=%s is not \"all\" or a list of device numbers: all used\n", devices);
        gpuaesd_devices_parse("all");
    }
    if (jobs == 0 && jobs_env != NULL)   /* ignored unless 1..64 */
        jobs = strtol(jobs_env, NULL, 10);
    if (jobs < 1 || jobs > (long)GPUAESD_INFLIGHT_MAX)
        jobs = 0;
    if (getenv("LISTEN_PID") != NULL && strtol(getenv("LISTEN_PID"), NULL, 10) == (long)getpid())
        foreground = 1;                /* systemd's: its process and its socket (fd 3) */
    if (worker >= 0) {                 /* the service's child, detached with it */
        foreground = 1;
        close_range(4, ~0U, 0);        /* nothing of the service's but the control socket (fd 3) */
    }
    if (!foreground) {
        close_range(3, ~0U, 0);        /* nothing of the starter's */
        ready = detach();
    }
    if (gpuaesd_dir_check(dir, 1, err, sizeof(err)) != 0) {
        gpuaesd_log("%s", err);
        return 1;
    }
    /* Signals: SIGTERM/SIGINT/SIGHUP through a signalfd (blocked in every
     * thread, the GPU layer's included); no SIGPIPE (a client gone). */
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_SETMASK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
    sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    if (worker >= 0)
        return sfd >= 0 ? worker_main((int)worker, (unsigned)jobs, idle_s, sfd) : 1;
    lfd = listen_on(dir, &held, &activated);
    if (lfd < 0 || sfd < 0) {
        if (held)
            gpuaesd_log("another gpuaesd serves %s", dir);
        if (ready >= 0 && held)
            (void)!write(ready, "\1", 1);   /* a service is there: the starter may connect */
        return held ? 0 : 1;
    }
    unsigned per_client = gpuaesd_serve_init((unsigned)jobs);
    configure_layer(idle_s, gpuaesd_devices_self());
    gpuaesd_warm_start(per_client);    /* the GPU's start-up and warm-up; jobs get BUSY until both are over */
    gpuaesd_log("serving %s (idle exit %ld s)", dir, idle_s);
    if (ready >= 0) {
        (void)!write(ready, "\1", 1);
        close(ready);
    }
    for (;;) {
        struct pollfd p[2] = { { lfd, POLLIN, 0 }, { sfd, POLLIN, 0 } };
        uint64_t last;

        if (poll(p, 2, gpuaesd_devices_spawned() ? 1000 : 50) < 0 && errno != EINTR)
            break;
        if (p[1].revents & POLLIN)
            break;
        if (p[0].revents & POLLIN)
            accept_one(lfd);
        if (!gpuaesd_devices_spawned() && gpuaesd_gpu_up() != GPUAESD_GPU_STARTING)
            gpuaesd_devices_spawn(dir, per_client, idle_s);   /* the other GPUs, now that ours is up */
        last = gpuaesd_last_activity_ms();
        if (gpuaesd_devices_last_activity_ms() > last)
            last = gpuaesd_devices_last_activity_ms();
        if (idle_s > 0 && gpuaesd_clients() + gpuaesd_devices_clients() == 0
            && mono_ms() - last >= (uint64_t)idle_s * 1000) {
            gpuaesd_log("idle for %ld s: exiting", idle_s);
            break;
        }
    }
    /* Socket gone first: no new client can come; then the clients' ends.
     * systemd's socket stays: it starts us again at the next connection. */
    if (!activated) {
        struct sockaddr_un sa;

        if (gpuaesd_sock_addr(dir, &sa) == 0)
            unlink(sa.sun_path);
    }
    close(lfd);
    gpuaesd_devices_stop();            /* the workers end beside us */
    layer_stop();
    gpuaesd_devices_join();
    return 0;
}
