#!/bin/bash
# device call prepared in session 29 (not run yet): issue 21's TLS over loopback on the H200 with more
# rounds than s24's one run (11 rounds: handshakes/s 0.93-1.05x, bulk 0.96-1.15x, "not conclusive at
# 0.97"): 21 rounds, both arms alternating (bench/tls_loopback.sh), under openssl.cnf.example with this
# build's gpuaes.so. ~4 min.
source bench/device_prelude.sh
timeout 500 bash bench/tls_loopback.sh --build-dir build --out $OUT/tls --rounds 21 > $OUT/tls.log 2>&1
echo "tls_loopback rc=$?"
tar czf $OUT/tls.tgz -C $OUT tls && rm -rf $OUT/tls
tail -20 $OUT/tls.log
echo "total $(( $(date +%s) - t0 )) s"
