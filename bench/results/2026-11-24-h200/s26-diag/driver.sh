#!/bin/bash
# device call (session 26, first): the keystream check's flake (10 runs alone), and where the service
# path's one-thread 64 MiB ceiling (~22 GB/s against 40 in process) comes from: piece size, DMA or
# staged in the service, the service's staging chunk and lanes, the client's copy threads
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && for i in 1 2 3 4 5 6 7 8 9 10; do GPUAES_MODULE_DIR=$B ctest -R '^overlap_keystream_gpu$' --output-on-failure > $OUT/overlap-ks-$i.log 2>&1 && echo pass || echo FAIL; done | sort | uniq -c )
grep -h "keystream used in" $OUT/overlap-ks-*.log | sort | uniq -c
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --ciphers AES-128-CTR --dir enc --threads 1"
run() { # label, env...
  local label=$1; shift
  D=$(mktemp -d)/s
  env GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D "$@" $EB 2>/dev/null | grep -E "^AES" | sed "s/^/$label /" >> $OUT/diag.txt
  [ -S $D/S.gpuaesd ] && $B/gpuaesd --socket-dir $D --status > $OUT/status-$label.txt 2>&1
  stop_svc $D
}
run inproc GPUAES_GPU_BACKEND=inprocess
run svc GPUAES_GPU_BACKEND=service
run svc-c4M GPUAES_GPU_BACKEND=service GPUAES_SERVICE_CHUNK=4M
run svc-c32M GPUAES_GPU_BACKEND=service GPUAES_SERVICE_CHUNK=32M
run svc-c64M GPUAES_GPU_BACKEND=service GPUAES_SERVICE_CHUNK=64M
run svc-nodma GPUAES_GPU_BACKEND=service GPUAESD_DMA=0
run svc-sc16M GPUAES_GPU_BACKEND=service GPUAES_STAGING_CHUNK=16M
run svc-lanes12 GPUAES_GPU_BACKEND=service GPUAES_STAGING_LANES=12
run svc-copy16 GPUAES_GPU_BACKEND=service GPUAES_COPY_THREADS=16
run svc-copy4 GPUAES_GPU_BACKEND=service GPUAES_COPY_THREADS=4
run svc-nostream GPUAES_GPU_BACKEND=service GPUAES_COPY_STREAM=0
run inproc2 GPUAES_GPU_BACKEND=inprocess
# keystream ahead (16 KiB and 4 KiB CTR updates, one thread) in process and through the service
for be in inprocess service; do
  D=$(mktemp -d)/s
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=$be GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_DEBUG=1 \
    $B/bench/evp_bench --provider-path $B --ciphers AES-128-CTR,AES-256-CTR --dir enc --sizes 4K,16K --threads 1 --repeats 3 --min-time 0.3 --seed 1 \
    2> $OUT/ks-$be.log | grep -E "^AES" | sed "s/^/ks-$be /" >> $OUT/ks.txt
  [ -S $D/S.gpuaesd ] && $B/gpuaesd --socket-dir $D --status > $OUT/status-ks-$be.txt 2>&1
  stop_svc $D
done
# the keystream tests on the real GPU through the real service
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 150 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu)$' --output-on-failure > $OUT/ctest-ks-service.log 2>&1; echo "ks service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-ks-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-ks-service.log 2>&1 )
stop_svc $D
awk '{print $1,$2,$6,$7,$8,$NF}' $OUT/diag.txt
awk '{print $1,$2,$5,$6,$7,$8,$NF}' $OUT/ks.txt
grep -h "dma:" $OUT/status-svc.txt $OUT/status-svc-nodma.txt
echo "total $(( $(date +%s) - t0 )) s"
