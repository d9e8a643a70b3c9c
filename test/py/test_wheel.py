#!/usr/bin/env python3
"""test_wheel.py - gpuaes inside a program that brings its own libcrypto: the
`cryptography` wheels' (static OpenSSL).  CI's OpenSSL matrix.

    test_wheel.py                 the cryptography this python3 imports (77 where none)
    test_wheel.py --wheel 46.0.7  a wheel pinned in wheels.txt (installed where missing)

gpuaes (the emulated module from GPUAES_MODULE_DIR) is loaded into the wheel's
OpenSSL through OPENSSL_CONF (default_properties = ?provider=gpuaes), every
update of two blocks or more sent to the emulated GPU.  Child processes of
the same wheel:
- "gpuaes", "keystream" (the same with CTR's keystream ahead, small windows)
  and "reference" (OPENSSL_CONF unset: the wheel's default provider) run one
  seeded differential through the cryptography API: AES-128, -192, -256 in
  ECB, CBC, CFB, CTR, GCM, both directions, random lengths and update splits,
  in place (update_into on one buffer), GCM with AAD in pieces and its tag
  checked, truncated and wrong, and the one-shot AESGCM.  Outputs and
  exceptions must be identical, bit for bit.  The emulator's report
  (GPUAES_EMU_REPORT) must show jobs of every GPU op in "gpuaes", keystream
  fills in "keystream", nothing in "reference": gpuaes was loaded, and its
  GPU path used.  All three read PEM keys whose AES-CBC decryption fails in
  the final (a partial block; a bad padding): the fallback's error, carried
  over by gpuaes, must be on the wheel's own stack as the default provider's
  is (read with the wheel's ERR_get_error: cryptography's cipher API drops a
  failing call's errors).
- "origin" (GPUAES_DEBUG on): which OpenSSL did the CPU work.  By default
  (fallback = application) the wheel's own default provider: version and
  code from the wheel (the debug line "CPU path: the default provider
  application 3.5.6 (.../_rust.abi3.so)"); with fallback = private the
  system libcrypto's.
- "fault": the GPU made to fail (GPUAES_FAULT): a call completes on the CPU
  with the right output and leaves gpuaes's "GPU failed ... completed on the
  CPU" error on the wheel's stack, once.

A pinned wheel that cannot be installed is skipped (77) only where pip's
index cannot be reached and CI is not set; with CI set it is a failure.
GPUAES_TEST_SEED sets the seed (printed), GPUAES_WHEEL_CASES the cases per
cipher (default 32).
"""
import argparse
import importlib.util
import os
import pickle
import random
import subprocess
import sys
import tempfile
import time

import wheels

CNF = """openssl_conf = openssl_init
[openssl_init]
providers = provider_sect
alg_section = algorithm_sect
[provider_sect]
default = default_sect
gpuaes = gpuaes_sect
[default_sect]
activate = 1
[gpuaes_sect]
module = {module}
activate = 1
[algorithm_sect]
default_properties = ?provider=gpuaes
"""
MODES = ("ECB", "CBC", "CFB", "CTR", "GCM")
GPU_OPS = ("ecb-enc", "ecb-dec", "ctr128", "cbc-dec", "cfb-dec", "gcm-enc", "gcm-dec")
# CTR's keystream ahead, windows that turn over constantly (test/evp/evp.cmake's
# knobs): it serves the updates below the offload threshold
KEYSTREAM = dict(GPUAES_OFFLOAD_MIN_BYTES="1M", GPUAES_KEYSTREAM="1", GPUAES_KEYSTREAM_RAMP_BYTES="4K", GPUAES_KEYSTREAM_MAX_WINDOW="64K",
                 GPUAES_KEYSTREAM_TOTAL_BYTES="1M", GPUAES_KEYSTREAM_MAX_CONTEXTS="16")
ERR_LIB_PROV = 57


# ---- children: they import the wheel ----

def pieces(rng, n, align):
    """Update boundaries: random cuts (empty pieces too), at block multiples where align."""
    cuts = sorted(rng.randrange(n + 1) for _ in range(rng.choice((0, 1, 2, 3, 5, 8))))
    if align:
        cuts = [c - c % 16 for c in cuts]
    bounds = [0] + cuts + [n]
    return list(zip(bounds, bounds[1:]))


