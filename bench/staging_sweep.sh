#!/usr/bin/env bash
# staging_sweep.sh - the measurements behind the staging defaults
# (cuda/staging.cu: chunk size and lanes; cuda/copy_pool.cpp: copy threads,
# part size, streaming stores; the least number of chunks per job): gpuaes alone, every update on the GPU path
# (GPUAES_OFFLOAD_MIN_BYTES=0), one thread, AES-128-CTR and AES-128-GCM
# encryption at 1, 4 and 64 MiB, once per configuration.
#
#   bash bench/staging_sweep.sh BUILD_DIR OUT_DIR
# Output: OUT_DIR/staging-sweep.csv (the configuration in s_* columns, then
# evp_bench's CSV row); bench/probe/sweep_table.py prints it as a table.
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
csv="$out/staging-sweep.csv"
: >"$csv"
run() { # chunk lanes threads stream part pieces
  local tmp="$out/.one.csv"
  env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_STAGING_CHUNK=$1 GPUAES_STAGING_LANES=$2 GPUAES_COPY_THREADS=$3 \
    GPUAES_COPY_STREAM=$4 GPUAES_COPY_PART=$5 GPUAES_STAGING_PIECES=$6 \
    "$build/bench/evp_bench" --provider-path "$build" --providers gpuaes \
    --threads 1 --repeats 5 --min-time 0.05 --sizes 1M,4M,64M --ciphers AES-128-CTR,AES-128-GCM --dir enc \
    --require-gpu --csv "$tmp" >/dev/null 2>>"$out/staging-sweep.log" || echo "failed: $*" >>"$out/staging-sweep.log"
  [ -s "$csv" ] || sed -n 1p "$tmp" | sed 's/^/s_chunk,s_lanes,s_threads,s_stream,s_part,s_pieces,/' >>"$csv"
  tail -n +2 "$tmp" | sed "s/^/$1,$2,$3,$4,$5,$6,/" >>"$csv"
  rm -f "$tmp"
}
K=1024; M=$((1024 * 1024))
for c in $M $((2 * M)) $((4 * M)); do
  for l in 8 16; do run $c $l 8 1 $((256 * K)) 4; done
done
for p in 2 8; do run $((2 * M)) 12 8 1 $((256 * K)) $p; done
for t in 6 12; do run $((2 * M)) 12 $t 1 $((256 * K)) 4; done
for p in $((128 * K)) $((512 * K)); do run $((2 * M)) 12 8 1 $p 4; done
