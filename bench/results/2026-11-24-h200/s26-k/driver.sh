#!/bin/bash
# device call (session 26, eleventh): spare segments merged, the keystream connection dialled in the
# background: GPU tests through the real gpuaesd; the short `openssl enc` of 64 MiB; fresh-warm and
# fresh-cold with spare segments and without (GPUAESD_SPARE=0)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
stop_svc() { local p; p=$($B/gpuaesd --socket-dir $1 --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p; sleep 0.3; }
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
( cd build && timeout 120 ctest -R '^(service_diff_gpu|direct_gpu|service_spare|service_fuzz)$' > $OUT/ctest-svc2.log 2>&1; echo "service/direct tests rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-svc2.log )
CNF=$(mktemp); sed "s|^module *=.*|module = $B/gpuaes.so|" openssl.cnf.example > $CNF
head -c 64M /dev/urandom > /dev/shm/in64
cp bench/results/2026-11-24-h200/s26-k/runs.py /tmp/runs.py
D=$(mktemp -d)/s
$B/gpuaesd --socket-dir $D; sleep 1.5
GPUAES_SERVICE_PATH=$B/gpuaesd python3 /tmp/runs.py $CNF $D | tee $OUT/short-enc.txt
$B/gpuaesd --socket-dir $D --status > $OUT/status-short.txt; stop_svc $D
for sp in 1 0; do
  GPUAESD_SPARE=$sp timeout 100 bash bench/load_matrix.sh --build-dir build --only fresh-warm,fresh-cold --backend service --out $OUT/fresh-spare$sp > $OUT/lm-fresh-spare$sp.log 2>&1; echo "fresh spare=$sp rc=$?"
  grep -E "fresh-(warm|cold): .* gpuaes" $OUT/lm-fresh-spare$sp.log
done
tar czf $OUT/fresh.tgz -C $OUT fresh-spare1 fresh-spare0 && rm -rf $OUT/fresh-spare1 $OUT/fresh-spare0
echo "total $(( $(date +%s) - t0 )) s"
