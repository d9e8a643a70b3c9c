#!/usr/bin/env python3
"""Trim a NIST CAVP GCM .rsp file to a few vectors per parameter group.

Every [Keylen/IVlen/PTlen/AADlen/Taglen] group is kept (so every parameter
combination stays covered); inside a group only the first PASS vectors and
the first FAIL vectors are kept.  Lines are copied byte for byte (the CAVP
files use CRLF), so the output is a line subset of the original.

usage: trim_gcm.py IN OUT PASS_PER_GROUP FAIL_PER_GROUP
"""
import sys


def main():
    src, dst, npass, nfail = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    with open(src, "rb") as f:
        lines = f.read().splitlines(keepends=True)

    out, entry, kept_pass, kept_fail = [], None, 0, 0

    def flush():
        nonlocal entry, kept_pass, kept_fail
        if entry is None:
            return
        failing = any(l.strip() == b"FAIL" for l in entry)
        if failing and kept_fail < nfail:
            kept_fail += 1
            out.extend(entry)
        elif not failing and kept_pass < npass:
            kept_pass += 1
            out.extend(entry)
        entry = None

    for line in lines:
        s = line.strip()
        if s.startswith(b"Count"):
            flush()
            entry = [line]
        elif s.startswith(b"["):
            flush()
            if s.startswith(b"[Keylen"):       # a new group starts at [Keylen = ...]
                kept_pass = kept_fail = 0
            out.append(line)
        elif entry is not None:
            entry.append(line)
        else:
            out.append(line)               # header comments and blank lines
    flush()
    with open(dst, "wb") as f:
        f.writelines(out)


if __name__ == "__main__":
    main()
