#!/bin/bash
# device call (session 25, third): other processes' threads in dispatch (the published clients):
# the service workloads again
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
timeout 300 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold --backend service --out $OUT/svc > $OUT/lm-svc.log 2>&1; echo "lm svc rc=$?"
tar czf $OUT/matrices.tgz -C $OUT svc 2>/dev/null && rm -rf $OUT/svc
grep -E "^(processes-long|fresh)" $OUT/lm-svc.log | tail -20
grep -E "fresh-(warm|cold): .* gpuaes|x16 .* gpuaes|x4 .* gpuaes" $OUT/lm-svc.log
echo "total $(( $(date +%s) - t0 )) s"
