#!/bin/bash
# why did fresh-warm AES-256-CTR run 0 % on the GPU: GPUAES_DEBUG traces of fresh processes
export PATH=/usr/local/cuda/bin:$PATH
set -u
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
B=$PWD/build
D=$(mktemp -d)/s
export GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D
LP="$B/bench/load_proc --provider gpuaes --dir enc --size 64M --provider-path $B"
$LP --cipher AES-128-CTR --bytes 256M --wait-gpu > /dev/null   # starts the service
sleep 1
for c in AES-256-CTR AES-256-GCM; do
  echo "== fresh $c" ; GPUAES_DEBUG=1 $LP --cipher $c --bytes 1G 2>&1 | tail -40
done > $OUT/fresh-debug.txt 2>&1
# after 16 concurrent CTR processes
for i in $(seq 16); do $LP --cipher AES-128-CTR --bytes 2G > /dev/null & done; wait
for c in AES-256-CTR; do
  echo "== fresh $c after 16"; GPUAES_DEBUG=1 $LP --cipher $c --bytes 1G 2>&1 | tail -40
done >> $OUT/fresh-debug.txt 2>&1
$B/gpuaesd --socket-dir $D --status >> $OUT/fresh-debug.txt
grep -E "^ok|^==" $OUT/fresh-debug.txt
echo "total $(( $(date +%s) - t0 )) s"
