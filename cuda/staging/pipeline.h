// pipeline.h - one GPU job's pipeline (gpuaes_gpu_run, job_run.cu): moves
// the job through a slot's pinned staging buffers and CUDA streams
// (slot_pool.h), chunk by chunk, with every stage of different chunks in
// flight at once (cuda/ internal).
//
// A chunk goes through four stages: copy-in (the caller's pageable in[] ->
// pinned, on the copy pool's threads), GPU (H2D, kernel(s), D2H on the
// lane's stream), copy-out (pinned -> the caller's out[], copy pool again),
// retired (done += n).  Lane i % lanes holds chunk i from its copy-in to its
// retirement.  CTR without GHASH needs no input on the GPU: its GPU stage
// makes the chunk's keystream only (no copy-in, no H2D), and its copy-out
// is out[] = in[] ^ keystream (four passes over host memory per byte
// instead of six, and PCIe one way).  The calling thread drives the stages
// (a poll loop: no thread is woken per chunk) and copies parts itself when
// nothing else is ready.
//
// The caller's share (job.cpu_share): when nothing moved and no copy part
// is left to help with, the calling thread takes a piece (kCpuPiece) from
// the END of the region no chunk has claimed yet, [next_off_, cpu_from_),
// and processes it on the CPU through the callback.  Chunks are claimed
// front to back and pieces back to front, so the GPU and the caller meet in
// the middle and finish together without any tuning; one thread moves both
// ends, so the split point needs no atomics.  A piece's CBC/CFB chain block
// in[a-16..a) is still the input when it is read, except at the meeting
// point, where the GPU's last chunk may already be copied out in place:
// there it comes from the chunk's last_in, taken from in[] when its copy-in
// started.  GCM: each piece's Y (GHASH times H) is prepended to the tail's,
// Y_tail' = Y_piece * H^|tail| ^ Y_tail.  With nothing at all to do, the
// caller spins kPollBeforeSleepNs (runtime/poll_wait.h), then sleeps until
// the oldest copy or GPU chunk it waits for completes (copy_wait; an event
// with blocking sync).
//
// Why this shape (measured, bench/NOTES.md): the host copies, not PCIe or the
// kernels, bound one job; copy-ins and copy-outs of different chunks
// overlap each other here as well as the DMA, and 6 lanes of 4 MiB keep 24
// MiB in flight: enough to cover the latencies, and little enough that the
// staging stays largely in the last-level cache, where the DMA reads it (6
// beat 8 at 64 MiB in every mode, 39-41 against 37-39 GB/s for ECB, NOTES
// §11).  A job's chunks ramp up from 256 KiB and down again at its
// end (chunk_len), so that the GPU starts early and the last copy-out is short.
//
// Order and failures: GPU completions are taken and copy-outs started in
// chunk order, and a chunk is copied out only once its GPU stage succeeded,
// so out[0..done) is final and out[done..cpu_from) untouched whatever fails (a
// copy-out of chunk j never starts before every chunk < j succeeded; copy-ins
// only read in[]).  In place (out == in) chunks write only their own range.
//
// Direct jobs (in[] and out[] in memory registered for DMA: gpuaesd's
// client segments, gpuaes_gpu_host_register): the same chunks, lanes and
// stages with nothing to copy.  The copy-in and copy-out are empty (still
// started and waited for, so the stage order is unchanged), the H2D reads
// in + off, the D2H writes out + off, CTR takes its input to the GPU (no
// keystream + host XOR), and there is no zero-copy.  A chunk's D2H is
// queued behind its own kernel only, so after a failure at chunk i, chunks
// after it already on the GPU may still write their (correct) output: out[]
// beyond done is not untouched (gpuaes_gpu.h).  In place, chunk i's D2H
// writes only [off, off + n), which no later chunk's H2D reads; the CBC/CFB
// chain block is taken from in[] at the copy-in, before the D2H is queued.
//
// Secrets (docs/DESIGN.md, "Secrets"): when a job returns, every pinned
// byte it wrote is zero again, and a wipe of every device byte it wrote is
// queued on the lane's stream, ahead of anything the lane does next.  The
// pinned side costs no extra pass: the copy-out that reads a chunk's
// output (or keystream) zeroes it as it reads (kCopyWipe), with the
// zero-copy input at the same offsets; the few bytes no copy-out reads (GCM's
// 16-byte chunk GHASH, its matrices, the chunks of a failed job) are wiped
// on the caller's thread.
#ifndef GPUAES_PIPELINE_H
#define GPUAES_PIPELINE_H

#include "gpuaes_gpu.h"
#include "staging/slot_pool.h"

namespace gpuaes {

// Runs `job` (valid, len > 0; kmode its KMode) on `slot`, inside
// copy_pool_enter()/copy_pool_leave(); fills job->done, iv, cpu_from,
// ghash, ghash_tail, status and error.  direct: in[] and out[] lie in
// registered memory (host_register.h), and each chunk's H2D reads in[]
// and its D2H writes out[] themselves.  Returns false when the slot's
// streams may not be idle (then the slot must not be reused); *fatal: the
// GPU is unusable now.
bool run_pipeline(gpuaes_job *job, Slot *slot, int kmode, bool direct, bool traced, bool *fatal);

} // namespace gpuaes

#endif
