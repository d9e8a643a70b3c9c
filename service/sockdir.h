/*
 * sockdir.h - where gpuaesd's socket lives, and the checks both ends make
 * before they trust that place (docs/SERVICE.md, "The socket").
 */
#ifndef GPUAESD_SOCKDIR_H
#define GPUAESD_SOCKDIR_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

#define GPUAESD_SOCK_NAME "S.gpuaesd"
#define GPUAESD_LOCK_NAME "lock"

/* $XDG_RUNTIME_DIR/gpuaes when that is set and absolute, else
 * /tmp/gpuaes-<euid>.  0, or -1 when it does not fit in n bytes. */
int gpuaesd_default_dir(char *buf, size_t n);

/* 0 when dir is a directory (not a symbolic link) owned by our effective
 * uid that nobody else may enter (mode & 077 == 0).  create: make it (0700)
 * when it does not exist.  -1 otherwise, with why in err. */
int gpuaesd_dir_check(const char *dir, int create, char *err, size_t errn);

/* dir/name, as a socket address or a path; -1 when too long. */
int gpuaesd_sock_addr(const char *dir, struct sockaddr_un *sa);
int gpuaesd_dir_file(const char *dir, const char *name, char *buf, size_t n);

#endif
