"""sizes.py - byte counts as the benches write them, for the scripts: the forms of
test/support/size.h ("4096", "16K", "64M", "1G"; K/M/G = 2^10/2^20/2^30, either
case, optionally followed by "iB" or "B": "1KiB", "64MB", "16B")."""

import re

_SIZE = re.compile(r"\s*(\d+)(?:([KMG])(?:IB|B)?|B)?", re.IGNORECASE)
_SHIFT = {"K": 10, "M": 20, "G": 30}


def parse_size(s):
    """Bytes in s; ValueError when s is not a size."""
    m = _SIZE.fullmatch(s)
    if m is None:
        raise ValueError("not a size: %r (e.g. 4096, 16K, 64M, 1G)" % s)
    unit = m.group(2)
    return int(m.group(1)) << (_SHIFT[unit.upper()] if unit else 0)


def size_label(n):
    """n as "1G", "64M", "16K" when it is a whole number of those, else in bytes."""
    n = int(n)
    for shift, unit in ((30, "G"), (20, "M"), (10, "K")):
        if n >= (1 << shift) and n % (1 << shift) == 0:
            return "%d%s" % (n >> shift, unit)
    return str(n)
