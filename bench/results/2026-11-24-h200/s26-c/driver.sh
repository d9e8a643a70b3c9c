#!/bin/bash
# device call (session 26, third): CTR through the service as keystream + XOR, copy-outs overlapped with
# copy-ins: the GPU tests through the real gpuaesd; one thread 64 MiB, in process and through the service
# (CTR keystream on and off), interleaved, three rounds; 16 KiB CTR (keystream windows) both ways
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
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate|service_diff_gpu|direct_gpu)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
for round in 1 2 3; do
  for cfg in inprocess service-ks service-copy; do
    be=${cfg%%-*}; ks=1; [ $cfg = service-copy ] && ks=0
    D=$(mktemp -d)/s
    GPUAES_DEBUG=1 GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=$be GPUAES_SERVICE_CTR_KEYSTREAM=$ks GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
      $EB --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM 2> $OUT/dbg-$cfg-$round.log | grep -E "^AES" | sed "s/^/$cfg r$round /" >> $OUT/ab.txt
    stop_svc $D
  done
done
for be in inprocess service; do
  D=$(mktemp -d)/s
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=$be GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D \
    $B/bench/evp_bench --provider-path $B --ciphers AES-128-CTR,AES-256-CTR --dir enc --sizes 16K --threads 1 --repeats 3 --min-time 0.3 --seed 1 \
    2>/dev/null | grep -E "^AES" | sed "s/^/ks16K-$be /" >> $OUT/ks.txt
  stop_svc $D
done
awk '{print $1,$2,$3,$7,$8,$9,$NF}' $OUT/ab.txt
for c in service-ks service-copy; do for r in 1 2 3; do grep -h "service job of 67108864" $OUT/dbg-$c-$r.log | awk '{for(i=1;i<=NF;i++) if($i=="bytes:") t+=$(i+1); for(i=1;i<=NF;i++){if($i=="in") a+=$(i+1); if($i=="out") b+=$(i+1); if($i=="waiting") c+=$(i+1)}; n++} END {if (n) printf "'$c' round '$r': %d jobs, mean %.2f ms: copy in %.2f, copy out %.2f, waiting %.2f\n", n, t/n, a/n, b/n, c/n}'; done; done
awk '{print $1,$2,$5,$6,$7,$8,$NF}' $OUT/ks.txt
echo "total $(( $(date +%s) - t0 )) s"
