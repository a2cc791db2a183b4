#!/usr/bin/env python3
"""Prints the Files section of docs/architecture.md: every source file outside test/ (C, headers,
Go, proto), grouped by directory, with the first sentence of the comment it opens with.

One source: a file's purpose is written once, in its own opening comment; hack/gen-docs.sh puts
this output between the markers of docs/architecture.md and, with --check, fails while it is
stale (a file added, removed or renamed, or its opening sentence changed). A file without an
opening comment is an error: say what it is for where it starts.
"""
import re
import subprocess
import sys

EXTS = (".c", ".h", ".go", ".proto")
MAX = 160  # characters of a purpose before it is cut at a clause boundary


def tracked(root):
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
        check=True, capture_output=True, text=True).stdout.split("\n")
    return sorted({f for f in out if f.endswith(EXTS) and not f.startswith("test/")
                   and "/node_modules/" not in f and "/testdata/" not in f})


def opening_comment(text):
    """The first paragraph of the file's first comment (C block, or // lines for Go and proto)."""
    m = re.match(r"\s*/\*(.*?)\*/", text, re.S)
    if m:
        lines = [l.strip().lstrip("*").strip() for l in m.group(1).split("\n")]
    else:
        lines = []
        for l in text.split("\n"):
            s = l.strip()
            if s.startswith("//"):
                lines.append(s[2:].strip())
            elif s == "" and not lines:
                continue
            else:
                break
    para = []
    for l in lines:
        if not l:
            if para:
                break
            continue
        para.append(l)
    return " ".join(para)


def purpose(path, text):
    t = opening_comment(text)
    # Drop a leading "name.c - " / "name.h: " / "Package x " naming the file itself.
    name = path.rsplit("/", 1)[-1]
    base = "(" + re.escape(name) + "|" + re.escape(name.rsplit(".", 1)[0]) + ")"
    t = re.sub(r"^(\S*/)?" + base + r"\s*(\([^)]*\))?\s*[-:—]+\s*", "", t)
    t = re.sub(r"^Package \w+ ", "", t)
    m = re.search(r"\.(\s|$)", t)
    if m:
        t = t[:m.start()]
    if len(t) > MAX:
        cut = max(t.rfind("; ", 0, MAX), t.rfind(": ", 0, MAX), t.rfind(" (", 0, MAX))
        t = t[:cut] if cut > 40 else t[:t.rfind(" ", 0, MAX)] + " ..."
    t = t.rstrip(" ,;:")
    return t.replace("|", "\\|")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    missing = []
    groups = {}
    for f in tracked(root):
        with open(f"{root}/{f}", encoding="utf-8") as fh:
            p = purpose(f, fh.read())
        if not p:
            missing.append(f)
        groups.setdefault(f.rsplit("/", 1)[0] if "/" in f else ".", []).append((f, p))
    if missing:
        for f in missing:
            print(f"doc-files: {f} does not open with a comment saying what it is for",
                  file=sys.stderr)
        sys.exit(1)
    for d in sorted(groups):
        print(f"\n**{d}/**\n\n| file | what it is |\n|---|---|")
        for f, p in groups[d]:
            print(f"| `{f.rsplit('/', 1)[-1]}` | {p} |")


if __name__ == "__main__":
    main()
