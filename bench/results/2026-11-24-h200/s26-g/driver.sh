#!/bin/bash
# device call (session 26, seventh): the startup cells (openssl enc -aes-256-ctr of whole files under
# openssl.cnf.example: 4 KiB updates, keystream ahead) through the service, with keystream windows and
# without, and in process
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
for cfg in service-ks service-noks inprocess; do
  be=${cfg%%-*}; ks=1; [ $cfg = service-noks ] && ks=0
  GPUAES_KEYSTREAM=$ks timeout 150 bash bench/load_matrix.sh --build-dir build --only startup --backend $be --out $OUT/$cfg > $OUT/lm-$cfg.log 2>&1; echo "$cfg rc=$?"
  grep -E '^\| startup' $OUT/$cfg/README.md | head -12
done
tar czf $OUT/startup.tgz -C $OUT service-ks service-noks inprocess && rm -rf $OUT/service-ks $OUT/service-noks $OUT/inprocess
echo "total $(( $(date +%s) - t0 )) s"
