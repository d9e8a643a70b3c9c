#!/bin/bash
# device call of session 31, sixth: the session's final code (the dispatch change, dispatch = auto | force,
# the provider's headers by concern, cuda/runtime, service/mono_clock.h, test/support): gpu_checks (ctest
# -j16 in process; the GPU tests through the real gpuaesd); test_exit_race through gpuaesd (300 x 4); then
# the README's headline table again at this code, as a user gets it now (gpuaesd the backend, the
# dispatcher on): bash bench/run_gpu.sh --quick --no-build --no-kernel -- --sizes 16,16K,1M,8M,64M.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
gpu_checks
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAES_MODULE_DIR=$B GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
  timeout 100 $B/test/test_exit_race 300 4 > $OUT/exit-race-service.log 2>&1
echo "exit race (service, 300 x 4) rc=$?"; tail -2 $OUT/exit-race-service.log
stop_svc $D
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log
timeout 260 bash bench/run_gpu.sh --quick --no-build --no-kernel --build-dir build --out $OUT/headline \
  -- --sizes 16,16K,1M,8M,64M > $OUT/headline.log 2>&1; echo "headline rc=$?"
tail -45 $OUT/headline.log | grep -E "^AES|cipher" | head -80
echo "total $(( $(date +%s) - t0 )) s"
