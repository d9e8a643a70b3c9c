#!/usr/bin/env bash
# mps.sh - many processes on one GPU, with and without CUDA MPS (issue 13):
# load_matrix.py's processes workload (16 load_proc processes at once x
# updates 1M, 64M x AES-128-CTR, AES-256-GCM, gpuaes against the default
# provider), and device memory per gpuaes process (bench/mps_mem.py,
# nvidia-smi), first without MPS, then under an MPS control daemon of our own
# (pipe and log directories in a temporary directory; stopped on exit).
# Without nvidia-cuda-mps-control the MPS half is skipped with a message.
#
#   cmake --build build --target gpuaes evp_bench load_proc
#   bash bench/mps.sh [--build-dir build] [--out DIR] [--proc-bytes 512M] [--plan] [-- load_matrix options]
#
# --plan (or --dry-run): print every command it would run and load_matrix's
# plan, run nothing.  Each gpuaes process waits for its GPU during setup
# (load_matrix --proc-wait-gpu): with gpu_start_bytes' default (2G) a process
# of 512M would never start it, and MPS changes how processes share the GPU,
# not whether one starts.  ~100 s on the H200 (two halves of <= 45 s of
# processes each, plus memory probes and MPS start/stop).
# Writes DIR/mps.csv, DIR/mem.csv, DIR/README.md (the tables), and per half
# DIR/no-mps/, DIR/mps/ (load_matrix's load.csv, run.log, meta.txt).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
py=${PYTHON:-python3}
build=$root/build
out=""
plan=0
proc_bytes=512M
procs=16
max_seconds=45
extra=()
usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --proc-bytes) proc_bytes=$2; shift 2 ;;
    --procs) procs=$2; shift 2 ;;
    --max-seconds) max_seconds=$2; shift 2 ;;
    --plan|--dry-run) plan=1; shift ;;
    -h|--help) usage ;;
    --) shift; extra=("$@"); break ;;
    *) echo "mps.sh: unknown option $1" >&2; usage ;;
  esac
done
build=$(cd "$build" 2>/dev/null && pwd || echo "$build")

# Prints a command; runs it unless --plan.
run() {
  printf '+ %s\n' "$*" >&2
  [ "$plan" = 1 ] || "$@"
}

if [ -z "$out" ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 \
        | tr 'A-Z' 'a-z' | sed 's/nvidia//; s/[^a-z0-9]\{1,\}/-/g; s/^-//; s/-$//' || true)
  out=$root/bench/results/$(date +%F)-${gpu:-nogpu}-mps
fi
if [ "$plan" = 0 ]; then
  for f in gpuaes.so bench/evp_bench bench/load_proc; do
    [ -e "$build/$f" ] || { echo "mps.sh: $build/$f not built (cmake --build $build --target gpuaes evp_bench load_proc)" >&2; exit 2; }
  done
  command -v nvidia-smi >/dev/null || { echo "mps.sh: nvidia-smi not found: no GPU here" >&2; exit 2; }
  mkdir -p "$out"
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuaes-mps.XXXXXX")
mps_on=0
cleanup() {
  if [ "$mps_on" = 1 ]; then
    echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true
    mps_on=0
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# One half: the processes matrix, then the memory probe.  $1: no-mps | mps.
half() {
  local mode=$1
  local matrix=("$py" "$here/load_matrix.py" --build-dir "$build" --out "$out/$mode" --only processes
    --procs "$procs" --proc-sizes 1M,64M --proc-ciphers AES-128-CTR,AES-256-GCM
    --proc-bytes "$proc_bytes" --rounds 1 --proc-wait-gpu --max-seconds "$max_seconds" ${extra[@]+"${extra[@]}"})
  run "${matrix[@]}" || echo "mps.sh: $mode: load_matrix failed (see $out/$mode/run.log)" >&2
  [ "$plan" = 0 ] || "${matrix[@]}" --plan   # its plan and estimate (runs nothing)
  run "$py" "$here/mps_mem.py" --load-proc "$build/bench/load_proc" --build-dir "$build" \
    --processes "$procs" --mode "$mode" --csv "$out/mem.csv" \
    || echo "mps.sh: $mode: memory probe failed" >&2
}

[ "$plan" = 1 ] || rm -f "$out/mem.csv"
echo "mps.sh: without MPS" >&2
half no-mps

if command -v nvidia-cuda-mps-control >/dev/null || [ "$plan" = 1 ]; then
  command -v nvidia-cuda-mps-control >/dev/null || echo "mps.sh: (--plan: nvidia-cuda-mps-control is not here; where it is:)" >&2
  export CUDA_MPS_PIPE_DIRECTORY=$tmp/pipe CUDA_MPS_LOG_DIRECTORY=$tmp/log
  run mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  echo "mps.sh: with MPS (CUDA_MPS_PIPE_DIRECTORY=$CUDA_MPS_PIPE_DIRECTORY)" >&2
  if run nvidia-cuda-mps-control -d; then
    [ "$plan" = 1 ] || mps_on=1
    half mps
    printf '+ echo quit | nvidia-cuda-mps-control\n' >&2
    if [ "$mps_on" = 1 ]; then
      echo quit | nvidia-cuda-mps-control || true
      mps_on=0
      [ -f "$CUDA_MPS_LOG_DIRECTORY/control.log" ] && cp "$CUDA_MPS_LOG_DIRECTORY/control.log" "$out/mps-control.log"
    fi
  else
    echo "mps.sh: nvidia-cuda-mps-control -d failed: MPS half skipped" >&2
  fi
  unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
else
  echo "mps.sh: nvidia-cuda-mps-control not found: MPS half skipped" >&2
fi

run "$py" "$here/mps_report.py" "$out"
