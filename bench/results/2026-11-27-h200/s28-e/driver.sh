#!/bin/bash
# device call (session 28, last): the in-process load matrix at the session's final code (threads,
# processes, short processes, openssl speed; not run since session 25), with the GPU layer loaded
# when the GPU first starts; small calls again.
source bench/device_prelude.sh
timeout 420 bash bench/load_matrix.sh --build-dir build --max-seconds 380 --out $OUT/lm > $OUT/lm.log 2>&1; echo "lm rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm 2>/dev/null && rm -rf $OUT/lm
$B/bench/small_calls --rounds 20 --provider-path $B > $OUT/small_calls.txt 2>&1; echo "small_calls rc=$?"
grep -E "cells: geo-mean" $OUT/lm.log
grep -A25 "worst first" $OUT/lm.log | head -28
grep -hE "^startup +openssl" $OUT/lm.log
awk 'NF==5 && $5+0 < 0.97' $OUT/small_calls.txt
echo "total $(( $(date +%s) - t0 )) s"
