#!/usr/bin/env bash
# service_list.sh GPUAESD MODULE_DIR [default] - `openssl list -providers
# -verbose` in service mode shows the service's state and starts nothing: "no
# gpuaesd running" and no socket made; with one running, its pid.  default:
# GPUAES_GPU_BACKEND unset, so that the service mode is gpuaes's own default.
set -u
svc=$1 mod=$2
backend=(GPUAES_GPU_BACKEND=service)
[ "${3:-}" = default ] && backend=(-u GPUAES_GPU_BACKEND)
dir=$(mktemp -d /tmp/gpuaes-list-XXXXXX)/s
trap 'pid=$("$svc" --socket-dir "$dir" --status 2>/dev/null | sed -n "s/^gpuaesd: serving, pid \([0-9]*\).*/\1/p"); [ -n "$pid" ] && kill "$pid"; rm -rf "$(dirname "$dir")"' EXIT
list() { env "${backend[@]}" GPUAES_SERVICE_DIR=$dir GPUAES_SERVICE_PATH=$svc \
  LD_PRELOAD=${GPUAES_TEST_PRELOAD:-} \
  openssl list -providers -verbose -provider-path "$mod" -provider gpuaes 2>&1 | grep "name: gpuaes"; }
out=$(list)
echo "$out"
case $out in *"no gpuaesd running"*) ;; *) echo "FAIL: no service, but the name says otherwise"; exit 1 ;; esac
[ -e "$dir/S.gpuaesd" ] && { echo "FAIL: listing started a service"; exit 1; }
"$svc" --socket-dir "$dir" --idle-exit 30 || { echo "FAIL: gpuaesd did not start"; exit 1; }
pid=$("$svc" --socket-dir "$dir" --status | sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p')
out=$(list)
echo "$out"
case $out in *"gpuaesd serving: pid $pid,"*) ;; *) echo "FAIL: the running service (pid $pid) is not shown"; exit 1 ;; esac
echo "service_list: ok"
