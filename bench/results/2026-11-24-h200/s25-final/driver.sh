#!/bin/bash
# device call (session 25, final): the whole suite, the GPU tests through the real gpuaesd, the exit
# race with the service backend, small calls, one and four threads at 64 MiB in process and through the service
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && GPUAES_MODULE_DIR=$B timeout 220 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
echo "ctest done $(( $(date +%s) - t0 )) s"
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
  timeout 120 ctest -L gpu -R '^(kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)_?(gpu)?$' --output-on-failure > $OUT/ctest-gpu-service.log 2>&1; echo "service ctest rc=$?"
  grep -E "tests passed" $OUT/ctest-gpu-service.log; $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-gpu-service.log )
stop_svc $D
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"; tail -24 $OUT/small_calls.txt
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.2 --warmup 0.05 --provider-path $B --require-gpu --seed 1"
for be in inprocess service; do
  D=$(mktemp -d)/s
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=$be GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D $EB --ciphers AES-128-CTR,AES-256-GCM,AES-256-ECB --dir enc --threads 1,4 2>/dev/null | grep -E "^AES" | sed "s/^/$be /" >> $OUT/svc-ab.txt
  stop_svc $D
done
awk '{print $1,$2,$3,$4,$5,$6,$7,$8,$NF}' $OUT/svc-ab.txt
left=$(( 580 - ($(date +%s) - t0) ))
echo "exit race with $left s left"
D=$(mktemp -d)/s
GPUAES_MODULE_DIR=$B GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D timeout $left $B/test/test_exit_race 1000 8 > $OUT/exit-race-service.log 2>&1; echo "exit race (service, 1000 x 8) rc=$?"; tail -3 $OUT/exit-race-service.log
stop_svc $D
echo "total $(( $(date +%s) - t0 )) s"
