#!/bin/bash
# device call of session 31: s31-m's two findings at 9738edb. 1. ks_life_pool through the real gpuaesd
# failed once ("no window was ever made"; the service had 0 spare segments ready): 10 more runs, as
# gpu_checks runs it. 2. fresh-cold AES-256-CTR read 0.82 (longest call 51-66 ms in 3 of 5 runs, 0 % on
# the GPU): 986193f's provider (.ab/old, carry [".ab"]) and this one, alternating, 2 rounds.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
[ -f .ab/old/gpuaes.so ] || { echo "s31-o: .ab/old/gpuaes.so missing"; exit 2; }
source bench/device_prelude.sh
d=$(mktemp -d)/s
cmake -DGPUAES_TEST_BACKEND=service "$B" > /dev/null
( cd "$B" && GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$d GPUAES_SERVICE_TIMEOUT_MS=10000 \
    timeout 120 ctest --output-on-failure -R '^(ks_life_pool|keystream|ks_life_jump)$' --repeat until-fail:10 > $OUT/ks-pool.log 2>&1
  echo "ks_life_pool x10 rc=$?"; grep -E "tests passed|FAIL|Failed" $OUT/ks-pool.log | head -5
  "$B/gpuaesd" --socket-dir "$d" --status >> $OUT/ks-pool.log 2>&1 )
cmake -DGPUAES_TEST_BACKEND=inprocess "$B" > /dev/null
stop_svc "$d"
rm -rf build-old && mkdir build-old && cp -r build/bench build/gpuaesd build/gpuaes_gpu.so build-old/ && cp .ab/old/gpuaes.so build-old/
for r in 1 2; do for v in old new; do
  bd=build; [ $v = old ] && bd=build-old
  timeout 60 bash bench/load_matrix.sh --build-dir $bd --backend service --only fresh-cold --fresh-ciphers AES-256-CTR \
    --out $OUT/lm-$v-$r > $OUT/lm-$v-$r.log 2>&1
  grep -h "fresh-cold: AES-256-CTR" $OUT/lm-$v-$r/run.log | sed "s/^/$v $r /" | cut -c1-200
done; done
tar czf $OUT/lm.tgz -C $OUT $(cd $OUT && ls -d lm-*) && (cd $OUT && rm -rf lm-*)
echo "total $(( $(date +%s) - t0 )) s"
