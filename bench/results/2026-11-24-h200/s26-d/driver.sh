#!/bin/bash
# device call (session 26, fourth): what caps one thread's 64 MiB job through the service at ~22 GB/s:
# pieces, jobs in flight per client, the service's staging chunk and lanes, DMA, the client's copy threads
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1 --ciphers AES-128-CTR,AES-256-ECB"
run() { # label, env...
  local label=$1; shift
  D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/sweep.txt
  stop_svc $D
}
for round in 1 2; do
  run default
  run jobs8 GPUAESD_JOBS=8
  run jobs2 GPUAESD_JOBS=2
  run piece8M GPUAES_SERVICE_CHUNK=8M
  run piece32M GPUAES_SERVICE_CHUNK=32M
  run schunk16 GPUAESD_STAGING_CHUNK_MB=16
  run schunk16-l8 GPUAESD_STAGING_CHUNK_MB=16 GPUAESD_STAGING_LANES=8
  run schunk8 GPUAESD_STAGING_CHUNK_MB=8
  run nodma GPUAESD_DMA=0
  run copy12 GPUAES_COPY_THREADS=12
done
awk '{print $1,$2,$6,$7,$8}' $OUT/sweep.txt | sort -k2,2 -k1,1 | awk '{k=$1" "$2; s[k]=s[k]" "$4} END {for (k in s) print k, s[k]}' | sort -k2,2 -k1,1
echo "total $(( $(date +%s) - t0 )) s"
