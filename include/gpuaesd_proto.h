/*
 * gpuaesd_proto.h - the wire protocol between gpuaes clients and gpuaesd,
 * the per-user GPU service (docs/SERVICE.md, "Wire format").
 *
 * Messages travel over an AF_UNIX SOCK_SEQPACKET socket: one message per
 * datagram, so a short or long one is seen as such, never merged or split.
 * Every message is a fixed-size struct that starts with gpuaesd_hdr; all
 * fields are little-endian (both ends run on one host: checked below at
 * compile time, so no conversion is needed).  Data never travels on the
 * socket: requests name offsets into the client's memfd segment, which the
 * client passes once, with its hello (SCM_RIGHTS).
 *
 * Both ends validate with the functions at the end (service/proto.c): the
 * service every request, the client every reply.
 */
#ifndef GPUAESD_PROTO_H
#define GPUAESD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "gpuaesd's wire format is little-endian host structs"
#endif

#define GPUAESD_MAGIC   0x64616767u   /* "ggad" in memory order: g g a d */
#define GPUAESD_VERSION 4u           /* 2: several jobs in flight (max_inflight); 3: keystream ops;
                                        4: job rings, DEVICES */

/* Jobs of one connection the service runs at once (HELLO_REPLY.max_inflight):
 * it reads no further request of that connection while so many run, so a
 * client that sends more is throttled by its socket, never refused. */
#define GPUAESD_INFLIGHT_MAX 64u

/* The segment: what a client may pass (bytes, a multiple of the page size). */
#define GPUAESD_SEG_MIN ((uint64_t)4096)
#define GPUAESD_SEG_MAX ((uint64_t)64 << 30)

enum gpuaesd_type {
    GPUAESD_HELLO = 1,       /* client -> service, with the memfd (SCM_RIGHTS) */
    GPUAESD_HELLO_REPLY,     /* service -> client */
    GPUAESD_JOB,             /* client -> service */
    GPUAESD_JOB_REPLY,       /* service -> client */
    GPUAESD_STATUS,          /* client -> service (no hello needed) */
    GPUAESD_STATUS_REPLY,    /* service -> client */
    GPUAESD_DEVICES,         /* client -> service (no hello needed): the load of each GPU */
    GPUAESD_DEVICES_REPLY    /* service -> client */
};

/* Operation codes on the wire: fixed numbers, independent of gpuaes_op. */
enum gpuaesd_op {
    GPUAESD_OP_ECB_ENCRYPT = 1,
    GPUAESD_OP_ECB_DECRYPT,
    GPUAESD_OP_CTR128,
    GPUAESD_OP_CTR32,
    GPUAESD_OP_CBC_DECRYPT,
    GPUAESD_OP_CFB128_DECRYPT,
    GPUAESD_OP_GCM_ENCRYPT,
    GPUAESD_OP_GCM_DECRYPT,
    /* Keystream windows (docs/SERVICE.md, "Keystream windows"): out =
     * E(ctr), E(ctr+1), ... (CTR128's counting, or CTR32's), no input:
     * in_off must equal out_off. */
    GPUAESD_OP_KEYSTREAM128,
    GPUAESD_OP_KEYSTREAM32,
    GPUAESD_OP_LAST = GPUAESD_OP_KEYSTREAM32
};

/* Reply status. */
enum gpuaesd_status {
    GPUAESD_OK = 0,          /* all of [0, len) done */
    GPUAESD_BUSY,            /* nothing done (no GPU now, start-up, memory cap): do it on the CPU */
    GPUAESD_FAILED,          /* the GPU failed: [0, done) is done, the rest is the caller's */
    GPUAESD_EINVAL,          /* the request was malformed: nothing done */
    GPUAESD_ESEGMENT         /* hello: the memfd was refused (missing, size, seals, mmap) */
};

typedef struct gpuaesd_hdr {
    uint32_t magic;          /* GPUAESD_MAGIC */
    uint16_t version;        /* GPUAESD_VERSION */
    uint16_t type;           /* enum gpuaesd_type */
    uint32_t size;           /* sizeof the whole message */
    uint32_t reserved;       /* 0 */
} gpuaesd_hdr;

typedef struct gpuaesd_hello {
    gpuaesd_hdr hdr;
    uint64_t seg_size;       /* bytes of the memfd the client passes, GPUAESD_SEG_MIN..MAX */
    uint32_t pid;            /* informational (the service takes SO_PEERCRED's) */
    uint32_t flags;          /* GPUAESD_HELLO_* */
} gpuaesd_hello;

/* hello.flags: no memfd passed; the client asks for one of the service's
 * spare segments of seg_size bytes (docs/SERVICE.md, "Shared memory").
 * RING: jobs and replies through a job ring, not the socket ("Job rings"). */
