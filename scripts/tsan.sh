#!/usr/bin/env bash
# tsan.sh - the threaded tests under ThreadSanitizer: the emulated module
# (provider threads, keystream windows, offload counters, 32 threads mixing
# modes at the dispatcher's policy, the caller's CPU share; diff_gpu_threads
# in its small variant), the GPU layer's
# window API on the emulator, and the staging copy pool.  Run it before a
# change to concurrent code lands; not part of CI (scripts/test.sh).
# Builds into build-tsan (GPUAES_TSAN_BUILD_DIR), one CUDA architecture.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
build=${GPUAES_TSAN_BUILD_DIR:-build-tsan}
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B "$build" -DCMAKE_CUDA_ARCHITECTURES=80-real ${GPUAES_CMAKE_ARGS:-} -DGPUAES_SANITIZE=thread
cmake --build "$build" -j"$jobs" --target gpuaes_emu test_diff test_keystream test_ks_api_emu \
  test_copy_pool test_params test_settings test_ks_life test_startup test_unload test_dispatch \
  test_dispatch_model test_mix test_cpu_share gpuaesd_emu test_service test_direct_emu
# shellcheck source=scripts/sanitizer_env.sh
source scripts/sanitizer_env.sh
cd "$build"
ctest --output-on-failure -j"$jobs" \
  -R '^(diff_threads|diff_gpu_threads_small_emu|mix_gpu_emu|cpu_share(_ctr|_off)?_gpu_emu|keystream_emu|keystream_tiny_emu|keystream_fault_emu|keystream_off|ks_api_emu|copy_pool|settings|ks_life_pool_emu|ks_life_mixed_emu|startup_emu|unload_emu|dispatch_slow_emu|dispatch_model_.*|service_diff|service_diff_noreg|service_fuzz|service_kill|service_inflight|diff_service_emu|diff_service_killed_emu|diff_service_failmid_emu|direct_emu|service_devices)$'
