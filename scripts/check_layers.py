#!/usr/bin/env python3
"""Fails when a source file includes a layer above its own, or another folder's private
header (docs/ARCHITECTURE.md, "Layers").

  scripts/check_layers.py [REPO_ROOT]

The layers, lowest first: each folder of src/ (and of include/djshard/) may include its own
headers and those of the layers below it, never one above. A folder's private headers
(src/<folder>/...) are its own: another folder reaches it through include/djshard/<folder>/.
apps/ and tests/ may include any. Prints every offending include as FILE:LINE: and exits 1
when there is one.
"""
import os
import re
import sys

LAYERS = ["common", "io", "recipe", "model", "ops", "exec", "preflight", "job", "store", "coord"]
INCLUDE = re.compile(r'^\s*#\s*include\s+"(djshard|src)/([a-z_]+)/')


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for base in ("src", os.path.join("include", "djshard")):
        for dirpath, _, files in os.walk(os.path.join(root, base)):
            rel = os.path.relpath(dirpath, os.path.join(root, base)).split(os.sep)
            layer = rel[0]
            if layer not in rank:
                if layer != ".":
                    bad.append("%s: folder '%s' is not a known layer (add it to %s)"
                               % (dirpath, layer, __file__))
                continue
            for name in sorted(files):
                path = os.path.join(dirpath, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or m.group(2) not in rank:
                            continue
                        rel_path = os.path.relpath(path, root)
                        if rank[m.group(2)] > rank[layer]:
                            bad.append("%s:%d: layer '%s' includes '%s', a layer above it"
                                       % (rel_path, n, layer, m.group(2)))
                        elif m.group(1) == "src" and m.group(2) != layer:
                            bad.append("%s:%d: layer '%s' includes a private header of '%s' "
                                       "(use include/djshard/%s/)"
                                       % (rel_path, n, layer, m.group(2), m.group(2)))
    for line in bad:
        print(line)
    if bad:
        print("layers, lowest first: " + " < ".join(LAYERS))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
