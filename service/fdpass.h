/*
 * fdpass.h - a descriptor passed with a message (SCM_RIGHTS), built and taken
 * the same way at both ends of gpuaesd's socket (client.c, serve.c).
 */
#ifndef GPUAESD_FDPASS_H
#define GPUAESD_FDPASS_H

#include <sys/socket.h>
#include <sys/types.h>

#define GPUAESD_FDS_MAX 8              /* descriptors one received message may carry; more are
                                          dropped by the kernel (MSG_CTRUNC) */

typedef union {
    struct cmsghdr c;
    char b[CMSG_SPACE(sizeof(int) * GPUAESD_FDS_MAX)];
} gpuaesd_cmsg;

/* mh (its iov set) will carry fd: its control data in cb.  _n: the n
 * (1..GPUAESD_FDS_MAX) descriptors fds, in that order. */
void gpuaesd_fd_attach(struct msghdr *mh, gpuaesd_cmsg *cb, int fd);
void gpuaesd_fd_attach_n(struct msghdr *mh, gpuaesd_cmsg *cb, const int *fds, unsigned n);

/* mh's control data set to receive into cb. */
void gpuaesd_fd_expect(struct msghdr *mh, gpuaesd_cmsg *cb);

/* After a recvmsg into mh: the first descriptor it carried, -1 if none;
 * every other one is closed (a peer may send any number). */
int gpuaesd_fd_take(struct msghdr *mh);

/* The same for the first n: fds[0..n) (-1 where none came); the rest closed. */
void gpuaesd_fd_take_n(struct msghdr *mh, int *fds, unsigned n);

/* One blocking recvmsg (EINTR retried) of at most n bytes and its first nfd
 * descriptors (fds[0..nfd), -1 where none came; the rest closed).  The
 * length, 0 at the end, -1 on an error, -2 for a message longer than n
 * (framing; its descriptors closed). */
ssize_t gpuaesd_recv_fds(int fd, void *m, size_t n, int *fds, unsigned nfd);

#endif
