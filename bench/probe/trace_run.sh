#!/usr/bin/env bash
# trace_run.sh BUILD_DIR [CIPHER [DIR [SIZE...]]] - per-chunk stage times
# (GPUAES_STAGING_TRACE) of one warm job (the 10th) per size, default staging
# shape.  Defaults: AES-128-CTR, enc, 64M 4M 1M.
build=${1:?build dir}
cipher=${2:-AES-128-CTR}
dir=${3:-enc}
shift 3 2>/dev/null || shift $#
sizes=${*:-64M 4M 1M}
for s in $sizes; do
  echo "### $cipher $dir job $s"
  env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_STAGING_TRACE=10 \
    "$build/bench/evp_bench" --provider-path "$build" --providers gpuaes --threads 1 --repeats 1 --min-time 0.01 \
    --sizes "$s" --ciphers "$cipher" --dir "$dir" 2>&1 | sed -n '/staging trace/,/^\[/p' | grep -v '^\['
done
