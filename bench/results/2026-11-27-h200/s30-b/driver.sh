#!/bin/bash
# device call of session 30: service_span_bytes (the part of the 64 MiB segment a job's pieces cycle
# through). The in-process pipeline keeps 24 MiB in flight so that its staging stays in the last-level
# cache (pipeline.h); a 64 MiB job through gpuaesd walks the whole segment. One thread, 64 MiB calls,
# through a warm foreground gpuaesd: CTR / ECB / GCM at spans 64M (the old behaviour), 32M, 24M, 16M,
# and ECB in 4 MiB pieces at 24M and 64M; 2 rounds, the order rotated; in process beside them. Then a
# short process through the service (openssl enc 64 MiB, s30-a's startup cell at 0.78: where does it
# lose?), then gpu_checks. Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --dir enc --threads 1"
SV="GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
for r in 1 2; do
  for c in AES-128-CTR AES-256-ECB AES-256-GCM; do
    spans="64M 32M 24M 16M"; [ $r = 2 ] && spans="16M 24M 32M 64M"
    for s in $spans; do
      env $SV GPUAES_SERVICE_SPAN_BYTES=$s $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed "s/^/r$r span=$s /"
    done
    [ $c = AES-256-ECB ] && for s in 24M 64M; do
      env $SV GPUAES_SERVICE_SPAN_BYTES=$s GPUAES_SERVICE_CHUNK=4M $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed "s/^/r$r span=$s chunk=4M /"
    done
    GPUAES_GPU_START_BYTES=0 $EB --ciphers $c 2>/dev/null | grep -E "^AES" | sed "s/^/r$r inprocess /"
  done
done | tee $OUT/span-ab.txt
# a short process through the (warm) service: openssl enc of 64 MiB, default and gpuaes alternating
sed "s#/usr/lib/x86_64-linux-gnu/ossl-modules/gpuaes.so#$B/gpuaes.so#" openssl.cnf.example > /tmp/g.cnf
head -c 67108864 /dev/urandom > /dev/shm/f64
K="-K $(printf '%064d' 7) -iv $(printf '%032d' 9)"
for i in 1 2 3 4 5 6 7; do
  s=$(date +%s%N); openssl enc -aes-256-ctr $K -in /dev/shm/f64 -out /dev/shm/o1; e=$(date +%s%N); echo "default $(( (e-s)/1000 )) us"
  s=$(date +%s%N); env GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D OPENSSL_CONF=/tmp/g.cnf \
    openssl enc -aes-256-ctr $K -in /dev/shm/f64 -out /dev/shm/o2; e=$(date +%s%N); echo "gpuaes $(( (e-s)/1000 )) us"
  cmp -s /dev/shm/o1 /dev/shm/o2 || echo "DIFFERENT OUTPUT"
done > $OUT/enc64.txt 2>&1
for i in 1 2; do GPUAES_DEBUG=1 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D OPENSSL_CONF=/tmp/g.cnf \
  openssl enc -aes-256-ctr $K -in /dev/shm/f64 -out /dev/shm/o2; done >> $OUT/enc64-debug.txt 2>&1
stop_svc $D
gpu_checks
tar czf $OUT/ctest.tgz -C $OUT ctest-gpu.log ctest-service.log svc.log && rm -f $OUT/ctest-gpu.log $OUT/ctest-service.log $OUT/svc.log
python3 - $OUT/span-ab.txt <<'PY'
import sys, collections, statistics as st
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    i = next(k for k, x in enumerate(f) if x.startswith('AES-'))
    g[(f[i], ' '.join(f[1:i]))].append(float(f[i + 5]))
for k in sorted(g): print("%-12s %-22s gpuaes GB/s %s" % (k[0], k[1], ' '.join('%.1f' % x for x in g[k])))
PY
cat $OUT/enc64.txt | sort | awk '{a[$1]=a[$1]" "$2} END {for (k in a) print k, a[k]}'
echo "total $(( $(date +%s) - t0 )) s"
