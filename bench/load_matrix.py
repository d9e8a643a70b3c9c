#!/usr/bin/env python3
"""load_matrix.py - the load matrix (issue 13): gpuaes against OpenSSL's default
provider under threads, processes, short processes and `openssl speed`.

usage: load_matrix.py --build-dir DIR [--out DIR] [--quick] [--allow-no-gpu] [options]
       load_matrix.py --report DIR      (README.md, heatmap.png and the table again
                                         from DIR/load.csv; nothing is measured)

Builds nothing: DIR must hold gpuaes.so, bench/evp_bench and bench/load_proc
(`cmake --build DIR --target gpuaes evp_bench load_proc`; --backend service: gpuaesd too).  bench/load_matrix.sh
runs this with python3.

Workloads (every cell measures default and gpuaes alternately, A B A B):
  threads        evp_bench: threads x update sizes x (cipher, direction); its
                 medians of --repeats alternated measurements; gpuaes's GPU is
                 ready before timing (evp_bench asks the "gpu" parameter, which
                 waits for the start-up); each cell below --confirm-below
                 (0.95) is then measured again alone, against an A/A control
  processes      N load_proc processes at once, each --proc-bytes in updates of
                 the given size through one provider, started together after
                 their setup; GB/s = all bytes / (start signal -> the slowest
                 one's last update); gpuaes's GPU start-up happens inside the
                 timed window, as a user meets it; median of --rounds rounds
  startup        whole short processes, wall time, median of --startup-runs:
                 `openssl enc -aes-256-ctr` of files in /dev/shm, `openssl list
                 -providers`, `openssl dgst -sha256` of 1 MiB (control, no AES);
                 gpuaes = OPENSSL_CONF pointing at openssl.cnf.example with the
                 build's gpuaes.so; default = plain openssl
  speed          `openssl speed -evp C -bytes N -seconds S` (CPU-time figures)
  speed-elapsed  the same with -elapsed (wall-clock figures)
Opt-in (--only; issue 22):
  processes-long as processes: 1, 4, 16 processes, each --long-bytes (10G) of 64M
                 updates, AES-128-CTR, AES-256-GCM, AES-256-ECB; device memory
                 (nvidia-smi) sampled during each batch, in README.md
  fresh-warm     one new load_proc, --fresh-bytes (1G) in 64M updates, wall time
  fresh-cold     spawn to exit; service backend: gpuaesd running and warm, or
                 stopped (fresh-cold-max-call rows: the longest single update);
                 in-process: both the same fresh process
--backend inprocess|service: GPUAES_GPU_BACKEND for every process; service:
gpuaesd on a private socket directory, stopped at the end.

Writes into the output directory (at most 5 files):
  load.csv     workload,cipher,direction,update_bytes,threads,processes,path,
               gbps,cpu_core_s_per_gb,wall_ms  (rewritten after every step)
  heatmap.png  gpuaes/default per cell (without matplotlib: skipped, said so)
  README.md    the ratios, worst cells first; meta in short
  meta.txt     GPU, driver, CPU, memory, OpenSSL, commit, command, plan
  run.log      everything the tools printed
"""
import argparse
import copy
import csv
import datetime
import math
import os
import platform
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

from sizes import parse_size, size_label

HEADER = ["workload", "cipher", "direction", "update_bytes", "threads", "processes", "path", "gbps",
          "cpu_core_s_per_gb", "wall_ms"]
WORKLOADS = ["threads", "processes", "startup", "speed", "speed-elapsed", "processes-long", "fresh-warm",
             "fresh-cold", "fresh-cold-max-call"]
STEPS = ["threads", "processes", "startup", "speed"]  # the default --only
EXTRA_STEPS = ["processes-long", "fresh-warm", "fresh-cold"]  # issue 22: opt-in through --only

# The thread matrix's (cipher, direction) cells, grouped by evp_bench run.
THREAD_CELLS = [("AES-128-CTR", "enc"), ("AES-256-GCM", "enc"), ("AES-256-GCM", "dec"),
                ("AES-128-CBC", "dec"), ("AES-256-ECB", "dec"), ("AES-128-CFB", "dec")]

ENC_KEY = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
ENC_IV = "0f0e0d0c0b0a09080706050403020100"

T_START = time.monotonic()
LOG = None  # the run.log file object
CHILDREN = []  # processes started, killed if the run is interrupted


# ---------------------------------------------------------------- helpers

def positive_size(s):
    v = parse_size(s)
    if v <= 0:
        raise ValueError("size must be positive")
    return v


def size_list(s):
    return [positive_size(x.strip()) for x in s.split(",") if x.strip()]


def int_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def median(v):
    v = sorted(v)
    n = len(v)
    if n == 0:
        return None
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def elapsed():
    return time.monotonic() - T_START


def log(msg, echo=True):
    line = "[%5.0fs] %s" % (elapsed(), msg)
    if echo:
        print(line, file=sys.stderr, flush=True)
    if LOG is not None:
        LOG.write(line + "\n")
        LOG.flush()


def log_text(title, text):
    if LOG is not None and text:
        LOG.write("---- %s\n%s%s" % (title, text, "" if text.endswith("\n") else "\n"))
        LOG.flush()


def run_cmd(cmd, timeout, env=None, title=None):
    """Runs cmd, output into run.log; returns (rc, stdout, stderr). rc None = timed out."""
    log("$ " + " ".join(cmd), echo=False)
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, timeout=timeout,
                           universal_newlines=True)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc = None
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        log("timed out after %.0f s: %s" % (timeout, " ".join(cmd)))
    except OSError as e:
        return -1, "", str(e)
    log_text((title or cmd[0]) + " stdout", out)
    log_text((title or cmd[0]) + " stderr", err)
    return rc, out, err


def forget_finished():
    CHILDREN[:] = [p for p in CHILDREN if p.returncode is None]


def wait_rusage(p, timeout):
    """Waits for Popen p; returns (rc, CPU seconds of the child: user+sys). rc None = killed at the timeout."""
    CHILDREN.append(p)
    timer = threading.Timer(timeout, p.kill)
    timer.start()
    try:
        _, status, ru = os.wait4(p.pid, 0)
    finally:
        timer.cancel()
    if os.WIFEXITED(status):
        p.returncode = os.WEXITSTATUS(status)
    else:
        p.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else -1
    if p.returncode == -signal.SIGKILL:
        return None, None
    return p.returncode, ru.ru_utime + ru.ru_stime


def fmt(v, digits):
    return "" if v is None else "%.*f" % (digits, v)


def fmt_g(v):
    """6 significant digits (a 1 KiB `openssl enc` runs at 0.00005 GB/s)."""
    return "" if v is None else "%.6g" % v


# ---------------------------------------------------------------- results

class Results:
    def __init__(self, path):
        self.path = path
        self.rows = []

    def add(self, workload, cipher, direction, update_bytes, threads, processes, path, gbps, cpu, wall_ms):
        self.rows.append({
            "workload": workload, "cipher": cipher or "", "direction": direction or "",
            "update_bytes": "" if update_bytes is None else str(int(update_bytes)),
            "threads": "" if threads is None else str(threads),
            "processes": "" if processes is None else str(processes),
            "path": path, "gbps": fmt_g(gbps), "cpu_core_s_per_gb": fmt_g(cpu), "wall_ms": fmt(wall_ms, 2),
        })

    def write(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=HEADER, lineterminator="\n")
            w.writeheader()
            for r in self.rows:
                w.writerow(r)
        os.replace(tmp, self.path)


def read_csv(path):
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        if r.fieldnames != HEADER:
            sys.exit("load_matrix: %s: unexpected header %s" % (path, r.fieldnames))
        return list(r)


# ---------------------------------------------------------------- plan

