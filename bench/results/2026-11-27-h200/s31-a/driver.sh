#!/bin/bash
# device call of session 31, the checks owed by session 30's last commits (setuid processes read no
# knob and use no GPU; gpuaesd_client_abort; bench/bench_stats.h): gpu_checks (ctest -j16 in process,
# then the GPU tests through the real gpuaesd); test_exit_race through gpuaesd (300 runs x 4 threads);
# one thread, 64 MiB calls, CTR / ECB / GCM through a warm gpuaesd and in process, 2 rounds.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
gpu_checks
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAES_MODULE_DIR=$B GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
  timeout 150 $B/test/test_exit_race 300 4 > $OUT/exit-race-service.log 2>&1
echo "exit race (service, 300 x 4) rc=$?"; tail -2 $OUT/exit-race-service.log
stop_svc $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
for r in 1 2; do for c in AES-128-CTR AES-256-ECB AES-256-GCM; do
  env GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
    $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed "s/^/r$r service /"
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=inprocess $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed "s/^/r$r inprocess /"
done; done | tee $OUT/one-thread-64M.txt
$B/gpuaesd --socket-dir $D --status >> $OUT/svc.log 2>&1
stop_svc $D
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log svc.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log $OUT/svc.log
echo "total $(( $(date +%s) - t0 )) s"
