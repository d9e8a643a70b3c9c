#!/bin/bash
# device call of session 31, third: the dispatch change of ec28cfe (the CPU's first estimate measured
# aside; the first look at the losing path bounded by its cost) against 986193f's module (.ab/old/gpuaes.so,
# built on the CPU machine; carry [".ab"]). 1. Fresh processes through one warm foreground gpuaesd (this
# build's): load_proc, 1 GiB of AES-128-CTR / AES-256-GCM in 64 MiB updates, default / old / new
# alternating, 5 rounds: wall spawn to exit, the timed window, bytes on the GPU. 2. issue 22's workloads
# through gpuaesd (load_matrix --only processes-long,fresh-warm,fresh-cold). Run as:
# bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
[ -f .ab/old/gpuaes.so ] || { echo "s31-c: .ab/old/gpuaes.so missing (carry [\".ab\"])"; exit 2; }
source bench/device_prelude.sh
cp $B/gpuaes_gpu.so .ab/old/
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
sleep 0.5
SV="GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
for r in 1 2 3 4 5; do for c in AES-128-CTR AES-256-GCM; do
  s=$(date +%s%N); o=$($B/bench/load_proc --provider default --cipher $c --dir enc --size 64M --bytes 1G --provider-path $B)
  e=$(date +%s%N); echo "$c default wall_us $(( (e-s)/1000 )) $o"
  for v in old new; do
    dir=$B; [ $v = old ] && dir=$PWD/.ab/old
    s=$(date +%s%N); o=$(env $SV $B/bench/load_proc --provider gpuaes --cipher $c --dir enc --size 64M --bytes 1G --provider-path $dir)
    e=$(date +%s%N); echo "$c $v wall_us $(( (e-s)/1000 )) $o"
  done
done; done > $OUT/fresh-ab.txt 2>&1
stop_svc $D
timeout 230 bash bench/load_matrix.sh --build-dir build --only processes-long,fresh-warm,fresh-cold \
    --backend service --out $OUT/lm-service > $OUT/lm-service.log 2>&1; echo "load matrix rc=$?"
tar czf $OUT/lm.tgz -C $OUT lm-service lm-service.log svc.log && rm -rf $OUT/lm-service $OUT/svc.log
python3 - $OUT/fresh-ab.txt <<'PY'
import sys, re, statistics as st, collections
w, win, gb = collections.defaultdict(list), collections.defaultdict(list), collections.defaultdict(list)
for l in open(sys.argv[1]):
    m = re.match(r'(\S+) (default|old|new) wall_us (\d+) ok bytes=\d+ t0=([\d.]+) t1=([\d.]+) cpu_s=\S+ gpu_bytes=(-?\d+)', l)
    if not m: continue
    k = (m[1], m[2]); w[k].append(int(m[3]) / 1e3); win[k].append((float(m[5]) - float(m[4])) * 1e3); gb[k].append(int(m[6]) >> 20)
for c in ('AES-128-CTR', 'AES-256-GCM'):
    d = st.median(w[(c, 'default')])
    for v in ('default', 'old', 'new'):
        k = (c, v)
        print("%s %-7s wall ms %s (median %.0f, default/this %.2f); timed ms median %.1f; MiB on GPU %s" % (c, v,
              ' '.join('%.0f' % x for x in w[k]), st.median(w[k]), d / st.median(w[k]), st.median(win[k]), ' '.join(map(str, gb[k]))))
PY
grep -A14 "worst first" $OUT/lm-service.log | head -16
echo "total $(( $(date +%s) - t0 )) s"
