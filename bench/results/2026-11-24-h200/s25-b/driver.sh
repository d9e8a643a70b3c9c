#!/bin/bash
# device call (session 25, second): GCM migration + warm service + first-call wait + fresh rates:
# the whole suite, the service workloads, the in-process processes-long workload
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
git log --oneline -1 | tee $OUT/commit.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
( cd build && GPUAES_MODULE_DIR=$B timeout 200 ctest -j16 --timeout 180 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
echo "ctest done $(( $(date +%s) - t0 )) s"
timeout 200 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold --backend service --out $OUT/svc > $OUT/lm-svc.log 2>&1; echo "lm svc rc=$?"
echo "svc done $(( $(date +%s) - t0 )) s"
# where a fresh process's time goes: fixed cost (16 bytes) per provider/backend, and per-update times
D=$(mktemp -d)/s
SV="GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
LP="$B/bench/load_proc --dir enc --provider-path $B"
env $SV $LP --provider gpuaes --cipher AES-128-CTR --size 64M --bytes 256M --wait-gpu >/dev/null
{ for p in default gpuaes; do for be in inprocess service; do for i in 1 2 3; do
    s=$(date +%s%N); env $SV GPUAES_GPU_BACKEND=$be $LP --provider $p --cipher AES-256-GCM --size 16 --bytes 16 >/dev/null; e=$(date +%s%N)
    echo "fixed $p $be $(( (e - s) / 1000 )) us"; done; done; done
  for c in AES-256-GCM AES-256-CTR; do for i in 1 2; do
    s=$(date +%s%N); out=$(env $SV LOAD_PROC_TRACE=1 $LP --provider gpuaes --cipher $c --size 64M --bytes 1G 2>&1); e=$(date +%s%N)
    echo "== fresh $c wall $(( (e - s) / 1000 )) us"; echo "$out" | tr '\n' ' ' | sed 's/load_proc: update //g'; echo; done; done
} > $OUT/fresh-trace.txt 2>&1
cat $OUT/fresh-trace.txt | cut -c1-400
left=$(( 570 - ($(date +%s) - t0) ))
timeout $left bash bench/load_matrix.sh --build-dir build --only processes-long --backend inprocess --out $OUT/inp > $OUT/lm-inp.log 2>&1; echo "lm inp rc=$?"
tar czf $OUT/matrices.tgz -C $OUT svc inp 2>/dev/null && rm -rf $OUT/svc $OUT/inp
grep -E "^(processes-long|fresh)" $OUT/lm-svc.log | tail -20
grep -E "fresh-(warm|cold): .* gpuaes" $OUT/lm-svc.log
grep -E "^processes-long" $OUT/lm-inp.log | tail -12
echo "total $(( $(date +%s) - t0 )) s"
