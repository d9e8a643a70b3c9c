#!/usr/bin/env python3
"""plot.py - plots and a markdown table from bench results.

usage: plot.py RESULTS_DIR_OR_CSV [MORE ...] [--out DIR] [--table-sizes 16K,1M,64M]

Reads throughput.csv (cipher,direction,update_bytes,threads,path,gbps,
cpu_core_s_per_gb) and writes, next to it (or into --out):
  throughput-aes128[-tN].png ...  one figure per key size (and thread count):
                                   one panel per mode, GB/s vs update size,
                                   default and gpuaes per direction, the
                                   kernel-only figure as a dashed line
  ratio.png                        gpuaes / default vs update size, one line per
                                   cipher and direction (one row of panels per
                                   thread count)
  results.md                       markdown table of the headline rows
Without matplotlib only results.md is written (exit status 0).
Several inputs (e.g. the slices of a --full run) are merged, a later row
replacing an earlier one with the same cipher, direction, size, threads and
path; the merged CSV is written to --out DIR/throughput.csv (required then).
"""
import argparse
import csv
import math
import os
import sys
from collections import defaultdict

from sizes import parse_size, size_label

MODES = ["ECB", "CBC", "CFB", "CTR", "GCM"]
KEYS = [128, 192, 256]


def read_rows(path):
    rows = []
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        need = ["cipher", "direction", "update_bytes", "threads", "path", "gbps", "cpu_core_s_per_gb"]
        if r.fieldnames is None or any(k not in r.fieldnames for k in need):
            sys.exit("plot.py: %s: unexpected header %s" % (path, r.fieldnames))
        for line in r:
            try:
                cipher = line["cipher"].strip()
                parts = cipher.split("-")  # AES-128-CTR
                row = {
                    "cipher": cipher,
                    "bits": int(parts[1]),
                    "mode": parts[2],
                    "dir": line["direction"].strip(),
                    "size": int(line["update_bytes"]),
                    "threads": int(line["threads"]),
                    "path": line["path"].strip(),
                    "gbps": float(line["gbps"]),
                    "cpu": float(line["cpu_core_s_per_gb"]) if line["cpu_core_s_per_gb"].strip() else None,
                }
            except (ValueError, IndexError, KeyError, AttributeError) as e:
                print("plot.py: skipping malformed row %r (%s)" % (line, e), file=sys.stderr)
                continue
            rows.append(row)
    return rows


def fmt(v, digits=2):
    return "-" if v is None else ("%.*f" % (digits, v))


def write_table(rows, out_dir, table_sizes):
    # (cipher, dir, size, threads) -> {path: row}
    evp = defaultdict(dict)
    kernel = {}
    for r in rows:
        if r["path"] == "kernel":
            kernel[(r["cipher"], r["dir"])] = r["gbps"]
        else:
            evp[(r["cipher"], r["dir"], r["size"], r["threads"])][r["path"]] = r
    sizes_present = sorted({k[2] for k in evp})
    wanted = [s for s in table_sizes if s in sizes_present] or sizes_present
    order = {("AES-%d-%s" % (b, m)): i for i, (m, b) in enumerate((m, b) for m in MODES for b in KEYS)}

    lines = []
    lines.append("| cipher | dir | update | threads | default GB/s | gpuaes GB/s | gpuaes/default "
                 "| default CPU s/GB | gpuaes CPU s/GB | kernel GB/s |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    keys = [k for k in evp if k[2] in wanted]
    keys.sort(key=lambda k: (order.get(k[0], 99), k[0], k[1] != "enc", k[3], k[2]))
    for k in keys:
        d = evp[k].get("default")
        g = evp[k].get("gpuaes")
        ratio = g["gbps"] / d["gbps"] if d and g and d["gbps"] > 0 else None
        kg = kernel.get((k[0], k[1]))
        lines.append("| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], size_label(k[2]), k[3],
            fmt(d["gbps"]) if d else "-", fmt(g["gbps"]) if g else "-",
            fmt(ratio), fmt(d["cpu"], 3) if d else "-", fmt(g["cpu"], 3) if g else "-",
            fmt(kg, 0) if kg is not None else "-"))
    # Kernel rows for modes with no EVP row in the table (e.g. a kernel-only CSV).
    extra = sorted((c, dr) for (c, dr) in kernel if not any(k[0] == c and k[1] == dr for k in keys))
    for c, dr in extra:
        lines.append("| %s | %s | - | - | - | - | - | - | - | %s |" % (c, dr, fmt(kernel[(c, dr)], 0)))

    path = os.path.join(out_dir, "results.md")
    with open(path, "w") as f:
        f.write("GB/s = 10^9 bytes/s, median of the repeats; CPU s/GB = process CPU seconds per 10^9 bytes "
                "(all threads); kernel = the GPU kernel alone on device-resident buffers (no PCIe).\n"
                "Update sizes shown: %s.\n\n" % ", ".join(size_label(s) for s in wanted))
        f.write("\n".join(lines) + "\n")
    print("plot.py: wrote %s" % path)


