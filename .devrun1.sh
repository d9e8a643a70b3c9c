set -o pipefail
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt
git rev-parse HEAD > $OUT/commit.txt 2>/dev/null || true
(cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build build -j16) > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
(cd build && timeout 240 ctest -j16 --timeout 200 > $OUT/ctest.log 2>&1); grep -E "tests passed|FAILED|Failed|Timeout" $OUT/ctest.log | head -20
E="build/bench/evp_bench --ciphers AES-128-CTR,AES-256-ECB,AES-128-CBC,AES-128-CFB,AES-256-GCM --dir dec --sizes 64M --repeats 3"
for sh in 1 0; do GPUAES_GPU_CPU_SHARE=$sh GPUAES_GPU_START_BYTES=0 timeout 60 $E --threads 1 > $OUT/share$sh-t1.txt 2>&1; done
for sh in 1 0; do GPUAES_GPU_CPU_SHARE=$sh GPUAES_GPU_START_BYTES=0 timeout 60 $E --threads 16 --min-time 0.3 > $OUT/share$sh-t16.txt 2>&1; done
timeout 150 bash bench/mps.sh --build-dir build --out $OUT/mps > $OUT/mps.log 2>&1; echo mps rc $?
for f in $OUT/share*.txt; do echo "== $f"; grep -E "AES" $f | head -6; done
tail -30 $OUT/mps/README.md 2>/dev/null
