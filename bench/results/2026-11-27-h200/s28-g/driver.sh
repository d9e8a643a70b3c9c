#!/bin/bash
# device call (session 28, last): the final code (the backend's job part as one gpuaes_layer table):
# ctest -j16 and the GPU tests through the real gpuaesd.
source bench/device_prelude.sh
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|Total Test" $OUT/ctest-gpu.log | head )
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 150 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
echo "total $(( $(date +%s) - t0 )) s"
