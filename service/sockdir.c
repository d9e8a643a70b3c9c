/*
 * sockdir.c - the per-user socket directory: found, made and checked the
 * same way by gpuaesd and its clients.  A directory of the wrong owner or
 * mode, or a symbolic link, is refused, never repaired: someone else may
 * have made it to catch our keys.
 */
#define _GNU_SOURCE              /* secure_getenv */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sockdir.h"

int gpuaesd_default_dir(char *buf, size_t n)
{
    const char *xdg = secure_getenv("XDG_RUNTIME_DIR");
    int w;

    if (xdg != NULL && xdg[0] == '/')
        w = snprintf(buf, n, "%s/gpuaes", xdg);
    else
        w = snprintf(buf, n, "/tmp/gpuaes-%lu", (unsigned long)geteuid());
    return w > 0 && (size_t)w < n ? 0 : -1;
}

int gpuaesd_dir_check(const char *dir, int create, char *err, size_t errn)
{
    struct stat st;

    if (lstat(dir, &st) != 0) {
        if (errno != ENOENT || !create || (mkdir(dir, 0700) != 0 && errno != EEXIST)
            || lstat(dir, &st) != 0) {
            snprintf(err, errn, "socket directory %s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, errn, "socket directory %s: not a directory (or a symbolic link)", dir);
        return -1;
    }
    if (st.st_uid != geteuid() || (st.st_mode & 077) != 0) {
        snprintf(err, errn, "socket directory %s: owner %lu, mode %03o (must be ours, 0700)", dir,
                 (unsigned long)st.st_uid, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return 0;
}

int gpuaesd_dir_file(const char *dir, const char *name, char *buf, size_t n)
{
    int w = snprintf(buf, n, "%s/%s", dir, name);

    return w > 0 && (size_t)w < n ? 0 : -1;
}

int gpuaesd_sock_addr(const char *dir, struct sockaddr_un *sa)
{
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    return gpuaesd_dir_file(dir, GPUAESD_SOCK_NAME, sa->sun_path, sizeof(sa->sun_path));
}
