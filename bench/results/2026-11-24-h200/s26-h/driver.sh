#!/bin/bash
# device call (session 26, eighth): why a short `openssl enc -aes-256-ctr` of 64 MiB (4 KiB updates)
# under openssl.cnf.example takes 113 ms through the service with keystream windows against 79 ms
# (default) and 77 ms without them: wall times with a warm service, and one traced run
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
D=$(mktemp -d)/s
CNF=$(mktemp); sed "s|^module *=.*|module = $B/gpuaes.so|" openssl.cnf.example > $CNF
head -c 64M /dev/urandom > /dev/shm/in64
K=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f; IV=00000000000000000000000000fffff0
$B/gpuaesd --socket-dir $D; sleep 1; $B/gpuaesd --socket-dir $D --status | head -3
export GPUAES_GPU_BACKEND=service GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd
ENC="openssl enc -aes-256-ctr -K $K -iv $IV -in /dev/shm/in64 -out /dev/shm/out64"
t() { local s=$(date +%s%N); "$@"; echo $(( ($(date +%s%N) - s) / 1000000 )); }
for i in 1 2 3 4 5; do
  a=$(t env -u OPENSSL_CONF $ENC)
  b=$(t env OPENSSL_CONF=$CNF $ENC)
  c=$(t env OPENSSL_CONF=$CNF GPUAES_KEYSTREAM=0 $ENC)
  d=$(t env OPENSSL_CONF=$CNF GPUAES_GPU_START_BYTES=1G $ENC)
  e=$(t env OPENSSL_CONF=$CNF GPUAES_KEYSTREAM_RAMP_BYTES=16M $ENC)
  echo "run $i ms: default $a | ks $b | noks $c | start1G $d | ramp16M $e"
done | tee $OUT/walls.txt
OPENSSL_CONF=$CNF GPUAES_DEBUG=1 openssl enc -aes-256-ctr -K $K -iv $IV -in /dev/shm/in64 -out /dev/shm/out64 2>&1 >/dev/null \
  | python3 -c 'import sys,time
t0=time.monotonic()
for l in sys.stdin: print("%8.2f ms  %s" % ((time.monotonic()-t0)*1000, l), end="")' > $OUT/trace.txt
grep -vE "knob|setting" $OUT/trace.txt | tail -25
$B/gpuaesd --socket-dir $D --status > $OUT/status.txt
kill $(sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p' $OUT/status.txt)
echo "total $(( $(date +%s) - t0 )) s"
