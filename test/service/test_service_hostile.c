/*
 * test_service_hostile.c - gpuaesd against clients it must not trust
 * (docs/SERVICE.md, "Trust").
 *
 * fuzz: hostile connections (garbage, bad framing, every bad field of a
 * job, wrong or missing or extra descriptors, mutations of valid requests)
 * beside a good client whose every job must still come out right; each
 * hostile message gets an error reply or its connection closed, never a
 * crash, and the service leaks no descriptor.  uid: a peer of another uid
 * is refused (SO_PEERCRED), even one that can reach the socket.  dir: a
 * socket directory of the wrong mode or owner, or a symbolic link, is
 * refused by client and service.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "service_util.h"
#include "fdpass.h"
#include "ring.h"
#include "sockdir.h"
#include "testutil.h"

#define HSEG ((size_t)64 << 10)        /* a hostile client's segment */

int svc_run_fuzz(const char *service);
int svc_run_uid(const char *service);
int svc_run_dir(const char *service);
int svc_run_inflight(const char *service);

static int send_fds(int fd, const void *m, size_t n, const int *fds, int nfds)
{
    union { struct cmsghdr c; char b[CMSG_SPACE(sizeof(int) * 8)]; } cb;
    struct iovec iov = { (void *)m, n };
    struct msghdr mh = { 0 };

    mh.msg_iov = &iov;
    mh.msg_iovlen = 1;
    if (nfds > 0) {
        memset(&cb, 0, sizeof(cb));
        mh.msg_control = cb.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
}

/* The next message within ms: its length, 0 closed, -1 timeout or error. */
static ssize_t recv_ms(int fd, void *m, size_t n, int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };
    ssize_t r;

    if (poll(&p, 1, ms) <= 0)
        return -1;
    r = recv(fd, m, n, MSG_DONTWAIT);
    return r < 0 && errno == ECONNRESET ? 0 : r;
}

/* A memfd of n bytes with these seals (0: none). */
static int memfd(size_t n, int seals)
{
    int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);

    if (fd < 0 || ftruncate(fd, (off_t)n) != 0 || (seals && fcntl(fd, F_ADD_SEALS, seals) != 0))
        exit(1);
    return fd;
}

static void hello_msg(gpuaesd_hello *h, uint64_t seg)
{
    memset(h, 0, sizeof(*h));
    gpuaesd_hdr_init(&h->hdr, GPUAESD_HELLO, sizeof(*h));
    h->seg_size = seg;
}

/* The connection ends (no reply, or only error replies, then closed). */
static int expect_closed(int fd)
{
    unsigned char m[512];
    ssize_t n;

    while ((n = recv_ms(fd, m, sizeof(m), 5000)) > 0) {
        gpuaesd_hello_reply hr;

        if (gpuaesd_check_hello_reply(m, (size_t)n) != 0)
            return 0;
        memcpy(&hr, m, sizeof(hr));
        if (hr.status == GPUAESD_OK)
            return 0;
    }
    return n == 0;
}

