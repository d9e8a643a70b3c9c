#!/bin/bash
# device call (session 28, first): the checks session 27 owed (ctest -j16 on the GPU, the GPU tests
# through the real gpuaesd with job rings), job rings on/off (s27-b's sweep, one round), service_rtt,
# and the startup cells in process and through the service (the baseline for the lazy CUDA layer)
source bench/device_prelude.sh
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|Total Test" $OUT/ctest-gpu.log | head )
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
echo "checks $(( $(date +%s) - t0 )) s"
for be in inprocess service; do
  timeout 100 bash bench/load_matrix.sh --build-dir build --only startup --backend $be --out $OUT/st-$be > $OUT/startup-$be.log 2>&1; echo "startup $be rc=$?"
done
EB="$B/bench/evp_bench --sizes 64M,1M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1,4 --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM"
run() { local label=$1; shift; D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/sweep.txt
  $B/gpuaesd --socket-dir $D --status > $OUT/status-$label.txt 2>&1; stop_svc $D; }
run ring; run noring GPUAESD_RING=0
env GPUAES_GPU_START_BYTES=0 $EB 2>/dev/null | grep -E "^AES" | sed "s/^/inproc /" >> $OUT/sweep.txt
echo "sweep $(( $(date +%s) - t0 )) s"
for ring in 1 0; do for len in 16 65536; do
  D=$(mktemp -d); GPUAESD_RING=$ring timeout 30 $B/bench/service_rtt --service $B/gpuaesd --dir $D --len $len --jobs 20000 \
    | sed "s/^/ring=$ring /" >> $OUT/rtt.txt; stop_svc $D
done; done
tar czf $OUT/startup.tgz -C $OUT st-inprocess st-service && rm -rf $OUT/st-inprocess $OUT/st-service
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"
echo "=== startup (ratio gpuaes/default)"; grep -hE "^startup +openssl" $OUT/startup-*.log
echo "=== sweep: cipher size threads: label=gpuaes GB/s (ratio)"
awk '{k=$2" "$4" t"$5; v[k]=v[k]" "$1"="$7"("$8")"} END {for (k in v) print k ":" v[k]}' $OUT/sweep.txt | sort
cat $OUT/rtt.txt
awk 'NF==5 && $5+0 < 0.97' $OUT/small_calls.txt
echo "total $(( $(date +%s) - t0 )) s"