def updates(ctx, data, parts, in_place, bs):
    if not in_place:
        return b"".join(ctx.update(data[a:b]) for a, b in parts)
    # update_into needs room for bs - 1 more bytes; output lands where its input was
    buf = bytearray(data) + bytearray(bs - 1)
    mv = memoryview(buf)
    w = 0
    for a, b in parts:
        w += ctx.update_into(mv[a:b], mv[w:b + bs - 1])
    return bytes(buf[:w])


def length(rng, block):
    r = rng.random()
    n = (rng.randrange(48) if r < 0.15 else rng.randrange(64 << 10) if r < 0.75
         else rng.randrange(64 << 10, 512 << 10) if r < 0.95
         else rng.randrange(1 << 20, (2 << 20) + 64))          # across the emulator's 1 MiB chunks
    if block and rng.random() < 0.9:
        n -= n % 16                                            # else the final raises
    return n


def counter_iv(rng):
    r = rng.random()
    if r < 0.2:                                                # the 128-bit counter wraps
        return ((1 << 128) - rng.randrange(1, 1 << 13)).to_bytes(16, "big")
    if r < 0.4:                                                # its low 32 bits wrap
        return rng.randbytes(12) + ((1 << 32) - rng.randrange(1, 1 << 13)).to_bytes(4, "big")
    return rng.randbytes(16)


def differential(seed, cases):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    try:                                   # moved there; gone from modes in 49.0.0
        from cryptography.hazmat.decrepit.ciphers.modes import CFB
    except ImportError:
        CFB = modes.CFB

    rng = random.Random(seed)
    res = []

    def rec(label, fn):
        try:
            res.append((label, fn()))
        except Exception as e:               # the same exception in both, or a difference
            res.append((label, "!" + type(e).__name__))

    for ks in (16, 24, 32):
        for mode in MODES:
            for i in range(cases):
                key = rng.randbytes(ks)
                block = mode in ("ECB", "CBC")
                n = length(rng, block)
                data = rng.randbytes(n)
                bs = 16 if block else 1
                tag = "AES-%d-%s #%d n=%d" % (ks * 8, mode, i, n)
                if mode != "GCM":
                    for enc in (True, False):
                        m = (modes.ECB() if mode == "ECB" else modes.CTR(counter_iv(rng)) if mode == "CTR"
                             else CFB(rng.randbytes(16)) if mode == "CFB" else modes.CBC(rng.randbytes(16)))
                        in_place = rng.random() < 0.4
                        parts = pieces(rng, n, block and in_place)
                        c = Cipher(algorithms.AES(key), m)
                        ctx = c.encryptor() if enc else c.decryptor()
                        what = "%s %s%s %d pieces" % (tag, "enc" if enc else "dec",
                                                      " in place" if in_place else "", len(parts))
                        rec(what, lambda: updates(ctx, data, parts, in_place, bs))
                        rec(what + " final", ctx.finalize)
                    continue
                iv = rng.randbytes(rng.choice((12, 12, 12, 8, 13, 16, 60, 128)))
                aad = [rng.randbytes(rng.choice((0, 1, 5, 13, 16, 100, 1000)))
                       for _ in range(rng.choice((0, 1, 1, 2, 3)))]
                in_place = rng.random() < 0.4
                parts = pieces(rng, n, False)
                ctx = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
                for a in aad:
                    ctx.authenticate_additional_data(a)
                what = "%s iv=%d aad=%s" % (tag, len(iv), [len(a) for a in aad])
                rec(what + " enc", lambda: updates(ctx, data, parts, in_place, 1) + ctx.finalize())
                ct = res[-1][1]
                if isinstance(ct, str):
                    continue
                full = ctx.tag
                res.append((what + " tag", full))
                for check in ("tag", "short tag", "wrong tag"):
                    t = full
                    if check == "short tag":
                        t = full[:rng.randrange(4, 16)]
                    elif check == "wrong tag":
                        t = bytearray(full)
                        t[rng.randrange(16)] ^= 1 << rng.randrange(8)
                        t = bytes(t)
                    d = Cipher(algorithms.AES(key), modes.GCM(iv, t, min_tag_length=len(t))).decryptor()
                    for a in aad:
                        d.authenticate_additional_data(a)
                    in_place = rng.random() < 0.4
                    parts = pieces(rng, len(ct), False)
                    rec("%s dec, %s" % (what, check), lambda: updates(d, ct, parts, in_place, 1))
                    rec("%s dec, %s: final" % (what, check), d.finalize)
                # the one-shot AEAD API (its own path into OpenSSL), a wrong tag too
                gcm = AESGCM(key)
                joined = b"".join(aad) or None
                rec(what + " AESGCM enc", lambda: gcm.encrypt(iv, data, joined))
                if isinstance(res[-1][1], bytes):
                    sealed = bytearray(res[-1][1])
                    rec(what + " AESGCM dec", lambda: gcm.decrypt(iv, bytes(sealed), joined))
                    sealed[-1] ^= 0x80
                    rec(what + " AESGCM dec, wrong tag", lambda: gcm.decrypt(iv, bytes(sealed), joined))
    return res


