/*
 * gpuaesd_client.h - the client side of gpuaesd (service/client.c): find or
 * start the user's service, pass it a memfd segment, run jobs on it.
 *
 * Not thread-safe per connection: one caller at a time on a gpuaesd_conn.
 * Every failure (no service, a refused hello, a timeout, a killed or hung
 * service, a reply that does not check out) is an error return, never a
 * wait beyond the caller's timeout: the caller then does the work on the
 * CPU.  After a failed gpuaesd_submit() the connection is dead and its
 * segment must not be read for results again (a service that only hung may
 * still write into it later): close it and use a new one.
 */
#ifndef GPUAESD_CLIENT_H
#define GPUAESD_CLIENT_H

#include <stddef.h>

#include "gpuaesd_proto.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gpuaesd_conn gpuaesd_conn;

/*
 * Connects to the service whose socket is in socket_dir (NULL: the default,
 * $XDG_RUNTIME_DIR/gpuaes or /tmp/gpuaes-<uid>), after checking that
 * directory (ours, 0700, not a symbolic link).  When none answers and
 * `service` is a path, starts it (detached: it forks, leaves the session,
 * and answers once it listens) and connects to it.  Then makes a sealed
 * memfd segment of seg_size bytes (a multiple of 4096), maps it, and passes
 * it with the hello.  All within timeout_ms.  NULL on failure, why in err.
 */
gpuaesd_conn *gpuaesd_connect(const char *socket_dir, const char *service, size_t seg_size,
                              int timeout_ms, char *err, size_t errn);

/* The segment, mapped here and in the service. */
unsigned char *gpuaesd_segment(gpuaesd_conn *c, size_t *size);

/*
 * Sends req (its header is filled in here) and waits up to timeout_ms for
 * the reply.  0: *rep is a reply that passed gpuaesd_check_reply (any
 * status: GPUAESD_OK, BUSY, FAILED with done, EINVAL).  -1: no such reply
 * in time; the connection is dead (see above).
 */
int gpuaesd_submit(gpuaesd_conn *c, gpuaesd_job_req *req, gpuaesd_job_reply *rep, int timeout_ms);

/* Unmaps the segment, closes the socket, frees c.  NULL is fine. */
void gpuaesd_close(gpuaesd_conn *c);

/* A connected socket to the service of socket_dir (NULL: the default), the
 * directory checked, without hello; -1 when none answers in timeout_ms. */
int gpuaesd_dial(const char *socket_dir, int timeout_ms);

/* The service's status, without starting it: 0, or -1 when none answers. */
int gpuaesd_query_status(const char *socket_dir, gpuaesd_status_reply *st, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* GPUAESD_CLIENT_H */
