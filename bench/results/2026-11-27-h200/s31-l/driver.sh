#!/bin/bash
# device call of session 31, twelfth: the GPU checks at the session's final code (fb41567 and the results
# after it): gpu_checks (ctest -j16 in process; the GPU tests through the real gpuaesd).
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -20
source bench/device_prelude.sh
gpu_checks
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log
echo "total $(( $(date +%s) - t0 )) s"
