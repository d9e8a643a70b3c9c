#!/bin/bash
# device call (session 28, fourth): the service client's new piece lengths (piece_len) against 1df043f's
# module (.ab/cur, built on the CPU machine, sm_90), both through one foreground gpuaesd, interleaved,
# 3 rounds; the service's job log summed per phase (1 and 4 threads); ctest -j16 and the GPU tests
# through the real gpuaesd at this code.
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAESD_JOB_LOG=1 $B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2> /tmp/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare" && break; sleep 0.1; done
sleep 1
EB="$B/bench/evp_bench --repeats 1 --min-time 0.3 --warmup 0.1 --require-gpu --seed 1 --dir enc --ciphers AES-128-CTR,AES-256-ECB,AES-256-GCM"
for round in 1 2 3; do for v in old new; do
  P=$B; [ $v = old ] && P=$PWD/.ab/cur
  for t in 1 4; do
    echo "--- $v t$t" >> /tmp/svc.log
    GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_DEBUG=1 \
      $EB --provider-path $P --threads $t --sizes 64M,1M 2>> /tmp/client-$v-t$t.log | grep -E "^AES" | sed "s/^/$v r$round /" >> $OUT/ab.txt
  done
done; done
kill %1; wait
echo "ab $(( $(date +%s) - t0 )) s"
python3 - > $OUT/jobs-summary.txt <<'PY'
import re, statistics as st, collections
jobs = collections.defaultdict(list); phase = 'warm'
for line in open('/tmp/svc.log'):
    if line.startswith('--- '): phase = line[4:].strip(); continue
    m = re.search(r'op (\d+) len (\d+) status (\d+): queued ([\d.]+) us, ran ([\d.]+) us \((\d+) running', line)
    if m: jobs[(phase, int(m[1]), int(m[2]))].append((float(m[4]), float(m[5]), int(m[6])))
print("service jobs: phase op len: n, median queued us, median ran us, median running")
for k, v in sorted(jobs.items()):
    if len(v) >= 10:
        print(k, len(v), round(st.median(x[0] for x in v), 1), round(st.median(x[1] for x in v), 1), st.median(x[2] for x in v))
for v in ('old', 'new'):
    for t in (1, 4):
        rows = [re.search(r'of (\d+) bytes: ([\d.]+) ms \(copy in ([\d.]+), copy out ([\d.]+), waiting ([\d.]+)\), (\d+) pieces', l) for l in open(f'/tmp/client-{v}-t{t}.log')]
        rows = [r for r in rows if r]
        for size in sorted(set(int(r[1]) for r in rows)):
            rr = [r for r in rows if int(r[1]) == size]
            print(v, 't%d' % t, size >> 20, 'MiB client per job (median ms): total', st.median(float(r[2]) for r in rr), 'in', st.median(float(r[3]) for r in rr),
                  'out', st.median(float(r[4]) for r in rr), 'wait', st.median(float(r[5]) for r in rr), 'pieces', rr[0][6], 'n', len(rr))
PY
( cd build && GPUAES_MODULE_DIR=$B timeout 230 ctest -j16 --timeout 200 > $OUT/ctest-gpu.log 2>&1; echo "ctest rc=$?"; grep -E "tests passed|\*\*\*Failed|Timeout|Total Test" $OUT/ctest-gpu.log | head )
D=$(mktemp -d)/s
( cd build && GPUAES_GPU_BACKEND=service GPUAES_GPU_START_BYTES=0 GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D GPUAES_SERVICE_TIMEOUT_MS=10000 \
  timeout 200 ctest -R '^(keystream|keystream_tiny|ks_life_(jump|mixed|final|pool)|overlap_keystream_gpu|kat|diff|params|bad_input|gcm_ghash|tls|reinit|diff_gpu_migrate)$' --output-on-failure > $OUT/ctest-service.log 2>&1; echo "service ctest rc=$?"; grep -E "tests passed|Failed" $OUT/ctest-service.log
  $B/gpuaesd --socket-dir $D --status >> $OUT/ctest-service.log 2>&1 )
stop_svc $D
cat $OUT/jobs-summary.txt
echo "=== A/B: cipher size threads: version=gpuaes GB/s (ratio to default), rounds 1-3"
awk '{k=$3" "$5" t"$6; v[k]=v[k]" "$1"="$8"("$9")"} END {for (k in v) print k ":" v[k]}' $OUT/ab.txt | sort
echo "total $(( $(date +%s) - t0 )) s"
