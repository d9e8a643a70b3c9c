#!/bin/bash
# device call (session 25, first): the warm service and the first call's wait, measured:
# service GPU tests, the service's warm-up time, a fresh process's fixed cost, and the
# load matrix's service workloads (processes-long, fresh-warm, fresh-cold)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && timeout 200 ctest -j8 -L service --timeout 150 > $OUT/ctest-service.log 2>&1; echo "ctest -L service rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-service.log | head )
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
  timeout 120 ctest -L gpu -R '^(kat|diff|params|bad_input|gcm_ghash|tls|reinit)_gpu$' --output-on-failure > $OUT/ctest-gpu-service.log 2>&1; echo "service ctest rc=$?"
  grep -E "tests passed" $OUT/ctest-gpu-service.log; $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-gpu-service.log )
stop_svc $D
# the service's warm-up, in the foreground log
D=$(mktemp -d); chmod 700 $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 > $OUT/warm-fg.log 2>&1 & sp=$!
for i in $(seq 100); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q '^gpu: NVIDIA' && break; sleep 0.05; done
$B/gpuaesd --socket-dir $D --status >> $OUT/warm-fg.log; kill $sp; wait $sp
grep -E "warm" $OUT/warm-fg.log
# a fresh process's fixed cost: 16 bytes, spawn to exit (default provider), 5 runs
for i in 1 2 3 4 5; do s=$(date +%s%N); $B/bench/load_proc --provider default --cipher AES-256-CTR --dir enc --size 16 --bytes 16 >/dev/null; e=$(date +%s%N); echo "fixed $(( (e - s) / 1000 )) us"; done | tee $OUT/fixed.txt
for i in 1 2 3; do s=$(date +%s%N); $B/bench/load_proc --provider default --cipher AES-256-CTR --dir enc --size 64M --bytes 64M >/dev/null; e=$(date +%s%N); echo "one 64M call $(( (e - s) / 1000 )) us"; done | tee -a $OUT/fixed.txt
echo "before matrix $(( $(date +%s) - t0 )) s"
left=$(( 560 - ($(date +%s) - t0) ))
timeout $left bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold --backend service --out $OUT/svc > $OUT/lm-svc.log 2>&1; echo "lm rc=$?"
tar czf $OUT/svc-matrix.tgz -C $OUT svc 2>/dev/null && rm -rf $OUT/svc
grep -E "^(processes-long|fresh)" $OUT/lm-svc.log | tail -20
grep -E "fresh-(warm|cold): .* gpuaes" $OUT/lm-svc.log
echo "total $(( $(date +%s) - t0 )) s"
