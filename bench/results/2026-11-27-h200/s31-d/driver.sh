#!/bin/bash
# device call of session 31, fourth. 1. processes-long AES-256-GCM at 16 processes, 4 rounds alternating
# (s31-c read 0.93 with 0-1 % on the GPU; s29-a 1.08): noise or real? 2. An experiment (an uncommitted
# switch, GPUAES_X_CTR_CORES, in provider/dispatch.c): CTR calls through gpuaesd exempt from the cores
# rule (no GPU while more than half the cores' threads make large calls); the GPU path of CTR through the
# service costs the caller one XOR pass, not two copies. processes-long AES-128-CTR at 4 and 16 processes,
# 3 rounds, with and without it. Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
LM="bash bench/load_matrix.sh --build-dir build --backend service --only processes-long"
timeout 150 $LM --long-procs 16 --long-ciphers AES-256-GCM --long-rounds 4 --out $OUT/gcm16 > $OUT/gcm16.log 2>&1
echo "gcm16 rc=$?"
for x in 0 1 0 1; do
  if [ $x = 1 ]; then export GPUAES_X_CTR_CORES=1; else unset GPUAES_X_CTR_CORES; fi
  timeout 110 $LM --long-procs 4,16 --long-ciphers AES-128-CTR --long-rounds 1 --out $OUT/ctr-x$x-$RANDOM > $OUT/ctr-x$x.log.$RANDOM 2>&1
  echo "ctr x=$x rc=$?"
done
unset GPUAES_X_CTR_CORES
grep -h "x16.*round\|x4.*round" $OUT/gcm16/run.log | cut -c1-190
for f in $OUT/ctr-x*/run.log; do echo "== $f"; grep -h "x16.*round\|x4.*round" $f | cut -c1-190; done
tar czf $OUT/lm.tgz -C $OUT $(cd $OUT && ls -d gcm16 ctr-x* gcm16.log) && (cd $OUT && rm -rf gcm16 ctr-x* gcm16.log)
echo "total $(( $(date +%s) - t0 )) s"
