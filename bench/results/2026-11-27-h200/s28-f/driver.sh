#!/bin/bash
# device call (session 28, after s28-e): s28-e's small calls read GCM updates at 0.49x (+23 ns a call)
# where s28-a read 0.98-1.0x; the CPU machine shows no difference between 810527a's module and this
# one. Small calls A/B on the H200: 810527a's module (.ab/old, built on the CPU machine, sm_90) and
# this one, alternated old, new, new, old, each run both providers interleaved in one process.
source bench/device_prelude.sh
for v in old new new old; do
  P=$B; [ $v = old ] && P=$PWD/.ab/old
  $B/bench/small_calls --rounds 20 --provider-path $P | awk -v v=$v 'NF==5 && $1!="pattern" {print v, $0}' >> $OUT/small-ab.txt
done
echo "pattern size: version=default/gpuaes, runs in order"
awk '{k=$2" "$3; r[k]=r[k]" "$1"="$6} END {for (k in r) print k ":" r[k]}' $OUT/small-ab.txt | sort -k1,1 -k2n
echo "total $(( $(date +%s) - t0 )) s"