def pem_errors():
    """The wheel's error stack (library, reason) after reading PEM keys whose
    AES-128-CBC decryption fails in the final: a partial block, a bad padding."""
    import base64
    from cryptography.hazmat.bindings._rust import _openssl

    ffi, lib = _openssl.ffi, _openssl.lib
    out = []
    for n in (40, 48):                     # longer ones fail in the decoder, not the cipher
        pem = (b"-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n"
               b"DEK-Info: AES-128-CBC,00112233445566778899AABBCCDDEEFF\n\n"
               + base64.b64encode(bytes(range(n))) + b"\n-----END RSA PRIVATE KEY-----\n")
        while lib.ERR_get_error() != 0:
            pass
        bio = lib.BIO_new_mem_buf(pem, len(pem))
        key = lib.PEM_read_bio_PrivateKey(bio, ffi.NULL, ffi.NULL, ffi.new("char[]", b"password"))
        stack = []
        while True:
            code = lib.ERR_get_error()
            if code == 0:
                break
            reason = lib.ERR_reason_error_string(code)
            stack.append((code >> 23 & 0xff, lib.ERR_GET_REASON(code),
                          ffi.string(reason).decode() if reason != ffi.NULL else ""))
        out.append((n, key == ffi.NULL, stack))
        lib.BIO_free(bio)
    return out


def child_run(args):
    import cryptography
    from cryptography.hazmat.bindings._rust import openssl as ossl
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    if args.child != "reference":
        # The GPU starts in the background: one call starts it, then a moment
        Cipher(algorithms.AES(b"k" * 16), modes.CTR(b"i" * 16)).encryptor().update(bytes(1 << 16))
        time.sleep(0.3)
    result = {"cryptography": cryptography.__version__, "openssl": ossl.openssl_version_text(),
              "outputs": differential(args.seed, args.cases), "pem": pem_errors()}
    with open(args.out, "wb") as f:
        pickle.dump(result, f)
    return 0


def child_fault(args):
    from cryptography.hazmat.bindings._rust import openssl as ossl
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    capture = ossl.capture_error_stack
    failures = 0
    capture()                              # whatever start-up left
    key, iv, data = b"k" * 16, b"i" * 16, bytes(range(256)) * 4096
    ctr = modes.CTR(iv)
    # The emulated GPU starts in the background, and after a failure the
    # dispatcher keeps the CPU for a while: encrypt until a call met the GPU.
    deadline = time.monotonic() + 10
    while True:
        enc = Cipher(algorithms.AES(key), ctr).encryptor()
        out = enc.update(data) + enc.finalize()
        stack = capture()
        if stack or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    dec = Cipher(algorithms.AES(key), ctr).decryptor()
    if dec.update(out) + dec.finalize() != data:
        print("FAIL: CTR round trip differs")
        failures += 1
    ours = [e for e in stack if e.lib == ERR_LIB_PROV and b"operation fail" in e.reason_text]
    if len(ours) != 1 or len(stack) != 1:
        print("FAIL: expected gpuaes's GPU failure once on the wheel's stack, got %r" % (stack,))
        failures += 1
    return 1 if failures else 0


