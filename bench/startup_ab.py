#!/usr/bin/env python3
"""startup_ab.py - what loading gpuaes costs a short process, A/B, interleaved.

Runs short `openssl` commands under openssl.cnf files that differ only in the
module they load (none: the default provider alone; then one file per gpuaes
build), round-robin, so that every variant sees the same machine; prints the
median wall time per command and variant and the ratio default / variant.

  python3 bench/startup_ab.py --rounds 40 none=- new=build/gpuaes.so old=/tmp/old/gpuaes.so

A variant is NAME=MODULE; MODULE '-' means no gpuaes (the default provider
alone, default_properties unset).  The cnf files are made from
openssl.cnf.example in a temporary directory.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "openssl.cnf.example")


def make_cnf(tmp, name, module):
    with open(EXAMPLE) as f:
        lines = f.read().splitlines()
    out = []
    for line in lines:
        if module == "-":
            if line.startswith("gpuaes = gpuaes_sect") or line.startswith("default_properties"):
                continue
        elif line.startswith("module = "):
            line = "module = " + os.path.abspath(module)
        out.append(line)
    path = os.path.join(tmp, name + ".cnf")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("variants", nargs="+", help="NAME=MODULE ('-': no gpuaes); the first is the baseline")
    a = ap.parse_args()
    variants = [v.split("=", 1) for v in a.variants]
    with tempfile.TemporaryDirectory() as tmp:
        small = os.path.join(tmp, "1K")
        mid = os.path.join(tmp, "1M")
        with open(small, "wb") as f:
            f.write(os.urandom(1024))
        with open(mid, "wb") as f:
            f.write(os.urandom(1 << 20))
        key = "00" * 32
        iv = "00" * 16
        commands = {
            "list -providers": ["openssl", "list", "-providers"],
            "enc -aes-256-ctr 1K": ["openssl", "enc", "-aes-256-ctr", "-K", key, "-iv", iv, "-in", small,
                                    "-out", os.devnull],
            "enc -aes-256-ctr 1M": ["openssl", "enc", "-aes-256-ctr", "-K", key, "-iv", iv, "-in", mid,
                                    "-out", os.devnull],
            "dgst -sha256 1M": ["openssl", "dgst", "-sha256", mid],
        }
        cnfs = {name: make_cnf(tmp, name, module) for name, module in variants}
        times = {(c, n): [] for c in commands for n, _ in variants}
        for r in range(a.rounds + 1):
            for c, argv in commands.items():
                for n, _ in variants:
                    env = dict(os.environ, OPENSSL_CONF=cnfs[n])
                    t0 = time.perf_counter_ns()
                    p = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                    t = (time.perf_counter_ns() - t0) / 1e6
                    if p.returncode != 0:
                        sys.exit(f"{n}: {' '.join(argv)} failed: {p.stderr.decode(errors='replace')}")
                    if r > 0:                      # round 0 warms the page cache
                        times[(c, n)].append(t)
        base = variants[0][0]
        print(f"# startup_ab: {a.rounds} interleaved rounds, median wall ms; ratio = {base} / variant")
        print(f"{'command':24s}" + "".join(f"{n:>12s}" for n, _ in variants)
              + "".join(f"{'ratio ' + n:>14s}" for n, _ in variants[1:]))
        for c in commands:
            med = {n: statistics.median(times[(c, n)]) for n, _ in variants}
            print(f"{c:24s}" + "".join(f"{med[n]:12.2f}" for n, _ in variants)
                  + "".join(f"{med[base] / med[n]:14.2f}" for n, _ in variants[1:]))


if __name__ == "__main__":
    main()
