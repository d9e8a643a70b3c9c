/* fdpass.c - see fdpass.h. */
#include "fdpass.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void gpuaesd_fd_attach_n(struct msghdr *mh, gpuaesd_cmsg *cb, const int *fds, unsigned n)
{
    struct cmsghdr *c;

    memset(cb, 0, sizeof(*cb));
    mh->msg_control = cb->b;
    mh->msg_controllen = CMSG_SPACE(sizeof(int) * n);
    c = CMSG_FIRSTHDR(mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * n);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
}

void gpuaesd_fd_attach(struct msghdr *mh, gpuaesd_cmsg *cb, int fd)
{
    gpuaesd_fd_attach_n(mh, cb, &fd, 1);
}

void gpuaesd_fd_expect(struct msghdr *mh, gpuaesd_cmsg *cb)
{
    mh->msg_control = cb->b;
    mh->msg_controllen = sizeof(cb->b);
}

int gpuaesd_fd_take(struct msghdr *mh)
{
    int first;

    gpuaesd_fd_take_n(mh, &first, 1);
    return first;
}

void gpuaesd_fd_take_n(struct msghdr *mh, int *fds, unsigned n)
{
    unsigned got = 0;

    for (unsigned i = 0; i < n; i++)
        fds[i] = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c != NULL; c = CMSG_NXTHDR(mh, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
            int f;

            memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
            if (got < n)
                fds[got++] = f;
            else
                close(f);
        }
    }
}

ssize_t gpuaesd_recv_fds(int fd, void *m, size_t n, int *fds, unsigned nfd)
{
    gpuaesd_cmsg cb;
    struct iovec iov = { m, n };
    struct msghdr mh = { 0 };
    ssize_t got;

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    gpuaesd_fd_expect(&mh, &cb);
    do
        got = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    if (got < 0) {
        for (unsigned i = 0; i < nfd; i++)
            fds[i] = -1;
        return -1;
    }
    gpuaesd_fd_take_n(&mh, fds, nfd);
    if (got > 0 && (mh.msg_flags & MSG_TRUNC)) {
        for (unsigned i = 0; i < nfd; i++) {
            if (fds[i] >= 0)
                close(fds[i]);
            fds[i] = -1;
        }
        return -2;
    }
    return got;
}