def plan(a):
    """Returns (lines, estimated seconds per step)."""
    est = {}
    lines = []
    if "threads" in a.only:
        nrows = len(a.threads) * len(a.sizes) * len(a.cells)
        per_row = 2 * a.warmup + 2 * a.repeats * a.min_time + 0.08
        big = sum(1 for s in a.sizes if s >= (8 << 20)) * len(a.threads) * len(a.cells) * 0.25
        est["threads"] = nrows * per_row + big + 3 * 1.5
        lines.append("threads: %d rows (threads %s x sizes %s x %s), %d repeats x %g s + warm-up %g s per provider"
                     % (nrows, ",".join(map(str, a.threads)), ",".join(size_label(s) for s in a.sizes),
                        " ".join("%s-%s" % c for c in a.cells), a.repeats, a.min_time, a.warmup))
        if a.confirm_below > 0:
            lines.append("threads: each cell below %g measured again: %d rounds of A/B and A/A, %d x %g s "
                         "(~%.0f s a cell, not in the estimate)" % (
                             a.confirm_below, CONFIRM_ROUNDS, CONFIRM_REPEATS, CONFIRM_MIN_TIME, confirm_seconds(a)))
    if "processes" in a.only:
        ncell = len(a.procs) * len(a.proc_sizes) * len(a.proc_ciphers)
        nb = ncell * 2 * a.rounds
        # per batch: process start-up/teardown (~0.4 s, CUDA contexts for gpuaes) + the work
        work = 0.0
        for n in a.procs:
            work += 2 * a.rounds * len(a.proc_sizes) * len(a.proc_ciphers) * (n * a.proc_bytes / 30e9 + 0.1)
        est["processes"] = nb * 0.45 + work
        lines.append("processes: %d cells (processes %s x sizes %s x %s), %d rounds x 2 providers = %d batches, "
                     "%s per process%s" % (ncell, ",".join(map(str, a.procs)), ",".join(size_label(s) for s in a.proc_sizes),
                                         ",".join(a.proc_ciphers), a.rounds, nb, size_label(a.proc_bytes),
                                         ", GPU ready before the start" if a.proc_wait_gpu else
                                         ", gpuaes's GPU start-up timed"))
    if "startup" in a.only:
        t = 0.0
        for s in a.startup_sizes:
            runs = a.startup_big_runs if s >= (1 << 30) else a.startup_runs
            t += runs * 2 * (0.15 + s / 1.2e9)
        t += a.startup_runs * 2 * 2 * 0.05 + sum(a.startup_sizes) / 1.5e9 + 1
        est["startup"] = t
        lines.append("startup: openssl enc -aes-256-ctr %s (%d runs; %d at >= 1G), list -providers, dgst -sha256 1M"
                     % (",".join(size_label(s) for s in a.startup_sizes), a.startup_runs, a.startup_big_runs))
    if "speed" in a.only:
        n = len(a.speed_ciphers) * len(a.speed_sizes) * 2 * 2 * a.speed_repeats
        est["speed"] = n * (a.speed_seconds + 0.35)
        lines.append("speed: %d runs of openssl speed -seconds %d (%s x -bytes %s x with/without -elapsed x 2 providers"
                     " x %d, median)" % (n, a.speed_seconds, ",".join(a.speed_ciphers),
                                         ",".join(map(str, a.speed_sizes)), a.speed_repeats))
    if "processes-long" in a.only:
        # per batch: ~0.45 s of process start-up/teardown + the work at ~4 GB/s a process, at most ~40 GB/s
        # in all (the H200 host's default provider; gpuaes should be faster)
        t = 0.0
        for n in a.long_procs:
            t += 2 * a.long_rounds * len(a.long_ciphers) * (0.45 + n * a.long_bytes / min(n * 4e9, 40e9))
        est["processes-long"] = t + (1.0 if a.backend == "service" else 0)
        lines.append("processes-long: processes %s x %s, %s per process in %s calls, %d round(s) x 2 providers; "
                     "device memory sampled (nvidia-smi)" % (",".join(map(str, a.long_procs)), ",".join(a.long_ciphers),
                                                             size_label(a.long_bytes), size_label(a.long_size),
                                                             a.long_rounds))
    for wl in ("fresh-warm", "fresh-cold"):
        if wl in a.only:
            # per run: process start + setup ~0.15 s, the work at ~4 GB/s; cold with the service: stopping it
            per = 0.15 + a.fresh_bytes / 4e9 + (0.3 if wl == "fresh-cold" and a.backend == "service" else 0)
            est[wl] = len(a.fresh_ciphers) * a.fresh_runs * 2 * per + (1.0 if a.backend == "service" else 0)
            lines.append("%s: one new process, %s in %s calls, %s, %d runs x 2 providers (median)%s"
                         % (wl, size_label(a.fresh_bytes), size_label(a.fresh_size), ",".join(a.fresh_ciphers),
                            a.fresh_runs, "" if a.backend == "service" else
                            " (in-process backend: the same fresh process as the other fresh-* workload)"))
    return lines, est


# ---------------------------------------------------------------- workloads

# The confirm pass (--confirm-below): a threads cell below the bound is measured again, alone, in rounds
# that alternate gpuaes against the default provider (A/B) and the default provider against itself (A/A):
# on the H200 one 3 x 0.1 s measurement read the default provider against itself at 0.89-1.76, 7 x 0.3 s
# still at 0.94 with 32 threads on 16 cores (bench/results/README.md, earlier runs: final-checks-426f6d5, calls B and F).
CONFIRM_ROUNDS, CONFIRM_REPEATS, CONFIRM_MIN_TIME = 3, 7, 0.3


def confirm_seconds(a):
    """What confirming one cell takes: its rounds of A/B and A/A, two providers each."""
    return CONFIRM_ROUNDS * 2 * 2 * (CONFIRM_REPEATS * CONFIRM_MIN_TIME + a.warmup + 0.5)


def confirm_cell(a, cipher, d, size, threads, pair, remaining):
    """One evp_bench run of one cell with providers `pair`; returns second/first GB/s, or None."""
    csv_path = os.path.join(a.tmp, "confirm.csv")
    if os.path.exists(csv_path):
        os.remove(csv_path)
    cmd = [a.evp_bench, "--providers", pair, "--ciphers", cipher, "--dir", d, "--sizes", size_label(size),
           "--threads", str(threads), "--repeats", str(CONFIRM_REPEATS), "--min-time", str(CONFIRM_MIN_TIME),
           "--warmup", str(a.warmup), "--provider-path", a.build_dir, "--csv", csv_path]
    if "gpuaes" in pair and not a.allow_no_gpu:
        cmd.append("--require-gpu")
    rc, _, _ = run_cmd(cmd, max(5, min(remaining(), 120)), title="confirm %s %s %s t=%d %s" % (
        cipher, d, size_label(size), threads, pair))
    if rc != 0 or not os.path.exists(csv_path):
        return None
    with open(csv_path, newline="") as f:
        g = {r["path"]: float(r["gbps"]) for r in csv.DictReader(f)}
    first, second = pair.split(",")
    return g[second] / g[first] if g.get(first) and second in g else None


def confirm_threads(a, res, remaining):
    """Threads cells below --confirm-below, measured again (meta.txt: `confirm:` lines, README)."""
    low = sorted((c["ratio"], (c["cipher"], c["direction"], int(c["update_bytes"]), int(c["threads"])))
                 for c in cells_with_ratio(res.rows)
                 if c["workload"] == "threads" and c["ratio"] is not None and c["ratio"] < a.confirm_below)
    for first, (cipher, d, size, threads) in low:
        if remaining() < confirm_seconds(a):
            log("threads: out of time to confirm %s %s %s t=%d" % (cipher, d, size_label(size), threads))
            a.cut.add("threads")
            return
        ab, aa = [], []
        for _ in range(CONFIRM_ROUNDS):
            ab.append(confirm_cell(a, cipher, d, size, threads, "default,gpuaes", remaining))
            aa.append(confirm_cell(a, cipher, d, size, threads, "default,default2", remaining))
        def ratios(v):
            return " ".join("-" if x is None else "%.3f" % x for x in v)

        line = "confirm: %s %s %s t=%d: first %.3f; A/B %s; A/A %s" % (
            cipher, d, size_label(size), threads, first, ratios(ab), ratios(aa))
        log("threads: " + line)
        a.meta_extra.append(line)


def step_threads(a, res, remaining):
    groups = {}
    for cipher, d in a.cells:
        groups.setdefault(d, []).append(cipher)
    # CTR enc + GCM enc in one run, GCM dec + CBC/ECB/CFB dec in one: two evp_bench processes.
    ok = True
    for d in ("enc", "dec"):
        if d not in groups:
            continue
        left = remaining()
        if left < 5:
            log("threads: out of time, %s rows skipped" % d)
            a.cut.add("threads")
            return False
        csv_path = os.path.join(a.tmp, "threads-%s.csv" % d)
        cmd = [a.evp_bench, "--ciphers", ",".join(groups[d]), "--dir", d,
               "--sizes", ",".join(size_label(s) for s in a.sizes), "--threads", ",".join(map(str, a.threads)),
               "--repeats", str(a.repeats), "--min-time", str(a.min_time), "--warmup", str(a.warmup),
               "--provider-path", a.build_dir, "--csv", csv_path]
        if not a.allow_no_gpu:
            cmd.append("--require-gpu")
        log("threads: evp_bench %s %s" % (d, ",".join(groups[d])))
        # evp_bench's progress (stderr) live to our stderr and into run.log
        LOG.write("$ %s\n" % " ".join(cmd))
        LOG.flush()
        t_deadline_base = time.monotonic()
        out_path = os.path.join(a.tmp, "threads-%s.txt" % d)
        with open(out_path, "w") as outf:
            p = subprocess.Popen(cmd, stdout=outf, stderr=subprocess.PIPE, universal_newlines=True)
            CHILDREN.append(p)
        timer = threading.Timer(left, p.kill)
        timer.start()
        try:
            for line in p.stderr:  # progress, one line per row
                sys.stderr.write(line)
                sys.stderr.flush()
                LOG.write(line)
        finally:
            timer.cancel()
            if p.poll() is None and sys.exc_info()[0] is not None:
                p.kill()  # interrupted: keep the rows it wrote
            rc = p.wait()
            LOG.flush()
            if os.path.exists(csv_path):
                with open(csv_path, newline="") as f:
                    for r in csv.DictReader(f):
                        if (r["cipher"], r["direction"]) not in a.cells:
                            continue
                        cpu = float(r["cpu_core_s_per_gb"]) if r["cpu_core_s_per_gb"] else None
                        res.add("threads", r["cipher"], r["direction"], int(r["update_bytes"]), int(r["threads"]),
                                1, r["path"], float(r["gbps"]), cpu, None)
            res.write()
        if time.monotonic() - t_deadline_base > left:
            log("threads: evp_bench out of time, killed (the rows it wrote are kept)")
            a.cut.add("threads")
        if rc != 0:
            log("threads: evp_bench exited with %d" % rc)
            ok = False
        with open(out_path) as f:
            text = f.read()
        a.evp_stdout += text
        log_text("evp_bench %s stdout" % d, text)
        res.write()
    if ok and a.confirm_below > 0:
        confirm_threads(a, res, remaining)
    return ok