def log2_axis(ax, sizes):
    ax.set_xscale("log", base=2)
    ticks = sorted(sizes)
    if len(ticks) > 9:  # keep labels readable: every other one
        ticks = ticks[::2] if ticks[-1] == ticks[::2][-1] else ticks[::2] + [ticks[-1]]
    ax.set_xticks(ticks)
    ax.set_xticklabels([size_label(s) for s in ticks], fontsize=7)
    ax.minorticks_off()


def plain_log_y(ax, ticker, ratio=False):
    """Log y axis labelled 0.5, 1, 2, 10, 100 ... instead of 10^x."""
    ax.set_yscale("log")
    if ratio:
        ax.yaxis.set_major_locator(ticker.FixedLocator([2.0 ** k for k in range(-8, 9)]))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: "%g" % v))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())


def make_plots(rows, out_dir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker as ticker
    except ImportError:
        print("plot.py: matplotlib is not installed: no PNG written (results.md only)")
        return

    evp = [r for r in rows if r["path"] in ("default", "gpuaes")]
    kernel = {(r["bits"], r["mode"], r["dir"]): r["gbps"] for r in rows if r["path"] == "kernel"}
    threads_all = sorted({r["threads"] for r in evp})
    colors = {"default": "tab:blue", "gpuaes": "tab:orange"}
    styles = {"enc": "-", "dec": "--"}
    markers = {"enc": "o", "dec": "s"}
    written = []

    for bits in KEYS:
        for t in threads_all or [1]:
            sub = [r for r in evp if r["bits"] == bits and r["threads"] == t]
            ksub = {k: v for k, v in kernel.items() if k[0] == bits}
            if not sub and not ksub:
                continue
            fig, axes = plt.subplots(1, len(MODES), figsize=(4.0 * len(MODES), 4.2), sharey=True)
            ymin, ymax = math.inf, 0.0
            sizes = sorted({r["size"] for r in sub}) or [16, 1 << 20]  # one x range for every panel
            for ax, mode in zip(axes, MODES):
                msub = [r for r in sub if r["mode"] == mode]
                for path in ("default", "gpuaes"):
                    for d in ("enc", "dec"):
                        pts = sorted((r["size"], r["gbps"]) for r in msub if r["path"] == path and r["dir"] == d)
                        if not pts:
                            continue
                        ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[d], color=colors[path],
                                marker=markers[d], markersize=3.5, linewidth=1.4, label="%s %s" % (path, d))
                        ymin = min(ymin, min(p[1] for p in pts))
                        ymax = max(ymax, max(p[1] for p in pts))
                for d, ls in (("enc", (0, (5, 3))), ("dec", (0, (1, 2)))):
                    v = ksub.get((bits, mode, d))
                    if v is not None:
                        ax.axhline(v, color="0.35", linestyle=ls, linewidth=1.1, label="kernel only %s" % d)
                        ymin, ymax = min(ymin, v), max(ymax, v)
                log2_axis(ax, sizes)
                ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
                plain_log_y(ax, ticker)
                ax.set_title("AES-%d-%s" % (bits, mode))
                ax.set_xlabel("update size (bytes)")
                ax.grid(True, which="major", alpha=0.3)
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, loc="best")
            axes[0].set_ylabel("GB/s (10^9 B/s, median)")
            if ymax > 0:
                axes[0].set_ylim(ymin / 1.6, ymax * 1.6)
            fig.suptitle("gpuaes vs OpenSSL default provider, AES-%d, %d thread%s"
                         % (bits, t, "" if t == 1 else "s"))
            fig.tight_layout()
            name = "throughput-aes%d%s.png" % (bits, "" if t == 1 and len(threads_all) <= 1 else "-t%d" % t)
            fig.savefig(os.path.join(out_dir, name), dpi=110)
            plt.close(fig)
            written.append(name)

    # Ratio plot: one row of panels per thread count, one panel per mode.
    pairs = defaultdict(dict)
    for r in evp:
        pairs[(r["cipher"], r["bits"], r["mode"], r["dir"], r["threads"], r["size"])][r["path"]] = r["gbps"]
    ratios = defaultdict(list)  # (threads, mode) -> [(bits, dir, size, ratio)]
    for (c, bits, mode, d, t, size), v in pairs.items():
        if "default" in v and "gpuaes" in v and v["default"] > 0:
            ratios[(t, mode)].append((bits, d, size, v["gpuaes"] / v["default"]))
    if ratios:
        tl = sorted({k[0] for k in ratios})
        all_sizes = sorted({x[2] for v in ratios.values() for x in v})
        fig, axes = plt.subplots(len(tl), len(MODES), figsize=(4.0 * len(MODES), 3.6 * len(tl)),
                                 sharey=True, squeeze=False)
        kc = {128: "tab:green", 192: "tab:purple", 256: "tab:red"}
        for i, t in enumerate(tl):
            for j, mode in enumerate(MODES):
                ax = axes[i][j]
                data = ratios.get((t, mode), [])
                sizes = all_sizes
                for bits in KEYS:
                    for d in ("enc", "dec"):
                        pts = sorted((x[2], x[3]) for x in data if x[0] == bits and x[1] == d)
                        if pts:
                            ax.plot([p[0] for p in pts], [p[1] for p in pts], styles[d], color=kc[bits],
                                    marker=markers[d], markersize=3.5, label="AES-%d %s" % (bits, d))
                ax.axhline(1.0, color="black", linewidth=0.8)
                log2_axis(ax, sizes)
                ax.set_xlim(sizes[0] / 1.5, sizes[-1] * 1.5)
                plain_log_y(ax, ticker, ratio=True)
                ax.set_title("%s, %d thread%s" % (mode, t, "" if t == 1 else "s"))
                ax.grid(True, which="major", alpha=0.3)
                if i == len(tl) - 1:
                    ax.set_xlabel("update size (bytes)")
                if j == 0:
                    ax.set_ylabel("gpuaes / default (throughput)")
                if ax.get_legend_handles_labels()[0]:
                    ax.legend(fontsize=7, loc="best")
        fig.suptitle("gpuaes / default provider: above 1 = gpuaes faster")
        fig.tight_layout()
        fig.savefig(os.path.join(out_dir, "ratio.png"), dpi=110)
        plt.close(fig)
        written.append("ratio.png")
    for w in written:
        print("plot.py: wrote %s" % os.path.join(out_dir, w))


