#!/bin/bash
# device call (session 26, fourteenth): the whole load matrix through the service again, with the
# keystream dial off the caller, spare segments and at most 3 GPU jobs at once
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
timeout 400 bash bench/load_matrix.sh --build-dir build --backend service --out $OUT/svc-matrix > $OUT/lm-matrix.log 2>&1; echo "matrix rc=$?"
grep -E '^\| (threads|processes|startup|speed|speed-elapsed) \| [0-9]' $OUT/svc-matrix/README.md
grep -E '^\| startup \|' $OUT/svc-matrix/README.md | head -8
tar czf $OUT/svc-matrix.tgz -C $OUT svc-matrix && rm -rf $OUT/svc-matrix
echo "total $(( $(date +%s) - t0 )) s"
