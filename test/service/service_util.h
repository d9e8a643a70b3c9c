/* service_util.h - helpers of the gpuaesd tests (test_service*.c): a
 * service in a temporary socket directory, and jobs checked against
 * OpenSSL's default provider. */
#ifndef GPUAES_SERVICE_UTIL_H
#define GPUAES_SERVICE_UTIL_H

#include <stddef.h>
#include <sys/types.h>

#include "gpuaesd_client.h"

/* A fresh 0700 directory under /tmp (removed, with its files, by svc_rmdir). */
void svc_tmpdir(char dir[64]);
void svc_rmdir(const char *dir);

/* gpuaesd --foreground --idle-exit 0 in dir, as our child; returns once it
 * answers and its GPU is up and warm (or known absent).  svc_stop: SIGTERM, then its exit status (0: clean, sanitizers
 * included), -1 if it did not end within 20 s (then killed). */
pid_t svc_start_fg(const char *service, const char *dir);
int svc_stop(pid_t pid);

/* Waits (up to ms) until the service of dir is past its GPU's start-up and
 * warm-up (service/warm.c): its gpu_up (GPUAESD_GPU_READY or _NONE), or -1. */
int svc_wait_warm(const char *dir, int ms);

/* Waits (up to ms) until the service of dir has its spare segments ready
 * (service/spare.c: one, none under GPUAESD_SPARE=0); how many it has. */
unsigned svc_wait_spares(const char *dir, int ms);

/* Waits (up to ms) until nobody answers in dir. */
int svc_wait_gone(const char *dir, int ms);

/* One random job of `op` (0: any) through c: random key size, key, IV,
 * length (up to max_len), offsets and in place or not; the reply must be
 * GPUAESD_OK (need_ok) or any valid one, and every byte it says is done,
 * its iv, iv_end and GCM ghash must match the default provider.  1 when
 * it does, 0 (printed) when not, -1 when submit failed. */
int svc_job_check(gpuaesd_conn *c, unsigned op, size_t max_len, int need_ok, int timeout_ms);

/* The default provider's output for request r on input in (len bytes);
 * may change r and in as svc_job_check's reference does (CTR32, GCM). */
void svc_expected(gpuaesd_job_req *r, unsigned char *in, unsigned char *out);

/* Builds a valid request for c's segment (random), for tests to spoil. */
void svc_make_request(gpuaesd_job_req *r, size_t seg_size);

#endif