def child_origin(args):
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    Cipher(algorithms.AES(b"k" * 16), modes.CTR(b"i" * 16)).encryptor().update(bytes(64))
    return 0


# ---- the parent: never imports the wheel ----

def origins(env, cnf, fallback):
    """The "CPU path" lines of gpuaes's debug log in a child of the wheel
    (one per load: the system libcrypto may load gpuaes too)."""
    e = dict(env, OPENSSL_CONF=cnf, GPUAES_DEBUG="1")
    e.pop("GPUAES_FALLBACK", None)
    if fallback is not None:
        e["GPUAES_FALLBACK"] = fallback
    r = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", "origin"], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return r.returncode, [l.split("CPU path: the default provider ", 1)[1]
                          for l in r.stdout.splitlines() if "CPU path: the default provider " in l]


def check_origin(env, cnf, version):
    """The wheel's default provider does the CPU work by default, the system's with
    fallback = private, or where the wheel has none loaded (gpuaes alone in
    its configuration): the provider's own account (fallback.c, describe)."""
    failures = 0
    rc, app = origins(env, cnf, None)
    wheel_code = [o for o in app if o.startswith("application %s (" % version) and "_rust" in o]
    print("CPU path, default: %s" % app)
    if rc != 0 or not wheel_code:
        print("FAIL: expected the wheel's own default provider (OpenSSL %s) doing the CPU work" % version)
        failures += 1
    alone = cnf + ".alone"
    with open(cnf) as f, open(alone, "w") as g:
        g.write(f.read().replace("default = default_sect\n", ""))
    for what, conf, fallback in (("fallback = private", cnf, "private"),
                                 ("gpuaes alone", alone, None)):
        rc, priv = origins(env, conf, fallback)
        print("CPU path, %s: %s" % (what, priv))
        if rc != 0 or not priv or any(not o.startswith("private 3.") or "_rust" in o for o in priv):
            print("FAIL: expected the linked libcrypto's default provider (%s)" % what)
            failures += 1
    return failures

def spawn(kind, env, args, tmp, extra=None):
    out = os.path.join(tmp, kind + ".pickle")
    e = dict(env, GPUAES_EMU_REPORT=os.path.join(tmp, kind + ".report"), **(extra or {}))
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--seed", str(args.seed),
           "--cases", str(args.cases), "--out", out]
    r = subprocess.run(cmd, env=e, timeout=900)
    if r.returncode != 0:
        return None
    if kind == "fault":
        return {}
    with open(out, "rb") as f:
        return pickle.load(f)


def report(tmp, kind):
    path = os.path.join(tmp, kind + ".report")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return {op: int(n) for op, n in (line.split() for line in f)}


def compare(ref, got, under="gpuaes"):
    failures = 0
    if len(ref) != len(got):
        print("FAIL: %d results under %s, %d without" % (len(got), under, len(ref)))
        return 1
    for (label, a), (_, b) in zip(ref, got):
        if a == b:
            continue
        failures += 1
        if failures > 10:
            continue
        if isinstance(a, bytes) and isinstance(b, bytes):
            at = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
            print("FAIL: %s: %d bytes under %s, %d without, first difference at %d"
                  % (label, len(b), under, len(a), at))
        else:
            print("FAIL: %s: %s under %s, %s without"
                  % (label, b if isinstance(b, str) else "%d bytes" % len(b), under,
                     a if isinstance(a, str) else "%d bytes" % len(a)))
    return failures


