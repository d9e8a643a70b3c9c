/*
 * remote_pipeline.c - one job through one gpuaesd connection, in pieces
 * (docs/SERVICE.md, "The pipeline").  A job goes in pieces of the
 * service_chunk (the first a quarter, the second a half of that, so the
 * service starts sooner), each in its own slot of the segment (a ring of W
 * slots) and run there in place.  The calling thread copies pieces in
 * (ahead, while slots are free), posts up to the service's max_inflight,
 * and copies finished pieces out in order, so that the copies overlap the
 * service's work on the pieces in flight; the copies use the copy pool's
 * threads (gpuaes_host_copy: no CUDA).  Out-of-order replies wait for
 * their turn: only a prefix of out[] is ever written, so that a failure
 * anywhere leaves done, iv and out[0..done) as one run would have: a piece
 * that is not OK ends the prefix at its own done, its successors in flight
 * are drained (the connection is reused) and their results dropped.
 *
 * The caller's share (job->cpu_share, as in process: docs/DESIGN.md, "The
 * caller's share of a GPU job"): with nothing to copy and no reply yet, the
 * calling thread takes a piece from the end of what no piece has claimed
 * and runs it on the CPU, instead of sleeping on the service.  Pieces are
 * claimed front to back and shares back to front, so they meet in the
 * middle.
 */
#include <stdio.h>
#include <string.h>
#include <openssl/crypto.h>

#include "debug.h"
#include "gpuaesd_client.h"
#include "gcm/gcm_math.h"
#include "gpu_remote.h"

#define PIECES_MAX 32                  /* slots of the ring, at most */
/* A share: ~40-60 us of one AES-NI core, as in process (cuda/staging/pipeline.cu,
 * kCpuPiece): short enough that replies wait little for the thread to notice
 * them, long enough that the callback's re-init of the default provider is noise. */
#define SHARE_PIECE ((size_t)256 << 10)

typedef struct piece {
    size_t off, len;                   /* in the job */
    unsigned char iv[16];              /* the state at in[off] */
    uint64_t id;                       /* its request's */
    int replied;
    gpuaesd_job_reply rep;
    gpuaes_host_copy_task *out_task;   /* its copy out, begun and not ended yet */
} piece;

typedef struct pipe_state {
    gpuaes_job *job;
    const remote_key *k;
    gpuaesd_conn *c;
    const remote_pipe_settings *s;
    unsigned char *seg;
    size_t chunk, w;                   /* slot size, slots */
    piece p[PIECES_MAX];               /* piece n is p[n % w] */
    size_t n_in, n_sent, n_out, n_free; /* pieces copied in, posted, copying out, slot free again */
    int keystream;                     /* CTR: the service makes keystream, the copy out XORs it */
    size_t next_off;                   /* the next piece's offset */
    unsigned char next_iv[16];         /* and its state */
    size_t cpu_from;                   /* the caller's shares cover [cpu_from, len); pieces stay below */
    size_t touched;                    /* the segment's bytes from its start this job's pieces reach */
    gpuaes_cpu_share_fn share;         /* NULL: no (more) shares */
    size_t bytes_in_flight;
    int stop;                          /* a piece was not OK: post and copy in no more */
    uint64_t ns_in, ns_out, ns_wait, ns_share; /* GPUAES_DEBUG: where a job's time went, */
    uint64_t t0, ns_first;             /* when the first reply came (the ramp's latency) */
    unsigned waits;                    /* and how often the thread slept on the service */
} pipe_state;

static int is_gcm(gpuaes_op op) { return op == GPUAES_GCM_ENCRYPT || op == GPUAES_GCM_DECRYPT; }

static unsigned char *slot_of(pipe_state *ps, size_t n)
{
    return ps->seg + (n % ps->w) * ps->chunk;
}

/* Whether the next piece is claimed now.  CTR as keystream copies nothing
 * in, so its pieces are claimed only as they can be posted: what is not
 * claimed yet is left to the caller's share. */
static int copy_in_due(pipe_state *ps, unsigned inflight_max)
{
    if (ps->stop || ps->next_off >= ps->cpu_from || ps->n_in - ps->n_free >= ps->w)
        return 0;
    return !ps->keystream || (ps->n_sent == ps->n_in && gpuaesd_inflight(ps->c) < inflight_max);
}