#define GPUAESD_HELLO_WANT_SEG 1u
#define GPUAESD_HELLO_RING 2u

/* hello_reply.flags: SEG_GIVEN (status OK): the reply's first descriptor is
 * the segment, a sealed memfd of seg_size bytes registered for DMA, the
 * published load's (if any) the second.  NO_SPARE (status ESEGMENT): none
 * ready; the connection stays open for a hello with the client's own memfd. */
#define GPUAESD_HELLO_SEG_GIVEN 1u
#define GPUAESD_HELLO_NO_SPARE 2u
/* RING_GIVEN (status OK, asked for with RING): the reply's first three
 * descriptors are the job ring (a sealed memfd of GPUAESD_RING_BYTES), the
 * service's wake-up eventfd and the client's; then the segment (SEG_GIVEN),
 * then the published load (if any).  Without it, jobs go over the socket. */
#define GPUAESD_HELLO_RING_GIVEN 4u

typedef struct gpuaesd_hello_reply {
    gpuaesd_hdr hdr;
    uint32_t status;         /* GPUAESD_OK or why not */
    uint32_t service_pid;
    uint64_t max_job;        /* the longest job the service takes */
    uint32_t max_inflight;   /* jobs it runs at once for this connection, 1..GPUAESD_INFLIGHT_MAX */
    uint32_t flags;          /* GPUAESD_HELLO_SEG_GIVEN or _NO_SPARE (with WANT_SEG), RING_GIVEN */
} gpuaesd_hello_reply;

/*
 * One whole-block job (include/gpuaes_gpu.h, gpuaes_job) on the segment:
 * in[0..len) at in_off, out at out_off; out_off == in_off (in place) or the
 * two ranges disjoint; len a non-zero multiple of 16.
 */
typedef struct gpuaesd_job_req {
    gpuaesd_hdr hdr;
    uint64_t id;             /* echoed in the reply */
    uint32_t op;             /* enum gpuaesd_op */
    uint32_t keylen;         /* 16, 24 or 32 */
    uint8_t key[32];         /* keylen bytes used, the rest 0 */
    uint8_t iv[16];          /* counter block of in[0], or the previous ciphertext block */
    uint8_t h[16];           /* GCM ops: H = E_K(0^128); else 0 */
    uint64_t in_off;
    uint64_t out_off;
    uint64_t len;
} gpuaesd_job_req;

typedef struct gpuaesd_job_reply {
    gpuaesd_hdr hdr;
    uint64_t id;
    uint32_t status;         /* enum gpuaesd_status */
    uint32_t reserved;
    uint64_t done;           /* out[0..done) final (multiple of 16); len on GPUAESD_OK */
    uint8_t iv[16];          /* the state for in[done] (gpuaes_job.iv after the run) */
    uint8_t iv_end[16];      /* the state for in[len] */
    uint8_t ghash[16];       /* GCM ops: Y of out[0..done)'s ciphertext (gpuaes_job.ghash) */
} gpuaesd_job_reply;

enum gpuaesd_gpu_up {
    GPUAESD_GPU_STARTING = 0,    /* the GPU layer's initialisation is under way (jobs: BUSY) */
    GPUAESD_GPU_READY = 1,       /* a usable GPU */
    GPUAESD_GPU_NONE = 2         /* initialised, no usable GPU (jobs: BUSY) */
};

typedef struct gpuaesd_status_reply {
    gpuaesd_hdr hdr;
    uint32_t service_pid;
    uint32_t clients;        /* connected now */
    uint64_t clients_total;  /* accepted since start */
    uint64_t refused;        /* connections refused (another uid) */
    uint64_t jobs;           /* job requests answered */
    uint64_t jobs_gpu;       /* of them with done > 0 */
    uint64_t bytes_gpu;      /* sum of done */
    uint64_t malformed;      /* requests answered GPUAESD_EINVAL, or connections dropped for bad framing */
    uint64_t uptime_ms;
    /* Registration for DMA (gpuaes_gpu_host_register): */
    uint64_t segments_registered; /* client segments registered now */
    uint64_t register_failed;     /* registrations that failed (those clients are served through staging) */
    uint64_t jobs_direct;         /* of jobs_gpu, run by DMA straight from the segment */
    uint64_t bytes_direct;        /* their done */
    uint64_t segments_given;      /* spare segments handed out with a hello (GPUAESD_HELLO_WANT_SEG) */
    uint64_t jobs_ring;           /* of jobs, those that came through a job ring */
    uint32_t gpu_up;         /* GPUAESD_GPU_*: whether jobs can run on a GPU now */
    uint32_t spares_ready;   /* spare segments ready now */
    char gpu[160];           /* gpuaes_gpu_state(), NUL-terminated */
} gpuaesd_status_reply;

