/*
 * test_service_activation.c - gpuaesd started as a systemd socket unit
 * would start it (service/activation.c): the listening socket as fd 3,
 * LISTEN_PID and LISTEN_FDS set.  It serves that socket (jobs checked
 * against the default provider), stays in the foreground (the pid systemd
 * started), and leaves the socket in place when it stops; a socket of the
 * wrong type is refused (exit 1) and not replaced.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "service_util.h"
#include "sockdir.h"

int svc_run_activation(const char *service);

static pid_t service_pid = -1;        /* killed on a failure, so that no service outlives the test */

#define FAIL(...) \
    do {                                                   \
        printf("FAIL: " __VA_ARGS__);                      \
        printf("\n");                                      \
        if (service_pid > 0)                               \
            kill(service_pid, SIGKILL);                    \
        return 1;                                          \
    } while (0)

/* A socket bound to dir/S.gpuaesd, listening, as systemd makes it. */
static int unit_socket(const char *dir, int type)
{
    struct sockaddr_un sa;
    int fd = socket(AF_UNIX, type, 0);

    if (fd < 0 || gpuaesd_sock_addr(dir, &sa) != 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0
        || listen(fd, 16) != 0) {
        perror("unit socket");
        exit(1);
    }
    return fd;
}

/* The service as systemd starts it: fd 3, LISTEN_PID = its pid, no --foreground. */
static pid_t activate(const char *service, const char *dir, int fd)
{
    pid_t pid = fork();

    if (pid == 0) {
        char me[24];

        if (dup2(fd, 3) != 3)
            _exit(126);
        if (fd != 3)
            close(fd);
        snprintf(me, sizeof(me), "%ld", (long)getpid());
        setenv("LISTEN_PID", me, 1);
        setenv("LISTEN_FDS", "1", 1);
        execl(service, "gpuaesd", "--socket-dir", dir, "--idle-exit", "0", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int is_socket(const char *dir, ino_t *ino)
{
    struct sockaddr_un sa;
    struct stat st;

    if (gpuaesd_sock_addr(dir, &sa) != 0 || stat(sa.sun_path, &st) != 0 || !S_ISSOCK(st.st_mode))
        return 0;
    *ino = st.st_ino;
    return 1;
}

int svc_run_activation(const char *service)
{
    char dir[64], err[256];
    gpuaesd_status_reply st;
    gpuaesd_conn *c;
    ino_t ino0, ino1;
    pid_t pid;
    int fd, rc, status;

    svc_tmpdir(dir);
    fd = unit_socket(dir, SOCK_SEQPACKET);
    if (!is_socket(dir, &ino0))
        FAIL("no unit socket");
    service_pid = pid = activate(service, dir, fd);
    c = gpuaesd_connect(dir, NULL, 4 << 20, 20000, err, sizeof(err));
    if (c == NULL)
        FAIL("connect to the activated service: %s", err);
    if (svc_wait_warm(dir, 20000) != GPUAESD_GPU_READY)
        FAIL("the activated service's GPU did not come up");
    for (int i = 0; i < 24; i++)
        if (svc_job_check(c, 0, 1 << 20, 1, 20000) != 1)
            FAIL("job %d through the activated service", i);
    gpuaesd_close(c);
    if (gpuaesd_query_status(dir, &st, 5000) != 0 || st.service_pid != (unsigned)pid)
        FAIL("status: the service is not the process started (pid %u, want %ld)", st.service_pid, (long)pid);
    printf("activated service pid %ld served 24 jobs\n", (long)pid);
    rc = svc_stop(pid);
    service_pid = -1;
    if (rc != 0)
        FAIL("the activated service exited %d on SIGTERM", rc);
    if (!is_socket(dir, &ino1) || ino1 != ino0)
        FAIL("the unit's socket was removed or replaced");
    close(fd);

    /* The wrong kind of socket: refused, exit 1, nothing bound in its place. */
    {
        struct sockaddr_un sa;

        gpuaesd_sock_addr(dir, &sa);
        unlink(sa.sun_path);
    }
    fd = unit_socket(dir, SOCK_STREAM);
    is_socket(dir, &ino0);
    service_pid = pid = activate(service, dir, fd);
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 1)
        FAIL("a SOCK_STREAM unit socket: the service did not exit 1");
    service_pid = -1;
    if (!is_socket(dir, &ino1) || ino1 != ino0)
        FAIL("a refused unit socket was replaced");
    close(fd);
    svc_rmdir(dir);
    printf("activation: ok\n");
    return 0;
}
