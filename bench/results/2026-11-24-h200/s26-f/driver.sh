#!/bin/bash
# device call (session 26, sixth): the whole load matrix through the service (the evidence for making
# it the default backend), then issue 22's service workloads
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
timeout 330 bash bench/load_matrix.sh --build-dir build --backend service --out $OUT/svc-matrix > $OUT/lm-matrix.log 2>&1; echo "matrix rc=$?"
echo "matrix done $(( $(date +%s) - t0 )) s"
timeout 200 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold --backend service --out $OUT/svc-long > $OUT/lm-long.log 2>&1; echo "long rc=$?"
tail -30 $OUT/lm-matrix.log | grep -vE '^\s*$' | tail -22
grep -E "fresh-(warm|cold): .* gpuaes|x16 .* gpuaes|x4 .* gpuaes|x1 .* gpuaes" $OUT/lm-long.log | head -20
echo "total $(( $(date +%s) - t0 )) s"
