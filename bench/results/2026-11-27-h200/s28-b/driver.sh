#!/bin/bash
# device call (session 28, second): the GPU layer as gpuaes_gpu.so, loaded when the GPU first starts
# (and the module without libstdc++, dl_iterate_phdr, the load checks once). ctest -j16 on the GPU,
# the GPU tests through the real gpuaesd, test_exit_race 300 x 8 in process (the exit order now lives
# in the dlopened layer), short processes A/B: the default provider alone, 810527a's module (.ab/old,
# built on the CPU machine, sm_90) and this one, interleaved; the load_matrix startup cells.
source bench/device_prelude.sh
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|Total Test" $OUT/ctest-gpu.log | head )
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate|startup)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
GPUAES_MODULE_DIR=$B timeout 150 $B/test/test_exit_race 300 8 > $OUT/exit-race.log 2>&1; echo "exit race (in process, 300 x 8) rc=$?"; tail -3 $OUT/exit-race.log
echo "checks $(( $(date +%s) - t0 )) s"
timeout 120 python3 bench/startup_ab.py --rounds 30 default=- old-810527a=.ab/old/gpuaes.so new=$B/gpuaes.so > $OUT/startup-ab.txt 2>&1; echo "startup_ab rc=$?"
timeout 100 bash bench/load_matrix.sh --build-dir build --only startup --backend inprocess --out $OUT/st > $OUT/startup-inprocess.log 2>&1; echo "startup rc=$?"
rm -rf $OUT/st
echo "=== load_matrix startup (in process)"; grep -hE "^startup +openssl" $OUT/startup-inprocess.log
echo "=== startup A/B"; cat $OUT/startup-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
