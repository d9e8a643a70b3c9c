#!/usr/bin/env python3
"""test_wheel_errors.py - an error raised inside gpuaes reaches the error stack
of a program with its own libcrypto: the `cryptography` wheel's (static).

gpuaes (the emulated module from GPUAES_MODULE_DIR) is loaded into the wheel's
OpenSSL through OPENSSL_CONF, with every call sent to the emulated GPU and the
GPU made to fail (GPUAES_FAULT): the call completes on the CPU with the right
output and leaves gpuaes's "GPU failed ... completed on the CPU" error, which
must be on the wheel's own stack once.  Under the libcrypto gpuaes links it
would sit on a queue the wheel never reads.

Exits 77 (skipped) where the wheel is not installed.  (A failing call's
errors, the fallback's carried over included, cannot be seen from Python:
cryptography takes them off the stack into its exception and drops them.)
"""
import os
import sys
import tempfile
import time

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


def main():
    module = os.path.join(os.environ.get("GPUAES_MODULE_DIR", "."), "gpuaes.so")
    with tempfile.NamedTemporaryFile("w", suffix=".cnf", delete=False) as f:
        f.write(CNF.format(module=os.path.abspath(module)))
        cnf = f.name
    # Before the wheel's OpenSSL initialises (at import): it reads these then.
    os.environ.update(OPENSSL_CONF=cnf, GPUAES_OFFLOAD_MIN_BYTES="0",
                      GPUAES_GPU_START_BYTES="0", GPUAES_FAULT="alloc", GPUAES_KEYSTREAM="0")
    try:
        from cryptography.hazmat.bindings._rust import openssl as ossl
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
        capture = ossl.capture_error_stack
    except (ImportError, AttributeError) as e:
        print("skipped: no usable cryptography wheel (%s)" % e)
        return 77
    finally:
        os.unlink(cnf)
    print(ossl.openssl_version_text())
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
    ours = [e for e in stack if e.lib == 57 and b"operation fail" in e.reason_text]
    if len(ours) != 1 or len(stack) != 1:
        print("FAIL: expected gpuaes's GPU failure once on the wheel's stack, got %r" % (stack,))
        failures += 1
    print("errors: %s" % ("FAILED" if failures else "passed"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