/*
 * A job ring (docs/SERVICE.md, "Job rings"): shared memory the service makes
 * for one connection, so that a job and its reply cost no socket message.
 * The client writes requests into sq[] and publishes them by advancing
 * sq_tail; the service copies each out once, checks the copy, and publishes
 * replies in cq[] by advancing cq_tail.  Indices count up (mod 2^32); slot
 * = index % GPUAESD_RING_SLOTS.  Each side keeps its own indices privately
 * and believes nothing of the other's beyond a range check.  A side that
 * found nothing to do sets its *_sleeping word, re-checks, and waits on its
 * eventfd (and the socket, which still tells a peer's death); the other
 * side, after publishing, writes that eventfd only when the word is set.
 * Both check and publish with sequentially consistent fences between, so
 * that no wake-up is lost.
 */
#define GPUAESD_RING_SLOTS 64u        /* >= GPUAESD_INFLIGHT_MAX: a client with room never overruns */
#define GPUAESD_RING_MAGIC 0x676e6972u /* "ring" */
#define GPUAESD_RING_BYTES 16384u

typedef struct gpuaesd_ring {
    uint32_t magic, slots;                   /* GPUAESD_RING_MAGIC, GPUAESD_RING_SLOTS */
    _Alignas(64) uint32_t sq_tail;           /* client: requests published */
    uint32_t cli_sleeping;                   /* client: 1 while it waits for a reply */
    _Alignas(64) uint32_t sq_head;           /* service: requests taken */
    uint32_t svc_sleeping;                   /* service: 1 while it waits for a request */
    _Alignas(64) uint32_t cq_tail;           /* service: replies published */
    _Alignas(64) uint32_t cq_head;           /* client: replies taken */
    _Alignas(64) gpuaesd_job_req sq[GPUAESD_RING_SLOTS];
    gpuaesd_job_reply cq[GPUAESD_RING_SLOTS];
} gpuaesd_ring;

/* The GPUs one service uses at most (docs/SERVICE.md, "Several GPUs"): the
 * service's own process serves the first, a worker process each other. */
#define GPUAESD_DEVICES_MAX 16u

typedef struct gpuaesd_device_load {
    uint32_t device;         /* CUDA device index */
    uint32_t pid;            /* the process that serves it */
    uint32_t gpu_up;         /* GPUAESD_GPU_* */
    uint32_t clients;        /* connections it serves now */
    uint32_t jobs_queued;
    uint32_t jobs_running;
    uint64_t jobs_gpu;       /* jobs with done > 0 */
    uint64_t bytes_gpu;
    uint64_t bytes_inflight;
    char gpu[96];            /* its description, NUL-terminated */
} gpuaesd_device_load;

typedef struct gpuaesd_devices_reply {
    gpuaesd_hdr hdr;
    uint32_t n;              /* entries of dev[] in use, 1..GPUAESD_DEVICES_MAX */
    uint32_t reserved;       /* 0 */
    gpuaesd_device_load dev[GPUAESD_DEVICES_MAX];
} gpuaesd_devices_reply;

/* A header for a message of this type and struct size. */
void gpuaesd_hdr_init(gpuaesd_hdr *h, enum gpuaesd_type type, size_t size);

/* 0 when the n bytes at msg are a well-formed message of `type` (magic,
 * version, type, size == n == the struct's size); -1 otherwise. */
int gpuaesd_check_hdr(const void *msg, size_t n, enum gpuaesd_type type);

/* Service side: 0 when the hello is well-formed (header, seg_size in range
 * and page-aligned, no unknown flag). */
int gpuaesd_check_hello(const void *msg, size_t n);

/* Service side: 0 when the n bytes are a job request that is valid for a
 * segment of seg_size bytes: header, op, keylen, unused key bytes 0, len a
 * non-zero multiple of 16 and <= max_job, both ranges inside the segment
 * without overflow, out == in or disjoint.  -1 otherwise. */
int gpuaesd_check_request(const void *msg, size_t n, uint64_t seg_size, uint64_t max_job);

/* Client side: 0 when a job reply is well-formed and consistent with the
 * request (id, status known, done <= len, a multiple of 16, == len on OK,
 * 0 on BUSY / EINVAL). */
int gpuaesd_check_reply(const void *msg, size_t n, const gpuaesd_job_req *req);

/* Client side: 0 when a hello or status reply is well-formed (a hello
 * reply's max_inflight in 1..GPUAESD_INFLIGHT_MAX when its status is OK;
 * SEG_GIVEN only with OK, NO_SPARE only with ESEGMENT). */
int gpuaesd_check_hello_reply(const void *msg, size_t n);
int gpuaesd_check_status_reply(const void *msg, size_t n);
int gpuaesd_check_devices_reply(const void *msg, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* GPUAESD_PROTO_H */
