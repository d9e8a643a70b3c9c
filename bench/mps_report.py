#!/usr/bin/env python3
"""mps_report.py DIR - bench/mps.sh's tables: DIR/mps.csv and DIR/README.md
from DIR/no-mps/load.csv, DIR/mps/load.csv (load_matrix.py, processes rows)
and DIR/mem.csv (mps_mem.py).  A missing half is left out."""
import csv
import os
import statistics
import sys

from sizes import size_label

MODES = ["no-mps", "mps"]


def read(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = sys.argv[1]
    rows = []
    for mode in MODES:
        for r in read(os.path.join(d, mode, "load.csv")):
            if r.get("workload") == "processes":
                rows.append(dict(mode=mode, **{k: r[k] for k in ("cipher", "update_bytes", "processes", "path",
                                                                  "gbps", "cpu_core_s_per_gb", "wall_ms")}))
    cols = ["mode", "cipher", "update_bytes", "processes", "path", "gbps", "cpu_core_s_per_gb", "wall_ms"]
    with open(os.path.join(d, "mps.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)

    g = {(r["mode"], r["cipher"], r["update_bytes"], r["processes"], r["path"]): r for r in rows}
    cells = sorted({(r["cipher"], r["update_bytes"], r["processes"]) for r in rows},
                   key=lambda c: (c[0], int(c[1]), int(c[2])))
    L = ["# Many processes, with and without CUDA MPS", "",
         "`bench/mps.sh`: N `load_proc` processes at once (each its own message, GPU ready before the start),",
         "GB/s of all bytes over the slowest process's time; ratio = gpuaes / default of the same half.", ""]
    head = "| cipher | update | processes |"
    sep = "|---|---|---|"
    for mode in MODES:
        head += " default %s | gpuaes %s | ratio %s |" % (mode, mode, mode)
        sep += "---:|---:|---:|"
    L += [head, sep]

    def gb(mode, c, path):
        r = g.get((mode,) + c + (path,))
        return float(r["gbps"]) if r and r["gbps"] else None

    for c in cells:
        line = "| %s | %s | %s |" % (c[0], size_label(c[1]), c[2])
        for mode in MODES:
            a, b = gb(mode, c, "default"), gb(mode, c, "gpuaes")
            line += " %s | %s | %s |" % ("%.2f" % a if a else "–", "%.2f" % b if b else "–",
                                         "%.2f×" % (b / a) if a and b else "–")
        L.append(line)
    if not cells:
        L.append("| (no processes rows: see run.log) |")

    mem = read(os.path.join(d, "mem.csv"))
    if mem:
        L += ["", "## Device memory per gpuaes process (nvidia-smi, MiB)", "",
              "ready: every process has made its CUDA context (`--wait-gpu`), no job yet; running: the largest",
              "sample while 64 MiB AES-128-CTR updates run (context + staging slots). `listed` = the median",
              "used_memory nvidia-smi gave per listed process (under MPS it may list the MPS server instead);",
              "`device / N` = the GPU's memory.used increase divided by the processes (MPS server included).", "",
              "| mode | processes | phase | listed per process | listed | device / N |", "|---|---:|---|---:|---|---:|"]
        keys = []
        for r in mem:
            k = (r["mode"], r["processes"], r["phase"])
            if k not in keys:
                keys.append(k)
        for k in keys:
            sel = [r for r in mem if (r["mode"], r["processes"], r["phase"]) == k]
            procs = [float(r["used_mib"]) for r in sel if r["pid"] not in ("device", "device-per-process")]
            names = sorted({r["name"] for r in sel if r["pid"] not in ("device", "device-per-process")})
            per = [r["used_mib"] for r in sel if r["pid"] == "device-per-process"]
            L.append("| %s | %s | %s | %s | %d (%s) | %s |" % (
                k[0], k[1], k[2], "%.0f" % statistics.median(procs) if procs else "–", len(procs),
                ", ".join(names) or "none", per[0] if per else "–"))
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    print("\n".join(L))
    return 0


if __name__ == "__main__":
    sys.exit(main())
