#!/bin/bash
# device call of session 31, second: where a fresh process's time goes through a warm gpuaesd (issue 22's
# fresh-warm target, 4x; 2.46x at s29-a). A foreground service with its per-job log; fresh load_proc
# runs, 1 GiB of AES-128-CTR / AES-256-GCM in 64 MiB updates, gpuaes (GPUAES_DEBUG=1 and LOAD_PROC_TRACE=1:
# when it connects, each update's time, each job's breakdown) alternating with the default provider,
# 5 each; then one thread of 64 MiB calls in one process (the steady state) with the same breakdown.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -50
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
GPUAESD_JOB_LOG=1 $B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
sleep 0.5
SV="GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
for c in AES-128-CTR AES-256-GCM; do for i in 1 2 3 4 5; do
  s=$(date +%s%N); $B/bench/load_proc --provider default --cipher $c --dir enc --size 64M --bytes 1G --provider-path $B > /dev/null
  e=$(date +%s%N); echo "$c default wall $(( (e-s)/1000 )) us"
  echo "--- fresh $c $i" >> $OUT/svc.log
  s=$(date +%s%N); env $SV GPUAES_DEBUG=1 LOAD_PROC_TRACE=1 $B/bench/load_proc --provider gpuaes --cipher $c --dir enc --size 64M \
    --bytes 1G --provider-path $B > $OUT/fresh-$c-$i.out 2> $OUT/fresh-$c-$i.log
  e=$(date +%s%N); echo "$c gpuaes wall $(( (e-s)/1000 )) us $(cat $OUT/fresh-$c-$i.out)"
done; done | tee $OUT/fresh.txt
echo "--- one process" >> $OUT/svc.log
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
for c in AES-128-CTR AES-256-ECB AES-256-GCM; do
  env GPUAES_GPU_START_BYTES=0 $SV GPUAES_DEBUG=1 $EB --ciphers $c 2> $OUT/steady-$c.log | grep -E "^AES" | tee -a $OUT/steady.txt
done
$B/gpuaesd --socket-dir $D --status >> $OUT/status.txt 2>&1
stop_svc $D
tar czf $OUT/logs.tgz -C $OUT $(cd $OUT && ls fresh-*.log fresh-*.out steady-*.log svc.log) && (cd $OUT && rm -f fresh-*.log fresh-*.out steady-*.log svc.log)
python3 - $OUT/fresh.txt <<'PY'
import sys, re, statistics as st, collections
w = collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'(\S+) (default|gpuaes) wall (\d+) us', l)
    if m: w[(m[1], m[2])].append(int(m[3]) / 1000)
for c in ('AES-128-CTR', 'AES-256-GCM'):
    d, g = w[(c, 'default')], w[(c, 'gpuaes')]
    print("%s fresh 1 GiB wall ms: default %s | gpuaes %s | ratio of medians %.2f" % (c, ' '.join('%.0f' % x for x in d), ' '.join('%.0f' % x for x in g), st.median(d) / st.median(g)))
PY
cat $OUT/steady.txt
echo "total $(( $(date +%s) - t0 )) s"
