#!/bin/bash
# device call (session 26, tenth): traced runs of the short `openssl enc` of 64 MiB with keystream
# windows through the service (GPUAES_DEBUG lines now carry ms since load)
export PATH=/usr/local/cuda/bin:$PATH
set -u
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
CNF=$(mktemp); sed "s|^module *=.*|module = $B/gpuaes.so|" openssl.cnf.example > $CNF
head -c 64M /dev/urandom > /dev/shm/in64
K=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f; IV=00000000000000000000000000fffff0
D=$(mktemp -d)/s
$B/gpuaesd --socket-dir $D; sleep 1
for v in ks noks; do for i in 1 2 3; do
  ks=1; [ $v = noks ] && ks=0
  s=$(date +%s%N)
  OPENSSL_CONF=$CNF GPUAES_KEYSTREAM=$ks GPUAES_DEBUG=1 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd \
    openssl enc -aes-256-ctr -K $K -iv $IV -in /dev/shm/in64 -out /dev/shm/out64 2> $OUT/trace-$v-$i.txt
  echo "$v run $i: wall $(( ($(date +%s%N) - s) / 1000000 )) ms" | tee -a $OUT/trace-$v-$i.txt
done; done
for f in $OUT/trace-ks-1.txt $OUT/trace-ks-2.txt $OUT/trace-noks-1.txt; do echo "== $f"; grep -vE "knob|setting|threshold" $f | cut -c1-150; done
$B/gpuaesd --socket-dir $D --status > $OUT/status.txt; kill $(sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p' $OUT/status.txt)
echo "total $(( $(date +%s) - t0 )) s"
