#!/bin/bash
# device call of session 31, eighth: s31-g's matrix (through gpuaesd) ran on an H100 machine with cells
# below 0.95; is it the card or the session's provider? The threads and processes workloads with the
# session's final code and with 986193f's provider (.ab/old/gpuaes.so; carry [".ab"]; the same gpuaesd,
# build-old is this build with that module), old then new, on one machine.
# Run as: bash .../driver.sh 2>&1 | tee $OUT/driver.log | tail -60
[ -f .ab/old/gpuaes.so ] || { echo "s31-h: .ab/old/gpuaes.so missing"; exit 2; }
source bench/device_prelude.sh
rm -rf build-old && mkdir build-old && cp -r build/bench build/gpuaesd build/gpuaes_gpu.so build-old/ && cp .ab/old/gpuaes.so build-old/
for v in old new; do
  bd=build; [ $v = old ] && bd=build-old
  timeout 250 bash bench/load_matrix.sh --build-dir $bd --backend service --only threads,processes \
    --out $OUT/lm-$v > $OUT/lm-$v.log 2>&1; echo "$v rc=$?"
done
python3 - $OUT <<'PY'
import csv, sys, statistics as st, collections
out = sys.argv[1]
def cells(v):
    r = collections.defaultdict(dict)
    for row in csv.DictReader(open(f'{out}/lm-{v}/load.csv')):
        k = (row['workload'], row['cipher'], row['direction'], row['update_bytes'], row['threads'], row['processes'])
        r[k].setdefault(row['path'], []).append(float(row['gbps']))
    return {k: st.median(d['gpuaes']) / st.median(d['default']) for k, d in r.items() if 'gpuaes' in d and 'default' in d}
o, n = cells('old'), cells('new')
ks = sorted(set(o) & set(n), key=lambda k: min(o[k], n[k]))
print("cells: %d; below 0.95 old %d new %d; geo-mean old %.3f new %.3f" % (len(ks), sum(o[k] < 0.95 for k in ks),
      sum(n[k] < 0.95 for k in ks), st.geometric_mean([o[k] for k in ks]), st.geometric_mean([n[k] for k in ks])))
for k in ks[:20]: print("%-10s %-12s %s %9s t=%-3s p=%-3s old %.2f new %.2f" % (k + (o[k], n[k])))
PY
tar czf $OUT/lm.tgz -C $OUT lm-old lm-new lm-old.log lm-new.log && rm -rf $OUT/lm-old $OUT/lm-new $OUT/lm-old.log $OUT/lm-new.log
echo "total $(( $(date +%s) - t0 )) s"