def proc_batch(a, prov, cipher, size, n, timeout, nbytes=None):
    """n load_proc processes at once, each nbytes (default --proc-bytes); returns dict or None."""
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    env = dict(os.environ, LOAD_PROC_READY_FD=str(ready_w), LOAD_PROC_GO_FD=str(go_r))
    cmd = [a.load_proc, "--provider", prov, "--cipher", cipher, "--dir", "enc", "--size", str(size),
           "--bytes", str(nbytes or a.proc_bytes), "--provider-path", a.build_dir] + \
        (["--wait-gpu"] if a.proc_wait_gpu and prov == "gpuaes" else [])
    forget_finished()
    t_spawn = time.monotonic()
    procs, errfs = [], []
    try:
        for _ in range(n):
            ef = tempfile.TemporaryFile()
            errfs.append(ef)
            procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=ef, env=env,
                                          pass_fds=(ready_w, go_r), universal_newlines=True))
            CHILDREN.append(procs[-1])
    finally:
        os.close(ready_w)
        os.close(go_r)
    got = 0
    deadline = time.monotonic() + timeout
    while got < n:
        t = deadline - time.monotonic()
        if t <= 0:
            break
        rl, _, _ = select.select([ready_r], [], [], t)
        if not rl:
            break
        b = os.read(ready_r, 64)
        if not b:
            break  # every process closed its end: some failed in their setup
        got += len(b)
    os.close(ready_r)
    t_go = time.monotonic()
    os.close(go_w)  # EOF: go
    outs = []
    failed = got < n
    for p, ef in zip(procs, errfs):
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            failed = True
        if p.returncode != 0:
            failed = True
        ef.seek(0)
        err = ef.read().decode(errors="replace")
        ef.close()
        log_text("load_proc %s %s %s x%d (rc %s)" % (prov, cipher, size_label(size), n, p.returncode),
                 out + err if (p.returncode != 0 or err) else "")
        outs.append(out)
    t_exit = time.monotonic()
    if failed:
        return None
    t1s, cpus, nbytes, gpub = [], [], 0, 0
    for out in outs:
        m = re.search(r"ok bytes=(\d+) t0=([\d.]+) t1=([\d.]+) cpu_s=([\d.]+) gpu_bytes=(-?\d+)", out)
        if not m:
            return None
        nbytes += int(m.group(1))
        t1s.append(float(m.group(3)))
        cpus.append(float(m.group(4)))
        gpub += max(0, int(m.group(5)))
    window = max(t1s) - t_go
    if window <= 0:
        return None
    return {"gbps": nbytes / window / 1e9, "cpu": sum(cpus) / (nbytes / 1e9), "wall_ms": window * 1e3,
            "total_s": t_exit - t_spawn, "gpu_share": gpub / nbytes}


def step_processes(a, res, remaining):
    ok = True
    for cipher in a.proc_ciphers:
        for size in a.proc_sizes:
            for n in a.procs:
                vals = {"default": [], "gpuaes": []}
                for rnd in range(a.rounds):
                    for prov in ("default", "gpuaes"):
                        left = remaining()
                        if left < 3:
                            log("processes: out of time")
                            a.cut.add("processes")
                            return False
                        r = proc_batch(a, prov, cipher, size, n, min(left, 120))
                        if r is None:
                            log("processes: %s %s %s x%d round %d FAILED (see run.log)"
                                % (prov, cipher, size_label(size), n, rnd + 1))
                            ok = False
                            continue
                        vals[prov].append(r)
                        log("processes: %s x%d %s round %d %-7s %7.2f GB/s  %.3f cpu s/GB  %.0f ms work, %.2f s "
                            "spawn-to-exit, %.0f%% on GPU" % (cipher, n, size_label(size), rnd + 1, prov, r["gbps"],
                                                              r["cpu"], r["wall_ms"], r["total_s"],
                                                              100 * r["gpu_share"]), echo=True)
                for prov in ("default", "gpuaes"):
                    v = vals[prov]
                    if len(v) < a.rounds:
                        continue
                    res.add("processes", cipher, "enc", size, 1, n, prov, median([x["gbps"] for x in v]),
                            median([x["cpu"] for x in v]), median([x["wall_ms"] for x in v]))
                res.write()
    return ok


# ---------------------------------------------------------------- the service (issue 22)

def svc_status(a):
    """`gpuaesd --status` of the run's socket dir: dict (running, pid, answered, gpu_jobs, gpu_bytes, gpu)."""
    rc, out, _ = run_cmd([a.gpuaesd, "--socket-dir", a.svc_dir, "--status"], 15, title="gpuaesd --status")
    st = {"running": False, "pid": None, "answered": 0, "gpu_jobs": 0, "gpu_bytes": 0, "gpu": ""}
    m = re.search(r"serving, pid (\d+)", out)
    if rc == 0 and m:
        st.update(running=True, pid=int(m.group(1)))
        j = re.search(r"jobs: (\d+) answered, (\d+) on the GPU \((\d+) bytes\)", out)
        if j:
            st.update(answered=int(j.group(1)), gpu_jobs=int(j.group(2)), gpu_bytes=int(j.group(3)))
        g = re.search(r"(?m)^gpu: (.*)$", out)
        st["gpu"] = g.group(1) if g else ""
    return st


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def svc_stop(a):
    """Stops the run's gpuaesd (SIGTERM to the pid it reports; SIGKILL after 10 s). No-op without one."""
    if not a.svc_dir:
        return
    st = svc_status(a)
    if not st["running"]:
        return
    pid = st["pid"]
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    if pid_alive(pid):
        log("gpuaesd %d did not end 10 s after SIGTERM: SIGKILL" % pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    log("gpuaesd %d stopped" % pid, echo=False)


def svc_warm(a):
    """Makes sure the run's gpuaesd is running and has answered a job: a gpuaes load_proc that waits
    for the service and sends it work from its first call (its knobs only).  Returns the status."""
    st = svc_status(a)
    if st["running"] and st["answered"] > 0:
        return st
    env = dict(os.environ, GPUAES_OFFLOAD_MIN_BYTES="0", GPUAES_DISPATCH="force", GPUAES_GPU_START_BYTES="0")
    rc, out, err = run_cmd([a.load_proc, "--provider", "gpuaes", "--cipher", "AES-128-CTR", "--dir", "enc",
                            "--size", str(64 << 20), "--bytes", str(256 << 20), "--provider-path", a.build_dir,
                            "--wait-gpu"], 120, env=env, title="service warm-up load_proc")
    st = svc_status(a)
    log("service warm-up: %s" % ("gpuaesd %d, %d jobs answered, %d on the GPU; gpu: %s"
                                 % (st["pid"], st["answered"], st["gpu_jobs"], st["gpu"]) if st["running"]
                                 else "no gpuaesd answers (load_proc rc %s; see run.log)" % rc), echo=False)
    if not (st["running"] and st["answered"] > 0):
        log("service warm-up: gpuaesd is not running or answered no job (see run.log)")
    return st


# ---------------------------------------------------------------- device memory

class DevMem:
    """Samples nvidia-smi (memory.used, and the compute apps) every `period` s in a thread while
    a batch runs; keeps the largest values.  available False: no nvidia-smi answer (no GPU)."""

    def __init__(self, period=0.5):
        self.period = period
        self.used = None       # max memory.used, MiB (all GPUs summed)
        self.apps_mib = None   # max sum of the compute apps' used_memory, MiB
        self.apps_desc = ""    # the apps at that moment, by name
        self.stop_ev = threading.Event()
        self.thread = None

    @staticmethod
    def query():
        """(memory.used MiB summed over GPUs, [(pid, MiB)]) or None."""
        try:
            q = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                               timeout=10)
            if q.returncode != 0:
                return None
            used = sum(int(x) for x in q.stdout.split() if x.strip().isdigit())
            if not q.stdout.strip():
                return None
            a = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                               timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        apps = []
        for line in a.stdout.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) == 2 and f[0].isdigit() and f[1].isdigit():
                apps.append((int(f[0]), int(f[1])))
        return used, apps

    def sample(self):
        r = self.query()
        if r is None:
            return
        used, apps = r
        self.used = used if self.used is None else max(self.used, used)
        tot = sum(m for _, m in apps)
        if self.apps_mib is None or tot > self.apps_mib:
            self.apps_mib = tot
            names = {}
            for pid, m in apps:
                try:
                    with open("/proc/%d/comm" % pid) as f:
                        nm = f.read().strip()
                except OSError:
                    nm = "pid %d" % pid
                k = names.setdefault(nm, [0, 0])
                k[0] += 1
                k[1] += m
            self.apps_desc = ", ".join("%s x%d %d MiB" % (nm, c, mm) for nm, (c, mm) in sorted(names.items())) \
                or "none"

    def _loop(self):
        while not self.stop_ev.is_set():
            self.sample()
            self.stop_ev.wait(self.period)

    def start(self):
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()
        return self

    def stop(self):
        self.stop_ev.set()
        if self.thread is not None:
            self.thread.join()
        return self

    def text(self):
        """meta.txt's form, read back by devmem_table()."""
        if self.used is None:
            return "used_mib=n/a apps_mib=n/a apps=n/a"
        return "used_mib=%d apps_mib=%d apps=%s" % (self.used, self.apps_mib or 0, self.apps_desc or "none")


# ---------------------------------------------------------------- issue 22's workloads

