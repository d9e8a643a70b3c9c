#!/bin/bash
# device call D of session 35 (H200 asked): call C's worst cells looked at again.
#  1. processes (AES-128-CTR, 4 and 16 processes x 1 GiB in 1 MiB and 64 MiB calls, start-up timed, 3 rounds)
#     with the caller's share off and on (GPUAES_GPU_CPU_SHARE=off / ctr), alternated twice: does the share
#     through gpuaesd cost the p=16 cells (call C: 0.86-0.89)?
#  2. startup, `openssl enc -aes-256-ctr` of 64 MiB (call C: 63.6 against 77.9 ms), 11 runs, twice.
# Run as: bash bench/results/service-share/d-driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
for arm in off-1 ctr-1 off-2 ctr-2; do
  GPUAES_GPU_CPU_SHARE=${arm%-*} timeout 100 bash bench/load_matrix.sh --build-dir build --backend service \
    --only processes --procs 4,16 --proc-sizes 1M,64M --proc-ciphers AES-128-CTR --rounds 3 \
    --out $OUT/lm-$arm > $OUT/lm-$arm.log 2>&1
  echo "processes, share $arm: rc=$?"
  grep -E "^processes +AES" $OUT/lm-$arm.log | head -4
done
for k in 1 2; do
  timeout 100 bash bench/load_matrix.sh --build-dir build --backend service --only startup --startup-sizes 64M \
    --startup-runs 11 --out $OUT/st-$k > $OUT/st-$k.log 2>&1
  echo "startup $k: rc=$?"; grep -E "startup: " $OUT/st-$k/run.log | head -4
done
tar czf $OUT/logs.tgz -C $OUT lm-off-1 lm-ctr-1 lm-off-2 lm-ctr-2 st-1 st-2 lm-off-1.log lm-ctr-1.log lm-off-2.log \
  lm-ctr-2.log st-1.log st-2.log && rm -rf $OUT/lm-* $OUT/st-*
echo "total $(( $(date +%s) - t0 )) s"
