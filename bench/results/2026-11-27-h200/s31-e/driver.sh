#!/bin/bash
# device call of session 31, fifth: an experiment (an uncommitted switch, GPUAES_X_IN_STREAM, in
# provider/gpu_remote.c): a service job's copy into its slot of the shared segment with non-temporal
# stores (the GPU reads the slot by DMA; the CPU does not read it again), where it used plain stores.
# One thread, 64 MiB calls through one warm foreground gpuaesd: ECB-256 enc, CBC-128 dec, GCM-256 enc,
# and CTR (keystream: no copy in; the control), plain / NT alternating, 3 rounds; in process beside.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
source bench/device_prelude.sh
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
EB="$B/bench/evp_bench --sizes 64M --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu --seed 1 --threads 1"
SV="GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
for r in 1 2 3; do
  for cd in AES-256-ECB:enc AES-128-CBC:dec AES-256-GCM:enc AES-128-CTR:enc; do
    c=${cd%:*}; d=${cd#*:}
    arms="plain nt"; [ $r = 2 ] && arms="nt plain"
    for a in $arms; do
      x=""; [ $a = nt ] && x="GPUAES_X_IN_STREAM=1"
      env $SV $x $EB --ciphers $c --dir $d 2>/dev/null | grep -E "^AES" | sed "s/^/r$r $a /"
    done
    [ $r = 1 ] && GPUAES_GPU_START_BYTES=0 GPUAES_GPU_BACKEND=inprocess $EB --ciphers $c --dir $d 2>/dev/null | grep -E "^AES" | sed "s/^/r$r inprocess /"
  done
done | tee $OUT/nt-ab.txt
stop_svc $D
python3 - $OUT/nt-ab.txt <<'PY'
import sys, collections
g = collections.defaultdict(list)
for l in open(sys.argv[1]):
    f = l.split()
    i = next(k for k, x in enumerate(f) if x.startswith('AES-'))
    g[(f[i], f[i + 1], f[1])].append(float(f[i + 5]))
for k in sorted(g): print("%-12s %s %-9s gpuaes GB/s %s" % (k[0], k[1], k[2], ' '.join('%.1f' % x for x in g[k])))
PY
echo "total $(( $(date +%s) - t0 )) s"