def step_processes_long(a, res, remaining):
    """processes-long: N processes at once, each --long-bytes of 64 MiB calls (proc_batch: the ready/go
    pipes); device memory sampled during every batch."""
    ok = True
    size = a.long_size
    idle = DevMem().start()
    idle.stop()
    a.meta_extra.append("devmem: idle x0 before: %s; gpu_share=-" % idle.text())
    for cipher in a.long_ciphers:
        for n in a.long_procs:
            vals = {"default": [], "gpuaes": []}
            mems = {"default": DevMem(), "gpuaes": DevMem()}
            for rnd in range(a.long_rounds):
                for prov in ("default", "gpuaes"):
                    left = remaining()
                    if left < 3:
                        log("processes-long: out of time")
                        a.cut.add("processes-long")
                        return False
                    if a.svc_dir:
                        svc_warm(a)  # every batch meets a running service (fresh-cold is the cold case)
                    timeout = min(left, max(120.0, 30 + n * a.long_bytes / 2e9))
                    mem = mems[prov]
                    mem.stop_ev.clear()
                    mem.start()
                    try:
                        r = proc_batch(a, prov, cipher, size, n, timeout, nbytes=a.long_bytes)
                    finally:
                        mem.stop()
                    if r is None:
                        log("processes-long: %s %s x%d round %d FAILED (see run.log)" % (prov, cipher, n, rnd + 1))
                        ok = False
                        continue
                    vals[prov].append(r)
                    log("processes-long: %s x%d %s/process round %d %-7s %7.2f GB/s  %.3f cpu s/GB  %.0f ms work, "
                        "%.2f s spawn-to-exit, %.0f%% on GPU" % (cipher, n, size_label(a.long_bytes), rnd + 1, prov,
                                                                 r["gbps"], r["cpu"], r["wall_ms"], r["total_s"],
                                                                 100 * r["gpu_share"]))
            for prov in ("default", "gpuaes"):
                v = vals[prov]
                if v:
                    res.add("processes-long", cipher, "enc", size, 1, n, prov, median([x["gbps"] for x in v]),
                            median([x["cpu"] for x in v]), median([x["wall_ms"] for x in v]))
                    a.meta_extra.append("devmem: %s x%d %s: %s; gpu_share=%.0f%%"
                                        % (cipher, n, prov, mems[prov].text(),
                                           100 * median([x["gpu_share"] for x in v])))
            res.write()
    return ok


def fresh_run(a, prov, cipher, timeout):
    """One new load_proc: --fresh-bytes in 64 MiB calls.  Returns dict (wall_s spawn to exit, cpu_s of the
    whole process, max_call_s, gpu_share) or None."""
    cmd = [a.load_proc, "--provider", prov, "--cipher", cipher, "--dir", "enc", "--size", str(a.fresh_size),
           "--bytes", str(a.fresh_bytes), "--provider-path", a.build_dir]
    env = {k: v for k, v in os.environ.items() if k not in ("LOAD_PROC_READY_FD", "LOAD_PROC_GO_FD")}
    forget_finished()
    with tempfile.TemporaryFile() as of, tempfile.TemporaryFile() as ef:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=of, stderr=ef, env=env)
        rc, cpu = wait_rusage(p, timeout)
        t1 = time.monotonic()
        of.seek(0)
        ef.seek(0)
        out = of.read().decode(errors="replace")
        err = ef.read().decode(errors="replace")
    log_text("fresh load_proc %s %s (rc %s)" % (prov, cipher, rc), out + err if (rc != 0 or err) else "")
    m = re.search(r"ok bytes=(\d+) .*gpu_bytes=(-?\d+) max_call_s=([\d.]+)", out)
    if rc != 0 or not m:
        return None
    return {"wall_s": t1 - t0, "cpu_s": cpu, "max_call_s": float(m.group(3)),
            "gpu_share": max(0, int(m.group(2))) / int(m.group(1))}


def step_fresh(a, res, remaining, cold):
    """fresh-warm / fresh-cold: one new process, --fresh-bytes in 64 MiB calls, wall time spawn to exit.
    Service backend: warm = a gpuaesd running that has answered a job; cold = none running (stopped before
    every run, either provider).  In-process backend: both are the same fresh process."""
    wl = "fresh-cold" if cold else "fresh-warm"
    ok = True
    for cipher in a.fresh_ciphers:
        runs = {"default": [], "gpuaes": []}
        for i in range(a.fresh_runs):
            for prov in ("default", "gpuaes"):
                left = remaining()
                if left < 3:
                    log("%s: out of time" % wl)
                    a.cut.add(wl)
                    return False
                if a.svc_dir:
                    if cold:
                        svc_stop(a)
                    else:
                        svc_warm(a)
                r = fresh_run(a, prov, cipher, min(left, 120))
                if r is None:
                    log("%s: %s %s run %d FAILED (see run.log)" % (wl, prov, cipher, i + 1))
                    ok = False
                    continue
                runs[prov].append(r)
        line = []
        for prov in ("default", "gpuaes"):
            v = runs[prov]
            if not v:
                continue
            wall = median([x["wall_s"] for x in v])
            cpu = median([x["cpu_s"] for x in v]) if all(x["cpu_s"] is not None for x in v) else None
            gb = a.fresh_bytes / 1e9
            res.add(wl, cipher, "enc", a.fresh_size, 1, 1, prov, gb / wall, None if cpu is None else cpu / gb,
                    wall * 1e3)
            worst = max(x["max_call_s"] for x in v)
            if cold:  # the longest single call of any run (the target: no start-up wait above 5 ms)
                res.add("fresh-cold-max-call", cipher, "enc", a.fresh_size, 1, 1, prov, None, None, worst * 1e3)
            desc = "%s %s: wall %.1f ms median (%s), longest call %.1f ms (runs: %s), %.0f%% on the GPU" % (
                cipher, prov, wall * 1e3, " ".join("%.0f" % (x["wall_s"] * 1e3) for x in v), worst * 1e3,
                " ".join("%.1f" % (x["max_call_s"] * 1e3) for x in v), 100 * median([x["gpu_share"] for x in v]))
            a.meta_extra.append("%s: %s" % (wl, desc))
            line.append(desc)
        for l in line:
            log("%s: %s" % (wl, l))
        res.write()
    if cold:
        svc_stop(a)  # the last run's service
    return ok

def make_file(path, size, chunk):
    with open(path, "wb") as f:
        left = size
        while left > 0:
            k = min(left, len(chunk))
            f.write(chunk[:k])
            left -= k


def files_equal(p, q):
    if os.path.getsize(p) != os.path.getsize(q):
        return False
    with open(p, "rb") as f, open(q, "rb") as g:
        while True:
            x, y = f.read(16 << 20), g.read(16 << 20)
            if x != y:
                return False
            if not x:
                return True


def step_startup(a, res, remaining):
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else a.tmp
    d = tempfile.mkdtemp(prefix="gpuaes-load-", dir=shm)
    a.cleanup.append(d)
    ok = True
    try:
        need = sum(a.startup_sizes) * 3 + (1 << 20)
        st = os.statvfs(d)
        if st.f_bavail * st.f_frsize < need:
            log("startup: %s has %.1f GiB free, %.1f GiB needed: sizes above 64M dropped"
                % (shm, st.f_bavail * st.f_frsize / 2**30, need / 2**30))
            a.startup_sizes = [s for s in a.startup_sizes if s <= (64 << 20)]
        chunk = os.urandom(16 << 20)  # files: this chunk repeated (AES does not care)
        files = {}
        for s in sorted(set(a.startup_sizes + [1 << 20])):
            files[s] = os.path.join(d, "in.%s" % size_label(s))
            make_file(files[s], s, chunk)
        del chunk
        cnf = os.path.join(d, "gpuaes.cnf")
        with open(a.cnf_example) as f:
            text = f.read()
        text, nsub = re.subn(r"(?m)^module\s*=.*$", "module = " + os.path.join(a.build_dir, "gpuaes.so"), text)
        if nsub != 1:
            log("startup: could not set the module path in %s" % a.cnf_example)
            return False
        with open(cnf, "w") as f:
            f.write(text)
        env_plain = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
        env_gpu = dict(env_plain, OPENSSL_CONF=cnf)
        rc, out, err = run_cmd([a.openssl, "list", "-providers", "-verbose"], 30, env=env_gpu,
                               title="OPENSSL_CONF=gpuaes.cnf openssl list -providers -verbose")
        if rc != 0 or "gpuaes" not in out:
            log("startup: gpuaes is not active under %s (see run.log): startup rows skipped" % cnf)
            return False
        a.meta_extra.append("providers under the gpuaes cnf (OPENSSL_CONF): " + "; ".join(
            l.strip()[len("name:"):].strip() for l in out.splitlines() if l.strip().startswith("name:")))

        cmds = []  # (label, cipher, direction, bytes, argv-builder, runs)
        for s in a.startup_sizes:
            runs = a.startup_big_runs if s >= (1 << 30) else a.startup_runs
            cmds.append(("enc %s" % size_label(s), "AES-256-CTR", "enc", s, s, runs))
        cmds.append(("list -providers", "", "list", None, None, a.startup_runs))
        cmds.append(("dgst -sha256 1M", "SHA256", "dgst", 1 << 20, 1 << 20, a.startup_runs))

        for label, cipher, sub, nbytes, fsize, runs in cmds:
            walls = {"default": [], "gpuaes": []}
            cpus = {"default": [], "gpuaes": []}
            outs = {}
            for i in range(runs):
                for prov in ("default", "gpuaes"):
                    left = remaining()
                    if left < 2:
                        log("startup: out of time")
                        a.cut.add("startup")
                        return False
                    if sub == "enc":
                        outs[prov] = os.path.join(d, "out.%s" % prov)
                        argv = [a.openssl, "enc", "-aes-256-ctr", "-K", ENC_KEY, "-iv", ENC_IV,
                                "-in", files[fsize], "-out", outs[prov]]
                    elif sub == "list":
                        argv = [a.openssl, "list", "-providers"]
                    else:
                        argv = [a.openssl, "dgst", "-sha256", files[fsize]]
                    env = env_gpu if prov == "gpuaes" else env_plain
                    t0 = time.monotonic()
                    with tempfile.TemporaryFile() as ef:
                        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=ef, env=env)
                        rc, cpu = wait_rusage(p, min(left, 120))
                        t1 = time.monotonic()
                        ef.seek(0)
                        errtxt = ef.read().decode(errors="replace")
                    if rc != 0:
                        log("startup: %s %s run %d failed (rc %s): %s" % (prov, label, i + 1, rc, errtxt.strip()[:300]))
                        ok = False
                        continue
                    walls[prov].append((t1 - t0) * 1e3)
                    cpus[prov].append(cpu)
            same = ""
            if sub == "enc" and all(os.path.exists(outs.get(p, "")) for p in ("default", "gpuaes")):
                same = "identical" if files_equal(outs["default"], outs["gpuaes"]) else "DIFFERENT"
                if same == "DIFFERENT":
                    log("startup: %s: gpuaes's output differs from the default provider's!" % label)
                    ok = False
                for p in ("default", "gpuaes"):
                    os.unlink(outs[p])
            line = []
            for prov in ("default", "gpuaes"):
                w = walls[prov]
                if len(w) < runs:
                    continue
                wm = median(w)
                gbps = nbytes / (wm * 1e-3) / 1e9 if sub == "enc" else None
                # Every command that has bytes (enc, dgst) gets its CPU cost; list has none.
                cpu = median(cpus[prov]) / (nbytes / 1e9) if nbytes and all(
                    c is not None for c in cpus[prov]) else None
                res.add("startup", cipher, sub, nbytes, None, 1, prov, gbps, cpu, wm)
                line.append("%s %.1f ms (%s)" % (prov, wm, " ".join("%.0f" % x for x in w)))
            log("startup: %-16s %s%s" % (label, "; ".join(line), ("; outputs " + same) if same else ""))
            res.write()
    finally:
        shutil.rmtree(d, ignore_errors=True)
    return ok


