#!/bin/bash
# device call (session 27, for the next GPU session): job rings on and off (GPUAESD_RING=0) through the
# service, 1 and 4 threads, 64 MiB and 1 MiB calls, CTR / ECB / GCM, the in-process backend beside them;
# then the GPU tests through the real service (the rings' first run on a GPU: s26-final2's list)
source bench/device_prelude.sh
EB="$B/bench/evp_bench --sizes 64M,1M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1,4 --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM"
run() { local label=$1; shift; D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/sweep.txt
  $B/gpuaesd --socket-dir $D --status > $OUT/status-$label.txt 2>&1; stop_svc $D; }
for round in 1 2; do
  run ring$round
  run noring$round GPUAESD_RING=0
done
env GPUAES_GPU_START_BYTES=0 $EB 2>/dev/null | grep -E "^AES" | sed "s/^/inproc /" >> $OUT/sweep.txt
echo "sweep $(( $(date +%s) - t0 )) s"
# a job's cost beyond the GPU's work: 16 B and 64 KiB jobs, rings on and off, twice
for round in 1 2; do for ring in 1 0; do for len in 16 65536; do
  D=$(mktemp -d); GPUAESD_RING=$ring $B/bench/service_rtt --service $B/gpuaesd --dir $D --len $len --jobs 20000 \
    | sed "s/^/ring=$ring /" >> $OUT/rtt.txt; stop_svc $D
done; done; done
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
# cipher size threads: label=gpuaes GB/s (ratio to the default provider in the same run)
awk '{k=$2" "$4" t"$5; v[k]=v[k]" "$1"="$7"("$8")"} END {for (k in v) print k ":" v[k]}' $OUT/sweep.txt | sort
cat $OUT/rtt.txt
echo "total $(( $(date +%s) - t0 )) s"
