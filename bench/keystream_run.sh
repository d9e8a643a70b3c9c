#!/bin/bash
# bench/keystream_run.sh OUT - keystream ahead (issue 4) on the GPU machine:
# build, the measurements, then the GPU tests of the path.  Logs under OUT.
set -u
out=${1:-/tmp/ks}
mkdir -p "$out"
export PATH=/usr/local/cuda/bin:$PATH
b=build
date -u > "$out/meta.txt"; nvidia-smi -L >> "$out/meta.txt" 2>&1; openssl version >> "$out/meta.txt"
{ cmake -S . -B $b -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=ON \
  && cmake --build $b -j16; } > "$out/build.log" 2>&1 || { tail -40 "$out/build.log"; exit 1; }
echo "build ok $(date -u +%T)"
export GPUAES_DEBUG=1
eb() { timeout 120 $b/bench/evp_bench --provider-path $b "$@"; }
eb --ciphers AES-128-CTR,AES-256-CTR,AES-128-GCM --dir enc --sizes 16,64,256,1K,4K,16K --threads 1 \
   --repeats 3 --min-time 0.2 --csv "$out/evp1.csv" > "$out/evp1.txt" 2> "$out/evp1.log"
grep -v '^#' "$out/evp1.txt" | tail -22; grep 'keystream:' "$out/evp1.log"
eb --ciphers AES-128-CTR,AES-256-CTR,AES-128-GCM --dir enc --sizes 16K --threads 16 \
   --repeats 3 --min-time 0.2 --csv "$out/evp16.csv" > "$out/evp16.txt" 2> "$out/evp16.log"
grep -v '^#' "$out/evp16.txt" | tail -6; grep 'keystream:' "$out/evp16.log"
unset GPUAES_DEBUG
# openssl enc of a 4 GiB file in /dev/shm
head -c 4G /dev/zero > /dev/shm/ks_in
K=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f; IV=00000000000000000000000000fffff0
for i in 1 2; do
  for p in default gpuaes; do
    extra=""; [ $p = gpuaes ] && extra="-provider-path $b -provider gpuaes"
    s=$(date +%s.%N)
    openssl enc -aes-256-ctr $extra -K $K -iv $IV -in /dev/shm/ks_in -out /dev/shm/ks_$p
    e=$(date +%s.%N); echo "enc 4GiB $p run $i: $(awk "BEGIN{printf \"%.2f\", $e - $s}") s"
  done
done | tee "$out/enc.txt"
cmp /dev/shm/ks_default /dev/shm/ks_gpuaes && echo "enc outputs identical" | tee -a "$out/enc.txt"
rm -f /dev/shm/ks_in /dev/shm/ks_default /dev/shm/ks_gpuaes
for p in default gpuaes; do
  extra=""; [ $p = gpuaes ] && extra="-provider-path $b -provider gpuaes -provider default -propquery ?provider=gpuaes"
  GPUAES_DEBUG=1 timeout 40 openssl speed $extra -seconds 1 -evp aes-128-ctr > "$out/speed_$p.txt" 2> "$out/speed_$p.err"
  echo "openssl speed ($p): rc=$?"; tail -2 "$out/speed_$p.txt"; grep -v '^Doing' "$out/speed_$p.err" | tail -4
done
echo "measurements done $(date -u +%T)"
(cd $b && timeout 100 ctest -L gpu -R 'keystream|kat_gpu|params_gpu|fork_gpu|tls_gpu|cli_gpu|diff_gpu_threads' \
   -j4 --output-on-failure) > "$out/ctest.log" 2>&1
tail -25 "$out/ctest.log"
grep -h "keystream made" $b/Testing/Temporary/LastTest.log | tee -a "$out/ctest.log"
