#!/usr/bin/env bash
# tls_loopback.sh - real TLS over loopback with and without gpuaes (issue 21):
# `openssl s_server -WWW` and bench/tls_client, both under one provider
# configuration per arm: "default" (no OPENSSL_CONF) or "gpuaes" (OPENSSL_CONF
# = openssl.cnf.example with the build's gpuaes.so, default_properties =
# ?provider=gpuaes).  TLS 1.3 (TLS_AES_128/256_GCM_*) and TLS 1.2
# (ECDHE-ECDSA-AES128/256-GCM-*: libssl's EVP_Cipher record path), EC P-256
# certificate.  Per suite, handshakes/s (new connection, full handshake, clean
# close, for S seconds) and bulk MB/s (fetches of a --bulk-mib file: the
# server encrypts 16 KiB records, the client decrypts).  The arms alternate
# A B, B A, ... per measurement; medians over the rounds, ratio gpuaes/default
# (issue 21's target: >= 0.97), and the per-round ratios of the two adjacent
# measurements (their median and range: the noise).  Builds nothing; ~2 min,
# --quick ~30 s.
#
#   cmake --build build --target gpuaes tls_client
#   bash bench/tls_loopback.sh --build-dir build --out DIR [--quick]
#
# --rounds N (11; quick 5), --seconds S per measurement (0.6; quick 0.3),
# --bulk-mib M (64), --suites LIST (comma list of 1.3:SUITE or 1.2:CIPHER).
# Without BUILD/bench/tls_client it is compiled with cc into a temporary folder.
# Writes DIR/tls.csv (every measurement), DIR/summary.csv, DIR/README.md (the
# table), DIR/meta.txt, DIR/verify.txt, DIR/run.log; prints the table last.
# Before measuring it checks that gpuaes serves the suites' AES-GCM in the
# gpuaes arm (its debug line "cipher contexts made", server and client) and
# not in the default arm.  Exit: 0 measured, 1 a run or the check failed, 2 usage.
set -euo pipefail
argv=("$0" "$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=""
out=""
quick=0
rounds=""
seconds=""
bulk_mib=64
suites="1.3:TLS_AES_128_GCM_SHA256,1.3:TLS_AES_256_GCM_SHA384,1.2:ECDHE-ECDSA-AES128-GCM-SHA256,1.2:ECDHE-ECDSA-AES256-GCM-SHA384"

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2; exit 2; }
die2() { echo "tls_loopback: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --quick) quick=1; shift ;;
    --rounds) [ $# -ge 2 ] || usage; rounds=$2; shift 2 ;;
    --seconds) [ $# -ge 2 ] || usage; seconds=$2; shift 2 ;;
    --bulk-mib) [ $# -ge 2 ] || usage; bulk_mib=$2; shift 2 ;;
    --suites) [ $# -ge 2 ] || usage; suites=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "tls_loopback: unknown option $1" >&2; usage ;;
  esac
done
if [ -z "$build" ] || [ -z "$out" ]; then echo "tls_loopback: --build-dir and --out are required" >&2; usage; fi
# Many short measurements rather than a few long ones: on a shared host a
# burst of other load then spoils a few pairs, not the median.
[ -n "$rounds" ] || rounds=$([ $quick = 1 ] && echo 5 || echo 11)
[ -n "$seconds" ] || seconds=$([ $quick = 1 ] && echo 0.3 || echo 0.6)
[[ $rounds =~ ^[1-9][0-9]*$ ]] || die2 "--rounds: '$rounds' is not a positive whole number"
[[ $seconds =~ ^[0-9]*\.?[0-9]+$ ]] || die2 "--seconds: '$seconds' is not a number"
[[ $bulk_mib =~ ^[1-9][0-9]*$ ]] || die2 "--bulk-mib: '$bulk_mib' is not a positive whole number"
IFS=, read -r -a suite_list <<<"$suites"
for s in "${suite_list[@]}"; do
  [[ $s =~ ^1\.[23]:[A-Za-z0-9_-]+$ ]] || die2 "--suites: '$s' is not 1.2:CIPHER or 1.3:SUITE"
done
build=$(cd "$build" 2>/dev/null && pwd) || die2 "--build-dir: no such directory"
[ -e "$build/gpuaes.so" ] || die2 "$build/gpuaes.so not built (cmake --build $build --target gpuaes tls_client)"
command -v openssl >/dev/null || die2 "no openssl command"

mkdir -p "$out"
out=$(cd "$out" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tls_loopback.XXXXXX")
pids=()
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
log=$out/run.log
: >"$log"

client=$build/bench/tls_client
if [ ! -x "$client" ]; then
  client=$work/tls_client
  "${CC:-cc}" -O2 -Wall -DOPENSSL_API_COMPAT=30000 -DOPENSSL_NO_DEPRECATED -o "$client" \
    "$here/tls_client.c" -lssl -lcrypto >>"$log" 2>&1 || die2 "cannot compile tls_client.c (see $log)"
fi

# The two arms: the environment each of their processes runs with.
conf=$work/gpuaes.cnf
sed "s#^module = .*#module = $build/gpuaes.so#" "$root/openssl.cnf.example" >"$conf"
cp "$conf" "$out/gpuaes.cnf"
arm_env_of() {   # ARM -> $arm_env, env's arguments for its processes
  case $1 in
    default) arm_env=(-u OPENSSL_CONF) ;;
    gpuaes) arm_env=("OPENSSL_CONF=$conf") ;;
  esac
}
# run_arm ARM [VAR=value ...] COMMAND...: COMMAND in ARM's environment.
run_arm() { local arm_env; arm_env_of "$1"; shift; env "${arm_env[@]}" "$@"; }

