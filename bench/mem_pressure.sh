#!/usr/bin/env bash
# mem_pressure.sh - gpuaes while another process holds most of the GPU's
# device memory (issue 13): per free-memory target, bench/gpu_hog allocates
# device memory until at most that many MiB are free and holds it; evp_bench
# then measures both providers side by side (AES-128-CTR enc, AES-256-ECB dec;
# updates 1M, 64M; threads 1, 16), with gpuaes's memory counters per row.
# Target 0 = no hog (the control).  Builds nothing; ~50-60 s on the H200.
#
#   cmake --build build --target gpuaes evp_bench gpu_hog
#   bash bench/mem_pressure.sh --build-dir build --out DIR [--free-mib N ...]
#
# --free-mib N: a target (repeatable or a comma list; default 559 and 0).
# --repeats N, --min-time S: evp_bench's (3, 0.3).
# Writes DIR/mem_pressure.csv, DIR/run.log, DIR/meta.txt; prints the table
# (gpuaes/default per row) last.  Exit: 0 all measured, 1 a run failed,
# 2 usage, not built, or no GPU (nothing is measured without one).
set -euo pipefail
argv=("$0" "$@")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(dirname "$here")
build=""
out=""
targets=()
repeats=3
min_time=0.3
warmup=0.1
cells=("AES-128-CTR enc" "AES-256-ECB dec")
sizes=1M,64M
threads=1,16
ready_timeout=60
evp_timeout=150
hog_max_s=900   # the hog lets go by itself after this, should we be killed

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}" >&2; exit 2; }
die2() { echo "mem_pressure: $*" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) [ $# -ge 2 ] || usage; build=$2; shift 2 ;;
    --out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --free-mib) [ $# -ge 2 ] || usage; IFS=, read -r -a more <<<"$2"; targets+=("${more[@]}"); shift 2 ;;
    --repeats) [ $# -ge 2 ] || usage; repeats=$2; shift 2 ;;
    --min-time) [ $# -ge 2 ] || usage; min_time=$2; shift 2 ;;
    -h|--help) usage ;;
    *) echo "mem_pressure: unknown option $1" >&2; usage ;;
  esac
