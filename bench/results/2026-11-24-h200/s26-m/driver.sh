#!/bin/bash
# device call (session 26, thirteenth): a bound on the service's jobs on the GPU at once, all clients
# together, in arrival order (GPUAESD_GPU_JOBS): 1 and 4 threads, CTR / ECB / GCM, 64 MiB calls
export PATH=/usr/local/cuda/bin:$PATH
set -u
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1,4 --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM"
run() { local label=$1; shift; D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/sweep.txt
  stop_svc $D; }
run g0
run g1 GPUAESD_GPU_JOBS=1
run g2 GPUAESD_GPU_JOBS=2
run g3 GPUAESD_GPU_JOBS=3
run g2-j8 GPUAESD_GPU_JOBS=2 GPUAESD_JOBS=8
run g0b
awk '{print $1,$2,$5,$6,$7,$8,$NF}' $OUT/sweep.txt | awk '{k=$2" t"$3; v[k]=v[k]" "$1"="$5"("$7")"} END {for (k in v) print k ":" v[k]}' | sort
echo "total $(( $(date +%s) - t0 )) s"