# Throwaway EC P-256 certificate (ECDSA handshakes: the cheap, common case, so
# per-connection costs of the AES contexts weigh the most), and the bulk file.
env -u OPENSSL_CONF openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
  -keyout "$work/key.pem" -out "$work/cert.pem" -days 1 -subj /CN=localhost >>"$log" 2>&1 \
  || die2 "cannot make a certificate (see $log)"
head -c $((bulk_mib << 20)) /dev/urandom >"$work/bulk.bin"
head -c 4096 /dev/urandom >"$work/small.bin"
bulk_bytes=$((bulk_mib << 20))

# start_server ARM TAG [s_server options...]: a server in $work; sets $port
# and $server_pid.  $server_env: one more VAR=value (or empty).
start_server() {
  local arm=$1 tag=$2; shift 2
  arm_env_of "$arm"
  (cd "$work" && exec env "${arm_env[@]}" ${server_env:+"$server_env"} openssl s_server -accept 0 -4 -cert cert.pem -key key.pem \
     -WWW "$@" </dev/null >"$work/$tag.out" 2>"$work/$tag.err") &
  server_pid=$!
  pids+=("$server_pid")
  port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/^ACCEPT .*:\([0-9][0-9]*\)$/\1/p' "$work/$tag.out" 2>/dev/null || true)
    [ -n "$port" ] && return 0
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/$tag.out" "$work/$tag.err" >>"$log" 2>/dev/null || true
  echo "tls_loopback: s_server ($arm) did not start (see $log)" >&2
  exit 1
}

suite_gcm() { case $1 in *AES128*|*AES_128*) echo AES-128-GCM ;; *) echo AES-256-GCM ;; esac; }