def ci():
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def parent(args):
    env = dict(os.environ)
    env.pop("OPENSSL_CONF", None)
    env.pop("GPUAES_FAULT", None)
    expect = None
    if args.wheel:
        pinned = wheels.pins()
        if args.wheel not in pinned:
            print("FAIL: cryptography %s is not pinned in wheels.txt" % args.wheel)
            return 1
        expect = pinned[args.wheel][0]
        why = wheels.install(args.wheel)
        if why is not None:
            print("cannot install cryptography %s: %s" % (args.wheel, why))
            if ci():
                print("FAIL: CI is set, and CI has the network: the wheel must be there")
                return 1
            if not wheels.index_reachable():
                print("skipped: pip's index is unreachable (offline)")
                return 77
            print("FAIL: the index answers, yet the wheel would not install")
            return 1
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (wheels.target(args.wheel), env.get("PYTHONPATH")) if p)
    elif importlib.util.find_spec("cryptography") is None:
        print("skipped: this python3 has no cryptography")
        return 77

    module = os.path.abspath(os.path.join(os.environ.get("GPUAES_MODULE_DIR", "."), "gpuaes.so"))
    print("seed %d (GPUAES_TEST_SEED reproduces it), %d cases per cipher" % (args.seed, args.cases))
    with tempfile.TemporaryDirectory() as tmp:
        cnf = os.path.join(tmp, "gpuaes.cnf")
        with open(cnf, "w") as f:
            f.write(CNF.format(module=module))
        gpu = dict(OPENSSL_CONF=cnf, GPUAES_OFFLOAD_MIN_BYTES="0", GPUAES_DISPATCH="force", GPUAES_GPU_START_BYTES="0",
                   GPUAES_KEYSTREAM="0", GPUAES_EMU_SEED=str(args.seed))
        t0 = time.monotonic()
        ref = spawn("reference", env, args, tmp)
        got = spawn("gpuaes", env, args, tmp, gpu)
        ks = spawn("keystream", env, args, tmp, dict(gpu, **KEYSTREAM))
        fault_ok = spawn("fault", env, args, tmp, dict(gpu, GPUAES_FAULT="alloc")) is not None
        if ref is None or got is None or ks is None:
            print("FAIL: a child failed")
            return 1
        print("cryptography %s, %s; %d results each (%.1f s)"
              % (got["cryptography"], got["openssl"], len(got["outputs"]), time.monotonic() - t0))
        failures = 0 if fault_ok else 1
        if args.wheel and (got["cryptography"] != args.wheel or ref["cryptography"] != args.wheel
                           or not got["openssl"].startswith("OpenSSL %s " % expect)):
            print("FAIL: expected cryptography %s with OpenSSL %s" % (args.wheel, expect))
            failures += 1
        failures += check_origin(env, cnf, got["openssl"].split()[1])
        failures += compare(ref["outputs"], got["outputs"])
        failures += compare(ref["outputs"], ks["outputs"], "keystream")
        jobs, fills, none = report(tmp, "gpuaes"), report(tmp, "keystream"), report(tmp, "reference")
        print("emulated GPU: %s; with keystream: %s" % (jobs, fills))
        if (jobs is None or any(jobs.get(op, 0) == 0 for op in GPU_OPS) or none is not None
                or fills is None or fills.get("keystream-fills", 0) == 0):
            print("FAIL: expected GPU jobs of every op under gpuaes, keystream fills with keystream,"
                  " no gpuaes without (%s)" % (none,))
            failures += 1
        for (n, _, want), (_, _, have), (_, _, have_ks) in zip(ref["pem"], got["pem"], ks["pem"]):
            print("PEM, %d bytes: %s" % (n, have))
            if [e[:2] for e in have] != [e[:2] for e in want] or have_ks != have or not any(
                    e[0] == ERR_LIB_PROV for e in want):
                print("FAIL: the default provider's errors were %s" % (want,))
                failures += 1
    print("wheel: %s" % ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--wheel")
    p.add_argument("--child", choices=("reference", "gpuaes", "keystream", "fault", "origin"))
    p.add_argument("--seed", type=int, default=int(os.environ.get("GPUAES_TEST_SEED", "0x776865656c"), 0))
    p.add_argument("--cases", type=int, default=int(os.environ.get("GPUAES_WHEEL_CASES", "32")))
    p.add_argument("--out")
    args = p.parse_args()
    if args.child == "fault":
        return child_fault(args)
    if args.child == "origin":
        return child_origin(args)
    if args.child:
        return child_run(args)
    return parent(args)


if __name__ == "__main__":
    sys.exit(main())
