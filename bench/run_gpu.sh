#!/usr/bin/env bash
# run_gpu.sh - the whole benchmark on the GPU machine in one command:
# build (Release, sm_90 by default), evp_bench (gpuaes vs the default
# provider), kernel_bench (kernels alone), meta.txt, plots.
#
#   bash bench/run_gpu.sh [--quick | --full] [--out DIR] [--no-build] [--no-kernel]
#                         [--build-dir DIR] [--allow-no-gpu] [-- EVP_BENCH_OPTIONS...]
#
# Results go to bench/results/<YYYY-MM-DD>-<gpu>/ (a suffix -2, -3 ... if that
# folder exists already):
#   throughput.csv  meta.txt  evp_bench.txt (table)  evp_bench.log (progress)
#   kernel_bench.txt  results.md  throughput-aes*.png  ratio.png
# --out DIR also copies them to DIR/<name>/ in few files (the device tool
# returns at most 8): results.tar.gz (the whole folder; unpack with
# tar -xzf results.tar.gz -C bench/results), throughput.csv, meta.txt,
# results.md, ratio.png.
# Everything after `--` goes to evp_bench and overrides the preset, e.g.
#   bash bench/run_gpu.sh --full -- --threads 1          (a slice of --full)
#   bash bench/run_gpu.sh -- --ciphers AES-128-CTR,AES-128-GCM --sizes 1M,64M,256M
# --allow-no-gpu: run even when gpuaes reports no usable GPU (its rows then
# measure its CPU fallback; by default evp_bench stops: --require-gpu).
# Environment: GPUAES_COMMIT (the commit to record; else git's HEAD), CUDA_ARCH (default 90).
# Exit status: 0 when every step succeeded, else 1 (the other steps still run
# and whatever was measured is kept).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
cd "$root" || exit 1

preset=--quick
out_base=""
build=1
kernel=1
build_dir="$root/bench/build"
evp_extra=()
require=--require-gpu
cmdline="bash bench/run_gpu.sh $*"

while [ $# -gt 0 ]; do
  case "$1" in
    --quick|--full) preset=$1 ;;
    --out) [ $# -ge 2 ] || { echo "run_gpu.sh: --out needs a directory" >&2; exit 2; }; out_base=$2; shift ;;
    --out=*) out_base=${1#--out=} ;;
    --build-dir) [ $# -ge 2 ] || { echo "run_gpu.sh: --build-dir needs a directory" >&2; exit 2; }; build_dir=$2; shift ;;
    --no-build) build=0 ;;
    --no-kernel) kernel=0 ;;
    --allow-no-gpu) require="" ;;
    --) shift; evp_extra=("$@"); break ;;
    -h|--help) sed -n '2,19p' "$here/run_gpu.sh"; exit 0 ;;
    *) echo "run_gpu.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

status=0
step() { echo "== $* ==" >&2; }
fail() { echo "run_gpu.sh: FAILED: $*" >&2; status=1; }

# ---- toolchain
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
jobs=$(nproc 2>/dev/null || echo 4)

# ---- build
if [ "$build" = 1 ]; then
  step "build ($build_dir)"
  t0=$SECONDS
  mkdir -p "$build_dir" || exit 1
  cfg_log="$build_dir/configure.log"
  if ! cmake -S "$root" -B "$build_dir" -DCMAKE_BUILD_TYPE=Release \
        -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" -DBUILD_TESTING=OFF >"$cfg_log" 2>&1; then
    tail -40 "$cfg_log" >&2
    echo "run_gpu.sh: cmake configure failed" >&2
    exit 1
  fi
  # gpuaes (the module) first; the two benchmarks after it.  kernel_bench may
  # fail to build on its own without stopping the EVP benchmark.
  if ! cmake --build "$build_dir" -j"$jobs" --target gpuaes evp_bench; then
    echo "run_gpu.sh: build of gpuaes/evp_bench failed" >&2
    exit 1
  fi
  if [ "$kernel" = 1 ] && ! cmake --build "$build_dir" -j"$jobs" --target kernel_bench; then
    fail "build of kernel_bench"
    kernel=0
  fi
  echo "build: $((SECONDS - t0)) s" >&2
fi
evp="$build_dir/bench/evp_bench"
kb="$build_dir/bench/kernel_bench"
[ -x "$evp" ] || { echo "run_gpu.sh: $evp not built" >&2; exit 1; }
[ -f "$build_dir/gpuaes.so" ] || { echo "run_gpu.sh: $build_dir/gpuaes.so not built" >&2; exit 1; }

# ---- where the results go
gpu_name=""
driver=""
if command -v nvidia-smi >/dev/null; then
  q=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
  gpu_name=$(echo "$q" | cut -d, -f1 | sed 's/^ *//;s/ *$//')
  driver=$(echo "$q" | cut -d, -f2 | sed 's/^ *//;s/ *$//')
