/*
 * activation.c - the listening socket handed over by systemd (a user socket
 * unit, service/systemd/): sd_listen_fds(3)'s protocol, without libsystemd.
 *
 * systemd starts gpuaesd with the socket as fd 3, LISTEN_PID = our pid and
 * LISTEN_FDS = 1.  It is used only if it is what the service would have
 * made itself: an AF_UNIX SOCK_SEQPACKET socket, listening, bound to
 * DIR/S.gpuaesd.  Anything else is refused (the unit is wrong: better no
 * service than one on a socket nobody checks).
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "service.h"
#include "sockdir.h"

#define LISTEN_FDS_START 3

int gpuaesd_activated_socket(const char *dir)
{
    const char *pid = getenv("LISTEN_PID"), *n = getenv("LISTEN_FDS");
    int fd = LISTEN_FDS_START, type = 0, listening = 0;
    socklen_t l = sizeof(type);
    struct sockaddr_un want, got;
    socklen_t gl = sizeof(got);

    if (pid == NULL || n == NULL || strtol(pid, NULL, 10) != (long)getpid())
        return -1;
    /* Not for our children (the variables describe this process only). */
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    if (strcmp(n, "1") != 0) {
        gpuaesd_log("socket activation: LISTEN_FDS=%s, want 1", n);
        return -2;
    }
    memset(&got, 0, sizeof(got));
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l) != 0 || type != SOCK_SEQPACKET
        || getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &(socklen_t){ sizeof(listening) }) != 0
        || !listening || getsockname(fd, (struct sockaddr *)&got, &gl) != 0 || got.sun_family != AF_UNIX
        || gpuaesd_sock_addr(dir, &want) != 0 || strncmp(got.sun_path, want.sun_path, sizeof(got.sun_path)) != 0) {
        gpuaesd_log("socket activation: fd 3 is not a listening SOCK_SEQPACKET socket at %s/%s",
                    dir, GPUAESD_SOCK_NAME);
        return -2;
    }
    (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}