def main():
    ap = argparse.ArgumentParser(description="Plot bench results (throughput.csv).")
    ap.add_argument("results", nargs="+", help="results directory (with throughput.csv) or the CSV itself")
    ap.add_argument("--out", help="output directory (default: next to the CSV)")
    ap.add_argument("--table-sizes", default="16K,1M,64M",
                    help="update sizes in results.md (default 16K,1M,64M; all when none is present)")
    a = ap.parse_args()
    paths = []
    for p in a.results:
        if os.path.isdir(p):
            p = os.path.join(p, "throughput.csv")
        if not os.path.isfile(p):
            sys.exit("plot.py: %s not found" % p)
        paths.append(os.path.abspath(p))
    if len(paths) > 1 and not a.out:
        sys.exit("plot.py: several inputs need --out DIR (the merged CSV is written there)")
    out_dir = a.out or os.path.dirname(paths[0])
    os.makedirs(out_dir, exist_ok=True)
    merged = {}
    for p in paths:
        for r in read_rows(p):
            merged[(r["cipher"], r["dir"], r["size"], r["threads"], r["path"])] = r
    rows = list(merged.values())
    if not rows:
        sys.exit("plot.py: no data rows in %s" % ", ".join(paths))
    if len(paths) > 1:
        out_csv = os.path.join(out_dir, "throughput.csv")
        if out_csv in paths:
            sys.exit("plot.py: --out must not hold one of the inputs")
        with open(out_csv, "w") as f:
            f.write("cipher,direction,update_bytes,threads,path,gbps,cpu_core_s_per_gb\n")
            for r in rows:
                f.write("%s,%s,%d,%d,%s,%.4f,%s\n" % (r["cipher"], r["dir"], r["size"], r["threads"], r["path"],
                                                     r["gbps"], "" if r["cpu"] is None else "%.5f" % r["cpu"]))
        print("plot.py: wrote %s (%d rows from %d files)" % (out_csv, len(rows), len(paths)))
    try:
        table_sizes = [parse_size(s.strip()) for s in a.table_sizes.split(",") if s.strip()]
    except ValueError:
        sys.exit("plot.py: bad --table-sizes %r" % a.table_sizes)
    write_table(rows, out_dir, table_sizes)
    make_plots(rows, out_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