# ---- The check: which provider runs the records, server and client.
fail=0
verify=$out/verify.txt
{
  echo "# openssl list -providers, gpuaes arm (OPENSSL_CONF=$out/gpuaes.cnf, module $build/gpuaes.so)"
  run_arm gpuaes openssl list -providers 2>&1
} >"$verify"
grep -q '^  gpuaes$' "$verify" || { echo "tls_loopback: the gpuaes arm's configuration does not load gpuaes" >&2; fail=1; }
for s in "${suite_list[@]}"; do
  v=${s%%:*}; suite=${s#*:}; gcm=$(suite_gcm "$suite")
  for arm in default gpuaes; do
    server_env=GPUAES_DEBUG=1 start_server "$arm" "check-$arm" -naccept 1
    run_arm "$arm" GPUAES_DEBUG=1 "$client" --connect "127.0.0.1:$port" --tls "$v" --suite "$suite" \
      --fetch /small.bin --expect 4096 --seconds 0.001 </dev/null >"$work/check.cli" 2>&1 || true
    for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$server_pid" 2>/dev/null || true   # a client that failed leaves it waiting
    wait "$server_pid" || true
    srv=$(grep -o 'cipher contexts made:.*' "$work/check-$arm.err" || true)
    cli=$(grep -o 'cipher contexts made:.*' "$work/check.cli" || true)
    fetched=$(grep -o "fetch $gcm: provider [a-z]*" "$work/check.cli" || true)
    echo "TLS $v $suite, $arm arm: client ${fetched:-no fetch line}; server [${srv:-no gpuaes}]; client [${cli:-no gpuaes}]" >>"$verify"
    cat "$work/check.cli" "$work/check-$arm.err" >>"$log"
    if [ "$arm" = gpuaes ] && [ -z "$srv$cli" ] && [[ $fetched == *gpuaes ]] \
       && grep -q '^gpuaes: loaded' "$work/check-$arm.err" && grep -q '^gpuaes: loaded' "$work/check.cli"; then
      # A gpuaes.so from before the count (bfb4f24): the fetch is all we can see.
      echo "  (this gpuaes.so does not count contexts: only its loading and the fetch are checked)" >>"$verify"
      [ -n "${warned:-}" ] || echo "tls_loopback: warning: $build/gpuaes.so predates the context count; gpuaes's use is not checked" >&2
      warned=1
    elif [ "$arm" = gpuaes ]; then
      [[ $srv == *" $gcm "* && $cli == *" $gcm "* && $fetched == *gpuaes ]] \
        || { echo "tls_loopback: TLS $v $suite: gpuaes did not serve $gcm in the gpuaes arm (see $verify)" >&2; fail=1; }
    else
      [[ -z $srv && -z $cli && $fetched == *default ]] \
        || { echo "tls_loopback: TLS $v $suite: the default arm is not plain default (see $verify)" >&2; fail=1; }
    fi
  done
done
[ $fail = 0 ] || exit 1

# ---- meta.txt
commit=${GPUAES_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown)}
{
  echo "date: $(date -u +%FT%TZ)"
  echo "command: ${argv[*]}"
  echo "commit: $commit"
  echo "host: $(uname -srm), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
  echo "openssl: $(openssl version)"
  echo "gpuaes (openssl list -providers, a fresh process): $(run_arm gpuaes openssl list -providers 2>/dev/null \
    | sed -n 's/^ *name: gpuaes: //p')"
  echo "certificate: EC P-256 (ECDSA), key exchange: OpenSSL's default group (X25519)"
  echo "plan: $rounds rounds x ${#suite_list[@]} suites x {handshakes, bulk} x {default, gpuaes}, $seconds s each; bulk file $bulk_mib MiB"
  env | grep '^GPUAES_' | sed 's/^/env: /' || true
} >"$out/meta.txt"

# ---- The measurements: one long-lived s_server per arm.
declare -A ports
for arm in default gpuaes; do
  start_server "$arm" "server-$arm"
  ports[$arm]=$port
done
measure() {   # arm v suite metric -> value
  local arm=$1 v=$2 suite=$3 metric=$4 line
  if [ "$metric" = handshakes ]; then
    line=$(run_arm "$arm" "$client" --connect "127.0.0.1:${ports[$arm]}" --tls "$v" --suite "$suite" \
      --handshakes --seconds "$seconds" </dev/null 2>>"$log" | tail -1)
    echo "$arm $v $suite $metric: $line" >>"$log"
    sed -n 's/.*per_s=\([0-9.]*\).*/\1/p' <<<"$line"
  else
    line=$(run_arm "$arm" "$client" --connect "127.0.0.1:${ports[$arm]}" --tls "$v" --suite "$suite" \
      --fetch /bulk.bin --expect "$bulk_bytes" --seconds "$seconds" </dev/null 2>>"$log" | tail -1)
    echo "$arm $v $suite $metric: $line" >>"$log"
    sed -n 's/.*mb_s=\([0-9.]*\).*/\1/p' <<<"$line"
  fi
}

