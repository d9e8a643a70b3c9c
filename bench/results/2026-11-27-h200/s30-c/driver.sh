#!/bin/bash
# device call of session 30, at the code that makes gpuaesd the default backend: gpu_checks (ctest -j16
# with the tests in process, then the GPU tests through the real gpuaesd, the tests configured with
# GPUAES_TEST_BACKEND=service); then the default as a user meets it, nothing set: openssl enc of 256 MiB
# under openssl.cnf.example (the process starts the user's gpuaesd in its default socket directory),
# bytes compared with the default provider's, gpuaesd --status; then scripts/demo.sh (the README's first
# command). Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
gpu_checks
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log
unset GPUAES_GPU_BACKEND GPUAES_SERVICE_DIR GPUAES_SERVICE_PATH
sed "s#/usr/lib/x86_64-linux-gnu/ossl-modules/gpuaes.so#$B/gpuaes.so#" openssl.cnf.example > /tmp/g.cnf
head -c 268435456 /dev/urandom > /dev/shm/f256
K="-K $(printf '%064d' 7) -iv $(printf '%032d' 9)"
{
for i in 1 2 3; do
  s=$(date +%s%N); openssl enc -aes-256-ctr $K -in /dev/shm/f256 -out /dev/shm/o1; e=$(date +%s%N); echo "default $(( (e-s)/1000000 )) ms"
  s=$(date +%s%N); OPENSSL_CONF=/tmp/g.cnf openssl enc -aes-256-ctr $K -in /dev/shm/f256 -out /dev/shm/o2; e=$(date +%s%N)
  echo "gpuaes (nothing set) $(( (e-s)/1000000 )) ms"
  cmp -s /dev/shm/o1 /dev/shm/o2 && echo "same bytes" || echo "DIFFERENT OUTPUT"
done
OPENSSL_CONF=/tmp/g.cnf openssl list -providers -verbose | grep "name: gpuaes"
$B/gpuaesd --status
} > $OUT/default-user.txt 2>&1
p=$($B/gpuaesd --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'); [ -n "$p" ] && kill $p
sleep 0.5
GPUAES_BUILD_DIR=build GPUAES_CMAKE_ARGS="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90" timeout 200 \
  bash scripts/demo.sh > $OUT/demo.txt 2>&1; echo "demo rc=$?"
cat $OUT/default-user.txt
cat $OUT/demo.txt | head -60
echo "total $(( $(date +%s) - t0 )) s"
