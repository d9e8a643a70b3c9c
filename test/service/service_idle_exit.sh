#!/usr/bin/env bash
# service_idle_exit.sh GPUAESD - the service's idle exit: GPUAESD_IDLE_EXIT sets
# it for a service started without --idle-exit (as a provider starts one: the
# service keeps its starter's GPUAESD_* variables), --idle-exit wins over it,
# and a value that is not a number of seconds is ignored (60 s).  The service
# is watched by its pid: a --status query is a client, and would keep it busy.
set -u
svc=$1
dir=$(mktemp -d /tmp/gpuaes-idle-XXXXXX)
pid_of() { "$svc" --socket-dir "$1" --status 2>/dev/null | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p'; }
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$dir"' EXIT
# Starts a detached service in $dir/$1 with environment $2 and options $3...;
# prints its pid.
start() {
  local d=$dir/$1 e=$2
  shift 2
  env $e "$svc" --socket-dir "$d" "$@" || return 1
  pid_of "$d"
}
fail=0

p=$(start env GPUAESD_IDLE_EXIT=1) && [ -n "$p" ] || { echo "FAIL: GPUAESD_IDLE_EXIT=1: no service"; exit 1; }
pids+=("$p")
for i in $(seq 150); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$p" 2>/dev/null; then
  echo "FAIL: GPUAESD_IDLE_EXIT=1: still running 15 s after its start"; fail=1
else
  echo "GPUAESD_IDLE_EXIT=1: exited about $(( i / 10 )) s after its start"
fi

for c in "option GPUAESD_IDLE_EXIT=1 --idle-exit 0" "bogus GPUAESD_IDLE_EXIT=soon" "empty GPUAESD_IDLE_EXIT="; do
  set -- $c
  p=$(start "$@") && [ -n "$p" ] || { echo "FAIL: $2 ${3:-} ${4:-}: no service"; fail=1; continue; }
  pids+=("$p")
done
sleep 4                                # past a 1 s idle exit, its warm-up included
for p in "${pids[@]:1}"; do
  kill -0 "$p" 2>/dev/null || { echo "FAIL: service $p exited within 4 s (only --idle-exit 0 or 60 s was asked for)"; fail=1; }
done
[ $fail = 0 ] && echo "service_idle_exit: ok"
exit $fail
