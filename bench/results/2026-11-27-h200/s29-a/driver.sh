#!/bin/bash
# device call prepared in session 28 (not run yet) for the next GPU session: issue 22's workloads (processes-long
# 1 / 4 / 16 processes, fresh-warm, fresh-cold) through gpuaesd and in process at the current code (last
# run in session 26, s26-f / s26-k), then the GPU checks. ~7 min on the H200.
source bench/device_prelude.sh
for be in service inprocess; do
  timeout 200 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold \
      --backend $be --out $OUT/lm-$be > $OUT/lm-$be.log 2>&1; echo "$be rc=$?"
done
tar czf $OUT/lm.tgz -C $OUT lm-service lm-inprocess 2>/dev/null && rm -rf $OUT/lm-service $OUT/lm-inprocess
gpu_checks
for be in service inprocess; do echo "== $be"; grep -A20 "worst first" $OUT/lm-$be.log | head -22; done
echo "total $(( $(date +%s) - t0 )) s"
