#!/bin/bash
# device call (session 26, twelfth): the merged code (spare segments, keystream dial in the background,
# the ECB/CBC hot path): ctest -j16, the overlap keystream check alone 10 times, small calls; then
# pieces x jobs in flight per client through the service, CTR / ECB / GCM at 1 and 4 threads
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && GPUAES_MODULE_DIR=$B timeout 220 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
echo "ctest done $(( $(date +%s) - t0 )) s"
( cd build && for i in 1 2 3 4 5 6 7 8 9 10; do GPUAES_MODULE_DIR=$B ctest -R '^overlap_keystream_gpu$' > /dev/null 2>&1 && echo pass || echo FAIL; done | sort | uniq -c )
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"; tail -24 $OUT/small_calls.txt
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1,4 --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM"
run() { local label=$1; shift; D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/sweep.txt
  stop_svc $D; }
run inprocess GPUAES_GPU_BACKEND=inprocess
run p8-j4 GPUAES_GPU_BACKEND=service
run p8-j2 GPUAES_GPU_BACKEND=service GPUAESD_JOBS=2
run p8-j3 GPUAES_GPU_BACKEND=service GPUAESD_JOBS=3
run p16-j2 GPUAES_GPU_BACKEND=service GPUAESD_JOBS=2 GPUAES_SERVICE_CHUNK=16M
run p4-j2 GPUAES_GPU_BACKEND=service GPUAESD_JOBS=2 GPUAES_SERVICE_CHUNK=4M
awk '{print $1,$2,$5,$6,$7,$8}' $OUT/sweep.txt | awk '{k=$2" t"$3; v[k]=v[k]" "$1"="$5} END {for (k in v) print k ":" v[k]}' | sort
echo "total $(( $(date +%s) - t0 )) s"
