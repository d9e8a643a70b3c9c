# device_prelude.sh - sourced first by a GPU-machine driver (bench/results/*/driver.sh, run through
# the device tool from the repository root): CUDA on PATH, the GPU recorded in $OUT/gpu.txt, a Release
# sm_90 build in build/ (its errors and warnings in $OUT/build.log), then B (the build's path), t0 (the
# start, for `echo "... $(( $(date +%s) - t0 )) s"`), stop_svc DIR (SIGTERM to the gpuaesd serving DIR) and
# gpu_checks (ctest -j16, then the GPU tests through gpuaesd).
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null \
    && cmake --build build -j16 2>&1 | grep -E "error|warning:"; echo "build rc=$?" ) > "$OUT/build.log" 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 "$OUT/build.log"
B=$PWD/build
stop_svc() {
    local p
    p=$("$B/gpuaesd" --socket-dir "$1" --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p')
    [ -n "$p" ] && kill "$p"
    sleep 0.3
}
# gpu_checks: the GPU checks a session owes its last code: ctest -j16 (the tests' backend is in process:
# GPUAES_TEST_BACKEND, test/CMakeLists.txt), then the GPU tests through the real gpuaesd, the tests
# configured with GPUAES_TEST_BACKEND=service for that pass (logs in $OUT/ctest-gpu.log, $OUT/ctest-service.log).
gpu_checks() {
    ( cd "$B" && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 --output-on-failure > "$OUT/ctest-gpu.log" 2>&1
      echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|Total Test" "$OUT/ctest-gpu.log" | head )
    local d; d=$(mktemp -d)/s
    cmake -DGPUAES_TEST_BACKEND=service "$B" > /dev/null
    ( cd "$B" && GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd \
        GPUAES_SERVICE_DIR=$d GPUAES_SERVICE_TIMEOUT_MS=10000 timeout 200 ctest --output-on-failure \
        -R '^(cpu_share_gpu|cpu_share_ctr_gpu|keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' \
        > "$OUT/ctest-service.log" 2>&1
      echo "service ctest rc=$?"; grep -E "tests passed|Failed" "$OUT/ctest-service.log"
      "$B/gpuaesd" --socket-dir "$d" --status >> "$OUT/ctest-service.log" 2>&1 )
    cmake -DGPUAES_TEST_BACKEND=inprocess "$B" > /dev/null
    stop_svc "$d"
}