# OpenSSL 3.0/3.1: "Doing AES-128-CTR for 3s on 16 size blocks: 123 AES-128-CTR's in 2.99s";
# 3.2 and later: "Doing AES-128-CTR ops for 3s on 16 size blocks: 123 AES-128-CTR ops in 2.99s".
SPEED_DOING = re.compile(r"Doing (\S+)(?: ops)? for ([\d.]+)s on (\d+) size blocks: (\d+) \S+(?: ops)? in ([\d.]+)s")


def step_speed(a, res, remaining):
    ok = True
    gpu_args = ["-provider-path", a.build_dir, "-provider", "gpuaes", "-provider", "default",
                "-propquery", "?provider=gpuaes"]
    env = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
    for cipher in a.speed_ciphers:
        for size in a.speed_sizes:
            for el in (False, True):
                wl = "speed-elapsed" if el else "speed"
                # The providers alternate, speed_repeats times; each keeps its median run (one
                # 1 s run of the same code varied up to 2x on the H200 machine).
                runs = {"default": [], "gpuaes": []}
                for prov in ["default", "gpuaes"] * a.speed_repeats:
                    left = remaining()
                    if left < a.speed_seconds + 2:
                        log("speed: out of time")
                        a.cut.add("speed")
                        return False
                    argv = [a.openssl, "speed"] + (gpu_args if prov == "gpuaes" else []) + \
                        (["-elapsed"] if el else []) + ["-seconds", str(a.speed_seconds), "-bytes", str(size),
                                                        "-evp", cipher.lower()]
                    log("$ " + " ".join(argv), echo=False)
                    t0 = time.monotonic()
                    with tempfile.TemporaryFile() as of, tempfile.TemporaryFile() as ef:
                        p = subprocess.Popen(argv, stdout=of, stderr=ef, env=env)
                        rc, cpu = wait_rusage(p, min(left, a.speed_seconds * 10 + 30))
                        wall = time.monotonic() - t0
                        of.seek(0)
                        ef.seek(0)
                        out = of.read().decode(errors="replace")
                        err = ef.read().decode(errors="replace")
                    log_text("openssl speed stdout", out)
                    log_text("openssl speed stderr", err)
                    kps = None
                    for line in out.splitlines():
                        m = re.match(r"^\s*(\S+)\s+([\d.]+)k\s*$", line)
                        if m and m.group(1).upper().replace("_", "-") == cipher.upper():
                            kps = float(m.group(2))
                    doing = SPEED_DOING.search(err + out)
                    if rc != 0 or kps is None:
                        log("speed: %s %s %s -bytes %d FAILED (rc %s; see run.log)" % (wl, prov, cipher, size, rc))
                        ok = False
                        continue
                    cpu_gb = None
                    if doing and cpu is not None:
                        nbytes = int(doing.group(3)) * int(doing.group(4))
                        if nbytes > 0:
                            cpu_gb = cpu / (nbytes / 1e9)
                    gbps = kps * 1e3 / 1e9
                    runs[prov].append((gbps, cpu_gb, wall * 1e3))
                    log("speed: %-13s %-11s %9d B %-7s %8.3f GB/s (%s k/s), process %.2f s, cpu %s s/GB"
                        % (wl, cipher, size, prov, gbps, "%.2f" % kps, wall, fmt(cpu_gb, 3)))
                for prov, got in runs.items():
                    if got:
                        gbps, cpu_gb, wall_ms = sorted(got)[(len(got) - 1) // 2]
                        res.add(wl, cipher, "enc", size, 1, 1, prov, gbps, cpu_gb, wall_ms)
                res.write()
    return ok


# ---------------------------------------------------------------- report

def cells_with_ratio(rows):
    """Pairs default and gpuaes rows: list of dicts with key fields, d, g, ratio."""
    keyf = ["workload", "cipher", "direction", "update_bytes", "threads", "processes"]
    by = {}
    order = []
    for r in rows:
        k = tuple(r[f] for f in keyf)
        if k not in by:
            by[k] = {}
            order.append(k)
        by[k][r["path"]] = r
    out = []
    for k in order:
        d, g = by[k].get("default"), by[k].get("gpuaes")
        ratio = None
        if d and g:
            if k[0] == "startup":  # whole processes: their wall times
                if d["wall_ms"] and g["wall_ms"] and float(g["wall_ms"]) > 0:
                    ratio = float(d["wall_ms"]) / float(g["wall_ms"])
            elif d["gbps"] and g["gbps"] and float(d["gbps"]) > 0:
                ratio = float(g["gbps"]) / float(d["gbps"])
            elif d["wall_ms"] and g["wall_ms"] and float(g["wall_ms"]) > 0:
                ratio = float(d["wall_ms"]) / float(g["wall_ms"])
        c = dict(zip(keyf, k))
        c.update({"d": d, "g": g, "ratio": ratio})
        out.append(c)
    return out


def cell_label(c):
    w = c["workload"]
    size = size_label(c["update_bytes"]) if c["update_bytes"] else ""
    if w == "threads":
        return "%s %s %s t=%s" % (c["cipher"], c["direction"], size, c["threads"])
    if w in ("processes", "processes-long"):
        return "%s %s %s p=%s" % (c["cipher"], c["direction"], size, c["processes"])
    if w in ("fresh-warm", "fresh-cold"):
        return "%s new process, %s calls" % (c["cipher"], size)
    if w == "fresh-cold-max-call":
        return "%s longest %s call" % (c["cipher"], size)
    if w == "startup":
        if c["direction"] == "list":
            return "openssl list -providers"
        if c["direction"] == "dgst":
            return "openssl dgst -sha256 %s" % size
        return "openssl enc -%s %s" % (c["cipher"].lower(), size)
    return "%s -bytes %s" % (c["cipher"], c["update_bytes"])


def value_str(r):
    if r is None:
        return "-"
    if r["workload"] == "startup" and r["wall_ms"]:
        return "%.1f ms" % float(r["wall_ms"])
    if r["gbps"]:
        return "%.2f GB/s" % float(r["gbps"])
    if r["wall_ms"]:
        return "%.1f ms" % float(r["wall_ms"])
    return "-"


def sort_key(c):
    return (c["ratio"] is None, c["ratio"] if c["ratio"] is not None else 0)


def geomean(v):
    v = [x for x in v if x and x > 0]
    return math.exp(sum(math.log(x) for x in v) / len(v)) if v else None


def readme_extra(cells, notes):
    """README sections of issue 22's workloads, from load.csv's cells and meta.txt's lines (notes)."""
    L = []
    conf = [l[len("confirm: "):] for l in notes if l.startswith("confirm: ")]
    if conf:
        L += ["## Threads cells measured again", "",
              "Each threads cell below `--confirm-below` (the table above keeps its first figure), alone, in %d "
              "rounds: gpuaes against the default provider (A/B, gpuaes/default) and the default provider "
              "against itself (A/A, the harness's own spread), %d x %g s each." % (
                  CONFIRM_ROUNDS, CONFIRM_REPEATS, CONFIRM_MIN_TIME), ""]
        L += ["- " + l for l in conf]
        L.append("")
    backend = next((l.split(":", 1)[1].strip() for l in notes if l.startswith("backend:")), "")
    fresh = [c for c in cells if c["workload"] in ("fresh-warm", "fresh-cold", "fresh-cold-max-call")]
    if fresh:
        L += ["## Fresh processes (fresh-warm, fresh-cold)", "",
              "One new `load_proc` per run encrypting 1 GiB (or meta.txt's plan) in 64 MiB calls; wall = spawn to "
              "exit, gbps = bytes / wall, median of runs; longest call: the longest single EVP_CipherUpdate of "
              "any run (the target: no call waits more than 5 ms on start-up)."]
        if backend.startswith("service"):
            L += ["Backend service: warm = a gpuaesd running that has answered a job; cold = none running "
                  "(stopped before every run), so the process starts it (gpuaesd's own CPU time is not in cpu s/GB)."]
        else:
            L += ["Backend in-process: fresh-warm and fresh-cold are **the same measurement**, a fresh process "
                  "that starts its own GPU (CUDA inside it); there is no service to warm or stop."]
        L += ["", "| workload | cipher | default | gpuaes | ratio |", "|---|---|---:|---:|---:|"]
        for c in fresh:
            L.append("| %s | %s | %s | %s | %s |" % (c["workload"], cell_label(c), value_str(c["d"]),
                                                    value_str(c["g"]), fmt(c["ratio"], 2) or "-"))
        det = [l for l in notes if l.startswith("fresh-warm:") or l.startswith("fresh-cold:")]
        if det:
            L += [""] + ["- " + l for l in det]
        L.append("")
    if any(c["workload"] == "processes-long" for c in cells):
        L += ["## Device memory (processes-long)", "",
              "nvidia-smi sampled every 0.5 s during each batch: the largest memory.used (all of the host's GPUs) "
              "and the largest sum of the compute apps' used_memory (by process name: gpuaesd, load_proc). n/a: no "
              "GPU (nvidia-smi answered nothing). The target: <= 1.5 GiB in all with 16 client processes.", ""]
        L += devmem_table(notes)
        L.append("")
    return L


DEVMEM = re.compile(r"^devmem: (\S+) x(\d+) (\S+): used_mib=(\S+) apps_mib=(\S+) apps=(.*); gpu_share=(\S+)$")


def devmem_table(notes):
    """meta.txt's devmem lines as a table per process count (the largest over ciphers first), then per cell."""
    rec = [m.groups() for m in (DEVMEM.match(l) for l in notes) if m]
    if not rec:
        return ["n/a (not recorded)"]
    L = ["| processes | provider | memory.used, largest (MiB) | compute apps, largest (MiB) |", "|---:|---|---:|---:|"]
    idle = [r for r in rec if r[1] == "0"]
    if idle:
        L.append("| idle, before | - | %s | %s |" % (idle[0][3], idle[0][4]))
    cells = [r for r in rec if r[1] != "0"]
    for n in sorted({int(r[1]) for r in cells}):
        for prov in ("default", "gpuaes"):
            rs = [r for r in cells if int(r[1]) == n and r[2] == prov]
            if not rs:
                continue
            u = [int(r[3]) for r in rs if r[3].isdigit()]
            ap = [int(r[4]) for r in rs if r[4].isdigit()]
            L.append("| %d | %s | %s | %s |" % (n, prov, max(u) if u else "n/a", max(ap) if ap else "n/a"))
    L += ["", "| cell | provider | memory.used (MiB) | compute apps (MiB) | apps at their largest | bytes on the GPU |",
          "|---|---|---:|---:|---|---:|"]
    for r in cells:
        L.append("| %s x%s | %s | %s | %s | %s | %s |" % (r[0], r[1], r[2], r[3], r[4], r[5], r[6]))
    return L


def write_readme(out_dir, rows, meta_lines, plot_note, notes=()):
    cells = cells_with_ratio(rows)
    L = ["# Load matrix: gpuaes against the default provider", ""]
    L += ["    " + m for m in meta_lines]
    L += ["", "ratio = gpuaes / default: GB/s, or for startup rows default / gpuaes wall time (whole processes); "
          "above 1 = gpuaes is better. threads: evp_bench medians (GPU ready before "
          "timing); processes: N processes at once, GB/s of all bytes over the slowest one's time, gpuaes's GPU "
          "start-up timed unless meta.txt's plan says otherwise, median of rounds; startup: whole `openssl` processes, median wall time (gbps = file bytes / "
          "wall); speed: `openssl speed` (without -elapsed its figure is per CPU second). cpu s/GB = CPU "
          "core-seconds per 10^9 bytes (process CPU, every thread; speed/startup: the whole child process). "
          "processes-long: as processes, many GiB per process, the GPU (or the service) started as a user meets "
          "it; fresh-*: see below.", ""]
    if plot_note:
        L += [plot_note, ""]
    else:
        L += ["![gpuaes/default](heatmap.png)", ""]
    L += ["## Per workload", "", "| workload | cells | geo-mean ratio | worst | best | cells below 1 |",
          "|---|---:|---:|---:|---:|---:|"]
    for w in WORKLOADS:
        rs = [c["ratio"] for c in cells if c["workload"] == w and c["ratio"] is not None]
        if not rs:
            continue
        L.append("| %s | %d | %.2f | %.2f | %.2f | %d |" % (w, len(rs), geomean(rs), min(rs), max(rs),
                                                           sum(1 for x in rs if x < 1)))
    L += ["", "## Every cell, worst first", "",
          "| workload | cell | default | gpuaes | ratio | cpu s/GB default | cpu s/GB gpuaes |",
          "|---|---|---:|---:|---:|---:|---:|"]
    for c in sorted(cells, key=sort_key):
        cd = "%.3g" % float(c["d"]["cpu_core_s_per_gb"]) if c["d"] and c["d"]["cpu_core_s_per_gb"] else "-"
        cg = "%.3g" % float(c["g"]["cpu_core_s_per_gb"]) if c["g"] and c["g"]["cpu_core_s_per_gb"] else "-"
        L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            c["workload"], cell_label(c), value_str(c["d"]), value_str(c["g"]),
            "**%.2f**" % c["ratio"] if c["ratio"] is not None and c["ratio"] < 1 else fmt(c["ratio"], 2) or "-",
            cd, cg))
    L += [""] + readme_extra(cells, list(notes))
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write("\n".join(L).rstrip("\n") + "\n")


