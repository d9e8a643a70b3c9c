#!/bin/bash
# device call D of session 33 (H200): call C's last two steps again (there, the gpuaesd processes of its
# cold exit soak were still starting CUDA and the GPU of the steps' own services never came up):
# issue 22's fresh-warm and fresh-cold through gpuaesd, and a quick evp_bench slice through gpuaesd.
# Run as: bash .../d-driver.sh 2>&1 | tee $OUT/driver.log | tail -50
echo "gpuaesd processes at the start: $(pgrep -c gpuaesd)"; pkill -9 gpuaesd; sleep 1
source bench/device_prelude.sh
bash bench/load_matrix.sh --build-dir build --only fresh-warm,fresh-cold --fresh-ciphers AES-256-CTR,AES-256-GCM \
  --backend service --out $OUT/lm-fresh > $OUT/lm-fresh.log 2>&1
echo "load_matrix rc=$?"; grep -E "^fresh" $OUT/lm-fresh/load.csv; grep -E "fresh-(warm|cold):" $OUT/lm-fresh.log | tail -8
D=$(mktemp -d)/s
$B/gpuaesd --socket-dir $D; sleep 1.5
GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_PATH=$B/gpuaesd timeout 150 $B/bench/evp_bench --provider-path $B --require-gpu \
  --ciphers AES-128-CTR,AES-256-CTR,AES-128-ECB,AES-128-CBC,AES-256-GCM --sizes 16K,1M,64M --threads 1 \
  --repeats 5 --min-time 0.1 --out $OUT/quick > $OUT/quick.txt 2> $OUT/quick.log
echo "quick evp_bench rc=$?"; tail -32 $OUT/quick.txt
stop_svc $D
tar czf $OUT/logs.tgz -C $OUT lm-fresh lm-fresh.log quick quick.log && rm -rf $OUT/lm-fresh $OUT/lm-fresh.log $OUT/quick $OUT/quick.log
echo "total $(( $(date +%s) - t0 )) s"
