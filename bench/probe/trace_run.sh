#!/usr/bin/env bash
# trace_run.sh BUILD_DIR - per-chunk stage times (GPUAES_STAGING_TRACE) of one
# AES-128-CTR job at a few sizes and staging shapes.
build=${1:?build dir}
one() { # size chunk lanes
  echo "### job $1, GPUAES_STAGING_CHUNK=$2 LANES=$3"
  env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_STAGING_CHUNK=$2 GPUAES_STAGING_LANES=$3 GPUAES_STAGING_TRACE=4 GPUAES_STAGING_FIRST=262144 \
    "$build/bench/evp_bench" --provider-path "$build" --providers gpuaes --threads 1 --repeats 1 --min-time 0.01 \
    --sizes $1 --ciphers AES-128-CTR --dir enc 2>&1 | sed -n '/staging trace/,/^\[/p' | grep -v '^\['
}
M=$((1024 * 1024))
one 64M $((4 * M)) 8
one 4M $((4 * M)) 8
one 1M $((4 * M)) 8
