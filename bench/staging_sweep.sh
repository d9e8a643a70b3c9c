#!/usr/bin/env bash
# staging_sweep.sh - the measurements behind the staging defaults
# (cuda/staging.cu: chunk size and lanes; cuda/copy_pool.cpp: copy threads,
# streaming stores): gpuaes alone, every update on the GPU path
# (GPUAES_OFFLOAD_MIN_BYTES=0), one thread, AES-128-CTR and AES-128-GCM
# encryption at 1, 4 and 64 MiB, once per configuration.
#
#   bash bench/staging_sweep.sh BUILD_DIR OUT_DIR
# Output: OUT_DIR/staging-sweep.csv (config columns + evp_bench's CSV row).
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
csv="$out/staging-sweep.csv"
: >"$csv"
run() { # chunk lanes threads stream
  local tmp="$out/.one.csv"
  env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_STAGING_CHUNK=$1 GPUAES_STAGING_LANES=$2 GPUAES_COPY_THREADS=$3 \
    GPUAES_COPY_STREAM=$4 "$build/bench/evp_bench" --provider-path "$build" --providers gpuaes \
    --threads 1 --repeats 5 --min-time 0.05 --sizes 1M,4M,64M --ciphers AES-128-CTR,AES-128-GCM --dir enc \
    --require-gpu --csv "$tmp" >/dev/null 2>>"$out/staging-sweep.log" || echo "failed: $*" >>"$out/staging-sweep.log"
  [ -s "$csv" ] || sed -n 1p "$tmp" | sed 's/^/chunk,lanes,threads,stream,/' >>"$csv"
  tail -n +2 "$tmp" | sed "s/^/$1,$2,$3,$4,/" >>"$csv"
  rm -f "$tmp"
}
K=1024; M=$((1024 * 1024))
for c in $((512 * K)) $M $((2 * M)) $((4 * M)) $((8 * M)); do
  for l in 3 4 8; do run $c $l 8 1; done
done
for t in 4 6 12 16; do run $((2 * M)) 4 $t 1; done
run $((2 * M)) 4 8 0
run $((8 * M)) 2 8 0   # the shape of the previous pipeline
