#!/bin/sh
# small_calls_ir.sh - instructions per operation of bench/small_calls' patterns,
# default provider vs gpuaes, under callgrind (no timing: for hosts without
# perf, and for changes too small to time).  Prints pattern, size, Ir/op of
# each, and default/gpuaes (above 1: gpuaes runs fewer instructions).
#   bench/small_calls_ir.sh [BUILD_DIR] [N]   (build/, 2000 operations)
set -eu
build=${1:-build}
n=${2:-2000}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
printf '%-8s %6s %12s %12s %15s\n' pattern size "default Ir" "gpuaes Ir" default/gpuaes
for spec in ${IR_SPECS:-tls13:16 tls13:64 tls13:1024 tls12:16 tls12:64 tls12:1024 ecb:16 ecb:64 \
            cbc-dec:16 cbc-dec:64 ctr:16 ctr:64 gcm:16 drbg:32 drbg:256 gcm-msg:16 gcm-msg:1024 cbc-msg:16 \
            cbc-msg:1024}; do
    p=${spec%%:*} s=${spec#*:}
    valgrind --tool=callgrind --callgrind-out-file="$out/cg" --collect-atstart=no \
        --toggle-collect=count_default --toggle-collect=count_gpuaes \
        "$build/bench/small_calls" --count "$n" --patterns "$p" --sizes "$s" >/dev/null 2>"$out/log" \
        || { cat "$out/log" >&2; exit 1; }
    callgrind_annotate --inclusive=yes "$out/cg" 2>/dev/null | awk -v p="$p" -v s="$s" -v n="$n" '
        /count_default/ { gsub(",", "", $1); d = $1 }
        /count_gpuaes/  { gsub(",", "", $1); g = $1 }
        END { printf "%-8s %6s %12.1f %12.1f %15.3f\n", p, s, d / n, g / n, d / g }'
done
