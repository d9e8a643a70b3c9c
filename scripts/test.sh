#!/usr/bin/env bash
# Configure, build and run every test.  Tests labelled "gpu" are skipped
# (exit 77) on a host without a usable GPU, and must pass on one.
# GPUAES_CMAKE_ARGS adds CMake options (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
build=${GPUAES_BUILD_DIR:-build}
jobs=$(nproc)
# shellcheck disable=SC2086
cmake -S . -B "$build" ${GPUAES_CMAKE_ARGS:-}
cmake --build "$build" -j"$jobs"
cd "$build"
ctest --output-on-failure -j"$jobs"
