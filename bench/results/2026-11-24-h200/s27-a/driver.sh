#!/bin/bash
# device call (session 27): the in-process load matrix at the current code (not re-run since s25)
source bench/device_prelude.sh
timeout 540 bash bench/load_matrix.sh --build-dir build --out $OUT/lm > $OUT/lm.log 2>&1; echo "lm rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm 2>/dev/null && rm -rf $OUT/lm
grep -E "cells: geo-mean" $OUT/lm.log
grep -A25 "worst first" $OUT/lm.log | head -28
echo "total $(( $(date +%s) - t0 )) s"
