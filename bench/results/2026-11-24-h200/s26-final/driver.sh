#!/bin/bash
# device call (session 26, final): ctest -j16; the GPU tests through the real gpuaesd; small calls in
# process and through a warm service; 16 KiB CTR keystream windows both ways; the exit race through
# the service
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
echo "ctest done $(( $(date +%s) - t0 )) s"
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls (in process) rc=$?"
D=$(mktemp -d)/s; $B/gpuaesd --socket-dir $D; sleep 1.5
GPUAES_GPU_BACKEND=service GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd $B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls-service.txt 2>&1; echo "small_calls (service) rc=$?"
stop_svc $D
paste <(awk 'NF==5 {print $1, $2, $5}' $OUT/small_calls.txt) <(awk 'NF==5 {print $5}' $OUT/small_calls-service.txt) | column -t | head -32
for be in inprocess service; do
  D=$(mktemp -d)/s
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=$be GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
    $B/bench/evp_bench --provider-path $B --ciphers AES-128-CTR,AES-256-CTR --dir enc --sizes 16K --threads 1 --repeats 3 --min-time 0.3 --seed 1 \
    2>/dev/null | grep -E "^AES" | sed "s/^/ks16K-$be /" >> $OUT/ks.txt
  stop_svc $D
done
awk '{print $1,$2,$5,$6,$7,$8,$NF}' $OUT/ks.txt
left=$(( 560 - ($(date +%s) - t0) ))
echo "exit race with $left s left"
D=$(mktemp -d)/s
GPUAES_MODULE_DIR=$B GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D timeout $left $B/test/test_exit_race 300 8 > $OUT/exit-race-service.log 2>&1; echo "exit race (service, 300 x 8) rc=$?"; tail -3 $OUT/exit-race-service.log
stop_svc $D
echo "total $(( $(date +%s) - t0 )) s"