fi
if [ -z "$gpu_name" ] && [ -x "$kb" ]; then
  gpu_name=$("$kb" --name 2>/dev/null | head -1)
fi
[ -n "$gpu_name" ] || gpu_name="nogpu"
slug=$(echo "$gpu_name" | tr 'A-Z' 'a-z' | sed 's/nvidia//g; s/[^a-z0-9]\{1,\}/-/g; s/^-*//; s/-*$//')
[ -n "$slug" ] || slug=gpu
name="$(date +%F)-$slug"
base="$root/bench/results"
res="$base/$name"
n=2
while [ -e "$res" ]; do res="$base/$name-$n"; n=$((n + 1)); done
name=$(basename "$res")
mkdir -p "$res" || { echo "run_gpu.sh: cannot create $res" >&2; exit 1; }
echo "results: $res" >&2
if [ -n "$out_base" ]; then
  mkdir -p "$out_base/$name" || { echo "run_gpu.sh: cannot create $out_base/$name" >&2; exit 1; }
  out_base=$(cd "$out_base" && pwd)
fi

# Copies the results to --out DIR: after each step (so a run killed later keeps
# the earlier steps' results there) and on SIGINT/SIGTERM.
export_results() {
  [ -n "$out_base" ] && [ -d "$res" ] || return 0
  local dst="$out_base/$name"
  tar -czf "$dst/results.tar.gz" -C "$base" "$name" || fail "tar of $res"
  for f in throughput.csv meta.txt results.md ratio.png; do
    [ -f "$res/$f" ] && cp "$res/$f" "$dst/"
  done
  echo "copied to $dst (unpack: tar -xzf results.tar.gz -C bench/results)" >&2
}
trap 'export_results' TERM INT

# ---- meta.txt
commit=${GPUAES_COMMIT:-} # given: it wins (a snapshot inside another checkout would report that one's HEAD)
if [ -z "$commit" ] && command -v git >/dev/null && git -C "$root" rev-parse HEAD >/dev/null 2>&1; then
  commit=$(git -C "$root" rev-parse HEAD)
  git -C "$root" diff --quiet HEAD -- 2>/dev/null || commit="$commit (working tree has changes)"
fi
[ -n "$commit" ] || commit=unknown
{
  echo "commit: $commit"
  echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
  echo "gpu: ${gpu_name} (driver ${driver:-unknown})"
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')"
  echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -xE 'aes|avx2|avx512f|vaes|vpclmulqdq|sha_ni|hypervisor' | tr '\n' ' ')"
  echo "nproc: $(nproc 2>/dev/null)"
  echo "memory: $(grep -m1 MemTotal /proc/meminfo 2>/dev/null | awk '{printf "%.0f GiB", $2/1048576}')"
  echo "openssl: $(openssl version 2>/dev/null || echo 'openssl CLI not found')"
  echo "cuda: $(nvcc --version 2>/dev/null | grep -m1 release | sed 's/.*release //')"
  echo "kernel: $(uname -r)"
  echo "command: $cmdline"
  echo "evp_bench: $evp $preset $require --out $res --provider-path $build_dir ${evp_extra[*]}"
} >"$res/meta.txt"

# ---- EVP benchmark (CSV written row by row: a cut-short run keeps its rows)
step "evp_bench $preset ${evp_extra[*]}"
"$evp" "$preset" $require --out "$res" --provider-path "$build_dir" "${evp_extra[@]}" \
  2> >(tee "$res/evp_bench.log" >&2) | tee "$res/evp_bench.txt"
rc=${PIPESTATUS[0]}
[ $rc -eq 0 ] || fail "evp_bench exited with $rc"
grep -E '^# (provider gpuaes|gpuaes gpu|gpuaes offload)' "$res/evp_bench.txt" >>"$res/meta.txt" 2>/dev/null
export_results

# ---- kernels alone (rows appended to the same CSV)
if [ "$kernel" = 1 ]; then
  if [ -x "$kb" ]; then
    step "kernel_bench"
    "$kb" --csv "$res/throughput.csv" | tee "$res/kernel_bench.txt"
    rc=${PIPESTATUS[0]}
    [ $rc -eq 0 ] || fail "kernel_bench exited with $rc"
    export_results
  else
    fail "kernel_bench not built"
  fi
fi

# ---- plots and table
step "plot"
if [ -f "$res/throughput.csv" ]; then
  python3 "$root/bench/plot.py" "$res" || fail "plot.py"
else
  fail "no throughput.csv"
fi

echo "results in $res:" >&2
ls -1 "$res" >&2
trap - TERM INT
export_results
[ $status -eq 0 ] || echo "run_gpu.sh: some steps FAILED (see above)" >&2
exit $status
