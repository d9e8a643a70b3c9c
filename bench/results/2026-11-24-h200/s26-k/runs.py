# runs.py CNF SOCKETDIR - a short `openssl enc -aes-256-ctr` of 64 MiB, 7 runs per variant, interleaved:
# median wall, minor faults and CPU time
import os, sys, time, subprocess, statistics
K="000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"; IV="00000000000000000000000000fffff0"
cnf, d = sys.argv[1], sys.argv[2]
argv = ["openssl", "enc", "-aes-256-ctr", "-K", K, "-iv", IV, "-in", "/dev/shm/in64", "-out", "/dev/shm/out64"]
base = {k: v for k, v in os.environ.items() if k != "OPENSSL_CONF"}
svc = dict(base, OPENSSL_CONF=cnf, GPUAES_GPU_BACKEND="service", GPUAES_SERVICE_DIR=d)
variants = [("default", base), ("ks", svc), ("noks", dict(svc, GPUAES_KEYSTREAM="0")),
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
