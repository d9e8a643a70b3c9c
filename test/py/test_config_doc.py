#!/usr/bin/env python3
"""docs/CONFIG.md against the code: test_config_doc.py SOURCE_DIR

1. The knob table ("## Knobs") has one row per entry of `knobs[]` in
   provider/settings.c and nothing else: the openssl.cnf name and the
   environment name of each, its range and its default (the first word of
   those cells, where the code holds a value rather than words).
2. Each old name in `aliases[]` is documented.
3. Every GPUAES_* / GPUAESD_* variable the product reads with getenv or
   secure_getenv (provider/, service/, cuda/, include/ and their subfolders) is documented, and
   every such name CONFIG.md gives in backquotes is one of those, a knob or
   a compile-time switch the code tests (#ifdef).

Exit 0 when all hold, 1 with a list of what differs.
"""
import glob
import os
import re
import sys

SIZE_MAX = 2**64 - 1
NAME_RE = re.compile(r"^GPUAESD?_[A-Z0-9_]*[A-Z0-9]$")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def split_top(s, sep=","):
    """s split at `sep` outside parentheses, braces and strings."""
    parts, depth, cur, quoted = [], 0, "", False
    for ch in s:
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "({[":
            depth += 1
        elif not quoted and ch in ")}]":
            depth -= 1
        if ch == sep and depth == 0 and not quoted:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def block(text, start_re):
    """The text between the braces of the initializer that start_re begins."""
    m = re.search(start_re, text)
    if not m:
        sys.exit("test_config_doc: no match for %r" % start_re)
    i = text.index("{", m.end() - 1)
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1:j]
    sys.exit("test_config_doc: unbalanced %r" % start_re)


def defines(paths):
    d = {}
    for p in paths:
        for m in re.finditer(r"^#define\s+([A-Z_][A-Z0-9_]*)\s+(.+)$", strip_comments(open(p).read()), re.M):
            d[m.group(1)] = m.group(2).strip()
    return d


def evaluate(expr, macros, depth=0):
    e = expr
    for _ in range(8):
        e2 = re.sub(r"\b([A-Z_][A-Z0-9_]*)\b",
                    lambda m: "(%s)" % macros[m.group(1)] if m.group(1) in macros else m.group(1), e)
        if e2 == e:
            break
        e = e2
    e = re.sub(r"\(\s*(size_t|uint64_t|int|long|unsigned)\s*\)", "", e)
    e = re.sub(r"\b(\d+)(?:ULL|UL|LL|L|U)\b", r"\1", e)
    e = re.sub(r"\bK_\b", "1024", e)
    e = re.sub(r"\bSIZE_MAX\b", str(SIZE_MAX), e)
    if not re.fullmatch(r"[0-9\s()+\-*<>]+", e):
        raise ValueError("cannot evaluate %r (%r)" % (expr, e))
    return eval(e)  # digits and operators only


def fmt_size(v):
    for shift, suffix in ((30, "G"), (20, "M"), (10, "K")):
        if v >= (1 << shift) and v % (1 << shift) == 0:
            return "%d%s" % (v >> shift, suffix)
    return str(v)


def fmt_count(v):
    if v >= (1 << 20) and v & (v - 1) == 0:
        return "2^%d" % (v.bit_length() - 1)
    return str(v)


def enum_names(text, array):
    body = block(text, r"static const char \*const %s\[\]\s*=\s*\{" % re.escape(array))
    return [m.group(1) for m in re.finditer(r'=\s*"([^"]+)"', body)], \
        {m.group(1): m.group(2) for m in re.finditer(r'\[(\w+)\]\s*=\s*"([^"]+)"', body)}


def knobs_from_code(src):
    text = strip_comments(open(os.path.join(src, "provider/settings.c")).read())
    macros = defines(glob.glob(os.path.join(src, "include/*.h")))
    body = block(text, r"static const knob knobs\[\]\s*=\s*\{")
    entries, i = [], 0
    while i < len(body):
        m = re.compile(r"(BOOL_KNOB|SIZE_KNOB|COUNT_KNOB)\s*\(|\{").search(body, i)
        if not m:
            break
        open_ch = "(" if m.group(0) != "{" else "{"
        close_ch = ")" if open_ch == "(" else "}"
        j, depth = m.end() - 1, 0
        for k in range(j, len(body)):
            depth += body[k] == open_ch
            depth -= body[k] == close_ch
            if depth == 0:
                break
        args = split_top(body[j + 1:k])
        entries.append((m.group(1) or "BRACE", args))
        i = k + 1
    knobs = {}
    for form, a in entries:
        unq = lambda s: s.strip().strip('"')
        k = {"cnf": unq(a[0]), "env": unq(a[1]), "text": None, "names": None}
        if form == "BOOL_KNOB":
            k.update(kind="KNOB_BOOL", min=0, max=1, default=evaluate(a[2], macros))
        elif form in ("SIZE_KNOB", "COUNT_KNOB"):
            k.update(kind="KNOB_SIZE" if form == "SIZE_KNOB" else "KNOB_COUNT",
                     min=evaluate(a[2], macros), max=evaluate(a[3], macros), default=evaluate(a[4], macros))
        else:
            k["kind"] = a[2]
            if a[8 - 1] != "NULL":                    # names
                order, by_enum = enum_names(text, a[7])
                k.update(names=order, default=by_enum.get(a[5]), min=None, max=None)
            else:
                k.update(min=evaluate(a[3], macros), max=evaluate(a[4], macros), default=evaluate(a[5], macros))
            if a[6] != "NULL":
                k["text"] = unq(a[6])
        knobs[k["cnf"]] = k
    aliases = re.findall(r'\{\s*"([^"]+)"\s*,\s*"([^"]+)"\s*,\s*"([^"]+)"\s*\}',
                         block(text, r"\}\s*aliases\[\]\s*=\s*\{"))
    return knobs, aliases


