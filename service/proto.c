/*
 * proto.c - validation of gpuaesd's messages (include/gpuaesd_proto.h), the
 * one copy both ends use: the service checks every request with it before
 * touching anything a request names, the client every reply.
 */
#include <string.h>

#include "gpuaesd_proto.h"
#include "gpuaesd_load.h"

/* The structs are the wire format: no padding, sizes fixed. */
_Static_assert(sizeof(gpuaesd_hdr) == 16, "gpuaesd_hdr");
_Static_assert(sizeof(gpuaesd_hello) == 32, "gpuaesd_hello");
_Static_assert(sizeof(gpuaesd_hello_reply) == 40, "gpuaesd_hello_reply");
_Static_assert(sizeof(gpuaesd_job_req) == 120, "gpuaesd_job_req");
_Static_assert(sizeof(gpuaesd_job_reply) == 88, "gpuaesd_job_reply");
/* 280: the DMA counters (issue 22, step "registration for DMA") grew it from
 * 240, 288 the spare segments' counter, 296 the job rings'; both ends insist
 * on the exact size (and version), so a client and a service of different
 * builds see a STATUS_REPLY of the other size as malformed. */
_Static_assert(sizeof(gpuaesd_status_reply) == 296, "gpuaesd_status_reply");
_Static_assert(sizeof(gpuaesd_device_load) == 144, "gpuaesd_device_load");
_Static_assert(sizeof(gpuaesd_ring) <= GPUAESD_RING_BYTES && GPUAESD_RING_SLOTS >= GPUAESD_INFLIGHT_MAX
               && (GPUAESD_RING_SLOTS & (GPUAESD_RING_SLOTS - 1)) == 0, "gpuaesd_ring");
_Static_assert(sizeof(gpuaesd_devices_reply) == 24 + 16 * 144, "gpuaesd_devices_reply");

static size_t type_size(enum gpuaesd_type t)
{
    switch (t) {
    case GPUAESD_HELLO: return sizeof(gpuaesd_hello);
    case GPUAESD_HELLO_REPLY: return sizeof(gpuaesd_hello_reply);
    case GPUAESD_JOB: return sizeof(gpuaesd_job_req);
    case GPUAESD_JOB_REPLY: return sizeof(gpuaesd_job_reply);
    case GPUAESD_STATUS: return sizeof(gpuaesd_hdr);
    case GPUAESD_STATUS_REPLY: return sizeof(gpuaesd_status_reply);
    case GPUAESD_DEVICES: return sizeof(gpuaesd_hdr);
    case GPUAESD_DEVICES_REPLY: return sizeof(gpuaesd_devices_reply);
    }
    return 0;
}

void gpuaesd_hdr_init(gpuaesd_hdr *h, enum gpuaesd_type type, size_t size)
{
    h->magic = GPUAESD_MAGIC;
    h->version = GPUAESD_VERSION;
    h->type = (uint16_t)type;
    h->size = (uint32_t)size;
    h->reserved = 0;
}

int gpuaesd_check_hdr(const void *msg, size_t n, enum gpuaesd_type type)
{
    gpuaesd_hdr h;
    size_t want = type_size(type);

    if (msg == NULL || want == 0 || n != want)
        return -1;
    memcpy(&h, msg, sizeof(h));
    if (h.magic != GPUAESD_MAGIC || h.version != GPUAESD_VERSION || h.type != (uint16_t)type
        || h.size != want || h.reserved != 0)
        return -1;
    return 0;
}

static int all_zero(const uint8_t *p, size_t n)
{
    uint8_t acc = 0;

    for (size_t i = 0; i < n; i++)
        acc |= p[i];
    return acc == 0;
}

int gpuaesd_check_hello(const void *msg, size_t n)
{
    gpuaesd_hello m;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_HELLO) != 0)
        return -1;
    memcpy(&m, msg, sizeof(m));
    if (m.seg_size < GPUAESD_SEG_MIN || m.seg_size > GPUAESD_SEG_MAX || m.seg_size % 4096 != 0
        || (m.flags & ~(GPUAESD_HELLO_WANT_SEG | GPUAESD_HELLO_RING)) != 0)
        return -1;
    return 0;
}

/* [off, off + len) inside [0, seg): no overflow (len <= seg checked first). */
static int in_segment(uint64_t off, uint64_t len, uint64_t seg)
{
    return len <= seg && off <= seg - len;
}

