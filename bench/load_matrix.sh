#!/usr/bin/env bash
# load_matrix.sh - the load matrix (issue 13) in one command: gpuaes against
# the default provider under threads, processes, short processes (openssl.cnf)
# and `openssl speed`.  Builds nothing: build first, e.g.
#
#   cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF
#   cmake --build build -j16 --target gpuaes evp_bench load_proc gpuaesd
#   bash bench/load_matrix.sh --build-dir build [--out DIR] [--quick] [--plan] [--allow-no-gpu]
#
# Writes DIR/load.csv, heatmap.png, README.md, meta.txt, run.log (default DIR:
# bench/results/<date>-<gpu>-load).  ~230 s on the H200 (--quick: ~50 s).
# Issue 22's opt-in workloads, per backend ~160 s on the H200 (--quick ~25 s):
#   bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold \
#        --backend inprocess|service --out DIR
# Options: bench/load_matrix.py --help.  PYTHON=... picks the interpreter.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "load_matrix.sh: $py not found (set PYTHON)" >&2; exit 2; }
if ! "$py" -c 'import matplotlib' 2>/dev/null; then
  echo "load_matrix.sh: note: $py has no matplotlib: load.csv and README.md only, no heatmap.png" >&2
fi
export LOAD_MATRIX_ARGV0="bash bench/load_matrix.sh"
exec "$py" "$here/load_matrix.py" "$@"
