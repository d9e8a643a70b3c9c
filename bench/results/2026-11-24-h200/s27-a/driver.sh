#!/bin/bash
# device call (session 27, for the next GPU session): ctest -j16, the in-process load matrix at the current
# code (not re-run since s25), small calls (the drbg pattern's first timing)
source bench/device_prelude.sh
# the whole ctest on the GPU first (the block init's tail call, ASSUME_INIT_OK, the rings' client side)
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout" $OUT/ctest-gpu.log | head )
timeout 380 bash bench/load_matrix.sh --build-dir build --out $OUT/lm > $OUT/lm.log 2>&1; echo "lm rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm 2>/dev/null && rm -rf $OUT/lm
grep -E "cells: geo-mean" $OUT/lm.log
grep -A25 "worst first" $OUT/lm.log | head -28
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"; awk 'NF==5' $OUT/small_calls.txt | head -40
echo "total $(( $(date +%s) - t0 )) s"
