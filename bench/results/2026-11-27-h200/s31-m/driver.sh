#!/bin/bash
# device call of session 31 at its final code (9738edb): gpu_checks (ctest -j16; the GPU tests through
# the real gpuaesd), then issue 22's workloads through gpuaesd as users meet them: 1, 4 and 16 long
# processes of 10 GiB each (processes-long), a fresh process with gpuaesd warm and with it stopped.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
gpu_checks
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log
timeout 260 bash bench/load_matrix.sh --build-dir build --backend service --only processes-long,fresh-warm,fresh-cold \
  --out $OUT/lm-service > $OUT/lm-service.log 2>&1; echo "load matrix rc=$?"
grep -A20 "worst first" $OUT/lm-service.log | head -20
tar czf $OUT/lm.tgz -C $OUT lm-service && rm -rf $OUT/lm-service
echo "total $(( $(date +%s) - t0 )) s"
