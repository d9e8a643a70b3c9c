#!/bin/bash
# device call of session 31 at its final code (9738edb): the default load matrix through gpuaesd
# (16-32 threads and every size, 1/4/16 processes, short processes under openssl.cnf.example, openssl
# speed with and without -elapsed), then the small calls (both providers interleaved in one process,
# and the A/A control). Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
timeout 320 bash bench/load_matrix.sh --build-dir build --backend service --out $OUT/lm-service > $OUT/lm-service.log 2>&1
echo "load matrix rc=$?"
grep -A24 "worst first" $OUT/lm-service.log | head -26
grep -E "cells: geo-mean" $OUT/lm-service.log | head -8
tar czf $OUT/lm.tgz -C $OUT lm-service && rm -rf $OUT/lm-service
( timeout 100 $B/bench/small_calls --rounds 20 --provider-path $B; timeout 100 $B/bench/small_calls --rounds 20 --provider-path $B --aa ) \
  > $OUT/small_calls.txt 2>&1; echo "small calls rc=$?"
grep -E "tls13|ecb|cbc|gcm|ctr|drbg|tls12" $OUT/small_calls.txt | head -40
echo "total $(( $(date +%s) - t0 )) s"
