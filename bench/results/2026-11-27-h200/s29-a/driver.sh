#!/bin/bash
# device call prepared in sessions 28-29 (not run yet: session 29 had no device time) for the next GPU session:
#  1. a lone job's round trip (service_rtt: 16 B, 64 KiB); one thread of 64 MiB CTR / ECB / GCM through a
#     foreground gpuaesd with the client's per-job line
#     (GPUAES_DEBUG: copy in / out, waiting, how many sleeps, when the first reply came) and the service's
#     job log: is the 0.4-0.5 ms of waiting per 64 MiB job the ramp or spread over the pieces?
#  2. issue 22's workloads (processes-long 1 / 4 / 16, fresh-warm, fresh-cold) through gpuaesd and in process;
#  3. small calls with the A/A control (--aa) beside the A/B run;
#  (the GPU checks moved to s29-c: this call with them would run past 600 s). ~6 min on the H200; run it
#  as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -80.
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAESD_JOB_LOG=1 $B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
# a lone job's round trip (s28-c: 86 us for 16 B, before the AES-NI key schedule of 74b0606)
echo "--- rtt" >> $OUT/svc.log
for len in 16 65536; do timeout 60 $B/bench/service_rtt --service $B/gpuaesd --dir $D --len $len --jobs 2000 --rounds 3 \
  | tee -a $OUT/service-ab.txt; done
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
for c in AES-128-CTR AES-256-ECB AES-256-GCM; do
  echo "--- $c" >> $OUT/svc.log
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_DEBUG=1 \
    $EB --ciphers $c 2> $OUT/client-$c.log | grep -E "^AES" | sed 's/^/service /' | tee -a $OUT/service-ab.txt
  GPUAES_GPU_START_BYTES=0 $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed 's/^/inproc  /' | tee -a $OUT/service-ab.txt
done
kill %1; wait
python3 - $OUT <<'PY' | tee -a $OUT/service-ab.txt
import re, sys, statistics as st
out = sys.argv[1]
pat = re.compile(r'of (\d+) bytes: ([\d.]+) ms \(copy in ([\d.]+), copy out ([\d.]+), waiting ([\d.]+): (\d+) sleeps, first reply at ([\d.]+)\), (\d+) pieces')
for c in ('AES-128-CTR', 'AES-256-ECB', 'AES-256-GCM'):
    rows = [m for m in (pat.search(l) for l in open(f'{out}/client-{c}.log')) if m and int(m[1]) == 64 << 20]
    if rows:
        med = lambda i: round(st.median(float(r[i]) for r in rows), 3)
        print(c, 'per 64 MiB job (median ms): total', med(2), 'in', med(3), 'out', med(4), 'wait', med(5),
              'sleeps', med(6), 'first reply', med(7), 'pieces', rows[0][8], 'n', len(rows))
PY
tar czf $OUT/service-logs.tgz -C $OUT svc.log client-AES-128-CTR.log client-AES-256-ECB.log client-AES-256-GCM.log \
  && rm -f $OUT/svc.log $OUT/client-*.log
for be in service inprocess; do
  timeout 200 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold \
      --backend $be --out $OUT/lm-$be > $OUT/lm-$be.log 2>&1; echo "$be rc=$?"
done
tar czf $OUT/lm.tgz -C $OUT lm-service lm-inprocess lm-service.log lm-inprocess.log 2>/dev/null \
  && rm -rf $OUT/lm-service $OUT/lm-inprocess $OUT/lm-service.log $OUT/lm-inprocess.log
( $B/bench/small_calls --rounds 40 --provider-path $B; $B/bench/small_calls --rounds 40 --provider-path $B --aa ) \
  > $OUT/small_calls.txt 2>&1
tar xzf $OUT/lm.tgz -C /tmp lm-service.log lm-inprocess.log 2>/dev/null
for be in service inprocess; do echo "== $be"; grep -A20 "worst first" /tmp/lm-$be.log | head -22; done
cat $OUT/service-ab.txt
echo "total $(( $(date +%s) - t0 )) s"
