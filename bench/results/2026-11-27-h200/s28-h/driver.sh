#!/bin/bash
# device call (session 28, last, short): after the layer's path moved to the provider's load (cbe97d0):
# the GPU tests that load the real layer (kat, diff, startup, tls, cli, unload) and a relative
# -provider-path through openssl enc.
source bench/device_prelude.sh
( cd build && GPUAES_MODULE_DIR=$B timeout 100 ctest -j16 -R '^(kat_gpu|diff_gpu|startup|startup_after_work|tls_gpu|cli_gpu|unload|exit_race)$' > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|Failed|Skipped" $OUT/ctest-gpu.log | head )
K=000102030405060708090a0b0c0d0e0f; head -c 8388608 /dev/urandom > /tmp/p
GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DEBUG=1 openssl enc -provider-path build -provider gpuaes -aes-128-ctr -K $K -iv $K -in /tmp/p -out /tmp/c 2> $OUT/enc-debug.log
openssl enc -aes-128-ctr -K $K -iv $K -in /tmp/p -out /tmp/d; cmp /tmp/c /tmp/d && echo "enc: same bytes"
grep -E "GPU layer|no usable|bytes on the GPU|NVIDIA" $OUT/enc-debug.log | head -4
echo "total $(( $(date +%s) - t0 )) s"
