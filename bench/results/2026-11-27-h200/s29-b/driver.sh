#!/bin/bash
# device call prepared in session 29 (not run yet): does a GCM message on gpuaes's engine now leave the GPU
# when the cores are busy? A/B of this build (d9a74af on: the engine's CPU blocks in one stitched pass, its
# pieces where dispatch says; also PCLMUL GHASH folds and AES-NI key schedules) against 37846f8, d9a74af's
# parent (pieces to the GPU whenever it takes them), in process:
# evp_bench AES-256-GCM enc and dec, 8 and 64 MiB updates (one long message per thread), 1, 16 and 32
# threads, 3 rounds alternating old / new; then bench/gcm_engine_cpu (the stitched pass against CTR + GHASH
# on this CPU, whose GCM is stitched with VAES). The old module is .ab/old/gpuaes.so (built on the CPU
# machine at 37846f8; carry [".ab"]); the layer beside it is this build's (same layer ABI). Then
# gpu_cpu_share=ctr vs all for one thread's 64 MiB GCM (the share now takes the stitched pass). ~5 min.
# The load matrix's cells before (s28-e, 0a1cd0b): GCM dec 64M t16 0.84, t32 0.89, enc 64M t16 0.93,
# t32 0.92, enc 8M t16 0.90.
# .ab/old/gpuaes.so, if missing: git worktree add /tmp/wt-old 37846f8 && cmake -S /tmp/wt-old -B /tmp/wt-old/b
#   -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 && cmake --build /tmp/wt-old/b --target gpuaes
#   && mkdir -p .ab/old && cp /tmp/wt-old/b/gpuaes.so .ab/old/   (.ab is in .git/info/exclude)
[ -f .ab/old/gpuaes.so ] || { echo "s29-b: .ab/old/gpuaes.so missing (carry [\".ab\"])"; exit 2; }
source bench/device_prelude.sh
cp $B/gpuaes_gpu.so .ab/old/
mkdir -p $OUT/ab
for r in 1 2 3; do
  for v in old new; do
    dir=$B; [ $v = old ] && dir=$PWD/.ab/old
    for d in enc dec; do
      timeout 120 $B/bench/evp_bench --ciphers AES-256-GCM --dir $d --sizes 8M,64M --threads 1,16,32 \
        --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $dir --require-gpu \
        --csv $OUT/ab/$v-$d-$r.csv > $OUT/ab/$v-$d-$r.txt 2>&1 || echo "$v $d $r rc=$?"
    done
  done
done
python3 - $OUT/ab <<'PY' | tee $OUT/gcm-ab.txt
import csv, glob, os, sys, statistics as st, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(sys.argv[1], '*.csv'))):
    v = os.path.basename(f).split('-')[0]
    got = {}
    for r in csv.DictReader(open(f)):
        got.setdefault((r['direction'], int(r['update_bytes']), int(r['threads'])), {})[r['path']] = float(r['gbps'])
    for k, p in got.items():
        if 'default' in p and 'gpuaes' in p:
            rows[(k, v)].append(p['gpuaes'] / p['default'])
print("AES-256-GCM, gpuaes / default per round (median), old = 37846f8, new = this build")
for k in sorted({k for k, v in rows}):
    print("%s %3dM t=%-2d  old %s  new %s" % (k[0], k[1] >> 20, k[2],
          " ".join("%.2f" % x for x in rows[(k, 'old')]), " ".join("%.2f" % x for x in rows[(k, 'new')])))
PY
tar czf $OUT/gcm-ab.tgz -C $OUT ab && rm -rf $OUT/ab
# The caller's share of a GCM job (gpu_cpu_share=all) now runs the stitched pass: does a lone thread's
# 64 MiB GCM gain from it now (default ctr: "not measured to help GCM yet")? 3 rounds alternating.
for r in 1 2 3; do
  for sh in ctr all; do
    GPUAES_GPU_CPU_SHARE=$sh timeout 60 $B/bench/evp_bench --ciphers AES-256-GCM --dir enc --sizes 64M \
      --threads 1 --repeats 3 --min-time 0.3 --warmup 0.1 --provider-path $B --require-gpu 2>/dev/null \
      | grep -E "^AES" | sed "s/^/share=$sh round $r: /" | tee -a $OUT/gcm-share.txt
  done
done
GPUAES_MODULE_DIR=$B/emu $B/bench/gcm_engine_cpu --provider-path $B/emu --rounds 15 --sizes 4K,16K,64K,1M,4M \
  | tee $OUT/gcm-engine-cpu.txt
echo "total $(( $(date +%s) - t0 )) s"
