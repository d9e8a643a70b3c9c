#!/usr/bin/env bash
# service_exit_starting.sh MODULE_DIR - a process that exits while the gpuaesd
# it started is not answering yet does not wait for the start's deadline (5 s):
# its threads that start or dial the service give up at the module's unload
# (gpuaesd_client_abort).  Two "services": one whose first process exits
# without ever listening, one that never returns.  Each `openssl enc` of 1 MiB
# must give the default provider's bytes within 2 s.
set -u
mod=$1
dir=$(mktemp -d /tmp/gpuaes-exit-XXXXXX)
trap '[ -s "$dir/hang.pid" ] && kill "$(cat "$dir/hang.pid")" 2>/dev/null; rm -rf "$dir"' EXIT
printf '#!/bin/sh\nexit 0\n' > "$dir/quiet"
printf '#!/bin/sh\necho $$ > %s/hang.pid\nexec sleep 30 > /dev/null 2>&1\n' "$dir" > "$dir/hang"
chmod 755 "$dir/quiet" "$dir/hang"
head -c 1048576 /dev/urandom > "$dir/in"
k=(-K 000102030405060708090a0b0c0d0e0f -iv 0f0e0d0c0b0a09080706050403020100)
openssl enc -aes-128-ctr "${k[@]}" -in "$dir/in" -out "$dir/want" || exit 1
fail=0
for svc in quiet hang; do
  t0=$(date +%s%N)
  env GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH="$dir/$svc" GPUAES_SERVICE_DIR="$dir/s-$svc" \
      GPUAES_GPU_START_BYTES=0 GPUAES_OFFLOAD_MIN_BYTES=0 GPUAES_DISPATCH=force \
      GPUAES_SERVICE_CONNECT_WAIT_MS=0 \
      LD_PRELOAD=${GPUAES_TEST_PRELOAD:-} \
      openssl enc -aes-128-ctr "${k[@]}" -provider-path "$mod" -provider gpuaes -in "$dir/in" -out "$dir/got" \
    || { echo "FAIL: openssl enc with the '$svc' service"; fail=1; }
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  echo "$svc service: ${ms} ms"
  cmp -s "$dir/want" "$dir/got" || { echo "FAIL: '$svc': not the default provider's bytes"; fail=1; }
  [ "$ms" -lt 2000 ] || { echo "FAIL: '$svc': the process took ${ms} ms (waited for the start's deadline)"; fail=1; }
done
[ $fail = 0 ] && echo "service_exit_starting: ok"
exit $fail
