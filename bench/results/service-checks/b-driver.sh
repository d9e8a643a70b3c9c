#!/bin/bash
# device call B of session 33 (H200): the GPU checks at the merge of cuda-pool (one pinned + device pair
# for staging lanes and keystream windows), then what call A left unfinished:
#  1. gpu_checks (ctest -j16; the GPU tests through the real gpuaesd).
#  2. The stall A/B: call F's pattern (4 processes x 1 GiB of 1 MiB AES-128-CTR calls, 8 rounds) against
#     gpuaesd as built and against gpuaesd built from the previous serve.c (.ab/serve-old.c, carried).
#  3. Killed service on the GPU: 16 test_diff processes (every cipher, random splits, up to 4 MiB, forced
#     to the GPU path), gpuaesd SIGKILLed at a random point: 3 times.
#  4. Exit soak, cold: test_exit_race 200 runs of each program, 2 at a time, each child with a socket
#     directory of its own (it starts its own gpuaesd, which exits 1 s after it).
# Run as: bash .../b-driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
P=$B/bench/load_proc
gpu_checks
echo "after checks $(( $(date +%s) - t0 )) s"
cp service/serve.c /tmp/serve.new && cp .ab/serve-old.c service/serve.c \
  && cmake --build build --target gpuaesd > /dev/null 2>&1 && cp build/gpuaesd /tmp/gpuaesd-old
cp /tmp/serve.new service/serve.c && cmake --build build --target gpuaesd > /dev/null 2>&1
ls -la /tmp/gpuaesd-old $B/gpuaesd | awk '{print $5, $9}'
mkdir -p $OUT/stall
for v in new old; do
  S=$B/gpuaesd; [ $v = old ] && S=/tmp/gpuaesd-old
  D=$(mktemp -d)/s
  GPUAESD_JOB_LOG=1 $S --socket-dir $D --foreground > $OUT/stall/$v-svc.log 2>&1 &
  svc=$!
  for _ in $(seq 100); do $S --socket-dir $D --status >/dev/null 2>&1 && break; sleep 0.05; done
  export GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$S
  GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_START_BYTES=0 timeout 60 $P --provider gpuaes \
    --cipher AES-128-CTR --dir enc --size 64M --bytes 256M --provider-path $B --wait-gpu > /dev/null; sleep 0.5
  for r in $(seq 8); do
    for i in 1 2 3 4; do
      GPUAES_DEBUG=1 timeout 60 $P --provider gpuaes --cipher AES-128-CTR --dir enc --size 1M --bytes 1G \
        --provider-path $B > $OUT/stall/$v-$r-$i.out 2> $OUT/stall/$v-$r-$i.err &
    done; wait
  done
  kill $svc 2>/dev/null; wait $svc 2>/dev/null
  n=$(grep -l 'no answer within' $OUT/stall/$v-*.err 2>/dev/null | wc -l)
  slow=$(awk '{for(i=1;i<=NF;i++) if($i=="ran" && $(i+1)+0>20000) print}' $OUT/stall/$v-svc.log | wc -l)
  jobs=$(grep -c "^gpuaesd job" $OUT/stall/$v-svc.log)
  walls=$(for f in $OUT/stall/$v-*.out; do awk '{split($3,a,"="); split($4,b,"="); printf "%.0f ", (b[2]-a[2])*1000}' $f; done)
  echo "stall $v: timeouts in $n of 32 processes; service jobs $jobs, over 20 ms: $slow; work ms: $walls"
  unset GPUAES_SERVICE_DIR GPUAES_SERVICE_PATH
done
tar czf $OUT/stall.tgz -C $OUT stall && rm -rf $OUT/stall
echo "after stall $(( $(date +%s) - t0 )) s"
for k in 1 2 3; do
  GPUAES_MODULE_DIR=$B GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_START_BYTES=0 timeout 60 \
    bash test/service/service_run.sh $B/gpuaesd killed16 $B/test/test_diff --threads 1 --iterations 12 \
    --max-bytes 4M > $OUT/killed16-$k.txt 2>&1
  echo "killed16 pass $k: rc=$?"; grep "service_run" $OUT/killed16-$k.txt | tail -2
done
echo "after killed16 $(( $(date +%s) - t0 )) s"
GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_MODULE_DIR=$B timeout 120 stdbuf -oL $B/test/test_exit_race 200 2 cold \
  > $OUT/exit-cold.txt 2>&1; echo "exit soak, cold service: rc=$?"; grep -E "runs|hung" $OUT/exit-cold.txt | tail -4
sleep 2; echo "gpuaesd left: $(pgrep -c gpuaesd)"
tar czf $OUT/logs.tgz -C $OUT exit-cold.txt killed16-1.txt killed16-2.txt killed16-3.txt ctest-gpu.log ctest-service.log \
  && rm -f $OUT/exit-cold.txt $OUT/killed16-*.txt $OUT/ctest-gpu.log $OUT/ctest-service.log
echo "total $(( $(date +%s) - t0 )) s"
