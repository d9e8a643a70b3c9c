#!/usr/bin/env bash
# Builds gpuaes and shows it at work: openssl enc through gpuaes alone, the
# bytes compared with the default provider's, and openssl speed side by side.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=scripts/deps.sh
source scripts/deps.sh
build=${GPUAES_BUILD_DIR:-build}
# shellcheck disable=SC2086
cmake -S . -B "$build" ${GPUAES_CMAKE_ARGS:-} >/dev/null
cmake --build "$build" -j"$(nproc)" >/dev/null
dir=$(cd "$build" && pwd)
gp=(-provider-path "$dir" -provider gpuaes)

echo "== openssl list -providers (gpuaes)"
openssl list -providers -verbose "${gp[@]}" | sed -n '1,6p'
# The listing never starts the GPU ("not started"); this asks for it (and waits for its start-up).
echo "== the GPU gpuaes uses"
GPUAES_MODULE_DIR=$dir "$dir/test/gpu_probe" 2>&1 | sed -e 's/^gpu available: /  /' -e 's/^SKIP: /  /' || true

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
head -c $((64 << 20)) /dev/urandom >"$tmp/plain"
key=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
iv=0f0e0d0c0b0a09080706050403020100
echo "== openssl enc -aes-256-ctr of 64 MiB: gpuaes alone vs the default provider"
for p in gpuaes default; do
  args=(); [ $p = gpuaes ] && args=("${gp[@]}")
  s=$(date +%s%N)
  openssl enc -aes-256-ctr "${args[@]}" -K $key -iv $iv -in "$tmp/plain" -out "$tmp/ct.$p"
  e=$(date +%s%N)
  awk -v p=$p -v ns=$((e - s)) 'BEGIN { printf "  %-7s %.3f s\n", p, ns / 1e9 }'
done
cmp "$tmp/ct.gpuaes" "$tmp/ct.default" && echo "  ciphertexts identical"
openssl enc -d -aes-256-ctr "${gp[@]}" -K $key -iv $iv -in "$tmp/ct.gpuaes" | cmp - "$tmp/plain" \
  && echo "  decrypts back"

echo "== bench/evp_bench: one thread, gpuaes beside the default provider (medians of 3)"
"$dir/bench/evp_bench" --provider-path "$dir" --ciphers AES-128-CTR,AES-256-ECB,AES-128-CBC,AES-128-CFB \
  --dir dec --sizes 16K,64M --threads 1 --repeats 3 --min-time 0.1 2>/dev/null | grep -E '^(cipher|AES| )'

echo "== openssl speed -evp (1 s per size; gpuaes then default)"
for c in aes-128-ctr aes-256-gcm aes-128-cbc; do
  for p in gpuaes default; do
    args=(-provider default); [ $p = gpuaes ] && args=("${gp[@]}" -provider default -propquery '?provider=gpuaes')
    printf '%-8s' $p
    openssl speed "${args[@]}" -evp $c -seconds 1 2>/dev/null | tail -1
  done
done
