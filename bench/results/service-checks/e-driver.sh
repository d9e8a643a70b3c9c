#!/bin/bash
# device call E of session 33 (H200): call D's slow 64 MiB ECB / CBC-dec rows (5.5-5.7 GB/s with 68-74 % on
# the GPU) looked at: AES-128-ECB, AES-256-ECB and AES-128-CBC at 64 MiB, one thread, through a foreground
# gpuaesd with its job log (GPUAESD_JOB_LOG=1) and the client's per-job log (GPUAES_DEBUG=1), twice; then
# the same rows in process (GPUAES_GPU_BACKEND=inprocess).
# Run as: bash .../e-driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
D=$(mktemp -d)/s
GPUAESD_JOB_LOG=1 $B/gpuaesd --socket-dir $D --foreground > $OUT/svc.log 2>&1 &
svc=$!
for _ in $(seq 100); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "GPU ready\|NVIDIA" && break; sleep 0.05; done
$B/gpuaesd --socket-dir $D --status | head -4
for k in 1 2; do
  GPUAES_DEBUG=1 GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 120 $B/bench/evp_bench --provider-path $B \
    --require-gpu --ciphers AES-128-ECB,AES-256-ECB,AES-128-CBC --dir enc,dec --sizes 64M --threads 1 --repeats 5 \
    --min-time 0.1 --counters > $OUT/svc-$k.txt 2> $OUT/svc-$k.log
  echo "through gpuaesd, pass $k: rc=$?"; grep -E "^AES" $OUT/svc-$k.txt
done
$B/gpuaesd --socket-dir $D --status > $OUT/svc-status.txt 2>&1
kill $svc; wait $svc 2>/dev/null
GPUAES_GPU_BACKEND=inprocess timeout 120 $B/bench/evp_bench --provider-path $B --require-gpu \
  --ciphers AES-128-ECB,AES-256-ECB,AES-128-CBC --dir enc,dec --sizes 64M --threads 1 --repeats 5 --min-time 0.1 \
  --counters > $OUT/inproc.txt 2> $OUT/inproc.log
echo "in process: rc=$?"; grep -E "^AES" $OUT/inproc.txt
tar czf $OUT/logs.tgz -C $OUT svc.log svc-1.txt svc-1.log svc-2.txt svc-2.log svc-status.txt inproc.txt inproc.log \
  && rm -f $OUT/svc.log $OUT/svc-*.txt $OUT/svc-*.log $OUT/inproc.*
echo "total $(( $(date +%s) - t0 )) s"
