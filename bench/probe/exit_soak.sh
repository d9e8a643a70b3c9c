#!/usr/bin/env bash
# exit_soak.sh - processes that exit while gpuaes's GPU start-up runs (GPU machine):
# test_startup children exiting at random delays 0..400 ms after starting it, and
# `openssl enc` of 1 MiB (the keystream ramp starts the GPU, the process ends at once).
# Counts non-zero exits, wrong outputs and exits slower than 100 ms past the delay.
# Then test_exit_race's two programs (exit() while other threads' updates start
# the GPU and run on it), RUNS children each, 4 at a time.
# usage: bash bench/probe/exit_soak.sh BUILD_DIR [RUNS]
set -u
b=$(cd "$1" && pwd); n=${2:-200}
bad=0; slow=0; worst=0
for i in $(seq "$n"); do
  d=$(( (RANDOM * 13) % 400000 )); s=$(date +%s%N)
  GPUAES_MODULE_DIR=$b GPUAES_OFFLOAD_MIN_BYTES=65536 GPUAES_DISPATCH=force "$b/test/test_startup" --exit-during-startup 1 $d >/dev/null
  rc=$?; e=$(date +%s%N); ms=$(( (e - s) / 1000000 - d / 1000 ))
  [ $rc -ne 0 ] && bad=$((bad + 1))
  [ $ms -gt 100 ] && slow=$((slow + 1)); [ $ms -gt $worst ] && worst=$ms
done
echo "test_startup exits: $n runs, $bad non-zero, $slow over 100 ms past the delay, worst $worst ms"
head -c 1048576 /dev/urandom > /tmp/soak.in
K=000102030405060708090a0b0c0d0e0f000102030405060708090a0b0c0d0e0f; IV=000102030405060708090a0b0c0d0e0f
openssl enc -aes-256-ctr -K $K -iv $IV -in /tmp/soak.in -out /tmp/soak.ref
bad=0; wrong=0; s=$(date +%s%N)
for i in $(seq "$n"); do
  openssl enc -aes-256-ctr -provider-path "$b" -provider gpuaes -K $K -iv $IV -in /tmp/soak.in -out /tmp/soak.out 2>/dev/null || bad=$((bad + 1))
  cmp -s /tmp/soak.out /tmp/soak.ref || wrong=$((wrong + 1))
done
e=$(date +%s%N); g=$(( (e - s) / n / 1000 ))
s=$(date +%s%N); for i in $(seq "$n"); do openssl enc -aes-256-ctr -K $K -iv $IV -in /tmp/soak.in -out /tmp/soak.ref; done; e=$(date +%s%N)
echo "openssl enc 1 MiB: $n runs, $bad non-zero, $wrong wrong outputs; $g us each (default provider $(( (e - s) / n / 1000 )) us)"
GPUAES_MODULE_DIR=$b "$b/test/test_exit_race" "$n" 4 | tail -3
