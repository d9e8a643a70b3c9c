#!/bin/bash
# device call of session 31, ninth: s31-h's lowest cells again, old (986193f's provider) and new
# alternating, twice: threads AES-256-GCM 8 MiB at 32 threads (enc, dec), processes AES-128-CTR 1 MiB and
# 64 MiB at 4 processes. Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
[ -f .ab/old/gpuaes.so ] || { echo "s31-i: .ab/old/gpuaes.so missing"; exit 2; }
source bench/device_prelude.sh
rm -rf build-old && mkdir build-old && cp -r build/bench build/gpuaesd build/gpuaes_gpu.so build-old/ && cp .ab/old/gpuaes.so build-old/
for r in 1 2; do for v in old new; do
  bd=build; [ $v = old ] && bd=build-old
  timeout 120 bash bench/load_matrix.sh --build-dir $bd --backend service --only threads,processes \
    --cells AES-256-GCM:enc,AES-256-GCM:dec --threads 32 --sizes 8M \
    --procs 4 --proc-sizes 1M,64M --proc-ciphers AES-128-CTR --out $OUT/lm-$v-$r > $OUT/lm-$v-$r.log 2>&1
  echo "$v $r rc=$?"; grep -A8 "worst first" $OUT/lm-$v-$r.log | tail -6 | sed "s/^/$v $r /"
done; done
tar czf $OUT/lm.tgz -C $OUT $(cd $OUT && ls -d lm-*) && (cd $OUT && rm -rf lm-*)
echo "total $(( $(date +%s) - t0 )) s"
