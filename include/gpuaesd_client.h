/*
 * gpuaesd_client.h - the client side of gpuaesd (service/client.c): find or
 * start the user's service, pass it a memfd segment, run jobs on it.
 *
 * Not thread-safe per connection: one caller at a time on a gpuaesd_conn.
 * Every failure (no service, a refused hello, a timeout, a killed or hung
 * service, a reply that does not check out) is an error return, never a
 * wait beyond the caller's timeout: the caller then does the work on the
 * CPU.  After a failed call (-1) the connection is dead and its segment
 * must not be read for results again (a service that only hung may still
 * write into it later): close it and use a new one.
 *
 * Several jobs may be in flight on one connection (gpuaesd_post, then
 * gpuaesd_wait_any / gpuaesd_poll_reply), up to the service's
 * max_inflight; the service runs them at once and answers each as it
 * completes, in any order (the reply's id says which).
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

/*
 * on = 1: every connect, start and wait of this library, in any thread, gives
 * up within 10 ms (as at its deadline), until on = 0.  For a module that goes
 * (the provider's unload, an application's exit): its threads that start or
 * dial the service end at once, not at their deadline.
 */
void gpuaesd_client_abort(int on);

/* The segment, mapped here and in the service. */
unsigned char *gpuaesd_segment(gpuaesd_conn *c, size_t *size);

/*
 * Sends req (its header is filled in here) and waits up to timeout_ms for
 * the reply; only with no other request in flight.  0: *rep is a reply
 * that passed gpuaesd_check_reply (any status: GPUAESD_OK, BUSY, FAILED
 * with done, EINVAL).  -1: no such reply in time; the connection is dead.
 */
int gpuaesd_submit(gpuaesd_conn *c, gpuaesd_job_req *req, gpuaesd_job_reply *rep, int timeout_ms);

/* The service's published load (include/gpuaesd_load.h), from c's hello,
 * mapped read-only; NULL when it sent none or it did not check out.  c
 * unmaps it when closed, unless taken: gpuaesd_take_load hands it over (the
 * caller unmaps it, gpuaesd_load_unmap), and c has none after. */
const struct gpuaesd_load_table *gpuaesd_load_of(const gpuaesd_conn *c);
const struct gpuaesd_load_table *gpuaesd_take_load(gpuaesd_conn *c);

/* The jobs the service runs at once for c (its hello reply, >= 1), and the
 * requests posted on c and not yet answered. */
unsigned gpuaesd_max_inflight(const gpuaesd_conn *c);
unsigned gpuaesd_inflight(const gpuaesd_conn *c);

/*
 * Sends req (header and id filled in here: req->id names its reply) without
 * waiting for the reply.  0: sent.  1: max_inflight requests are unanswered
 * already: nothing sent (take a reply first).  -1: not sent within
 * timeout_ms (a full socket) or the connection is dead.
 */
int gpuaesd_post(gpuaesd_conn *c, gpuaesd_job_req *req, int timeout_ms);

/*
 * Waits up to timeout_ms for the reply to any request in flight.  0: *rep
 * passed gpuaesd_check_reply against the request whose id it carries (which
 * is then answered).  -1: none in time, nothing in flight, or a reply that
 * does not check out; the connection is dead unless nothing was in flight.
 */
int gpuaesd_wait_any(gpuaesd_conn *c, gpuaesd_job_reply *rep, int timeout_ms);

/* The same without waiting: 1 a reply (as above), 0 none yet (or nothing
 * in flight), -1 the connection is dead. */
int gpuaesd_poll_reply(gpuaesd_conn *c, gpuaesd_job_reply *rep);

/* Unmaps the segment, closes the socket, frees c.  NULL is fine. */
void gpuaesd_close(gpuaesd_conn *c);

/* A connected socket to the service of socket_dir (NULL: the default), the
 * directory checked, without hello; -1 when none answers in timeout_ms. */
int gpuaesd_dial(const char *socket_dir, int timeout_ms);

/* 1 when socket_dir holds a service's socket (one stat, no connection): a
 * service runs there, or one died and left it. */
int gpuaesd_listening(const char *socket_dir);

/* The service's status, without starting it: 0, or -1 when none answers. */
int gpuaesd_query_status(const char *socket_dir, gpuaesd_status_reply *st, int timeout_ms);

/* The same for the load of each GPU the service uses (GPUAESD_DEVICES). */
int gpuaesd_query_devices(const char *socket_dir, gpuaesd_devices_reply *r, int timeout_ms);

#ifdef __cplusplus
}
#endif
#endif /* GPUAESD_CLIENT_H */
