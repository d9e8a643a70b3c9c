#!/bin/bash
# device call of session 31, tenth: s31-h/s31-i's regression, processes AES-128-CTR 64 MiB at 4 processes
# (old 1.29-1.44, new 0.78-0.93): the block modes' CPU measured aside (an uncommitted switch,
# GPUAES_X_NO_ASIDE=1, turns it off) or the first look's bound? new / new without the aside measurement
# alternating, 3 rounds, with the per-process GPU share. Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
for r in 1 2 3; do for v in aside noaside; do
  if [ $v = noaside ]; then export GPUAES_X_NO_ASIDE=1; else unset GPUAES_X_NO_ASIDE; fi
  timeout 100 bash bench/load_matrix.sh --build-dir build --backend service --only processes \
    --procs 4 --proc-sizes 64M --proc-ciphers AES-128-CTR --out $OUT/lm-$v-$r > $OUT/lm-$v-$r.log 2>&1
  echo "$v $r rc=$?"; grep -h "gpuaes.*on GPU\|processes: .*x4" $OUT/lm-$v-$r/run.log | cut -c1-200 | sed "s/^/$v $r /"
done; done
unset GPUAES_X_NO_ASIDE
tar czf $OUT/lm.tgz -C $OUT $(cd $OUT && ls -d lm-*) && (cd $OUT && rm -rf lm-*)
echo "total $(( $(date +%s) - t0 )) s"
