#!/usr/bin/env bash
# crossover.sh - the measurements behind the default offload thresholds
# (provider/settings.c): every GPU operation with GPUAES_OFFLOAD_MIN_BYTES=0
# and GPUAES_DISPATCH=force (gpuaes always on the GPU path) against the default provider, 1 thread,
# update sizes 256 KiB .. 64 MiB; plus `openssl speed -bytes 16` for all 15
# ciphers, gpuaes (on its CPU path, default thresholds) beside default.
#
#   bash bench/crossover.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=${1:?build dir}
out=${2:?output dir}
mkdir -p "$out"
bench=(env GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force "$build/bench/evp_bench" --provider-path "$build"
       --threads 1 --repeats 3 --min-time 0.1 --sizes 256K,1M,2M,4M,16M,64M --require-gpu)
"${bench[@]}" --ciphers AES-128-CBC,AES-128-CFB,AES-256-CFB --dir dec --csv "$out/crossover-dec.csv" \
  >"$out/crossover-dec.txt" 2>"$out/crossover.log"
"${bench[@]}" --ciphers AES-128-ECB,AES-256-ECB,AES-128-CTR,AES-256-CTR,AES-128-GCM,AES-256-GCM \
  --dir enc,dec --csv "$out/crossover-encdec.csv" >"$out/crossover-encdec.txt" 2>>"$out/crossover.log"

# openssl speed at 16-byte updates: the cost of the wrapper on the CPU path.
{
  printf 'cipher,default_kBps,gpuaes_kBps,ratio\n'
  for c in aes-{128,192,256}-{ecb,cbc,cfb,ctr,gcm}; do
    for p in default gpuaes; do
      args=(-provider default)
      [ $p = gpuaes ] && args=(-provider-path "$build" -provider gpuaes -provider default
                               -propquery '?provider=gpuaes')
      v=$(openssl speed "${args[@]}" -evp $c -bytes 16 -seconds 1 2>/dev/null | tail -1 \
          | awk '{print $NF}' | tr -d k)
      eval "v_$p=\$v"
    done
    awk -v c=$c -v d="$v_default" -v g="$v_gpuaes" 'BEGIN { printf "%s,%s,%s,%.3f\n", c, d, g, g / d }'
  done
} >"$out/speed16.csv"