def print_table(rows, n=25):
    cells = [c for c in cells_with_ratio(rows) if c["ratio"] is not None]
    cells.sort(key=sort_key)
    print("\ngpuaes/default, worst first (%d cells; %d below 1.0; README.md has them all):"
          % (len(cells), sum(1 for c in cells if c["ratio"] < 1)))
    print("%-19s %-40s %12s %12s %7s" % ("workload", "cell", "default", "gpuaes", "ratio"))
    shown = cells if len(cells) <= n + 5 else cells[:n]
    for c in shown:
        print("%-19s %-40s %12s %12s %7.2f" % (c["workload"], cell_label(c), value_str(c["d"]), value_str(c["g"]),
                                               c["ratio"]))
    if len(shown) < len(cells):
        print("... %d more; best: %s" % (len(cells) - len(shown), ", ".join(
            "%s %.2f" % (cell_label(c), c["ratio"]) for c in cells[-3:][::-1])))
    for w in WORKLOADS:
        rs = [c["ratio"] for c in cells if c["workload"] == w]
        if rs:
            print("%-19s %3d cells: geo-mean %.2f, worst %.2f, best %.2f, below 1: %d"
                  % (w, len(rs), geomean(rs), min(rs), max(rs), sum(1 for x in rs if x < 1)))
    sys.stdout.flush()


