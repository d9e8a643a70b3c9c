#!/bin/bash
# device call of session 30: the whole load matrix through gpuaesd (threads, processes, short processes,
# openssl speed; SERVICE.md's condition for making `service` the default: "a service-side matrix at
# least as good as the in-process one"; the in-process one at s28-e), and small calls A/B then A/A twice
# (s29-a's A/B run read TLS 1.3 records at 0.82-0.87 with the default column 1.2-2x slower than in the
# A/A run that followed: the process or the machine?). Run as:
#   bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
for i in 1 2; do
  $B/bench/small_calls --rounds 40 --provider-path $B --patterns tls13,gcm,ecb --sizes 16,64,1024
  $B/bench/small_calls --rounds 40 --provider-path $B --patterns tls13,gcm,ecb --sizes 16,64,1024 --aa
done > $OUT/small_calls.txt 2>&1
timeout 450 bash bench/load_matrix.sh --build-dir build --backend service --max-seconds 380 \
    --out $OUT/lm-service > $OUT/lm-service.log 2>&1; echo "service matrix rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm-service lm-service.log && rm -rf $OUT/lm-service
grep -A40 "worst first" $OUT/lm-service.log | head -42
grep -E "cells: geo" $OUT/lm-service.log
cat $OUT/small_calls.txt
echo "total $(( $(date +%s) - t0 )) s"
