#!/bin/bash
# device call of session 31, seventh: the whole default load matrix through gpuaesd at the session's
# final code (threads, processes, startup, speed), the "never slower" check of the dispatch change
# (s30-a is the same matrix at e532b57, on an H200). Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
timeout 420 bash bench/load_matrix.sh --build-dir build --backend service --out $OUT/lm-service > $OUT/lm-service.log 2>&1
echo "load matrix rc=$?"
grep -A24 "worst first" $OUT/lm-service.log | head -26
tar czf $OUT/lm.tgz -C $OUT lm-service && rm -rf $OUT/lm-service
echo "total $(( $(date +%s) - t0 )) s"
