#!/bin/bash
# device call prepared in session 29 (not run yet): issue 21's TLS over loopback on the H200 with more
# rounds than s24's one run (11 rounds: handshakes/s 0.93-1.05x, bulk 0.96-1.15x, "not conclusive at
# 0.97"): 21 rounds, both arms alternating (bench/tls_loopback.sh), under openssl.cnf.example with this
# build's gpuaes.so; then the GPU checks this session's code owes (gpu_checks: ctest -j16, the GPU tests
# through gpuaesd; they also check the AES-NI key schedules and the stitched GCM pass on the real layer).
# ~8 min (the build is incremental after s29-a on a warm machine).
source bench/device_prelude.sh
timeout 500 bash bench/tls_loopback.sh --build-dir build --out $OUT/tls --rounds 21 > $OUT/tls.log 2>&1
echo "tls_loopback rc=$?"
tar czf $OUT/tls.tgz -C $OUT tls && rm -rf $OUT/tls
gpu_checks
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log
tail -20 $OUT/tls.log
echo "total $(( $(date +%s) - t0 )) s"
