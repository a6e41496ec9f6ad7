#!/usr/bin/env python3
"""Compares two JSONL outputs record by record: same rows, same values, floats
within 1e-9 relative. Exit 0 when they match."""
import json
import sys


def same(a, b):
    if isinstance(a, float) or isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def main():
    with open(sys.argv[1], encoding="utf-8") as fa, open(sys.argv[2], encoding="utf-8") as fb:
        rows = 0
        for la, lb in zip(fa, fb):
            rows += 1
            if not same(json.loads(la), json.loads(lb)):
                print("differ at row %d" % rows)
                return 1
        if fa.readline() or fb.readline():
            print("row counts differ")
            return 1
    print("identical records: %d" % rows)
    return 0


sys.exit(main())
