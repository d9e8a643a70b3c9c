#!/bin/bash
# device call (session 26, ninth): the short `openssl enc` of 64 MiB with keystream windows through the
# service: wall and minor page faults per variant (window size, DMA registration off, ramp)
export PATH=/usr/local/cuda/bin:$PATH
set -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s)
( cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null && cmake --build build -j16 2>&1 | grep -E "error|warning:" ; echo build rc=$? ) > $OUT/build.log 2>&1
echo "build $(( $(date +%s) - t0 )) s"; tail -1 $OUT/build.log
B=$PWD/build
CNF=$(mktemp); sed "s|^module *=.*|module = $B/gpuaes.so|" openssl.cnf.example > $CNF
head -c 64M /dev/urandom > /dev/shm/in64
cat > /tmp/runs.py <<'PY'
import os, sys, time, subprocess, statistics
K="000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"; IV="00000000000000000000000000fffff0"
cnf, d = sys.argv[1], sys.argv[2]
argv = ["openssl", "enc", "-aes-256-ctr", "-K", K, "-iv", IV, "-in", "/dev/shm/in64", "-out", "/dev/shm/out64"]
base = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
svc = dict(base, OPENSSL_CONF=cnf, GPUAES_GPU_BACKEND="service", GPUAES_SERVICE_DIR=d)
variants = [("default", base), ("ks", svc), ("noks", dict(svc, GPUAES_KEYSTREAM="0")),
            ("ks-win1M", dict(svc, GPUAES_KEYSTREAM_MAX_WINDOW="1M")),
            ("ks-ramp4M", dict(svc, GPUAES_KEYSTREAM_RAMP_BYTES="4M")),
            ("inproc", dict(base, OPENSSL_CONF=cnf, GPUAES_GPU_BACKEND="inprocess"))]
res = {n: [] for n, _ in variants}
for i in range(7):
    for n, env in variants:
        t = time.monotonic(); p = subprocess.Popen(argv, env=env, stderr=subprocess.DEVNULL)
        _, st, ru = os.wait4(p.pid, 0); w = (time.monotonic() - t) * 1000
        res[n].append((w, ru.ru_minflt, ru.ru_utime + ru.ru_stime))
for n, _ in variants:
    r = res[n]
    print("%-10s wall %6.1f ms  minflt %7d  cpu %6.1f ms" % (n, statistics.median(x[0] for x in r),
          statistics.median(x[1] for x in r), 1000 * statistics.median(x[2] for x in r)))
PY
for dma in 1 0; do
  D=$(mktemp -d)/s
  GPUAESD_DMA=$dma $B/gpuaesd --socket-dir $D; sleep 1
  echo "== service DMA registration $dma"; GPUAES_SERVICE_PATH=$B/gpuaesd python3 /tmp/runs.py $CNF $D | tee -a $OUT/runs-dma$dma.txt
  $B/gpuaesd --socket-dir $D --status > $OUT/status-dma$dma.txt; kill $(sed -n 's/^gpuaesd: serving, pid \([0-9]*\).*/\1/p' $OUT/status-dma$dma.txt)
done
which perf >/dev/null 2>&1 && echo "perf: yes" || echo "perf: no"
echo "total $(( $(date +%s) - t0 )) s"
