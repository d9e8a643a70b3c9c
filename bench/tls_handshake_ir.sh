#!/usr/bin/env bash
# tls_handshake_ir.sh - what a TLS handshake costs each side with and without
# gpuaes, in instructions (callgrind), where timings on a shared host are too
# noisy to tell 3 % (issue 21's TLS check; bench/tls_loopback.sh times it).
# Per arm ("default": no OPENSSL_CONF; "gpuaes": openssl.cnf.example with the
# build's module, as tls_loopback.sh writes it) and TLS version:
#  - client: bench/tls_client --handshakes under callgrind, counting inside
#    SSL_connect only, against a default-provider s_server;
#  - server: `openssl s_server -WWW` under callgrind, counters dumped after
#    its start-up and again after a default-provider client's handshakes, so
#    the second dump is the handshakes' alone.
# Prints Ir per handshake and the ratio default/gpuaes (above 1: gpuaes runs
# fewer).  Needs valgrind; builds nothing (cmake --build BUILD --target
# gpuaes tls_client); ~1 min.
#
#   bash bench/tls_handshake_ir.sh BUILD_DIR
set -euo pipefail
build=$(cd "${1:?usage: tls_handshake_ir.sh BUILD_DIR}" && pwd)
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
client=$build/bench/tls_client
[ -x "$client" ] && [ -e "$build/gpuaes.so" ] || { echo "build gpuaes and tls_client first" >&2; exit 2; }
work=$(mktemp -d "${TMPDIR:-/tmp}/tls_handshake_ir.XXXXXX")
trap 'pkill -f "s_server -accept 0 -4 -cert $work" 2>/dev/null || true; rm -rf "$work"' EXIT
cd "$work"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem \
  -days 1 -subj /CN=localhost >/dev/null 2>&1
sed -e "s|^module = .*|module = $build/gpuaes.so|" "$root/openssl.cnf.example" > gpuaes.cnf
grep -q "^module = $build/gpuaes.so" gpuaes.cnf || { echo "openssl.cnf.example has no module line" >&2; exit 1; }
arm_env() { if [ "$1" = gpuaes ]; then echo "OPENSSL_CONF=$work/gpuaes.cnf"; else echo "GPUAES_ARM=default"; fi; }
suite() { if [ "$1" = 1.3 ]; then echo TLS_AES_128_GCM_SHA256; else echo ECDHE-ECDSA-AES128-GCM-SHA256; fi; }
# start_server ARM [valgrind args...]: sets port and pid
start_server() {
  local arm=$1; shift
  rm -f s.out
  (env -u OPENSSL_CONF "$(arm_env "$arm")" "$@" openssl s_server -accept 0 -4 -cert "$work/cert.pem" \
     -key "$work/key.pem" -WWW </dev/null > s.out 2>s.err &)
  port=""
  for _ in $(seq 300); do
    port=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' s.out 2>/dev/null || true)
    [ -n "$port" ] && break; sleep 0.1
  done
  [ -n "$port" ] || { echo "s_server ($arm) did not start" >&2; cat s.err >&2; exit 1; }
  pid=$(pgrep -f "s_server -accept 0 -4 -cert $work" | tail -1)
}
handshakes() {   # ARM TLS SECONDS [wrapper...]: prints the count
  local arm=$1 tls=$2 s=$3; shift 3
  env -u OPENSSL_CONF "$(arm_env "$arm")" "$@" "$client" --connect "127.0.0.1:$port" --tls "$tls" \
    --suite "$(suite "$tls")" --handshakes --seconds "$s" 2>/dev/null | sed -n 's/^handshakes=\([0-9]*\).*/\1/p'
}
total_ir() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'; }
declare -A per
for tls in 1.3 1.2; do
  # client side, against a default server
  start_server default
  for arm in default gpuaes; do
    n=$(handshakes "$arm" "$tls" 4 valgrind --tool=callgrind --callgrind-out-file="$work/cli.$arm.$tls" \
        --toggle-collect=SSL_connect)
    per[client,$arm,$tls]=$(( $(total_ir "cli.$arm.$tls") / n ))
  done
  kill "$pid"; sleep 0.5
  # server side, against a default client
  for arm in default gpuaes; do
    start_server "$arm" valgrind --tool=callgrind --callgrind-out-file="$work/srv.$arm.$tls.%p"
    vpid=$(pgrep -f "callgrind.*s_server -accept 0 -4 -cert $work" | head -1)
    callgrind_control -d "$vpid" >/dev/null 2>&1
    n=$(handshakes default "$tls" 6)
    callgrind_control -d "$vpid" >/dev/null 2>&1; sleep 0.5
    kill "$vpid"; sleep 1
    per[server,$arm,$tls]=$(( $(total_ir "$(ls srv.$arm.$tls.*.2)") / n ))
  done
done
printf '%-7s %-4s %14s %14s %8s\n' side TLS "default Ir/hs" "gpuaes Ir/hs" ratio
for side in client server; do for tls in 1.3 1.2; do
  d=${per[$side,default,$tls]}; g=${per[$side,gpuaes,$tls]}
  printf '%-7s %-4s %14d %14d %8.4f\n' "$side" "$tls" "$d" "$g" "$(echo "$d / $g" | bc -l)"
done; done
