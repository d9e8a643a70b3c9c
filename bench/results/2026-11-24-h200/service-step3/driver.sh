#!/bin/bash
# device call B: the service backend on the H200 (temporary driver; results committed)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"
B=$PWD/build
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
  timeout 200 ctest -L gpu -R '^(kat|diff|params|bad_input|gcm_ghash|tls|reinit)_gpu$' --output-on-failure > $OUT/ctest-gpu-service.log 2>&1; echo "service ctest rc=$?"
  grep -E "tests passed" $OUT/ctest-gpu-service.log; $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-gpu-service.log )
stop_svc $D
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.2 --warmup 0.05 --provider-path $B --require-gpu --seed 1"
run_eb() { # label env...
  local l=$1; shift
  local D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB --ciphers AES-128-CTR,AES-256-GCM,AES-256-ECB --dir enc --threads 1,4 2>/dev/null | grep -E "^AES" | sed "s/^/$l /" >> $OUT/svc-ab.txt
  $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -E "^(jobs|dma):" | sed "s/^/$l # /" >> $OUT/svc-ab.txt
  stop_svc $D
}
run_eb inprocess GPUAES_GPU_BACKEND=inprocess
run_eb service GPUAES_GPU_BACKEND=service
run_eb service-nodma GPUAES_GPU_BACKEND=service GPUAESD_DMA=0
for ch in 2M 8M 16M; do run_eb service-chunk$ch GPUAES_GPU_BACKEND=service GPUAES_SERVICE_CHUNK=$ch; done
run_eb service-jobs8 GPUAES_GPU_BACKEND=service GPUAESD_JOBS=8
run_eb inprocess-2 GPUAES_GPU_BACKEND=inprocess
echo "evp done $(( $(date +%s) - t0 )) s"
left=$(( 560 - ($(date +%s) - t0) ))
GPUAES_GPU_START_BYTES=8M timeout $left bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold --backend service --out $OUT/svc > $OUT/lm-svc.log 2>&1; echo "lm rc=$?"
tar czf $OUT/svc-matrix.tgz -C $OUT svc && rm -rf $OUT/svc
awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$NF}' $OUT/svc-ab.txt
tail -30 $OUT/lm-svc.log | grep -v "^\[" | tail -25
echo "total $(( $(date +%s) - t0 )) s"
