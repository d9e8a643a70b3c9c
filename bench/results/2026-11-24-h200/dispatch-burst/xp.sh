#!/bin/bash
# temporary experiment: dispatch variants under load (not committed)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 -DBUILD_TESTING=OFF >/dev/null && cmake --build build -j16 --target gpuaes evp_bench load_proc 2>&1 | tail -2 ) > $OUT/build.log 2>&1
ls -la build/gpuaes.so old/gpuaes.so >> $OUT/build.log
EB=build/bench/evp_bench
run() { # name provider-path env...
  local name=$1 pp=$2; shift 2
  for x in 1; do
    env "$@" $EB --ciphers AES-256-GCM --dir enc,dec --sizes 8M,64M --threads 1,4,16,32 --repeats 3 --min-time 0.1 --warmup 0.05 --provider-path $pp --require-gpu --seed 1 2>/dev/null | grep -E "^AES" | sed "s/^/$name r$rep /" >> $OUT/xp.txt
  done
}
for rep in 1 2; do
[ $rep = 1 ] && run OLD old
run NEW build
done
$EB --ciphers AES-256-CTR,AES-256-GCM --dir enc --sizes 64M --threads 16,1,1,1 --repeats 3 --min-time 0.1 --warmup 0.05 --provider-path build --require-gpu 2>/dev/null | grep -E "^AES" | sed "s/^/REC /" >> $OUT/xp.txt
$EB --ciphers AES-128-CTR,AES-256-ECB --dir enc,dec --sizes 8M,64M --threads 16 --repeats 3 --min-time 0.1 --warmup 0.05 --provider-path build --require-gpu 2>/dev/null | grep -E "^AES" | sed "s/^/BLK /" >> $OUT/xp.txt
cat $OUT/gpu.txt; tail -3 $OUT/build.log
true
