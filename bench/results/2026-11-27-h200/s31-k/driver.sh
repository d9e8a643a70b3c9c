#!/bin/bash
# device call of session 31, eleventh: fb41567 (a loser close behind is looked at as before) against
# 986193f's provider (.ab/old/gpuaes.so; carry [".ab"]), alternating, 3 rounds: processes AES-128-CTR
# 64 MiB and 1 MiB at 4 processes (s31-h/i: 0.78-0.93 against 1.29-1.44), and fresh load_proc processes
# (1 GiB of AES-128-CTR in 64 MiB updates through a warm gpuaesd, as s31-c).
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -40
[ -f .ab/old/gpuaes.so ] || { echo "s31-k: .ab/old/gpuaes.so missing"; exit 2; }
source bench/device_prelude.sh
rm -rf build-old && mkdir build-old && cp -r build/bench build/gpuaesd build/gpuaes_gpu.so build-old/ && cp .ab/old/gpuaes.so build-old/
for r in 1 2 3; do for v in old new; do
  bd=build; [ $v = old ] && bd=build-old
  timeout 100 bash bench/load_matrix.sh --build-dir $bd --backend service --only processes \
    --procs 4 --proc-sizes 1M,64M --proc-ciphers AES-128-CTR --out $OUT/lm-$v-$r > $OUT/lm-$v-$r.log 2>&1
  echo "$v $r rc=$?"; grep -A4 "worst first" $OUT/lm-$v-$r.log | tail -2 | sed "s/^/$v $r /"
done; done
D=$(mktemp -d)/s; mkdir -p $D; chmod 700 $D
$B/gpuaesd --socket-dir $D --foreground --idle-exit 0 2>> $OUT/svc.log &
for i in $(seq 50); do $B/gpuaesd --socket-dir $D --status 2>/dev/null | grep -q "spare: .* [1-9][0-9]* ready" && break; sleep 0.1; done
SV="GPUAES_GPU_BACKEND=service GPUAES_SERVICE_PATH=$B/gpuaesd GPUAES_SERVICE_DIR=$D"
for r in 1 2 3; do
  o=$($B/bench/load_proc --provider default --cipher AES-128-CTR --dir enc --size 64M --bytes 1G --provider-path $B); echo "default $o"
  for v in old new; do
    dir=$B; [ $v = old ] && dir=$PWD/build-old
    o=$(env $SV $B/bench/load_proc --provider gpuaes --cipher AES-128-CTR --dir enc --size 64M --bytes 1G --provider-path $dir); echo "$v $o"
  done
done | tee $OUT/fresh-ab.txt | awk '{split($4,a,"=");split($5,b,"="); printf "%s timed %.1f ms %s\n", $1, (b[2]-a[2])*1000, $7}'
stop_svc $D
tar czf $OUT/lm.tgz -C $OUT $(cd $OUT && ls -d lm-* svc.log) && (cd $OUT && rm -rf lm-* svc.log)
echo "total $(( $(date +%s) - t0 )) s"
