#!/usr/bin/env python3
"""wheels.py - the OpenSSL matrix's `cryptography` wheels (wheels.txt): where
each is installed, and installing it (pip, --require-hashes, one directory per
version: the wheels cannot share one).

    wheels.py install      installs every pinned version that is missing
                           (scripts/deps.sh, for scripts/test.sh)

The directory: $GPUAES_WHEEL_DIR, else ~/.cache/gpuaes/wheels (XDG_CACHE_HOME
honoured); one subdirectory per version and Python version.
"""
import importlib.util
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.parse

PINS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheels.txt")


def pins():
    """{cryptography version: (OpenSSL version, its requirement block)} from wheels.txt."""
    out, ossl, block = {}, None, None
    with open(PINS) as f:
        for line in f:
            m = re.match(r"# OpenSSL (\S+)$", line.strip())
            if m:
                ossl = m.group(1)
                continue
            m = re.match(r"cryptography==(\S+)", line)
            if m:
                block = [line]
                out[m.group(1)] = (ossl, block)
            elif block is not None and line.startswith(" "):
                block.append(line)
            else:
                block = None
    return out


def target(version):
    base = os.environ.get("GPUAES_WHEEL_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gpuaes", "wheels")
    return os.path.join(base, "cryptography-%s-py%d.%d" % (version, *sys.version_info[:2]))


def installed(version):
    return os.path.isfile(os.path.join(target(version), "cryptography", "__init__.py"))


def install(version):
    """Installs the pinned wheel (and cffi, where this Python has none: the
    wheel's bindings import it); returns None, or why it could not."""
    if installed(version):
        return None
    dest = target(version)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".tmp-", dir=os.path.dirname(dest))
    try:
        req = os.path.join(tmp, "requirements.txt")
        with open(req, "w") as f:
            f.writelines(pins()[version][1])
        pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               "--no-deps", "--only-binary=:all:", "--target", os.path.join(tmp, "t")]
        steps = [pip + ["--require-hashes", "-r", req]]
        if importlib.util.find_spec("_cffi_backend") is None:
            steps.append(pip + ["cffi"])
        for cmd in steps:
            r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                return "pip failed: %s" % r.stdout.strip()[-2000:]
        try:
            os.rename(os.path.join(tmp, "t"), dest)   # whole, or not at all
        except OSError:
            if not installed(version):                # else another process was first
                raise
        return None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def index_reachable():
    """Whether pip's index (its configuration's, else PyPI's) answers a TCP
    connection: the network is there."""
    r = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    m = re.search(r"^\S*index-url='([^']+)'", r.stdout, re.M)
    u = urllib.parse.urlparse(m.group(1) if m else "https://pypi.org/simple")
    try:
        socket.create_connection((u.hostname, u.port or (443 if u.scheme == "https" else 80)),
                                 timeout=10).close()
        return True
    except OSError:
        return False


def main(argv):
    if argv[1:] != ["install"]:
        print(__doc__)
        return 2
    failed = 0
    for version in pins():
        why = install(version)
        print("cryptography %s: %s" % (version, why or target(version)))
        failed += why is not None
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
