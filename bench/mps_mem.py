#!/usr/bin/env python3
"""mps_mem.py - device memory per gpuaes process (bench/mps.sh's helper).

Starts N load_proc processes through gpuaes (--wait-gpu: each has made its
CUDA context during setup), samples nvidia-smi once all are ready (the
context alone) and every ~0.2 s while they work (context + staging slots +
keystream windows), and appends rows to CSV:
    mode,phase,processes,pid,name,used_mib
phase "ready" / "running" (the largest sample per process); pid "device" is
the GPU's memory.used minus its value before the processes started, i.e.
everything they cost the device (under MPS: the server's share included),
and "device-per-process" that divided by N.  Under MPS nvidia-smi may list the
MPS server (nvidia-cuda-mps-server) rather than the clients: the rows say what
it listed.
"""
import argparse
import os
import select
import subprocess
import sys
import time


def smi(args):
    try:
        r = subprocess.run(["nvidia-smi"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        print("mps_mem: nvidia-smi: %s" % e, file=sys.stderr)
        return []
    if r.returncode != 0:
        print("mps_mem: nvidia-smi %s: %s" % (" ".join(args), r.stderr.strip()), file=sys.stderr)
        return []
    return [l.strip() for l in r.stdout.splitlines() if l.strip()]


def device_used(gpu):
    v = smi(["-i", str(gpu), "--query-gpu=memory.used", "--format=csv,noheader,nounits"])
    try:
        return float(v[0])
    except (IndexError, ValueError):
        return None


def apps(gpu):
    """{pid: (name, MiB)} of the compute processes on the GPU."""
    got = {}
    for l in smi(["-i", str(gpu), "--query-compute-apps=pid,process_name,used_memory",
                  "--format=csv,noheader,nounits"]):
        f = [x.strip() for x in l.split(",")]
        if len(f) >= 3:
            try:
                got[int(f[0])] = (os.path.basename(f[1]), float(f[2]))
            except ValueError:
                pass  # "[N/A]" under some MPS setups
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--load-proc", required=True)
    ap.add_argument("--build-dir", required=True, help="holds gpuaes.so")
    ap.add_argument("--processes", type=int, default=16)
    ap.add_argument("--mode", required=True, help="label: no-mps or mps")
    ap.add_argument("--csv", required=True, help="appended to (header written when new)")
    ap.add_argument("--gpu", type=int, default=0, help="nvidia-smi index")
    ap.add_argument("--bytes", default="2G", help="work per process (load_proc --bytes)")
    ap.add_argument("--timeout", type=float, default=40)
    a = ap.parse_args()

    base = device_used(a.gpu)
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    env = dict(os.environ, LOAD_PROC_READY_FD=str(ready_w), LOAD_PROC_GO_FD=str(go_r))
    cmd = [a.load_proc, "--provider", "gpuaes", "--cipher", "AES-128-CTR", "--dir", "enc", "--size", "64M",
           "--bytes", a.bytes, "--provider-path", a.build_dir, "--wait-gpu"]
    procs = []
    try:
        for _ in range(a.processes):
            procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, env=env, pass_fds=(ready_w, go_r)))
    finally:
        os.close(ready_w)
        os.close(go_r)
    deadline = time.monotonic() + a.timeout
    got = 0
    while got < a.processes and time.monotonic() < deadline:
        rl, _, _ = select.select([ready_r], [], [], max(0.0, deadline - time.monotonic()))
        if not rl:
            break
        b = os.read(ready_r, 64)
        if not b:
            break
        got += len(b)
    os.close(ready_r)
    pids = {p.pid for p in procs}
    rows = []

    def take(phase, seen, dev):
        for pid, (name, mib) in sorted(seen.items()):
            rows.append((a.mode, phase, a.processes, pid, name, "%.0f" % mib))
        if dev is not None and base is not None:
            rows.append((a.mode, phase, a.processes, "device", "", "%.0f" % (dev - base)))
            rows.append((a.mode, phase, a.processes, "device-per-process", "", "%.1f" % ((dev - base) / a.processes)))

    if got == a.processes:
        time.sleep(0.3)  # let the driver's accounting settle
        take("ready", apps(a.gpu), device_used(a.gpu))
    else:
        print("mps_mem: only %d of %d processes got ready" % (got, a.processes), file=sys.stderr)
    os.close(go_w)  # EOF: go
    peak, dev_peak = {}, None
    while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
        for pid, (name, mib) in apps(a.gpu).items():
            if pid not in peak or mib > peak[pid][1]:
                peak[pid] = (name, mib)
        d = device_used(a.gpu)
        if d is not None and (dev_peak is None or d > dev_peak):
            dev_peak = d
        time.sleep(0.2)
    take("running", peak, dev_peak)
    failed = 0
    for p in procs:
        if p.poll() is None:
            p.kill()
        if p.wait() != 0:
            failed += 1
    new = not os.path.exists(a.csv)
    with open(a.csv, "a") as f:
        if new:
            f.write("mode,phase,processes,pid,name,used_mib\n")
        for r in rows:
            f.write(",".join(str(x) for x in r) + "\n")
    listed = len({r[3] for r in rows if r[3] in pids})
    print("mps_mem: %s: %d processes, %d listed by nvidia-smi as themselves, %d failed"
          % (a.mode, a.processes, listed, failed), file=sys.stderr)
    return 1 if failed or got < a.processes else 0


if __name__ == "__main__":
    sys.exit(main())
