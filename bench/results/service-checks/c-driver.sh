#!/bin/bash
# device call C of session 33 (H200): the GPU checks at the final code, and what calls A and B left:
#  1. gpu_checks (ctest -j16; the GPU tests through the real gpuaesd).
#  2. Killed service on the GPU: 16 test_diff processes (every cipher, random splits, up to 4 MiB, forced
#     to the GPU path; 64 iterations each, long enough to outlive the kill), gpuaesd SIGKILLed at a random
#     point after its first job: 3 times.
#  3. What the 394 "gpuaesd left" of call B were: a cold exit soak of 60 runs, then the gpuaesd processes'
#     states (ps) every 5 s for 20 s, and which process reaps them (PID 1 of this machine).
#  4. Issue 22's fresh-warm and fresh-cold through gpuaesd (load_matrix, AES-256-CTR and AES-256-GCM).
#  5. A quick evp_bench slice through gpuaesd against the headline run (one thread, 16 KiB / 1 MiB / 64 MiB).
# Run as: bash .../c-driver.sh 2>&1 | tee $OUT/driver.log | tail -50
source bench/device_prelude.sh
gpu_checks
echo "after checks $(( $(date +%s) - t0 )) s"
for k in 1 2 3; do
  GPUAES_MODULE_DIR=$B GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force GPUAES_GPU_START_BYTES=0 timeout 60 \
    bash test/service/service_run.sh $B/gpuaesd killed16 $B/test/test_diff --threads 1 --iterations 64 \
    --max-bytes 4M > $OUT/killed16-$k.txt 2>&1
  echo "killed16 pass $k: rc=$?"; grep "service_run" $OUT/killed16-$k.txt | tail -2
done
echo "after killed16 $(( $(date +%s) - t0 )) s"
echo "PID 1: $(ps -o comm= -p 1)"
GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_MODULE_DIR=$B timeout 60 stdbuf -oL $B/test/test_exit_race 60 2 cold \
  > $OUT/exit-cold.txt 2>&1; echo "exit soak, cold service: rc=$?"; grep -E "runs|hung" $OUT/exit-cold.txt | tail -4
for s in 0 5 10 15 20; do
  echo "t+$s s: gpuaesd processes by state: $(ps -eo stat=,comm= | awk '$2 ~ /gpuaesd/ {print substr($1,1,1)}' | sort | uniq -c | tr '\n' ' ')"
  sleep 5
done
ps -eo pid=,ppid=,stat=,etimes=,comm= | awk '$5 ~ /gpuaesd/' | head -5
echo "after exit soak $(( $(date +%s) - t0 )) s"
bash bench/load_matrix.sh --build-dir build --only fresh-warm,fresh-cold --fresh-ciphers AES-256-CTR,AES-256-GCM \
  --backend service --out $OUT/lm-fresh > $OUT/lm-fresh.log 2>&1
grep -E "^fresh" $OUT/lm-fresh/load.csv; grep -E "fresh" $OUT/lm-fresh.log | tail -6
echo "after fresh $(( $(date +%s) - t0 )) s"
D=$(mktemp -d)/s
GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 150 $B/bench/evp_bench --provider-path $B --require-gpu \
  --ciphers AES-128-CTR,AES-256-CTR,AES-128-ECB,AES-128-CBC,AES-256-GCM --sizes 16K,1M,64M --threads 1 \
  --repeats 5 --min-time 0.1 --out $OUT/quick > $OUT/quick.txt 2> $OUT/quick.log
echo "quick evp_bench rc=$?"; cat $OUT/quick.txt | tail -32
stop_svc $D
tar czf $OUT/logs.tgz -C $OUT exit-cold.txt killed16-1.txt killed16-2.txt killed16-3.txt ctest-gpu.log ctest-service.log \
  lm-fresh lm-fresh.log quick quick.log && rm -rf $OUT/exit-cold.txt $OUT/killed16-*.txt $OUT/ctest-gpu.log \
  $OUT/ctest-service.log $OUT/lm-fresh $OUT/lm-fresh.log $OUT/quick $OUT/quick.log
echo "total $(( $(date +%s) - t0 )) s"
