#!/bin/bash
# device call A of session 35 (H200), at 8d33fbd (session 34's last commit):
#  1. gpu_checks (ctest -j16; the GPU tests through the real gpuaesd).
#  2. Issue 21's small calls, 200 rounds: A/B and the A/A control (gcm-msg and cbc-msg included).
#  3. Issue 21's TLS over loopback (bench/tls_loopback.sh, 11 rounds).
#  4. Issue 22's one-thread CTR gap: AES-256-CTR 64 MiB, one thread, through a foreground gpuaesd with its
#     job log and the client's per-job log, then in process.
# Run as: bash bench/results/service-share/a-driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
gpu_checks
echo "after checks $(( $(date +%s) - t0 )) s"
for arm in ab aa; do
  a=(); [ $arm = aa ] && a=(--aa)
  timeout 120 $B/bench/small_calls --rounds 200 --provider-path $B "${a[@]}" > $OUT/small-calls-$arm.txt 2>&1
  echo "small calls $arm rc=$?"
done
echo "after small calls $(( $(date +%s) - t0 )) s"
timeout 200 bash bench/tls_loopback.sh --build-dir build --out $OUT/tls > $OUT/tls.log 2>&1
echo "tls_loopback rc=$?"; tail -10 $OUT/tls.log
D=$(mktemp -d)/s
GPUAESD_JOB_LOG=1 $B/gpuaesd --socket-dir $D --foreground > $OUT/ctr-svc-jobs.log 2>&1 &
svc=$!
for _ in $(seq 100); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "NVIDIA" && break; sleep 0.05; done
GPUAES_DEBUG=1 GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 60 $B/bench/evp_bench --provider-path $B \
  --require-gpu --ciphers AES-256-CTR,AES-128-CTR --dir enc --sizes 64M --threads 1 --repeats 5 --min-time 0.1 \
  --counters > $OUT/ctr-svc.txt 2> $OUT/ctr-svc.log
echo "CTR through gpuaesd rc=$?"; grep -E "^AES" $OUT/ctr-svc.txt
kill $svc; wait $svc 2>/dev/null
GPUAES_GPU_BACKEND=inprocess timeout 60 $B/bench/evp_bench --provider-path $B --require-gpu \
  --ciphers AES-256-CTR,AES-128-CTR --dir enc --sizes 64M --threads 1 --repeats 5 --min-time 0.1 --counters \
  > $OUT/ctr-inproc.txt 2> $OUT/ctr-inproc.log
echo "CTR in process rc=$?"; grep -E "^AES" $OUT/ctr-inproc.txt
tar czf $OUT/logs.tgz -C $OUT ctest-gpu.log ctest-service.log tls tls.log ctr-svc-jobs.log ctr-svc.log ctr-inproc.log \
  && rm -rf $OUT/ctest-gpu.log $OUT/ctest-service.log $OUT/tls $OUT/tls.log $OUT/ctr-svc-jobs.log $OUT/ctr-svc.log $OUT/ctr-inproc.log
paste <(awk '/^[a-z]/ && NF==5 {print $1, $2, $5}' $OUT/small-calls-ab.txt) \
      <(awk '/^[a-z]/ && NF==5 {print $5}' $OUT/small-calls-aa.txt) | sed '1i pattern size A/B A/A'
echo "total $(( $(date +%s) - t0 )) s"