def expected_range(k):
    if k["kind"] == "KNOB_BOOL":
        return "switch"
    if k["names"] is not None:
        return ", ".join(k["names"])
    if k["min"] == 0 and k["max"] >= SIZE_MAX - 1:
        return "size"
    f = fmt_size if k["kind"] == "KNOB_SIZE" else fmt_count
    return "%s–%s" % (f(k["min"]), f(k["max"]))


def expected_default(k):
    if k["text"] is not None:
        return None                     # words in the code: the doc's words are free
    if k["kind"] == "KNOB_BOOL":
        return "on" if k["default"] else "off"
    if k["names"] is not None:
        return k["default"]
    return (fmt_size if k["kind"] == "KNOB_SIZE" else fmt_count)(k["default"])


def cell_words(cell):
    return cell.replace("`", "").strip()


def doc_knob_rows(doc):
    m = re.search(r"^## Knobs\s*$(.*?)(?=^#)", doc, re.M | re.S)
    if not m:
        return None
    rows = []
    for line in m.group(1).splitlines():
        if not line.startswith("|") or line.startswith("|---") or "openssl.cnf" in line:
            continue
        if not line.startswith("| `"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(cells)
    return rows


def env_reads(src):
    names = set()
    files = []
    for d, exts in (("provider", ("c", "h")), ("service", ("c", "h")), ("include", ("h",)),
                    ("cuda", ("c", "cpp", "cu", "cuh", "h"))):
        for e in exts:
            files += glob.glob(os.path.join(src, d, "**", "*." + e), recursive=True)  # cuda/ has subfolders
    for p in files:
        for m in re.finditer(r'\b(?:secure_)?getenv\s*\(\s*"([^"]+)"\s*\)', open(p).read()):
            if NAME_RE.match(m.group(1)):
                names.add(m.group(1))
    return names


def build_switches(src):
    """Compile-time definitions the code tests (#ifdef NAME): a doc may name them."""
    names = set()
    for p in (glob.glob(os.path.join(src, "provider", "**", "*.[ch]"), recursive=True)
              + glob.glob(os.path.join(src, "include", "*.h"))):
        names.update(m for m in re.findall(r"^#\s*if(?:n?def)?\s+(?:defined\s*\(?\s*)?(\w+)", open(p).read(), re.M)
                     if NAME_RE.match(m))
    return names


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    doc_path = os.path.join(src, "docs/CONFIG.md")
    doc = open(doc_path).read()
    knobs, aliases = knobs_from_code(src)
    errors = []
    if len(knobs) < 10:
        errors.append("only %d knobs parsed from provider/settings.c: the parser is out of date" % len(knobs))

    rows = doc_knob_rows(doc)
    if rows is None:
        errors.append("docs/CONFIG.md has no '## Knobs' section")
        rows = []
    seen = set()
    for cells in rows:
        if len(cells) != 5:
            errors.append("knob row with %d cells, not 5: %s" % (len(cells), cells[0]))
            continue
        cnf, env, _, rng, dflt = (cell_words(c) for c in cells)
        if cnf in seen:
            errors.append("%s: documented twice" % cnf)
        seen.add(cnf)
        k = knobs.get(cnf)
        if k is None:
            errors.append("%s (%s): documented, but not in provider/settings.c's knobs[]" % (cnf, env))
            continue
        if env != k["env"]:
            errors.append("%s: documented environment name %s, the code's %s" % (cnf, env, k["env"]))
        want = expected_range(k)
        got = rng.split(" (")[0].strip()
        if k["names"] is not None:
            if sorted(x.strip() for x in got.split(",")) != sorted(k["names"]):
                errors.append("%s: documented values '%s', the code's '%s'" % (cnf, got, want))
        elif got != want:
            errors.append("%s: documented range '%s', the code's '%s'" % (cnf, got, want))
        want = expected_default(k)
        if want is not None and (dflt.split() or [""])[0].rstrip(",;:") != want:
            errors.append("%s: documented default '%s', the code's '%s'" % (cnf, dflt, want))
        if not dflt:
            errors.append("%s: no default documented" % cnf)
    for cnf, k in knobs.items():
        if cnf not in seen:
            errors.append("%s (%s): in provider/settings.c's knobs[], not in docs/CONFIG.md's knob table"
                          % (cnf, k["env"]))

    quoted = set()
    for span in re.findall(r"`([^`\n]+)`", doc):
        name = span.split("=")[0].strip()
        if NAME_RE.match(name):
            quoted.add(name)
    for new, old_cnf, old_env in aliases:
        for old in (old_cnf, old_env):
            if "`%s`" % old not in doc:
                errors.append("old name %s (of %s) is not documented" % (old, new))
    reads = env_reads(src)
    known = {k["env"] for k in knobs.values()} | {a[2] for a in aliases} | reads | build_switches(src)
    for name in sorted(reads - quoted):
        errors.append("%s: read by the code (getenv), not documented" % name)
    for name in sorted(quoted - known):
        errors.append("%s: documented, but neither a knob nor read by the code" % name)

    if errors:
        print("docs/CONFIG.md does not match the code:")
        for e in errors:
            print("  " + e)
        return 1
    print("docs/CONFIG.md: %d knobs, %d old names, %d other variables: all documented, nothing else"
          % (len(knobs), len(aliases) * 2, len(reads)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
