#!/bin/bash
# device call C of session 35 (H200 asked), at the session's last code commit:
#  1. gpu_checks (ctest -j16; the GPU tests through the real gpuaesd, cpu_share included).
#  2. The default load matrix through gpuaesd (16-32 threads and every size, 1/4/16 processes of 1 GiB with
#     start-up timed, short processes under openssl.cnf.example, openssl speed with and without -elapsed):
#     not run since session 33 (898a7bd).
# Run as: bash bench/results/service-share/c-driver.sh 2>&1 | tee $OUT/driver.log | tail -45
source bench/device_prelude.sh
gpu_checks
echo "after checks $(( $(date +%s) - t0 )) s"
timeout 370 bash bench/load_matrix.sh --build-dir build --backend service --out $OUT/lm-service > $OUT/lm-service.log 2>&1
echo "load matrix rc=$?"
grep -A24 "worst first" $OUT/lm-service.log | head -26
grep -E "cells: geo-mean" $OUT/lm-service.log | head -8
tar czf $OUT/logs.tgz -C $OUT ctest-gpu.log ctest-service.log lm-service && rm -rf $OUT/ctest-gpu.log \
  $OUT/ctest-service.log $OUT/lm-service
echo "total $(( $(date +%s) - t0 )) s"