/* A connection with a good segment; the mapping in *seg. */
static int good_hello(const char *dir, unsigned char **seg)
{
    int fd = gpuaesd_dial(dir, 2000), mfd = memfd(HSEG, F_SEAL_SHRINK);
    gpuaesd_hello h;
    gpuaesd_hello_reply r;

    hello_msg(&h, HSEG);
    *seg = mmap(NULL, HSEG, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (fd < 0 || *seg == MAP_FAILED || send_fds(fd, &h, sizeof(h), &mfd, 1) != 0
        || recv_ms(fd, &r, sizeof(r), 5000) != sizeof(r) || r.status != GPUAESD_OK) {
        fprintf(stderr, "good hello failed\n");
        exit(1);
    }
    close(mfd);
    return fd;
}

/* A job request spoiled in field `k`; -1 when k is past the last. */
static int spoil(gpuaesd_job_req *r, int k)
{
    static const uint32_t ops[] = { 0, GPUAESD_OP_LAST + 1, 0xffffffffu };
    static const uint32_t keylens[] = { 0, 8, 15, 17, 31, 33, 64, 0xffffffffu };
    static const uint64_t lens[] = { 0, 8, 17, HSEG + 16, (uint64_t)1 << 63, UINT64_MAX - 15 };
    static const uint64_t offs[] = { HSEG, HSEG - 16, UINT64_MAX - 15, UINT64_MAX - 4095 };
    int n0 = 3, n1 = n0 + 8, n2 = n1 + 6, n3 = n2 + 4, n4 = n3 + 4;

    svc_make_request(r, HSEG);
    if (r->op >= GPUAESD_OP_GCM_ENCRYPT)  /* a valid base for the spoils: no GCM, not a keystream fill */
        r->op = GPUAESD_OP_CTR128;
    if (r->len < 64)
        r->len = 64;
    r->in_off = 0;
    r->out_off = HSEG / 2;
    if (k < n0) r->op = ops[k];
    else if (k < n1) r->keylen = keylens[k - n0];
    else if (k < n2) r->len = lens[k - n1];
    else if (k < n3) r->in_off = offs[k - n2];
    else if (k < n4) r->out_off = offs[k - n3];
    else if (k == n4) r->out_off = r->in_off + 16;                /* overlapping, not in place */
    else if (k == n4 + 1) r->in_off = r->out_off + r->len - 16;
    else if (k == n4 + 2) { r->keylen = 16; r->key[20] = 1; }     /* key bytes past keylen */
    else if (k == n4 + 3) r->h[3] = 1;                          /* H on a non-GCM op */
    else if (k == n4 + 4) r->op = GPUAESD_OP_KEYSTREAM128;      /* a fill with in_off != out_off */
    else return -1;
    return 0;
}

/* Every spoiled job: GPUAESD_EINVAL with done 0, the segment untouched; a
 * good job afterwards on the same connection still works. */
static int bad_jobs(const char *dir)
{
    unsigned char *seg, copy[HSEG];
    int fd = good_hello(dir, &seg), ok = 1;
    gpuaesd_job_req r;
    gpuaesd_job_reply rep;

    test_rand_bytes(seg, HSEG);
    memcpy(copy, seg, HSEG);
    for (int k = 0; spoil(&r, k) == 0; k++) {
        gpuaesd_hdr_init(&r.hdr, GPUAESD_JOB, sizeof(r));
        r.id = (uint64_t)k + 100;
        if (send_fds(fd, &r, sizeof(r), NULL, 0) != 0 || recv_ms(fd, &rep, sizeof(rep), 5000) != sizeof(rep)
            || gpuaesd_check_reply(&rep, sizeof(rep), &r) != 0 || rep.status != GPUAESD_EINVAL) {
            fprintf(stderr, "spoiled field %d: no EINVAL reply\n", k);
            ok = 0;
        }
    }
    if (memcmp(seg, copy, HSEG) != 0) {
        fprintf(stderr, "a refused job wrote into the segment\n");
        ok = 0;
    }
    svc_make_request(&r, HSEG);
    r.op = GPUAESD_OP_ECB_ENCRYPT;
    gpuaesd_hdr_init(&r.hdr, GPUAESD_JOB, sizeof(r));
    if (send_fds(fd, &r, sizeof(r), NULL, 0) != 0 || recv_ms(fd, &rep, sizeof(rep), 5000) != sizeof(rep)
        || rep.status != GPUAESD_OK) {
        fprintf(stderr, "a good job after refused ones failed\n");
        ok = 0;
    }
    munmap(seg, HSEG);
    close(fd);
    return ok;
}

/* One hostile connection of kind k; 1 when the service answered as it must. */
/* Hellos asking for a spare segment: 12, of a size the service has none of
 * (answered NO_SPARE: the connection stays for a hello with its own memfd);
 * 13, with a memfd passed too, or an unknown flag (the connection ends). */
static int spare_hello(const char *dir, int k)
{
    int fd = gpuaesd_dial(dir, 2000), mfd = memfd(HSEG, F_SEAL_SHRINK), ok;
    gpuaesd_hello h;
    gpuaesd_hello_reply r;

    if (fd < 0)
        return 0;
    hello_msg(&h, HSEG);
    h.flags = GPUAESD_HELLO_WANT_SEG;
    if (k == 13) {
        int with_fd = test_rand_below(2);

        h.flags |= with_fd ? 0 : 1u << (2 + test_rand_below(30));   /* past WANT_SEG and RING */
        send_fds(fd, &h, sizeof(h), &mfd, with_fd);
        ok = expect_closed(fd);
    } else {
        ok = send_fds(fd, &h, sizeof(h), NULL, 0) == 0 && recv_ms(fd, &r, sizeof(r), 5000) == sizeof(r)
            && gpuaesd_check_hello_reply(&r, sizeof(r)) == 0 && r.status == GPUAESD_ESEGMENT
            && r.flags == GPUAESD_HELLO_NO_SPARE;
        h.flags = 0;
        ok = ok && send_fds(fd, &h, sizeof(h), &mfd, 1) == 0 && recv_ms(fd, &r, sizeof(r), 5000) == sizeof(r)
            && r.status == GPUAESD_OK && r.flags == 0;
    }
    close(mfd);
    close(fd);
    return ok;
}

/* A message and up to 4 descriptors (-1 where none) within ms: as recv_ms. */
static ssize_t recv_fds_ms(int fd, void *m, size_t n, int fds[4], int ms)
{
    struct pollfd p = { fd, POLLIN, 0 };

    for (int i = 0; i < 4; i++)
        fds[i] = -1;
    return poll(&p, 1, ms) <= 0 ? -1 : gpuaesd_recv_fds(fd, m, n, fds, 4);
}

/* 14: a client with a job ring that scribbles on it (docs/SERVICE.md, "Job
 * rings"): its request index far ahead, a hello in a request slot, or the
 * index of replies it took set to nonsense: its connection ends; a spoiled
 * job in the ring: an EINVAL reply in the ring. */
static int ring_hostile(const char *dir)
{
    int fd = gpuaesd_dial(dir, 2000), mfd = memfd(HSEG, F_SEAL_SHRINK), fds[4], ok = 0, how = (int)test_rand_below(4);
    gpuaesd_hello h;
    gpuaesd_hello_reply rep;
    gpuaesd_ring *ring = NULL;
    gpuaesd_job_req r;
    uint64_t one = 1;
    uint32_t tail;

    hello_msg(&h, HSEG);
    h.flags = GPUAESD_HELLO_RING;
    if (fd < 0 || send_fds(fd, &h, sizeof(h), &mfd, 1) != 0
        || recv_fds_ms(fd, &rep, sizeof(rep), fds, 5000) != sizeof(rep) || rep.status != GPUAESD_OK
        || rep.flags != GPUAESD_HELLO_RING_GIVEN || fds[0] < 0 || fds[1] < 0 || fds[2] < 0
        || (ring = gpuaesd_ring_map(fds[0])) == NULL) {
        fprintf(stderr, "ring hello failed\n");
        exit(1);
    }
    close(mfd);
    tail = ring_load(&ring->sq_tail);
    svc_make_request(&r, HSEG);
    gpuaesd_hdr_init(&r.hdr, GPUAESD_JOB, sizeof(r));
    switch (how) {
    case 0:                                                               /* index far ahead */
        ring_store(&ring->sq_tail, tail + GPUAESD_RING_SLOTS + 1 + test_rand_below(1u << 30));
        break;
    case 1:                                                               /* a hello as a request */
        memcpy(&ring->sq[tail % GPUAESD_RING_SLOTS], &h, sizeof(h));
        ring_store(&ring->sq_tail, tail + 1);
        break;
    case 2:                                                               /* a spoiled job */
        r.op = 0;
        ring->sq[tail % GPUAESD_RING_SLOTS] = r;
        ring_store(&ring->sq_tail, tail + 1);
        break;
    default:                                                              /* replies "taken" ahead */
        ring_store(&ring->cq_head, ring_load(&ring->cq_tail) + 1 + test_rand_below(1u << 30));
        ring->sq[tail % GPUAESD_RING_SLOTS] = r;
        ring_store(&ring->sq_tail, tail + 1);
    }
    (void)!write(fds[1], &one, sizeof(one));
    if (how == 2) {                    /* the EINVAL reply comes in the ring */
        for (int i = 0; i < 5000 && ring_load(&ring->cq_tail) == 0; i++)
            usleep(1000);
        ok = ring_load(&ring->cq_tail) == 1 && ring->cq[0].status == GPUAESD_EINVAL && ring->cq[0].done == 0
             && ring->cq[0].id == r.id;
    } else {
        ok = expect_closed(fd);
    }
    gpuaesd_ring_unmap(ring);
    for (int i = 0; i < 4; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    close(fd);
    return ok;
}

static int hostile(const char *dir, int k)
{
    unsigned char m[700], *seg;
    gpuaesd_hello h;
    gpuaesd_job_req r;
    int fd, fds[8], nfds = 0, ok;
    size_t n;

    if (k == 0)
        return bad_jobs(dir);
    if (k == 14)
        return ring_hostile(dir);
    if (k >= 12)
        return spare_hello(dir, k);
    if (k >= 7) {                      /* after a good hello */
        fd = good_hello(dir, &seg);
        munmap(seg, HSEG);
        svc_make_request(&r, HSEG);
        gpuaesd_hdr_init(&r.hdr, GPUAESD_JOB, sizeof(r));
        memcpy(m, &r, sizeof(r));
        n = sizeof(r);
        switch (k) {
        case 7: n = test_rand_below(sizeof(r)); break;                       /* truncated */
        case 8: n = sizeof(r) + 1 + test_rand_below(sizeof(m) - sizeof(r) - 1); break;   /* too long */
        case 9: m[test_rand_below(16)] ^= (unsigned char)(1 + test_rand_below(255)); break; /* header */
        case 10: hello_msg(&h, HSEG); memcpy(m, &h, n = sizeof(h)); break;   /* a second hello */
        default:                                                             /* any bytes mutated */
            for (int i = 0; i < 3; i++)
                m[test_rand_below(sizeof(r))] ^= (unsigned char)(1 + test_rand_below(255));
            send_fds(fd, m, n, NULL, 0);
            n = (size_t)recv_ms(fd, m, sizeof(m), 5000);
            /* a well-formed reply of any status, or closed */
            ok = n == 0 || (n == sizeof(gpuaesd_job_reply) && gpuaesd_check_hdr(m, n, GPUAESD_JOB_REPLY) == 0);
            close(fd);
            return ok;
        }
        send_fds(fd, m, n, NULL, 0);
        ok = expect_closed(fd);
        close(fd);
        return ok;
    }
    fd = gpuaesd_dial(dir, 2000);
    if (fd < 0)
        return 0;
    hello_msg(&h, HSEG);
    memcpy(m, &h, sizeof(h));
    n = sizeof(h);
    switch (k) {
    case 1: n = test_rand_below(sizeof(m)); test_rand_bytes(m, n); break;   /* garbage */
    case 2: break;                                                        /* no descriptor */
    case 3: {                                                             /* a wrong one */
        int p[2];

        switch (test_rand_below(5)) {
        case 0: fds[0] = memfd(HSEG, 0); break;                            /* not sealed */
        case 1: fds[0] = memfd(HSEG / 2, F_SEAL_SHRINK); break;            /* too small */
        case 2: fds[0] = open("/dev/zero", O_RDWR | O_CLOEXEC); break;
        case 3: fds[0] = fd; break;                                        /* a socket */
        default:
            if (pipe(p) != 0)
                exit(1);
            close(p[1]);
            fds[0] = p[0];
        }
        nfds = 1;
        break;
    }
    case 4:                                                               /* seg_size out of range */
        h.seg_size = test_rand_below(2) ? GPUAESD_SEG_MAX + 4096 : HSEG + 1;
        memcpy(m, &h, sizeof(h));
        fds[0] = memfd(HSEG, F_SEAL_SHRINK);
        nfds = 1;
        break;
    case 5:                                                               /* a job before the hello */
        svc_make_request(&r, HSEG);
        gpuaesd_hdr_init(&r.hdr, GPUAESD_JOB, sizeof(r));
        if (send_fds(fd, &r, sizeof(r), NULL, 0) != 0)
            return 0;
        {
            gpuaesd_job_reply rep;

            ok = recv_ms(fd, &rep, sizeof(rep), 5000) == sizeof(rep) && rep.status == GPUAESD_EINVAL;
        }
        close(fd);
        return ok;
    default: {                                                            /* 6: many descriptors */
        gpuaesd_hello_reply rep;

        for (nfds = 0; nfds < 8; nfds++)
            fds[nfds] = memfd(HSEG, F_SEAL_SHRINK);
        ok = send_fds(fd, m, n, fds, nfds) == 0 && recv_ms(fd, &rep, sizeof(rep), 5000) == sizeof(rep)
            && rep.status == GPUAESD_OK;
        for (int i = 0; i < nfds; i++)
            close(fds[i]);
        close(fd);
        return ok;
    }
    }
    send_fds(fd, m, n, fds, nfds);
    for (int i = 0; i < nfds; i++)
        if (fds[i] != fd)
            close(fds[i]);
    ok = expect_closed(fd);
    close(fd);
    return ok;
}

static int count_fds(pid_t pid)
{
    char p[64];
    DIR *d;
    int n = 0;

    snprintf(p, sizeof(p), "/proc/%ld/fd", (long)pid);
    if ((d = opendir(p)) == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

int svc_run_fuzz(const char *service)
{
    char dir[64], err[256];
    pid_t pid;
    gpuaesd_conn *good;
    gpuaesd_status_reply st;
    int base, fds = -1, kinds = 15, held[6];

    svc_tmpdir(dir);
    pid = svc_start_fg(service, dir);
    good = gpuaesd_connect(dir, NULL, (size_t)1 << 20, 5000, err, sizeof(err));
    CHECK(good != NULL);
    if (good == NULL)
        return test_report("service fuzz");
    svc_wait_spares(dir, 20000);       /* the spare's memfd, made in the background: in base */
    /* base may count a descriptor of the good client's start still in
     * flight (seen under ASan on a loaded machine): "none kept" is then
     * "not more than at the start" */
    base = count_fds(pid);
    /* connections that say nothing, held through it all */
    for (int i = 0; i < 6; i++)
        held[i] = gpuaesd_dial(dir, 2000);
    for (int round = 0; round < 30 * kinds; round++) {
        int k = round % kinds;

        if (!hostile(dir, k)) {
            fprintf(stderr, "hostile kind %d (round %d): not refused as it should be\n", k, round);
            CHECK(0);
        }
        CHECK(svc_job_check(good, 0, (size_t)32 << 10, 1, 20000) == 1);
    }
    for (int i = 0; i < 6; i++)
        close(held[i]);
    /* every hostile connection's thread gone, no descriptor kept; the
     * descriptors are counted before the status query, whose own connection
     * the service may still hold for a moment after it answered */
    for (int i = 0; i < 500; i++) {
        fds = count_fds(pid);
        if (fds <= base && gpuaesd_query_status(dir, &st, 2000) == 0 && st.clients == 2)
            break;
        usleep(10 * 1000);
    }
    if (fds > base) {
        char cmd[96];

        fprintf(stderr, "service descriptors: %d, %d at the start:\n", fds, base);
        snprintf(cmd, sizeof(cmd), "ls -l /proc/%ld/fd >&2", (long)pid);
        if (system(cmd) != 0)
            fprintf(stderr, "(could not list them)\n");
    }
    CHECK(fds <= base);
    CHECK(st.malformed > 0 && st.clients == 2);
    gpuaesd_close(good);
    CHECK(svc_stop(pid) == 0);    /* a clean exit: no sanitizer finding, no leak */
    svc_rmdir(dir);
    return test_report("service fuzz");
}

/* In a child: become uid/gid 65534 (nobody), keeping CAP_DAC_OVERRIDE when
 * keep (so that the 0700 directory does not stop us first).  -1 if we cannot. */
static int become_nobody(int keep)
{
    struct __user_cap_header_struct hd = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct cd[2];

    if (prctl(PR_SET_KEEPCAPS, 1) != 0 || setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0
        || getuid() != 65534)
        return -1;
    memset(cd, 0, sizeof(cd));
    if (keep) {
        cd[0].permitted = cd[0].effective = 1u << CAP_DAC_OVERRIDE;
        if (syscall(SYS_capset, &hd, cd) != 0)
            return -1;
    }
    return 0;
}

/* 0: the connection was refused as it should; 77: cannot test here. */
static int other_uid_child(const char *dir, int keep)
{
    struct sockaddr_un sa;
    gpuaesd_hdr h;
    unsigned char m[512];
    int fd;

    if (become_nobody(keep) != 0)
        return 77;
    gpuaesd_sock_addr(dir, &sa);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
        return keep ? 3 : (errno == EACCES ? 0 : 4);  /* without the capability the directory stops us */
    if (!keep)
        return 5;
    gpuaesd_hdr_init(&h, GPUAESD_STATUS, sizeof(h));
    send(fd, &h, sizeof(h), MSG_NOSIGNAL);
    return recv_ms(fd, m, sizeof(m), 5000) == 0 ? 0 : 1;
}

static int child_status(const char *dir, int keep)
{
    pid_t c = fork();
    int st;

    if (c == 0)
        _exit(other_uid_child(dir, keep));
    waitpid(c, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

int svc_run_uid(const char *service)
{
    char dir[64];
    pid_t pid;
    gpuaesd_status_reply st;
    int rc;

    if (geteuid() != 0) {
        fprintf(stderr, "not root: cannot act as another uid; skipped\n");
        return 77;
    }
    svc_tmpdir(dir);
    pid = svc_start_fg(service, dir);
    rc = child_status(dir, 1);
    if (rc == 77) {
        svc_stop(pid);
        svc_rmdir(dir);
        return 77;
    }
    CHECK(rc == 0);               /* reached the socket, and SO_PEERCRED refused it */
    CHECK(child_status(dir, 0) == 0);   /* the 0700 directory alone stops it */
    CHECK(gpuaesd_query_status(dir, &st, 2000) == 0 && st.refused == 1);
    CHECK(svc_stop(pid) == 0);
    svc_rmdir(dir);
    return test_report("service uid");
}

/* The service in dir in the foreground: its exit status (it must not serve). */
static int service_exit(const char *service, const char *dir)
{
    pid_t pid = fork();
    int st;

    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);

        dup2(null, 2);
        execl(service, "gpuaesd", "--socket-dir", dir, "--foreground", "--idle-exit", "1", (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 1000; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
        usleep(10 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return 101;
}

/* dir is refused by the client (no connection, no service started) and by the service. */
static void refused(const char *service, const char *dir, const char *what)
{
    char err[256];
    gpuaesd_conn *c = gpuaesd_connect(dir, service, 4096, 5000, err, sizeof(err));
    int rc = service_exit(service, dir);

    if (c != NULL || rc != 1)
        fprintf(stderr, "%s: connect %s, service exit %d\n", what, c != NULL ? "succeeded" : "refused", rc);
    CHECK(c == NULL && rc == 1);
    gpuaesd_close(c);
}

int svc_run_dir(const char *service)
{
    char dir[64], sub[128], link[128], err[256];
    gpuaesd_conn *c;
    gpuaesd_status_reply st;
    struct stat sb;

    svc_tmpdir(dir);
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    snprintf(link, sizeof(link), "%s/link", dir);
    CHECK(mkdir(sub, 0755) == 0);
    refused(service, sub, "mode 0755");
    CHECK(chmod(sub, 0710) == 0);
    refused(service, sub, "mode 0710");
    CHECK(chmod(sub, 0700) == 0 && symlink(sub, link) == 0);
    refused(service, link, "a symbolic link");
    if (geteuid() == 0) {
        CHECK(chown(sub, 65534, 65534) == 0);
        refused(service, sub, "another owner");
    }
    CHECK(rmdir(sub) == 0);
    /* missing: made 0700, and served */
    c = gpuaesd_connect(sub, service, 4096, 20000, err, sizeof(err));
    CHECK(c != NULL && stat(sub, &sb) == 0 && (sb.st_mode & 0777) == 0700);
    CHECK(svc_wait_warm(sub, 20000) == GPUAESD_GPU_READY);
    CHECK(svc_job_check(c, 0, 1024, 1, 20000) == 1);
    CHECK(gpuaesd_query_status(sub, &st, 2000) == 0);
    gpuaesd_close(c);
    kill((pid_t)st.service_pid, SIGTERM);
    CHECK(svc_wait_gone(sub, 20000) == 0);
    unlink(link);
    svc_rmdir(sub);
    svc_rmdir(dir);
    return test_report("service dir");
}

/* ---- Several jobs in flight on one connection ----
 * inflight: with every job taking 200 ms (GPUAES_EMU_JOB_DELAY_MS), the
 * library posts max_inflight jobs (4 by default) and refuses one more
 * without sending it; the service runs them at once (the emulator's peak,
 * in the status: at least 2, at most max_inflight) and answers each.  A raw
 * client that sends five times that many without waiting is throttled by its
 * socket, not refused: every job answered OK and right. */
#define IF_JOB 1024

static void ctr_job(gpuaesd_job_req *r, unsigned char *seg, unsigned k, unsigned char *want)
{
    unsigned char in[IF_JOB];

    memset(r, 0, sizeof(*r));
    gpuaesd_hdr_init(&r->hdr, GPUAESD_JOB, sizeof(*r));
    r->op = GPUAESD_OP_CTR128;
    r->keylen = 16;
    test_rand_bytes(r->key, 16);
    test_rand_bytes(r->iv, 16);
    r->in_off = r->out_off = (uint64_t)k * IF_JOB;
    r->len = IF_JOB;
    r->id = 1000 + k;
    test_rand_bytes(in, IF_JOB);
    memcpy(seg + r->in_off, in, IF_JOB);
    svc_expected(r, in, want);
}

static unsigned peak_jobs(const char *dir)
{
    gpuaesd_status_reply st;
    const char *p;

    if (gpuaesd_query_status(dir, &st, 5000) != 0 || (p = strstr(st.gpu, "at most ")) == NULL)
        return 0;
    return (unsigned)strtoul(p + 8, NULL, 10);
}

int svc_run_inflight(const char *service)
{
    enum { FLOOD = 20 };
    char dir[64], err[256];
    pid_t pid;
    gpuaesd_conn *c;
    gpuaesd_job_req r[FLOOD];
    gpuaesd_job_reply rep;
    unsigned char *seg, want[FLOOD][IF_JOB];
    size_t segn;
    unsigned m = 0, peak, answered = 0, sent = 0;
    int fd, seen[FLOOD] = { 0 };

    svc_tmpdir(dir);
    setenv("GPUAES_EMU_JOB_DELAY_MS", "200", 1);   /* the service inherits it */
    setenv("GPUAESD_WARM", "0", 1);                /* the peak below counts this test's jobs only */
    pid = svc_start_fg(service, dir);
    unsetenv("GPUAES_EMU_JOB_DELAY_MS");
    unsetenv("GPUAESD_WARM");
    c = gpuaesd_connect(dir, NULL, HSEG, 5000, err, sizeof(err));
    CHECK(c != NULL && (m = gpuaesd_max_inflight(c)) == 4);
    if (c == NULL || m != 4)
        return test_report("service inflight");
    seg = gpuaesd_segment(c, &segn);
    for (unsigned k = 0; k <= m; k++)
        ctr_job(&r[k], seg, k, want[k]);
    for (unsigned k = 0; k < m; k++)
        CHECK(gpuaesd_post(c, &r[k], 5000) == 0);
    CHECK(gpuaesd_post(c, &r[m], 5000) == 1 && gpuaesd_inflight(c) == m);
    for (unsigned k = 0; k < m; k++) {
        CHECK(gpuaesd_wait_any(c, &rep, 20000) == 0 && rep.status == GPUAESD_OK);
        for (unsigned j = 0; j < m; j++)
            if (rep.id == r[j].id)
                seen[j]++;
    }
    CHECK(gpuaesd_inflight(c) == 0 && gpuaesd_wait_any(c, &rep, 100) == -1);  /* nothing in flight */
    for (unsigned k = 0; k < m; k++)
        CHECK(seen[k] == 1 && memcmp(seg + r[k].out_off, want[k], IF_JOB) == 0);
    peak = peak_jobs(dir);
    if (peak < 2 || peak > m)
        fprintf(stderr, "at most %u jobs ran at once, not 2..%u\n", peak, m);
    CHECK(peak >= 2 && peak <= m);
    CHECK(svc_job_check(c, 0, 4096, 1, 20000) == 1);   /* still usable */
    gpuaesd_close(c);

    /* the raw client: FLOOD requests, sent as the socket takes them */
    fd = good_hello(dir, &seg);
    memset(seen, 0, sizeof(seen));
    for (unsigned k = 0; k < FLOOD; k++)
        ctr_job(&r[k], seg, k, want[k]);
    while (answered < FLOOD) {
        struct pollfd p = { fd, POLLIN | (sent < FLOOD ? POLLOUT : 0), 0 };
        ssize_t n;

        if (poll(&p, 1, 20000) <= 0)
            break;
        if ((p.revents & POLLOUT) && sent < FLOOD && send_fds(fd, &r[sent], sizeof(r[0]), NULL, 0) == 0)
            sent++;
        if ((p.revents & POLLIN) && (n = recv(fd, &rep, sizeof(rep), MSG_DONTWAIT)) > 0) {
            if (n != sizeof(rep) || rep.id < 1000 || rep.id >= 1000 + FLOOD || rep.status != GPUAESD_OK)
                break;
            seen[rep.id - 1000]++;
            answered++;
        }
        if (p.revents & (POLLHUP | POLLERR))
            break;
    }
    CHECK(sent == FLOOD && answered == FLOOD);
    for (unsigned k = 0; k < FLOOD; k++)
        CHECK(seen[k] == 1 && memcmp(seg + r[k].out_off, want[k], IF_JOB) == 0);
    peak = peak_jobs(dir);
    CHECK(peak >= 2 && peak <= m);
    close(fd);
    munmap(seg, HSEG);
    CHECK(svc_stop(pid) == 0);
    svc_rmdir(dir);
    return test_report("service inflight");
}