done
if [ -z "$build" ] || [ -z "$out" ]; then echo "mem_pressure: --build-dir and --out are required" >&2; usage; fi
[ ${#targets[@]} -gt 0 ] || targets=(559 0)
for t in "${targets[@]}"; do
  [[ $t =~ ^[0-9]+$ ]] || die2 "--free-mib: '$t' is not a whole number of MiB"
done
[[ $repeats =~ ^[0-9]+$ ]] || die2 "--repeats: '$repeats' is not a whole number"
build=$(cd "$build" 2>/dev/null && pwd) || die2 "--build-dir: no such directory"

evp=$build/bench/evp_bench
hog=$build/bench/gpu_hog
for f in "$build/gpuaes.so" "$evp" "$hog"; do
  [ -e "$f" ] || die2 "$f not built (cmake --build $build --target gpuaes evp_bench gpu_hog)"
done
# No GPU, no hog: say so before anything is written.
command -v nvidia-smi >/dev/null \
  || die2 "no NVIDIA GPU here (nvidia-smi not found): another process's hold on device memory cannot be made; run this on the GPU machine"
gpus=$(nvidia-smi -L 2>&1) || true
grep -q '^GPU ' <<<"$gpus" \
  || die2 "no NVIDIA GPU here (nvidia-smi -L: ${gpus//$'\n'/ }): another process's hold on device memory cannot be made"
tmo=()
command -v timeout >/dev/null && tmo=(timeout -k 10 "$evp_timeout")

mkdir -p "$out"
out=$(cd "$out" && pwd)
csv=$out/mem_pressure.csv
log=$out/run.log
meta=$out/meta.txt
: >"$log"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpuaes-mem.XXXXXX")
hog_pid="" keep_pid="" sampler_pid=""

# Ends a process we started (by pid): TERM, up to $2 s, then KILL; reaps it.
stop_pid() {
  local pid=$1 wait_s=${2:-5} i
  [ -n "$pid" ] || return 0
  kill "$pid" 2>/dev/null || true
  for ((i = 0; i < wait_s * 10; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
# shellcheck disable=SC2317  # called by the EXIT trap
cleanup() {
  stop_pid "$sampler_pid" 2
  stop_pid "$keep_pid" 2
  stop_pid "$hog_pid" 10
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { echo "mem_pressure: $*" | tee -a "$log" >&2; }
# Runs a command, its output into run.log under a title.
logcmd() {
  local title=$1; shift
  { echo "--- $title: $*"; "$@" 2>&1 || echo "(exit $?)"; } >>"$log"
}
smi_mem() { logcmd "nvidia-smi ($1)" nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv; }
free_now() {
  { nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null || true; } | head -1 | tr -dc 0-9
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "command: ${argv[*]}"
  echo "host: $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | sed 's/.*: //')"
  echo "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv,noheader 2>&1 | head -1)"
  echo "openssl (CLI): $(openssl version 2>&1 || echo none)"
  if [ -n "${GPUAES_COMMIT:-}" ]; then c=$GPUAES_COMMIT
  else c=$(git -C "$root" rev-parse HEAD 2>/dev/null || echo unknown); fi
  echo "commit: $c"
  echo "build: $build"
  echo "targets (MiB free): ${targets[*]}; cells: ${cells[*]}; sizes $sizes; threads $threads;" \
       "repeats $repeats x $min_time s, warm-up $warmup s"
  env | grep '^GPUAES_' | sed 's/^/env: /' || true
} >"$meta"
smi_mem "before"

echo "free_mib_target,free_mib_actual,cipher,direction,update_bytes,threads,path,gbps,cpu_core_s_per_gb,gpu_available,gpu_share_pct,gpu_bytes,gpu_errors,gpu_backoffs,gpu_memory_refusals,gpu_memory_oom,gpu_memory_bytes" >"$csv"

# Starts gpu_hog for target $1; its stdin is a FIFO held open by a sleep of
# ours, so killing that sleep closes it.  Sets hog_free (its ready line).
# Returns 0 ready, 2 no CUDA device, 1 otherwise.
start_hog() {
  local t=$1 i line rc
  rm -f "$tmp/hog.in" "$tmp/hog.out"
  mkfifo "$tmp/hog.in"
  "$hog" --free-mib "$t" --max-seconds "$hog_max_s" <"$tmp/hog.in" >"$tmp/hog.out" 2>"$tmp/hog.err" &
  hog_pid=$!
  sleep "$hog_max_s" >"$tmp/hog.in" &
  keep_pid=$!
  for ((i = 0; i < ready_timeout * 10; i++)); do
    line=$(grep -m1 '^gpu_hog: ready' "$tmp/hog.out" || true)
    if [ -n "$line" ]; then
      hog_free=$(sed -n 's/.*free_mib=\([0-9]*\).*/\1/p' <<<"$line")
      say "hog: $line"
      return 0
    fi
    if ! kill -0 "$hog_pid" 2>/dev/null; then
      rc=0; wait "$hog_pid" || rc=$?
      hog_pid=""
      cat "$tmp/hog.err" >>"$log"
      say "gpu_hog exited with $rc before it was ready: $(tr '\n' ' ' <"$tmp/hog.err")"
      stop_pid "$keep_pid" 2; keep_pid=""
      [ "$rc" = 2 ] && return 2
      return 1
    fi
    sleep 0.1
  done
  say "gpu_hog: not ready after ${ready_timeout} s"
  return 1
}

# Closes the hog's stdin (it frees and exits), TERM after 20 s.
stop_hog() {
  local i rc=0
  stop_pid "$keep_pid" 2; keep_pid=""
  for ((i = 0; i < 200; i++)); do kill -0 "$hog_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$hog_pid" 2>/dev/null; then
    say "gpu_hog still running 20 s after its stdin closed: TERM"
    stop_pid "$hog_pid" 10
  else
    wait "$hog_pid" || rc=$?
    [ "$rc" = 0 ] || say "gpu_hog exited with $rc"
  fi
  hog_pid=""
  cat "$tmp/hog.err" >>"$log"
}

# nvidia-smi every second while evp_bench runs (its context and staging show
# here); seldom, so that it takes little from the measured cores.
start_sampler() {
  local t5=()
  command -v timeout >/dev/null && t5=(timeout 5)
  ( while :; do
      ${t5[@]+"${t5[@]}"} nvidia-smi --query-gpu=memory.used,memory.free --format=csv,noheader,nounits 2>/dev/null | head -1
      sleep 1
    done ) >"$1" &
  sampler_pid=$!
}

# evp_bench's stdout ($2) + CSV ($3) -> rows of mem_pressure.csv; $1 target, $4 actual free.
to_csv() {
  local t=$1 txt=$2 evcsv=$3 actual=$4 avail
  avail=$(sed -n 's/^# gpuaes gpu-available: \(-\{0,1\}[0-9]*\).*/\1/p' "$txt" | head -1)
  awk -v t="$t" -v actual="$actual" -v avail="${avail:-}" -v txt="$txt" '
    function label(n) {
      if (n >= 1073741824 && n % 1073741824 == 0) return (n / 1073741824) "G"
      if (n >= 1048576 && n % 1048576 == 0) return (n / 1048576) "M"
      if (n >= 1024 && n % 1024 == 0) return (n / 1024) "K"
      return n
    }
    { file = FILENAME == txt ? 1 : 2 }
    file == 1 && /^# counters / {
      k = $3 " " $4 " " $5 " " $6; sub(/:$/, "", k)
      for (i = 7; i <= NF; i++) { split($i, kv, "="); c[k, kv[1]] = (kv[2] == "-" ? "" : kv[2]) }
      next
    }
    # the table: cipher dir size thr default gpuaes ratio cpu cpu share
    file == 1 && NF == 10 && $1 ~ /^AES-/ { sh = $10; sub(/%$/, "", sh); share[$1 " " $2 " " $3 " " $4] = (sh == "-" ? "" : sh); next }
    file == 2 && FNR > 1 {
      split($0, f, ",")
      k = f[1] " " f[2] " " f[3] " " f[4]
      row = t "," actual "," $0
      if (f[5] == "gpuaes")
        row = row "," avail "," share[f[1] " " f[2] " " label(f[3]) " " f[4]] "," c[k, "gpu-bytes"] "," c[k, "gpu-errors"] \
              "," c[k, "gpu-backoffs"] "," c[k, "gpu-memory-refusals"] "," c[k, "gpu-memory-oom"] "," c[k, "gpu-memory"]
      else
        row = row ",,,,,,,,"
      print row
    }' "$txt" "$evcsv" >>"$csv"
}

# Which of gpuaes's memory paths target $1's runs went through (for meta.txt).
describe_path() {
  local t=$1 txt=$2 avail gpu oom ref
  avail=$(sed -n 's/^# gpuaes gpu-available: //p' "$txt" | head -1)
  gpu=$(sed -n 's/^# gpuaes gpu: //p' "$txt" | head -1)
  oom=$(awk '/^# counters /{for(i=7;i<=NF;i++){split($i,kv,"=");if(kv[1]=="gpu-memory-oom")s+=kv[2]}} END{print s+0}' "$txt")
  ref=$(awk '/^# counters /{for(i=7;i<=NF;i++){split($i,kv,"=");if(kv[1]=="gpu-memory-refusals")s+=kv[2]}} END{print s+0}' "$txt")
  if [ "$avail" != 1 ]; then
    echo "context creation failed or GPU unusable (gpu-available ${avail:-?}: $gpu): gpuaes ran its CPU fallback"
  elif [ "$oom" -gt 0 ]; then
    echo "context made; staging/keystream allocations found memory full (gpu-memory-oom $oom, refusals $ref): back-off path"
  elif [ "$ref" -gt 0 ]; then
    echo "context made; no allocation found memory full, but $ref slots/windows were refused (gpu_memory_max cap)"
  else
    echo "context made and every allocation fit (no oom, no refusals): no memory pressure reached gpuaes"
  fi
}

failed=0
for t in "${targets[@]}"; do
  if [ "$t" -gt 0 ]; then
    say "target: <= $t MiB free (gpu_hog)"
    hog_free=""
    rc=0; start_hog "$t" || rc=$?
    if [ "$rc" = 2 ]; then
      die2 "gpu_hog found no CUDA device: no hog possible (see $log)"
    elif [ "$rc" != 0 ]; then
      failed=1
      [ -n "$hog_pid" ] && stop_hog
      continue
    fi
    actual=$hog_free
    smi_mem "while gpu_hog holds <= $t MiB free"
    logcmd "nvidia-smi apps (while gpu_hog holds)" nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
  else
    say "target: control (no hog)"
    actual=$(free_now)
  fi
  echo "target $t MiB: free before evp_bench ${actual:-?} MiB (nvidia-smi / gpu_hog)" >>"$meta"

  for cell in "${cells[@]}"; do
    read -r cipher dir <<<"$cell"
    base=$tmp/t$t-$cipher-$dir
    cmd=("$evp" --ciphers "$cipher" --dir "$dir" --sizes "$sizes" --threads "$threads"
         --repeats "$repeats" --min-time "$min_time" --warmup "$warmup"
         --provider-path "$build" --csv "$base.csv" --counters)
    echo "\$ ${cmd[*]}" >>"$log"
    start_sampler "$base.smi"
    set +e
    ${tmo[@]+"${tmo[@]}"} "${cmd[@]}" 2>&1 >"$base.txt" | tee -a "$log" >&2
    rc=${PIPESTATUS[0]}
    set -e
    stop_pid "$sampler_pid" 2; sampler_pid=""
    cat "$base.txt" >>"$log"
    if [ -s "$base.smi" ]; then
      awk -F', *' -v t="$t" -v c="$cell" 'NF >= 2 { if ($1 > u) u = $1; if (m == "" || $2 < m) m = $2 }
        END { printf "target %s MiB, %s: during evp_bench (nvidia-smi every 1 s) max used %s MiB, min free %s MiB\n", t, c, u, m }' \
        "$base.smi" >>"$meta"
    fi
    if [ "$rc" != 0 ]; then
      say "evp_bench ($cipher $dir, target $t) exited with $rc"
      failed=1
    fi
    if [ -s "$base.csv" ]; then
      to_csv "$t" "$base.txt" "$base.csv" "$actual"
      echo "target $t MiB, $cell: $(describe_path "$t" "$base.txt")" >>"$meta"
    fi
    grep '^# gpuaes gpu' "$base.txt" | sed "s/^# /target $t MiB, $cell: /" >>"$meta" || true
    grep -q '^libcrypto' "$meta" || sed -n 's/^# OpenSSL /libcrypto (evp_bench): /p' "$base.txt" >>"$meta"
  done

  if [ "$t" -gt 0 ]; then
    stop_hog
    smi_mem "after gpu_hog released"
  fi
done

# The table: per row gpuaes/default.
table=$(awk -F, 'NR > 1 {
    k = $1 "," $3 "," $4 "," $5 "," $6
    if (!(k in seen)) { seen[k] = 1; order[++n] = k; act[k] = $2 }
    if ($7 == "default") d[k] = $8
    else { g[k] = $8; sh[k] = $11; oom[k] = $16; ref[k] = $15; bo[k] = $14 }
  }
  END {
    printf "%-6s %-6s %-12s %-3s %6s %3s %8s %8s %6s %5s %5s %5s %5s  %s\n", "free<=", "actual", "cipher", "dir",
      "size", "thr", "default", "gpuaes", "ratio", "GPU%", "oom", "refus", "bkoff", ""
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, f, ",")
      sz = f[4] >= 1048576 ? (f[4] / 1048576) "M" : f[4]
      r = (k in d) && (k in g) && d[k] > 0 ? g[k] / d[k] : -1
      flag = r < 0 ? "(missing)" : (r < 0.95 ? "below 0.95" : "")
      printf "%-6s %-6s %-12s %-3s %6s %3s %8s %8s %6s %5s %5s %5s %5s  %s\n", (f[1] == 0 ? "ctl" : f[1]), act[k],
        f[2], f[3], sz, f[5], (k in d) ? d[k] : "-", (k in g) ? g[k] : "-", r < 0 ? "-" : sprintf("%.2f", r),
        sh[k] == "" ? "-" : sh[k], oom[k] == "" ? "-" : oom[k], ref[k] == "" ? "-" : ref[k],
        bo[k] == "" ? "-" : bo[k], flag
    }
  }' "$csv")
{
  echo
  echo "$table"
  echo "# GB/s medians of $repeats x $min_time s; ratio = gpuaes/default (issue 13: >= 0.95 at 1M);"
  echo "# GPU% = gpuaes bytes on the GPU; oom / refus / bkoff = gpu-memory-oom, gpu-memory-refusals,"
  echo "# gpu-backoffs over the row (warm-up included); free<= ctl = no hog"
} | tee -a "$log"
grep '^target .*: context' "$meta" | sed 's/^/# /' || true
echo "mem_pressure: wrote $csv, $meta, $log" >&2
exit "$failed"