int gpuaesd_check_request(const void *msg, size_t n, uint64_t seg_size, uint64_t max_job)
{
    gpuaesd_job_req r;
    int ok;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_JOB) != 0)
        return -1;
    memcpy(&r, msg, sizeof(r));
    ok = r.op >= GPUAESD_OP_ECB_ENCRYPT && r.op <= GPUAESD_OP_LAST
        && (r.keylen == 16 || r.keylen == 24 || r.keylen == 32)
        && all_zero(r.key + r.keylen, sizeof(r.key) - r.keylen)
        && (r.op == GPUAESD_OP_GCM_ENCRYPT || r.op == GPUAESD_OP_GCM_DECRYPT || all_zero(r.h, 16))
        && r.len != 0 && r.len % 16 == 0 && r.len <= max_job
        && in_segment(r.in_off, r.len, seg_size) && in_segment(r.out_off, r.len, seg_size)
        && (r.in_off == r.out_off
            || (r.op < GPUAESD_OP_KEYSTREAM128 && (r.in_off + r.len <= r.out_off || r.out_off + r.len <= r.in_off)));
    memset(&r, 0, sizeof(r));          /* the key copy */
    __asm__ __volatile__("" : : "r"(&r) : "memory");
    return ok ? 0 : -1;
}

int gpuaesd_check_reply(const void *msg, size_t n, const gpuaesd_job_req *req)
{
    gpuaesd_job_reply r;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_JOB_REPLY) != 0 || req == NULL)
        return -1;
    memcpy(&r, msg, sizeof(r));
    if (r.id != req->id || r.reserved != 0 || r.done > req->len || r.done % 16 != 0)
        return -1;
    switch (r.status) {
    case GPUAESD_OK: return r.done == req->len ? 0 : -1;
    case GPUAESD_BUSY:
    case GPUAESD_EINVAL: return r.done == 0 ? 0 : -1;
    case GPUAESD_FAILED: return 0;
    default: return -1;
    }
}

int gpuaesd_check_hello_reply(const void *msg, size_t n)
{
    gpuaesd_hello_reply r;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_HELLO_REPLY) != 0)
        return -1;
    memcpy(&r, msg, sizeof(r));
    if (r.status > GPUAESD_ESEGMENT
        || (r.flags & ~(GPUAESD_HELLO_SEG_GIVEN | GPUAESD_HELLO_NO_SPARE | GPUAESD_HELLO_RING_GIVEN)) != 0
        || ((r.flags & (GPUAESD_HELLO_SEG_GIVEN | GPUAESD_HELLO_RING_GIVEN)) && r.status != GPUAESD_OK)
        || ((r.flags & GPUAESD_HELLO_NO_SPARE) && r.status != GPUAESD_ESEGMENT))
        return -1;
    return r.status != GPUAESD_OK || (r.max_inflight >= 1 && r.max_inflight <= GPUAESD_INFLIGHT_MAX) ? 0 : -1;
}

int gpuaesd_check_status_reply(const void *msg, size_t n)
{
    gpuaesd_status_reply r;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_STATUS_REPLY) != 0)
        return -1;
    memcpy(&r, msg, sizeof(r));
    return memchr(r.gpu, '\0', sizeof(r.gpu)) != NULL && r.gpu_up <= GPUAESD_GPU_NONE ? 0 : -1;
}

int gpuaesd_check_devices_reply(const void *msg, size_t n)
{
    gpuaesd_devices_reply r;

    if (gpuaesd_check_hdr(msg, n, GPUAESD_DEVICES_REPLY) != 0)
        return -1;
    memcpy(&r, msg, sizeof(r));
    if (r.n < 1 || r.n > GPUAESD_DEVICES_MAX || r.reserved != 0)
        return -1;
    for (uint32_t i = 0; i < r.n; i++)
        if (memchr(r.dev[i].gpu, '\0', sizeof(r.dev[i].gpu)) == NULL || r.dev[i].gpu_up > GPUAESD_GPU_NONE)
            return -1;
    return 0;
}

int gpuaesd_check_load(const gpuaesd_load *v)
{
    uint64_t jobs = (uint64_t)v->jobs_queued + v->jobs_running;

    if (v->jobs_queued > GPUAESD_LOAD_JOBS_MAX || v->jobs_running > GPUAESD_LOAD_JOBS_MAX
        || v->clients > GPUAESD_LOAD_JOBS_MAX || v->clients_busy > v->clients || v->clients_busy > jobs
        || v->bytes_inflight > jobs * GPUAESD_SEG_MAX || v->gpu_up > GPUAESD_GPU_NONE || v->reserved != 0)
        return -1;
    for (int op = 0; op < GPUAESD_LOAD_OPS; op++)
        if (v->rate[op] > GPUAESD_LOAD_RATE_MAX)
            return -1;
    return 0;
}
