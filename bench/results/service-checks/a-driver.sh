#!/bin/bash
# device call A of session 33 (H200): the fresh-client stall fix and issue 22's unrun checks.
#  1. register_stall: a fresh memfd (no pages) registered as it is, or after reading a byte a page.
#  2. The stall A/B: call F's pattern (4 processes x 1 GiB of 1 MiB AES-128-CTR calls, 8 rounds) against
#     gpuaesd as built (the segment faulted in before cudaHostRegister) and against the previous serve.c.
#  3. The load matrix's cell that read 0.67x: processes, 4 x 1 GiB in 1 MiB AES-128-CTR, through gpuaesd.
#  4. Exit soak through the service: test_exit_race 1000 runs of each program, 8 at a time, with a warm
#     service, then cold (each child its own socket directory: it starts its own gpuaesd and mostly exits
#     while that one starts).
#  5. Killed service on the GPU: 16 test_diff processes (every cipher, random splits, up to 4 MiB, forced
#     to the GPU path), gpuaesd SIGKILLed at a random point: 3 times.
# Run as: bash .../a-driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
P=$B/bench/load_proc
# 1
nvcc -O3 -arch=sm_90 -std=c++17 bench/probe/register_stall.cu -o /tmp/rs && /tmp/rs 64 > $OUT/register-stall.txt 2>&1
grep -E "fresh|reading|after reading|whole  " $OUT/register-stall.txt | sort | uniq -c | head -12
# 2: the old service binary: the previous serve.c, relinked
cp service/serve.c /tmp/serve.new && git show 13f917b~1:service/serve.c > service/serve.c \
  && cmake --build build --target gpuaesd > /dev/null 2>&1 && cp build/gpuaesd /tmp/gpuaesd-old
cp /tmp/serve.new service/serve.c && cmake --build build --target gpuaesd > /dev/null 2>&1
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
  grep "faulted in" $OUT/stall/$v-svc.log | head -3
  unset GPUAES_SERVICE_DIR GPUAES_SERVICE_PATH
done
tar czf $OUT/stall.tgz -C $OUT stall && rm -rf $OUT/stall
# 3
bash bench/load_matrix.sh --build-dir build --only processes --procs 4 --proc-sizes 1M \
  --proc-ciphers AES-128-CTR --rounds 7 --backend service --out $OUT/lm-p4 > $OUT/lm-p4.log 2>&1
echo "processes 4 x 1M CTR through gpuaesd:"; grep -E "^processes" $OUT/lm-p4/load.csv | head -4; grep -iE "ratio|geo" $OUT/lm-p4/README.md | head -3
# 4
D=$(mktemp -d)/s
$B/gpuaesd --socket-dir $D; sleep 1
GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_MODULE_DIR=$B timeout 400 $B/test/test_exit_race 1000 8 \
  > $OUT/exit-warm.txt 2>&1; echo "exit soak, warm service: rc=$?"; tail -3 $OUT/exit-warm.txt
$B/gpuaesd --socket-dir $D --status | head -3; stop_svc $D
GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_MODULE_DIR=$B timeout 400 $B/test/test_exit_race 1000 8 cold \
  > $OUT/exit-cold.txt 2>&1; echo "exit soak, cold service: rc=$?"; tail -3 $OUT/exit-cold.txt
sleep 2; echo "gpuaesd left: $(pgrep -c gpuaesd)"
# 5
for k in 1 2 3; do
  GPUAES_MODULE_DIR=$B GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_START_BYTES=0 timeout 250 \
    bash test/service/service_run.sh $B/gpuaesd killed16 $B/test/test_diff --threads 1 --iterations 32 \
    --max-bytes 4M > $OUT/killed16-$k.txt 2>&1
  echo "killed16 pass $k: rc=$?"; grep "service_run" $OUT/killed16-$k.txt | tail -2
done
tar czf $OUT/logs.tgz -C $OUT lm-p4 lm-p4.log exit-warm.txt exit-cold.txt killed16-1.txt killed16-2.txt killed16-3.txt \
  && rm -rf $OUT/lm-p4 $OUT/lm-p4.log $OUT/exit-*.txt $OUT/killed16-*.txt
echo "total $(( $(date +%s) - t0 )) s"