def plot_heatmap(out_dir, rows):
    """Returns None when written, else a note why not."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.colors import LogNorm
    except ImportError as e:
        return "heatmap.png not written: matplotlib is missing (%s); `python3 bench/load_matrix.py --report DIR` " \
               "makes it where matplotlib is installed" % e
    cells = cells_with_ratio(rows)
    R = {}
    for c in cells:
        R[(c["workload"], c["cipher"], c["direction"], c["update_bytes"], c["threads"], c["processes"])] = c["ratio"]
    panels = []  # (title, rowlabels, collabels, matrix)

    def isz(c):
        return int(c["update_bytes"])

    th = [c for c in cells if c["workload"] == "threads"]
    tcounts = sorted({int(c["threads"]) for c in th})
    tsizes = sorted({isz(c) for c in th})
    tcells = []
    for c in th:
        k = (c["cipher"], c["direction"])
        if k not in tcells:
            tcells.append(k)
    for t in tcounts:
        m = [[R.get(("threads", ci, d, str(s), str(t), "1")) for s in tsizes] for ci, d in tcells]
        panels.append(("threads = %d" % t, ["%s %s" % k for k in tcells], [size_label(s) for s in tsizes], m))
    for pw in ("processes", "processes-long"):
        pr = [c for c in cells if c["workload"] == pw]
        if not pr:
            continue
        psizes = sorted({isz(c) for c in pr})
        prow = []
        for c in sorted(pr, key=lambda c: (c["cipher"], int(c["processes"]))):
            k = (c["cipher"], c["processes"])
            if k not in prow:
                prow.append(k)
        m = [[R.get((pw, ci, "enc", str(s), "1", n)) for s in psizes] for ci, n in prow]
        panels.append(("%s (update size)" % pw, ["%s x%s" % k for k in prow], [size_label(s) for s in psizes], m))
    fr = [c for c in cells if c["workload"].startswith("fresh-")]
    if fr:
        flab = ["%s %s" % (c["workload"].replace("fresh-", "").replace("-max-call", " longest call"), c["cipher"])
                for c in fr]
        panels.append(("fresh process", flab, ["ratio"], [[c["ratio"]] for c in fr]))
    su = [c for c in cells if c["workload"] == "startup"]
    if su:
        panels.append(("startup (whole process)", [cell_label(c).replace("openssl ", "") for c in su], ["ratio"],
                       [[c["ratio"]] for c in su]))
    sp = [c for c in cells if c["workload"] in ("speed", "speed-elapsed")]
    if sp:
        ssizes = sorted({isz(c) for c in sp})
        srow = []
        for c in sp:
            k = (c["workload"], c["cipher"])
            if k not in srow:
                srow.append(k)
        m = [[R.get((w, ci, "enc", str(s), "1", "1")) for s in ssizes] for w, ci in srow]
        panels.append(("openssl speed -bytes", ["%s %s" % (ci, "elapsed" if w == "speed-elapsed" else "cpu-time")
                                                for w, ci in srow], [size_label(s) for s in ssizes], m))
    if not panels:
        return "heatmap.png not written: no paired cells"
    allr = [x for p in panels for row in p[3] for x in row if x]
    span = max([2.0] + [max(x, 1 / x) for x in allr])
    span = min(span, 100.0)
    norm = LogNorm(vmin=1 / span, vmax=span)
    top = [p for p in panels if p[0].startswith("threads")]
    bottom = [p for p in panels if not p[0].startswith("threads")]
    ncol = max(len(top), len(bottom), 1)
    nrow = (1 if top else 0) + (1 if bottom else 0)
    fig, axes = plt.subplots(nrow, ncol, figsize=(4.2 * ncol + 1.5, 4.2 * nrow + 0.6), squeeze=False)
    cmap = copy.copy(plt.get_cmap("RdYlGn"))
    cmap.set_bad("#cccccc")
    im = None
    for ri, group in enumerate([g for g in (top, bottom) if g]):
        for ci in range(ncol):
            ax = axes[ri][ci]
            if ci >= len(group):
                ax.axis("off")
                continue
            title, rl, cl, m = group[ci]
            data = [[(x if x else float("nan")) for x in row] for row in m]
            im = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto")
            ax.set_xticks(range(len(cl)))
            ax.set_xticklabels(cl, fontsize=8)
            ax.set_yticks(range(len(rl)))
            ax.set_yticklabels(rl, fontsize=8)
            ax.set_title(title, fontsize=9)
            for y, row in enumerate(m):
                for x, v in enumerate(row):
                    ax.text(x, y, "-" if v is None else ("%.2f" % v if v < 10 else "%.1f" % v), ha="center",
                            va="center", fontsize=7)
    fig.suptitle("gpuaes / default (above 1: gpuaes better; GB/s, startup: 1 / wall time)", fontsize=10)
    fig.tight_layout(rect=(0, 0, 0.93, 0.95))
    cax = fig.add_axes((0.945, 0.15, 0.015, 0.7))
    cb = fig.colorbar(im, cax=cax)
    ticks = [2.0 ** e for e in range(-int(math.log2(span)), int(math.log2(span)) + 1)]
    cb.set_ticks(ticks)
    cb.set_ticklabels(["%g" % t if t >= 1 else "1/%g" % (1 / t) for t in ticks])
    cb.ax.minorticks_off()
    cb.set_label("gpuaes / default", fontsize=8)
    fig.savefig(os.path.join(out_dir, "heatmap.png"), dpi=110)
    plt.close(fig)
    return None


def report(out_dir, meta_lines, notes=()):
    rows = read_csv(os.path.join(out_dir, "load.csv"))
    note = None
    try:
        note = plot_heatmap(out_dir, rows)
    except Exception as e:  # a plot problem must not cost the table
        note = "heatmap.png not written: %s: %s" % (type(e).__name__, e)
    if note:
        print("load_matrix: " + note, file=sys.stderr)
    write_readme(out_dir, rows, meta_lines, note, notes)
    print_table(rows)
    return note is None


# ---------------------------------------------------------------- main

def sh(cmd):
    try:
        return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, universal_newlines=True,
                              timeout=20).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def gpu_info():
    q = sh(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]).splitlines()
    if not q:
        return "", ""
    parts = [x.strip() for x in q[0].split(",")]
    return parts[0], parts[1] if len(parts) > 1 else ""


def main():
    global LOG
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(root, "build"), help="gpuaes.so, bench/evp_bench, bench/load_proc")
    ap.add_argument("--out", help="output directory (default bench/results/<date>-<gpu>-load)")
    ap.add_argument("--quick", action="store_true", help="a smaller matrix, <= 60 s on the H200")
    ap.add_argument("--allow-no-gpu", action="store_true", help="run even when gpuaes has no GPU (its CPU fallback)")
    ap.add_argument("--only", default=",".join(STEPS),
                    help="steps: threads,processes,startup,speed (the default), and the opt-in "
                         "processes-long,fresh-warm,fresh-cold (issue 22)")
    ap.add_argument("--backend", choices=["inprocess", "service"],
                    help="gpuaes's GPU backend (GPUAES_GPU_BACKEND for every process; default: the environment's, "
                         "else service, gpuaes's own default). service: gpuaesd (BUILD/gpuaesd, or GPUAES_SERVICE_PATH) on a private "
                         "socket directory under the run's temporary directory, stopped at the end")
    ap.add_argument("--max-seconds", type=float,
                    help="no measurement starts, and a running evp_bench stops, after this many seconds "
                         "(290; --quick 80): the CSV keeps what was measured, meta.txt says what was cut")
    ap.add_argument("--plan", action="store_true", help="print the plan and the estimate, then exit")
    ap.add_argument("--report", metavar="DIR", help="only README.md, heatmap.png and the table from DIR/load.csv")
    g = ap.add_argument_group("threads (evp_bench)")
    g.add_argument("--threads", type=int_list)
    g.add_argument("--sizes", type=size_list)
    g.add_argument("--cells", help="cipher:dir list (default the six of issue 13)")
    g.add_argument("--repeats", type=int)
    g.add_argument("--min-time", type=float)
    g.add_argument("--warmup", type=float)
    g.add_argument("--confirm-below", type=float, default=0.95,
                   help="measure each cell whose ratio is below this again, alone: %d rounds alternating gpuaes "
                        "against the default provider and the default provider against itself (an A/A control), "
                        "%d x %g s each; meta.txt and README list them (0: off; default 0.95)"
                        % (CONFIRM_ROUNDS, CONFIRM_REPEATS, CONFIRM_MIN_TIME))
    g = ap.add_argument_group("processes (load_proc)")
    g.add_argument("--procs", type=int_list)
    g.add_argument("--proc-sizes", type=size_list)
    g.add_argument("--proc-ciphers")
    g.add_argument("--proc-bytes", type=positive_size, help="work per process")
    g.add_argument("--rounds", type=int)
    g.add_argument("--proc-wait-gpu", action="store_true",
                   help="each gpuaes process waits for its GPU during setup (default: the start-up is timed)")
    g = ap.add_argument_group("startup (openssl)")
    g.add_argument("--startup-sizes", type=size_list)
    g.add_argument("--startup-runs", type=int)
    g.add_argument("--startup-big-runs", type=int, help="runs for files of 1G and more")
    g = ap.add_argument_group("speed (openssl speed)")
    g.add_argument("--speed-ciphers")
    g.add_argument("--speed-sizes", type=int_list)
    g.add_argument("--speed-seconds", type=int)
    g.add_argument("--speed-repeats", type=int, help="runs per provider and cell, alternated; the median is kept")
    g = ap.add_argument_group("processes-long (load_proc; opt-in)")
    g.add_argument("--long-procs", type=int_list, help="process counts (1,4,16)")
    g.add_argument("--long-ciphers", help="AES-128-CTR,AES-256-GCM,AES-256-ECB")
    g.add_argument("--long-bytes", type=positive_size, help="work per process (10G; --quick 512M)")
    g.add_argument("--long-size", type=positive_size, help="update size (64M)")
    g.add_argument("--long-rounds", type=int, help="rounds, alternated; the median is kept (2; --quick 1)")
    g = ap.add_argument_group("fresh-warm, fresh-cold (one new load_proc; opt-in)")
    g.add_argument("--fresh-ciphers", help="AES-256-CTR,AES-256-GCM")
    g.add_argument("--fresh-bytes", type=positive_size, help="work of the process (1G)")
    g.add_argument("--fresh-size", type=positive_size, help="update size (64M)")
    g.add_argument("--fresh-runs", type=int, help="runs per provider, alternated; the median is kept (5; --quick 2)")
    ap.add_argument("--openssl", default=shutil.which("openssl") or "openssl")
    a = ap.parse_args()

    if a.report:
        meta, notes = [], []
        mp = os.path.join(a.report, "meta.txt")
        if os.path.exists(mp):
            with open(mp) as f:
                allm = [l.rstrip("\n") for l in f]
            meta = [l for l in allm if l.split(":")[0] in ("commit", "date", "gpu", "cpu", "command", "backend")]
            notes = allm
        report(a.report, meta, notes)
        return 0

    full = dict(threads=[1, 4, 16, 32], sizes=[16 << 10, 256 << 10, 1 << 20, 8 << 20, 64 << 20],
                repeats=3, min_time=0.1, warmup=0.05,
                procs=[1, 4, 16], proc_sizes=[1 << 20, 64 << 20], proc_ciphers="AES-128-CTR,AES-256-GCM",
                proc_bytes=1 << 30, rounds=5, max_seconds=400,
                startup_sizes=[1 << 10, 1 << 20, 64 << 20, 1 << 30], startup_runs=7, startup_big_runs=5,
                speed_ciphers="AES-128-CTR,AES-256-GCM", speed_sizes=[16, 16384, 67108864], speed_seconds=1,
                speed_repeats=3,
                long_procs=[1, 4, 16], long_ciphers="AES-128-CTR,AES-256-GCM,AES-256-ECB", long_bytes=10 << 30,
                long_size=64 << 20, long_rounds=2,
                fresh_ciphers="AES-256-CTR,AES-256-GCM", fresh_bytes=1 << 30, fresh_size=64 << 20, fresh_runs=5)
    quick = dict(full, long_bytes=512 << 20, long_rounds=1, fresh_runs=2,
                 threads=[1, 16], sizes=[16 << 10, 1 << 20, 64 << 20], min_time=0.05, warmup=0.02,
                 procs=[1, 16], proc_sizes=[64 << 20], proc_bytes=256 << 20, max_seconds=80,
                 startup_sizes=[1 << 10, 64 << 20], startup_runs=3, rounds=3,
                 speed_ciphers="AES-128-CTR", speed_sizes=[16384, 67108864], speed_repeats=1)
    preset = quick if a.quick else full
    max_seconds_given = a.max_seconds is not None
    for k, v in preset.items():
        if getattr(a, k) is None:
            setattr(a, k, v)
    if a.cells:
        a.cells = [tuple(x.strip().split(":")) for x in a.cells.split(",") if x.strip()]
        if any(len(c) != 2 or c[1].lower() not in ("enc", "dec") for c in a.cells):
            ap.error("--cells: CIPHER:enc|dec, comma separated")
        a.cells = [(c[0].upper(), c[1].lower()) for c in a.cells]
    else:
        a.cells = list(THREAD_CELLS)
    a.proc_ciphers = [x.strip().upper() for x in a.proc_ciphers.split(",") if x.strip()]
    a.speed_ciphers = [x.strip().upper() for x in a.speed_ciphers.split(",") if x.strip()]
    a.long_ciphers = [x.strip().upper() for x in a.long_ciphers.split(",") if x.strip()]
    a.fresh_ciphers = [x.strip().upper() for x in a.fresh_ciphers.split(",") if x.strip()]
    a.only = [x.strip() for x in a.only.split(",") if x.strip()]
    for s in a.only:
        if s not in STEPS + EXTRA_STEPS:
            ap.error("--only: unknown step %s" % s)
    if a.rounds < 1 or a.repeats < 1 or a.startup_runs < 1 or a.startup_big_runs < 1 or a.long_rounds < 1 \
            or a.fresh_runs < 1:
        ap.error("--rounds, --repeats, --startup-runs, --long-rounds, --fresh-runs: at least 1")
    for nm in ("long_size", "fresh_size"):
        v = getattr(a, nm)
        if v % 16 or v > (1 << 30):
            ap.error("--%s: a multiple of 16, at most 1G" % nm.replace("_", "-"))
    env_backend = os.environ.get("GPUAES_GPU_BACKEND", "").strip().lower()
    a.backend_given = a.backend is not None
    if a.backend is None:
        a.backend = "inprocess" if env_backend == "inprocess" else "service"

    a.build_dir = os.path.abspath(a.build_dir)
    a.evp_bench = os.path.join(a.build_dir, "bench", "evp_bench")
    a.load_proc = os.path.join(a.build_dir, "bench", "load_proc")
    a.cnf_example = os.path.join(root, "openssl.cnf.example")
    a.gpuaesd = os.environ.get("GPUAES_SERVICE_PATH") or os.path.join(a.build_dir, "gpuaesd")
    a.svc_dir = None  # the service's private socket directory (service backend), set below
    lines, est = plan(a)
    total = sum(est.values())
    if not max_seconds_given:  # the default steps' limit as before, plus room for the opt-in ones
        a.max_seconds += 1.5 * sum(v for k, v in est.items() if k in EXTRA_STEPS)
    print("load_matrix plan (%s):" % ("--quick" if a.quick else "full"), file=sys.stderr)
    for l in lines:
        print("  " + l, file=sys.stderr)
    print("  estimate: %s = %.0f s (stops starting new work after %.0f s)" % (
        " + ".join("%s %.0f" % (k, v) for k, v in est.items()), total, a.max_seconds), file=sys.stderr)
    if a.plan:
        return 0

    missing = [p for p in (os.path.join(a.build_dir, "gpuaes.so"), a.evp_bench, a.load_proc) +
               ((a.gpuaesd,) if a.backend == "service" else ()) if not os.path.exists(p)]
    if missing:
        print("load_matrix: not built: %s (cmake --build %s --target gpuaes evp_bench load_proc%s)"
              % (", ".join(missing), a.build_dir, " gpuaesd" if a.backend == "service" else ""), file=sys.stderr)
        return 2

    gpu_name, driver = gpu_info()
    if not a.out:
        slug = re.sub(r"[^a-z0-9]+", "-", (gpu_name or "nogpu").lower().replace("nvidia", "")).strip("-") or "gpu"
        base = os.path.join(root, "bench", "results", "%s-%s-load" % (datetime.date.today().isoformat(), slug))
        out, n = base, 2
        while os.path.exists(out):
            out, n = "%s-%d" % (base, n), n + 1
        a.out = out
    os.makedirs(a.out, exist_ok=True)
    a.out = os.path.abspath(a.out)
    LOG = open(os.path.join(a.out, "run.log"), "w")
    a.tmp = tempfile.mkdtemp(prefix="gpuaes-load-")
    a.cleanup = [a.tmp]
    # The backend reaches every process through the environment (the default provider's arm ignores it).
    os.environ["GPUAES_GPU_BACKEND"] = a.backend
    if a.backend == "service":
        a.svc_dir = os.path.join(a.tmp, "svc")
        os.mkdir(a.svc_dir, 0o700)
        os.environ["GPUAES_SERVICE_DIR"] = a.svc_dir
    a.meta_extra = []
    a.cut = set()
    a.evp_stdout = ""
    log("output: %s" % a.out)
    for l in lines:
        log("plan: " + l, echo=False)
    log("plan: estimate %.0f s" % total, echo=False)

    commit = os.environ.get("GPUAES_COMMIT", "")
    if not commit:
        commit = sh(["git", "-C", root, "rev-parse", "HEAD"]) or "unknown"
        if commit != "unknown" and sh(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"]):
            commit += " (working tree has changes)"
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    cpu = l.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = "%.0f GiB" % (int(f.readline().split()[1]) / 1048576)
    except (OSError, ValueError, IndexError):
        pass
    cmdline = " ".join([os.environ.get("LOAD_MATRIX_ARGV0", "bench/load_matrix.py")] + sys.argv[1:])
    meta = ["commit: %s" % commit,
            "date: %s" % datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
            "gpu: %s (driver %s)" % (gpu_name or "none found by nvidia-smi", driver or "unknown"),
            "cpu: %s, %d cores, %s" % (cpu or platform.processor(), os.cpu_count() or 0, mem),
            "openssl: %s" % (sh([a.openssl, "version"]) or "not found"),
            "host: %s, python %s" % (platform.node(), platform.python_version()),
            "command: %s" % cmdline]
    env_knobs = ["%s=%s" % (k, v) for k, v in sorted(os.environ.items()) if k.startswith("GPUAES_")]
    meta.append("environment: %s" % (" ".join(env_knobs) or "no GPUAES_* variables"))
    meta.append("backend: %s" % (
        "service (GPUAES_GPU_BACKEND=service; gpuaesd %s, private socket directory, stopped at the end)" % a.gpuaesd
        if a.backend == "service" else "inprocess (CUDA inside each gpuaes process)"))

    def write_meta(extra_status=""):
        with open(os.path.join(a.out, "meta.txt"), "w") as f:
            f.write("\n".join(meta) + "\n")
            for l in lines:
                f.write("plan: %s\n" % l)
            f.write("estimate: %.0f s\n" % total)
            for l in a.meta_extra:
                f.write(l + "\n")
            if extra_status:
                f.write(extra_status + "\n")

    # Preflight: gpuaes loads, and what it says about its GPU (evp_bench asks "gpu", which waits).
    rc, out, err = run_cmd([a.evp_bench, "--providers", "gpuaes", "--ciphers", "AES-128-CTR", "--dir", "enc",
                            "--sizes", "16", "--repeats", "1", "--min-time", "0.001", "--warmup", "0",
                            "--provider-path", a.build_dir], 120, title="preflight evp_bench")
    for l in out.splitlines():
        if l.startswith("# gpuaes") or l.startswith("# OpenSSL") or l.startswith("# provider gpuaes"):
            a.meta_extra.append(l[2:])
    avail = re.search(r"# gpuaes gpu-available: (-?\d+)", out)
    gpu_ok = avail is not None and avail.group(1) == "1"
    gline = re.search(r"# gpuaes gpu: (.*)", out)
    log("gpuaes: %s" % (gline.group(1) if gline else "(no answer: rc %s)" % rc))
    write_meta()
    if rc != 0 or not gpu_ok:
        if not a.allow_no_gpu:
            log("gpuaes reports no usable GPU (or did not load): stopping; --allow-no-gpu measures its CPU fallback")
            write_meta("status: stopped, no usable GPU")
            return 1
        log("WARNING: no usable GPU: gpuaes's rows measure its CPU fallback")

    res = Results(os.path.join(a.out, "load.csv"))
    res.write()
    deadline = T_START + a.max_seconds
    remaining = lambda: deadline - time.monotonic()  # noqa: E731
    status = {}

    def on_term(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    interrupted = False
    try:
        for step, fn in (("threads", step_threads), ("processes", step_processes), ("startup", step_startup),
                         ("speed", step_speed), ("processes-long", step_processes_long),
                         ("fresh-warm", lambda a, res, rem: step_fresh(a, res, rem, False)),
                         ("fresh-cold", lambda a, res, rem: step_fresh(a, res, rem, True))):
            if step not in a.only:
                continue
            t0 = time.monotonic()
            log("== %s (estimate %.0f s)" % (step, est.get(step, 0)))
            try:
                status[step] = fn(a, res, remaining)
            except Exception as e:  # keep the other steps' results
                log("%s: FAILED: %s: %s" % (step, type(e).__name__, e))
                status[step] = False
            log("== %s done in %.0f s%s" % (step, time.monotonic() - t0, "" if status[step] else " (with failures)"))
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted: writing what was measured")
        for p in CHILDREN:
            if p.returncode is None:
                try:
                    p.kill()
                except OSError:
                    pass
    finally:
        res.write()
        try:
            svc_stop(a)  # the service this run started, if any (its socket directory is in a.tmp)
        except Exception as e:
            log("stopping gpuaesd: %s: %s" % (type(e).__name__, e))
        for d in a.cleanup:
            shutil.rmtree(d, ignore_errors=True)
    took = elapsed()
    failed = [k for k, v in status.items() if not v and k not in a.cut]
    st = "interrupted" if interrupted else ("FAILED: " + ",".join(failed) if failed else "ok")
    if a.cut:
        st += "; cut short by --max-seconds %.0f: %s" % (a.max_seconds, ",".join(k for k in STEPS + EXTRA_STEPS
                                                                                 if k in a.cut))
    summary = "status: %s; %.0f s (estimate %.0f s); %d rows" % (st, took, total, len(res.rows))
    write_meta(summary)
    log(summary)
    LOG.flush()
    print("load_matrix: %s -> %s" % (summary, a.out))
    report(a.out, meta[:4] + [meta[6], meta[8], summary], [meta[8]] + a.meta_extra)  # the table, last on stdout
    print("(files: %s)" % ", ".join(sorted(os.listdir(a.out))), file=sys.stderr)
    LOG.close()
    return 0 if (not interrupted and not failed and not a.cut) else 1


if __name__ == "__main__":
    sys.exit(main())
