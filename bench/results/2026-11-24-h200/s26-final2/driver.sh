#!/bin/bash
# device call (session 26, last): the session's last code: ctest -j16, the GPU tests through the real
# gpuaesd, small calls in process
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"; awk 'NF==5' $OUT/small_calls.txt | head -31
echo "total $(( $(date +%s) - t0 )) s"
