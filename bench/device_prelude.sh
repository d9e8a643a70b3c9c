# device_prelude.sh - sourced first by a GPU-machine driver (bench/results/*/driver.sh, run through
# the device tool from the repository root): CUDA on PATH, the GPU recorded in $OUT/gpu.txt, a Release
# sm_90 build in build/ (its errors and warnings in $OUT/build.log), then B (the build's path), t0 (the
# start, for `echo "... $(( $(date +%s) - t0 )) s"`) and stop_svc DIR (SIGTERM to the gpuaesd serving DIR).
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
