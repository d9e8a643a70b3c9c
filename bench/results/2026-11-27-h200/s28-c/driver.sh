#!/bin/bash
# device call (session 28, third): where a job's time goes through gpuaesd. A foreground service with
# the new per-job log (GPUAESD_JOB_LOG=1: wait in its client's queue, run) and the stage trace of one
# job; service_rtt (16 B and 64 KiB jobs); one thread of 64 MiB CTR and ECB through it with the
# client's per-job breakdown (GPUAES_DEBUG); the in-process stage trace of a 64 MiB CTR job beside it.
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAESD_JOB_LOG=1 GPUAESD_STAGING_TRACE=200 $B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare" && break; sleep 0.1; done
sleep 1; $B/gpuaesd --socket-dir $D --status | head -12
for len in 16 65536 1048576; do timeout 60 $B/bench/service_rtt --service $B/gpuaesd --dir $D --len $len --jobs 2000 --rounds 3 >> $OUT/rtt.txt; done
echo "--- client jobs from here" >> $OUT/svc.log
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
for c in AES-128-CTR AES-256-ECB; do
  echo "--- $c" >> $OUT/svc.log
  GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_DEBUG=1 \
    $EB --ciphers $c 2> $OUT/client-$c.log | grep -E "^AES" | tee -a $OUT/evp.txt
done
kill %1; wait
GPUAES_GPU_START_BYTES=0 GPUAES_STAGING_TRACE=12 $EB --ciphers AES-128-CTR 2> $OUT/inproc-trace.log | grep -E "^AES" | sed 's/^/inproc /' | tee -a $OUT/evp.txt
python3 - $OUT <<'PY'
import re, sys, statistics as st, collections
out = sys.argv[1]
jobs = collections.defaultdict(list); phase = 'rtt'
for line in open(out + '/svc.log'):
    if line.startswith('--- '): phase = line[4:].strip(); continue
    m = re.search(r'op (\d+) len (\d+) status (\d+): queued ([\d.]+) us, ran ([\d.]+) us \((\d+) running', line)
    if m: jobs[(phase, int(m[1]), int(m[2]))].append((float(m[4]), float(m[5]), int(m[6])))
print("service jobs: phase op len: n, median queued us, median ran us, median running")
for k, v in sorted(jobs.items()):
    if len(v) >= 20:
        print(k, len(v), round(st.median(x[0] for x in v), 1), round(st.median(x[1] for x in v), 1), st.median(x[2] for x in v))
for c in ('AES-128-CTR', 'AES-256-ECB'):
    rows = [re.search(r'of (\d+) bytes: ([\d.]+) ms \(copy in ([\d.]+), copy out ([\d.]+), waiting ([\d.]+)\), (\d+) pieces', l) for l in open(f'{out}/client-{c}.log')]
    rows = [r for r in rows if r and int(r[1]) == 64 << 20]
    if rows:
        print(c, 'client per 64 MiB job (median ms): total', st.median(float(r[2]) for r in rows), 'in', st.median(float(r[3]) for r in rows),
              'out', st.median(float(r[4]) for r in rows), 'wait', st.median(float(r[5]) for r in rows), 'pieces', rows[0][6], 'n', len(rows))
PY
cat $OUT/rtt.txt; grep -A30 "staging trace" $OUT/svc.log | head -34; grep -A24 "staging trace" $OUT/inproc-trace.log | head -26
echo "total $(( $(date +%s) - t0 )) s"