/* Copies the next piece into its slot (CTR as keystream: nothing to copy). */
static void copy_in(pipe_state *ps)
{
    gpuaes_job *job = ps->job;
    size_t n = ps->n_in, want = n == 0 ? ps->chunk / 4 : n == 1 ? ps->chunk / 2 : ps->chunk, end;
    piece *p = &ps->p[n % ps->w];

    want = want / 16 * 16;
    p->off = ps->next_off;
    p->len = ps->cpu_from - p->off < want ? ps->cpu_from - p->off : want;
    p->replied = 0;
    memcpy(p->iv, ps->next_iv, 16);
    end = (size_t)(slot_of(ps, n) - ps->seg) + p->len;
    if (end > ps->touched)
        ps->touched = end;
    if (!ps->keystream)
        gpuaes_host_copy(slot_of(ps, n), job->in + p->off, p->len, 0);
    gpuaes_state_after(job->op, ps->next_iv, job->in != NULL ? job->in + p->off : NULL, p->len);
    ps->next_off += p->len;
    ps->n_in++;
}

/* Posts the next copied-in piece: 0, 1 (max_inflight reached), -1 (dead). */
static int post_next(pipe_state *ps)
{
    gpuaes_job *job = ps->job;
    piece *p = &ps->p[ps->n_sent % ps->w];
    gpuaesd_job_req req;
    int rc;

    memset(&req, 0, sizeof(req));
    req.op = !ps->keystream ? remote_wire_op(job->op)
           : job->op == GPUAES_CTR128 ? GPUAESD_OP_KEYSTREAM128 : GPUAESD_OP_KEYSTREAM32;
    req.keylen = (uint32_t)ps->k->keylen;
    memcpy(req.key, ps->k->key, ps->k->keylen);
    memcpy(req.iv, p->iv, 16);
    if (is_gcm(job->op))
        memcpy(req.h, job->h, 16);
    req.in_off = req.out_off = (uint64_t)(slot_of(ps, ps->n_sent) - ps->seg);
    req.len = p->len;
    rc = gpuaesd_post(ps->c, &req, (int)ps->s->timeout_ms);
    p->id = req.id;
    OPENSSL_cleanse(&req, sizeof(req));
    if (rc == 0) {
        ps->n_sent++;
        ps->bytes_in_flight += p->len;
    }
    return rc;
}

/* A reply: to the piece in flight it names (the client library checked it
 * against that request). */
static void record(pipe_state *ps, const gpuaesd_job_reply *rep)
{
    for (size_t n = ps->n_out; n < ps->n_sent; n++) {
        piece *p = &ps->p[n % ps->w];

        if (!p->replied && p->id == rep->id) {
            p->replied = 1;
            p->rep = *rep;
            if (ps->ns_first == 0)
                ps->ns_first = remote_mono_ns() - ps->t0;
            ps->bytes_in_flight -= p->len;
            if (rep->status != GPUAESD_OK)
                ps->stop = 1;
            return;
        }
    }
}

/* The head piece has its reply: its done bytes begin to go out (the slot
 * stays taken until that copy is ended: end_copy_out), the state and GCM's
 * Y(A || B) = Y(A) * H^blocks(B) + Y(B) move on.  0 when it was all done. */
static int copy_out(pipe_state *ps)
{
    gpuaes_job *job = ps->job;
    piece *p = &ps->p[ps->n_out % ps->w];
    size_t done = (size_t)p->rep.done;

    p->out_task = NULL;
    if (done > 0) {
        p->out_task = gpuaes_host_copy_begin(job->out + p->off,
                                             ps->keystream ? job->in + p->off : slot_of(ps, ps->n_out),
                                             ps->keystream ? slot_of(ps, ps->n_out) : NULL, done, 1);
        if (is_gcm(job->op)) {
            unsigned char hm[16];

            gf128_pow(hm, job->h, done / 16);
            gf128_mul(job->ghash, hm);
            for (int i = 0; i < 16; i++)
                job->ghash[i] ^= p->rep.ghash[i];
            OPENSSL_cleanse(hm, sizeof(hm));
        }
        memcpy(job->iv, p->rep.iv, 16);
        job->done = p->off + done;
    }
    OPENSSL_cleanse(&p->rep.iv, sizeof(p->rep.iv) * 3);
    ps->n_out++;                       /* begun: end_copy_out ends it */
    return p->rep.status != GPUAESD_OK ? -1 : 0;
}

