#!/usr/bin/env bash
# staging_sweep.sh - the measurements behind the staging defaults
# (cuda/staging/staging_config.cpp: chunk size and lanes; cuda/copy/copy_pool.cpp: copy threads,
# part size, streaming stores; the first chunk of a job; zero-copy chunks): gpuaes alone, every update on the GPU path
# (GPUAES_OFFLOAD_MIN_BYTES=0, GPUAES_DISPATCH=force), one thread, AES-128-CTR and AES-128-GCM
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
run() { # chunk lanes threads stream part first zero_copy
  local tmp="$out/.one.csv"
  env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_STAGING_CHUNK=$1 GPUAES_STAGING_LANES=$2 GPUAES_COPY_THREADS=$3 \
    GPUAES_COPY_STREAM=$4 GPUAES_COPY_PART=$5 GPUAES_STAGING_FIRST=$6 GPUAES_STAGING_ZEROCOPY=${7:-0} \
    "$build/bench/evp_bench" --provider-path "$build" --providers gpuaes \
    --threads 1 --repeats 5 --min-time 0.05 --sizes 1M,4M,64M --ciphers AES-128-CTR,AES-128-GCM --dir enc \
    --require-gpu --csv "$tmp" >/dev/null 2>>"$out/staging-sweep.log" || echo "failed: $*" >>"$out/staging-sweep.log"
  [ -s "$csv" ] || sed -n 1p "$tmp" | sed 's/^/s_chunk,s_lanes,s_threads,s_stream,s_part,s_first,s_zc,/' >>"$csv"
  tail -n +2 "$tmp" | sed "s/^/$1,$2,$3,$4,$5,$6,${7:-0},/" >>"$csv"
  rm -f "$tmp"
}
K=1024; M=$((1024 * 1024))
for z in 0 $((512 * K)) $M $((4 * M)); do run $((4 * M)) 8 8 1 $((256 * K)) $((256 * K)) $z; done
run $((4 * M)) 8 8 1 $((256 * K)) $((128 * K)) $((512 * K))
