#!/bin/bash
# device call (session 27): the in-process load matrix at the current code (not re-run since s25)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
timeout 540 bash bench/load_matrix.sh --build-dir build --out $OUT/lm > $OUT/lm.log 2>&1; echo "lm rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm 2>/dev/null && rm -rf $OUT/lm
grep -E "cells: geo-mean" $OUT/lm.log
grep -A25 "worst first" $OUT/lm.log | head -28
echo "total $(( $(date +%s) - t0 )) s"