/* Ends the oldest copy out (helping it): its slot is free again. */
static void end_copy_out(pipe_state *ps)
{
    gpuaes_host_copy_end(ps->p[ps->n_free % ps->w].out_task);
    ps->p[ps->n_free % ps->w].out_task = NULL;
    ps->n_free++;
}

/* The caller's share: the last SHARE_PIECE bytes (at most) of what no piece
 * has claimed, on the CPU.  Its state: the next piece's, moved on over the
 * unclaimed input before it (still input: nothing writes there yet).  A GCM
 * share goes in front of the tail: Y_tail = Y_share * H^blocks(tail) + Y_tail.
 * Not after a failure.  0: none taken. */
static int cpu_piece(pipe_state *ps)
{
    gpuaes_job *job = ps->job;
    unsigned char st[16], y[16] = { 0 };
    size_t n, a;
    int ok;

    if (ps->share == NULL || ps->stop || ps->cpu_from <= ps->next_off)
        return 0;
    n = ps->cpu_from - ps->next_off < SHARE_PIECE ? ps->cpu_from - ps->next_off : SHARE_PIECE;
    a = ps->cpu_from - n;
    memcpy(st, ps->next_iv, 16);
    gpuaes_state_after(job->op, st, job->in + ps->next_off, a - ps->next_off);
    ok = ps->share(job->cpu_share_arg, job->in + a, job->out + a, n, st, y);
    if (ok && is_gcm(job->op)) {
        unsigned char hk[16];

        gf128_pow(hk, job->h, (job->len - ps->cpu_from) / 16);
        gf128_mul(y, hk);
        for (int i = 0; i < 16; i++)
            job->ghash_tail[i] ^= y[i];
        OPENSSL_cleanse(hk, sizeof(hk));
    }
    OPENSSL_cleanse(st, sizeof(st));
    OPENSSL_cleanse(y, sizeof(y));
    if (ok)
        ps->cpu_from = a;
    else
        ps->share = NULL;              /* the caller fails the operation; the pieces end the job */
    return 1;
}

/* Runs the job through the connection.  0: over (job->status set, the
 * connection still usable, nothing in flight); -1: it is dead (job->done /
 * iv: the prefix copied out so far). */
static int pipeline(pipe_state *ps, int *busy_answer)
{
    gpuaes_job *job = ps->job;
    gpuaesd_job_reply rep;
    unsigned inflight_max = gpuaesd_max_inflight(ps->c);
    int failed = 0, rc = 0;
    uint64_t t;

    for (;;) {
        while ((rc = gpuaesd_poll_reply(ps->c, &rep)) == 1)
            record(ps, &rep);
        if (rc < 0)
            break;
        while (!ps->stop && ps->n_sent < ps->n_in && gpuaesd_inflight(ps->c) < inflight_max)
            if ((rc = post_next(ps)) != 0)
                break;
        if (rc < 0)
            break;
        rc = 0;
        t = remote_mono_ns();
        if (!failed && ps->n_out < ps->n_sent && ps->p[ps->n_out % ps->w].replied) {
            failed = copy_out(ps) != 0;
            ps->ns_out += remote_mono_ns() - t;
            continue;
        }
        if (copy_in_due(ps, inflight_max)) {
            copy_in(ps);               /* while the pool copies the piece before out */
            ps->ns_in += remote_mono_ns() - t;
            continue;
        }
        if (ps->n_free < ps->n_out) {  /* nothing else to do: help the oldest copy out */
            end_copy_out(ps);
            ps->ns_out += remote_mono_ns() - t;
            continue;
        }
        if (cpu_piece(ps)) {           /* or work on the job's end, rather than sleep */
            ps->ns_share += remote_mono_ns() - t;
            continue;
        }
        if (gpuaesd_inflight(ps->c) == 0)
            break;                     /* all out; or failed, and the rest drained */
        rc = gpuaesd_wait_any(ps->c, &rep, (int)(ps->s->timeout_ms + ps->bytes_in_flight / 1000000));
        ps->ns_wait += remote_mono_ns() - t;
        ps->waits++;
        if (rc != 0)
            break;
        record(ps, &rep);
    }
    while (ps->n_free < ps->n_out)     /* before the segment can go (the caller may unmap it) */
        end_copy_out(ps);
    OPENSSL_cleanse(&rep, sizeof(rep));
    if (rc < 0)
        return -1;
    if (!failed) {
        job->status = GPUAES_OK;
        return 0;
    }
    {
        const piece *p = &ps->p[(ps->n_out - 1) % ps->w];   /* the one that was not OK */
        uint32_t st = p->rep.status;

        if (job->done == 0 && st == GPUAESD_BUSY) {
            job->status = GPUAES_BUSY;
        } else {
            job->status = GPUAES_FAILED;
            snprintf(job->error, sizeof(job->error), "gpuaesd answered status %u after %zu bytes", st,
                     job->done);
        }
        *busy_answer = st == GPUAESD_BUSY;
        if (p->rep.done == 0)
            memcpy(job->iv, p->iv, 16);  /* the state at in[done]: the piece's start */
    }
    return 0;
}

