#!/bin/bash
# device call B of session 35 (H200 asked): the caller's share through gpuaesd (remote_pipeline.c), A/B by
# its knob in one build (GPUAES_GPU_CPU_SHARE=off: the pieces as before, the thread sleeps on the service;
# ctr, the default: it works on the job's end meanwhile), alternated:
#  1. gpu_checks at this commit (ctest -j16; the GPU tests through the real gpuaesd, cpu_share included).
#  2. One thread, AES-128/256-CTR 64 MiB, through a warm gpuaesd: evp_bench off / ctr, 3 rounds; then
#     one short run with the client's per-job log (GPUAES_DEBUG: the share's bytes per job).
#  3. processes-long (AES-128-CTR, 4 and 16 processes x 10 GiB of 64 MiB calls) and fresh-warm
#     (AES-256-CTR), through gpuaesd: off, ctr, off, ctr.
# Run as: bash bench/results/service-share/b-driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
gpu_checks
echo "after checks $(( $(date +%s) - t0 )) s"
D=$(mktemp -d)/s
$B/gpuaesd --socket-dir $D --foreground > $OUT/svc.log 2>&1 &
svc=$!
for _ in $(seq 100); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "NVIDIA" && break; sleep 0.05; done
for r in 1 2 3; do
  for s in off ctr; do
    GPUAES_GPU_CPU_SHARE=$s GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 60 $B/bench/evp_bench \
      --provider-path $B --require-gpu --ciphers AES-128-CTR,AES-256-CTR --dir enc --sizes 64M --threads 1 \
      --repeats 5 --min-time 0.1 --counters > $OUT/one-$s-$r.txt 2>&1
    echo "one thread, share $s, round $r: rc=$?"; grep -E "^AES" $OUT/one-$s-$r.txt
  done
done
GPUAES_DEBUG=1 GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 60 $B/bench/evp_bench --provider-path $B \
  --require-gpu --ciphers AES-256-CTR --dir enc --sizes 64M --threads 1 --repeats 3 --min-time 0.1 \
  > $OUT/one-debug.txt 2> $OUT/one-debug.log
grep "service job of 67108864" $OUT/one-debug.log | tail -4
kill $svc; wait $svc 2>/dev/null
echo "after one thread $(( $(date +%s) - t0 )) s"
for arm in off-1 ctr-1 off-2 ctr-2; do
  GPUAES_GPU_CPU_SHARE=${arm%-*} timeout 150 bash bench/load_matrix.sh --build-dir build --backend service \
    --only processes-long,fresh-warm --long-ciphers AES-128-CTR --long-procs 4,16 --long-rounds 1 \
    --fresh-ciphers AES-256-CTR --out $OUT/lm-$arm > $OUT/lm-$arm.log 2>&1
  echo "processes-long + fresh-warm, share $arm: rc=$?"
  grep -E "^(processes-long|fresh-warm) +AES" $OUT/lm-$arm.log | head -8
done
tar czf $OUT/logs.tgz -C $OUT ctest-gpu.log ctest-service.log svc.log one-debug.log lm-off-1 lm-ctr-1 lm-off-2 lm-ctr-2 \
  lm-off-1.log lm-ctr-1.log lm-off-2.log lm-ctr-2.log && rm -rf $OUT/ctest-gpu.log $OUT/ctest-service.log $OUT/svc.log \
  $OUT/one-debug.log $OUT/lm-*
echo "total $(( $(date +%s) - t0 )) s"
