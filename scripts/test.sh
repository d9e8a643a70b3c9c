#!/usr/bin/env bash
# Configure, build and run every test.  Tests labelled "gpu" are skipped
# (exit 77) on a host without a usable GPU, and must pass on one.
# GPUAES_CMAKE_ARGS adds CMake options (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
#
# Then the host code again, instrumented with AddressSanitizer (leak
# detection on) and UndefinedBehaviorSanitizer, in a second build directory
# ($build-asan, one CUDA architecture: no device code runs there), and every
# CPU and emulator test under it (scripts/sanitizer_env.sh says how).
# GPUAES_SANITIZE_RUN=0 skips that pass.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
GPUAES_DEPS_WHEELS=1   # deps.sh fetches the OpenSSL matrix's wheels too
source scripts/deps.sh
build=${GPUAES_BUILD_DIR:-build}
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B "$build" ${GPUAES_CMAKE_ARGS:-}
cmake --build "$build" -j"$jobs"
(cd "$build" && ctest --output-on-failure -j"$jobs")

if [ "${GPUAES_SANITIZE_RUN:-1}" != 0 ]; then
  asan=${build}-asan
  # shellcheck disable=SC2086
  cmake -S . -B "$asan" -DCMAKE_CUDA_ARCHITECTURES=80-real ${GPUAES_CMAKE_ARGS:-} \
    -DGPUAES_SANITIZE=address,undefined
  cmake --build "$asan" -j"$jobs"
  # shellcheck source=scripts/sanitizer_env.sh
  source scripts/sanitizer_env.sh
  # Not the gpu-labelled tests (the real CUDA layer: on the GPU machine, in
  # the first pass) nor the 1 GiB differential test (~7 minutes unsanitized
  # on 2 cores; diff and diff_gpu_emu cover its code paths with smaller data).
  (cd "$asan" && ctest --output-on-failure -j"$jobs" -LE '^gpu$' -E '^diff_gpu_big_emu$')
fi
