#!/usr/bin/env bash
# deps.sh - installs what a fresh machine lacks to build gpuaes (sourced by
# demo.sh and test.sh): CMake, a C/C++ compiler, OpenSSL 3 headers and CLI;
# finds the CUDA toolkit (nvcc) if it is installed but not on PATH.
# With GPUAES_DEPS_WHEELS=1 (test.sh) also python3 and pip, and the OpenSSL
# matrix's `cryptography` wheels (test/py/wheels.txt) into their cache.
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v make >/dev/null || need+=(make)
command -v gcc >/dev/null || need+=(gcc)
command -v g++ >/dev/null || need+=(g++)
command -v openssl >/dev/null || need+=(openssl)
[ -f /usr/include/openssl/core_dispatch.h ] || need+=(libssl-dev)
if [ "${GPUAES_DEPS_WHEELS:-0}" = 1 ]; then
  command -v python3 >/dev/null || need+=(python3)
  python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
fi
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  sudo=""; [ "$(id -u)" -ne 0 ] && sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends "${need[@]}" \
    || { echo "could not install ${need[*]}" >&2; exit 1; }
fi
if ! command -v nvcc >/dev/null; then
  for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
    [ -x "$d/nvcc" ] && export PATH="$d:$PATH" && break
  done
fi
command -v nvcc >/dev/null || { echo "nvcc not found: install the CUDA toolkit (12.8 or newer)" >&2; exit 1; }
# Not fatal here: without them the matrix tests fail where CI is set (CI has
# the network), and are skipped offline.
if [ "${GPUAES_DEPS_WHEELS:-0}" = 1 ] && ! python3 test/py/wheels.py install; then
  echo "could not install the OpenSSL matrix's wheels (test/py/wheels.py)" >&2
fi