int remote_pipeline(gpuaes_job *job, const remote_key *k, gpuaesd_conn *c, const remote_pipe_settings *s,
                    int *busy_answer, size_t *warm)
{
    pipe_state *ps;
    size_t segn;
    int rc;

    *busy_answer = 0;
    if ((ps = OPENSSL_zalloc(sizeof(*ps))) == NULL)
        return 0;                      /* job->status: BUSY, nothing done */
    ps->job = job;
    ps->k = k;
    ps->c = c;
    ps->s = s;
    ps->seg = gpuaesd_segment(c, &segn);
    /* CTR: the service writes the keystream into the slots (no copy in, PCIe
     * one way) and the copy out XORs it into out[]: one host pass, in pieces
     * of half service_chunk (H200, one thread 64 MiB: 4 MiB pieces 29-30
     * GB/s, 8 MiB 25-29, 16 MiB 22-23; copies in and out: 8 MiB 25, 4 MiB
     * 15-19, 16 MiB 22: bench/results/README.md, earlier runs:
     * 2026-11-24-h200/s26-e). */
    ps->keystream = s->ctr_keystream && (job->op == GPUAES_CTR128 || job->op == GPUAES_CTR32);
    ps->chunk = ps->keystream && s->chunk >= 8192 ? s->chunk / 2 / 4096 * 4096 : s->chunk;
    if (ps->chunk > segn)
        ps->chunk = segn;
    ps->w = segn / ps->chunk < PIECES_MAX ? segn / ps->chunk : PIECES_MAX;
    ps->cpu_from = job->len;
    ps->share = job->in != NULL ? job->cpu_share : NULL;
    memcpy(ps->next_iv, job->iv, 16);
    ps->t0 = remote_mono_ns();
    rc = pipeline(ps, busy_answer);
    job->cpu_from = ps->cpu_from;
    /* Slots this process had not touched yet: their pages faulted in during
     * the copies (a fresh 64 MiB segment: 40-90 ms against ~3 for the job;
     * the job log of service-share-28cb1db call F, bench/results/README.md,
     * earlier runs).  Not the path's speed: dispatch must not learn it. */
    if (ps->touched > *warm) {
        job->first_use = 1;
        *warm = ps->touched;
    }
    if (rc == 0 && job->status == GPUAES_OK && job->done != job->cpu_from) {
        job->status = GPUAES_FAILED;   /* every piece OK, yet a gap: never trust it */
        snprintf(job->error, sizeof(job->error), "gpuaesd's pieces ended at %zu of %zu bytes", job->done,
                 job->cpu_from);
    }
    if (gpuaes_debug_enabled())
        gpuaes_debug("service job of %zu bytes: %.3f ms (copy in %.3f, copy out %.3f, waiting %.3f: %u sleeps, "
                     "first reply at %.3f; the caller's share %zu bytes in %.3f), %zu pieces%s",
                     job->len, (double)(remote_mono_ns() - ps->t0) / 1e6, (double)ps->ns_in / 1e6,
                     (double)ps->ns_out / 1e6, (double)ps->ns_wait / 1e6, ps->waits,
                     (double)ps->ns_first / 1e6, job->len - ps->cpu_from, (double)ps->ns_share / 1e6,
                     ps->n_in, job->first_use ? ", a first use of the segment (no sample)" : "");
    OPENSSL_cleanse(ps->next_iv, sizeof(ps->next_iv));
    OPENSSL_clear_free(ps, sizeof(*ps));
    return rc;
}