csv=$out/tls.csv
echo "round,tls,suite,metric,arm,value" >"$csv"
echo "tls_loopback: warm-up, then $rounds rounds (plan in $out/meta.txt)" >&2
for arm in default gpuaes; do   # warm-up (excluded): page cache, first connections
  s=${suite_list[0]}
  seconds_saved=$seconds; seconds=0.2
  measure "$arm" "${s%%:*}" "${s#*:}" handshakes >/dev/null
  measure "$arm" "${s%%:*}" "${s#*:}" bulk >/dev/null
  seconds=$seconds_saved
done
k=0
for r in $(seq "$rounds"); do
  for s in "${suite_list[@]}"; do
    for metric in handshakes bulk; do
      if [ $((k % 2)) = 0 ]; then order="default gpuaes"; else order="gpuaes default"; fi
      k=$((k + 1))
      for arm in $order; do
        val=$(measure "$arm" "${s%%:*}" "${s#*:}" "$metric") || true
        if [ -z "$val" ]; then
          echo "tls_loopback: round $r $s $metric $arm failed (see $log)" >&2
          fail=1
          continue
        fi
        echo "$r,${s%%:*},${s#*:},$metric,$arm,$val" >>"$csv"
      done
    done
  done
  echo "tls_loopback: round $r of $rounds done" >&2
done

# ---- Medians, ratio, table.
awk -F, -v out="$out" -v rounds="$rounds" -v secs="$seconds" -v mib="$bulk_mib" '
function median(key,   n, i, j, t, a) {   # of val[key, 1..cnt[key]]
  n = cnt[key]
  for (i = 1; i <= n; i++) a[i] = val[key, i]
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  lo = a[1]; hi = a[n]
  if (n == 0) return ""
  return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
NR > 1 {
  row = $2 "," $3 "," $4
  key = row "," $5
  val[key, ++cnt[key]] = $6
  one[row "," $1 "," $5] = $6
  if (!(row in seen)) { seen[row] = 1; order[++nrows] = row }
}
END {
  sum = out "/summary.csv"; md = out "/README.md"
  print "tls,suite,metric,default,gpuaes,ratio,paired_median,paired_min,paired_max,rounds" > sum
  print "# TLS over loopback, default vs gpuaes (bench/tls_loopback.sh)\n" > md
  printf "Medians of %d alternated measurements of %s s: handshakes/s (new connection, full handshake,\n", rounds, secs > md
  printf "clean close) and bulk MB/s (fetches of a %d MiB file, 10^6 bytes/s). ratio = gpuaes/default of\n", mib > md
  print "the medians (target >= 0.97); paired = the rounds\x27 ratios of two adjacent measurements, median [min, max]." > md
  print "Host, commit, and the check that gpuaes served the ciphers: meta.txt, verify.txt.\n" > md
  print "| TLS | suite | metric | default | gpuaes | ratio | paired [min, max] |" > md
  print "|---|---|---|---:|---:|---:|---:|" > md
  for (i = 1; i <= nrows; i++) {
    split(order[i], f, ",")
    d = median(order[i] ",default"); g = median(order[i] ",gpuaes")
    pk = order[i] ",paired"; cnt[pk] = 0
    for (r = 1; r <= rounds; r++) {
      a = one[order[i] "," r ",default"]; b = one[order[i] "," r ",gpuaes"]
      if (a > 0 && b != "") val[pk, ++cnt[pk]] = b / a
    }
    pm = median(pk)
    ratio = (d > 0 && g != "") ? sprintf("%.3f", g / d) : ""
    flag = (ratio != "" && ratio + 0 < 0.97) ? " (below 0.97)" : ""
    unit = f[3] == "handshakes" ? "handshakes/s" : "MB/s"
    paired = pm == "" ? "" : sprintf("%.3f [%.3f, %.3f]", pm, lo, hi)
    printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%d\n", f[1], f[2], f[3], d, g, ratio,
      pm == "" ? "" : sprintf("%.4f", pm), pm == "" ? "" : sprintf("%.4f", lo),
      pm == "" ? "" : sprintf("%.4f", hi), cnt[pk] > sum
    printf "| %s | %s | %s | %.1f | %.1f | %s%s | %s |\n", f[1], f[2], unit, d, g, ratio, flag, paired > md
  }
}' "$csv"
sed -n '/^| TLS/,$p' "$out/README.md"
echo "tls_loopback: results in $out"
exit $fail
