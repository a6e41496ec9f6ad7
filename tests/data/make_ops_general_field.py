#!/usr/bin/python3
"""Writes tests/data/ops-general-field.jsonl: reference vectors for
Data-Juicer's general_field_filter, in the layout of ops.jsonl (see
ops-vectors-README.md, section "General field filter").

What it runs
------------
Data-Juicer's own code, unchanged, imported from a Data-Juicer checkout given
on the command line:
  data_juicer/ops/filter/general_field_filter.py (GeneralFieldFilter and its
  ExpressionTransformer), data_juicer/utils/constant.py (Fields, StatsKeys)
  tests/ops/filter/test_general_field_filter.py (unit tests, harvested for
  their records, conditions and expected kept texts)
Only the framework around them is replaced by stand-ins (install_stubs, and
dj_stand_ins.py, shared with the other make_ops_*.py):
- data_juicer.ops.base_op: OPERATORS registry and a Filter base whose
  __init__ takes *args, **kwargs (general_field_filter uses nothing of it).
- loguru / zstandard (imported by constant.py, unused here): empty stand-ins
  when not installed.
- for harvesting the unit tests: NestedDataset / DataJuicerTestCaseBase
  stand-ins; the test's _run_general_field_filter helper is replaced by a
  recorder (op, samples, expected kept rows). test_invalid_condition runs
  as written (its assertRaises(ValueError) passes against the real code).

How each (condition, record) pair is run, as the framework runs a
single-sample filter:
  op = GeneralFieldFilter(filter_condition=C)       # once per condition
  sample = deepcopy(record); sample.setdefault("__dj__stats__", {})
  sample = op.compute_stats_single(sample)
  keep = op.process_single(sample)
  vector: {"op", "args": {"filter_condition": C}, "input": record (as it was
  before the run), "output_text": null, "stats": sample["__dj__stats__"],
  "keep": keep}
- An exception in compute/process: "error": "<Type>: <message>", stats and
  keep null. A constructor exception: ONE vector for the condition, with
  "input": null and the error (there is nothing to run the records on).
- stats / keep values that JSON cannot hold (DJ can return a bound method,
  e.g. for `text.upper`) are written as {"$py": "<type name>", "repr":
  "<repr with ' at 0x...' removed>"}; a container that holds itself would be
  {"$py": "circular"} (no vector here has one).

Vectors: every condition of CONDITIONS on every record of RECORDS (ids
gff-NN, in that order), then the unit-test cases (their own records, with an
added id dj-unit-general_field_filter-NN, and their own conditions).

Versions used for the committed file
------------------------------------
- Data-Juicer 1.4.3, mirror commit c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b
- Debian bookworm /usr/bin/python3 3.11.2 (the ast module of 3.11: the text
  of "Unsupported node type" errors contains ast.dump() of 3.11)
- no third-party packages

Regenerate (from the repository root)
-------------------------------------
  mkdir -p /tmp/dj-src
  git -C /work/.mirror/modelscope+data-juicer/repo archive \\
      c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \\
      data_juicer/ops/filter/general_field_filter.py \\
      data_juicer/utils/constant.py \\
      tests/ops/filter/test_general_field_filter.py | tar -x -C /tmp/dj-src
  /usr/bin/python3 tests/data/make_ops_general_field.py /tmp/dj-src \\
      tests/data/ops-general-field.jsonl
(git archive may print "error: invalid object ... video3-no-audio.mp4"; it
exits 0 and the extraction is complete.) Counts and any unit-test mismatch go
to stderr.

Deterministic: no randomness, fixed condition and record order.
"""
import argparse
import copy
import importlib
import json
import math
import os
import re
import sys
import types

import dj_stand_ins as dj
from dj_stand_ins import err_str

OP = "general_field_filter"

# Conditions, as the exact text given to the constructor (raw strings: a
# backslash in the text below is a backslash in the condition).
CONDITIONS = [
    # --- Data-Juicer's unit-test conditions
    r"10 < num < 20",
    r"num < 10 and flag == True",
    r"num < 10 or num > 20",
    r"num <= 5",
    r"__dj__meta__.a == 2",
    r"10 < num < 20 and __dj__meta__.a == 2",
    r"invalid syntax",                      # constructor: ValueError
    r"",                                    # empty: nothing evaluated
    r"(num < 10 or num > 20) and flag == True and text!='sample3'",
    # --- the docstring example, chains, and/or mixtures
    r"10 < num <= 30 and text != 'nothing here' and __dj__meta__.a == 3",
    r"1 < x < 5",
    r"a == b == c",
    # bare names in and/or; the UnaryOp raises only when it is reached
    r"(x or y == 'b') and (z != 0 or -5 < num)",
    # --- comparisons across types
    r"'Z' < s < '\uff5e'",                  # code-point order, astral > BMP
    r"num == 3.0",
    r"num != '15'",
    r"num < 'a'",
    r"lst == lst2",
    r"lst < lst2",
    r"d == d2",
    r"__dj__stats__.some_stat >= 0.5",
    r"big == 9007199254740992.0",            # exact int/float comparison
    # --- a bare name or constant as the whole condition
    r"flag",
    r"1",
    r"'x'",
    r"None",
    r"True",
    # --- attributes of non-dict values, nested paths
    r"text.upper",
    r"num.real",
    r"meta.src.deep.val >= 1e3",
    # --- literals
    r"""text == 'a\nb' or text == "it's" or text == r'\d' or text == 'a' 'b'""",
    r"num == 0x10 or num == 1_000 or num == .5 or num == 1e3",
    # --- what the transformer cannot evaluate
    r"not flag",
    r"-5 < num",
    r"num + 1 > 2",
    r"x in [1, 2]",
    r"x is None",
    r"len(text) > 3",
    r"a <",                                 # constructor: ValueError
    r" num <= 5",                           # leading space: constructor error
]

# Hand-written records (JSON objects). Keys are kept in this order.
_R = [
    # unit-test-like
    {"text": "sample1", "num": 5, "flag": True},
    {"text": "sample2", "num": 15, "flag": False},
    {"text": "sample3", "num": 25, "flag": True},
    {"text": "sample4", "num": 30, "flag": False},
    {"text": "nothing here", "num": 20, "__dj__meta__": {"a": 3}},
    {"text": "something", "num": 30, "__dj__meta__": {"a": 3}},
    {"text": "something", "num": 10, "__dj__meta__": {"a": 3.0}},
    {"text": "x", "num": 15, "flag": 1, "__dj__meta__": {"a": 2, "b": [1]}},
    # numbers, bools, null
    {"text": "", "num": 0, "flag": 0, "x": 0, "y": "b", "z": 0},
    {"num": -7, "flag": -1, "x": -3.5, "y": "b", "z": 5},
    {"text": "日本語 text 😀", "num": 3, "flag": 1, "x": 3, "z": 1},
    {"num": 3.0, "flag": 1.0, "x": 4.999, "z": 0},
    {"num": 0.0025, "flag": 2, "x": 5, "y": "a"},
    {"num": 18446744073709551617, "big": 18446744073709551617, "x": 2},
    {"num": -9223372036854775809, "big": -9223372036854775809, "x": 1},
    {"big": 9007199254740993, "num": 9007199254740993},
    {"big": 9007199254740992, "num": 9007199254740992},
    {"big": 9007199254740992.0},
    {"big": 1180591620717411303424, "num": 1.0e300},
    {"num": 16, "x": 1.5, "y": "b", "z": None},
    {"num": 1000, "x": 1.0000000000000002},
    {"num": 0.5, "flag": 0.5},
    {"num": 1000.0, "flag": 1e-300},
    {"text": "15", "num": "15", "flag": "0"},
    {"text": "abc", "num": "abc", "flag": "x", "x": "a", "y": "b", "z": "0"},
    {"text": None, "num": None, "flag": None, "x": None, "y": None, "z": None},
    {"num": True, "flag": True, "x": True, "z": True},
    {"num": False, "flag": False, "x": False, "y": "b", "z": False},
    {"num": [1, 2], "flag": [], "x": [1], "z": []},
    {"num": {"a": 1, "real": 5}, "flag": {}, "x": {}, "y": "b", "z": {}},
    {"flag": [0], "x": [1, 2], "text": ["upper"]},
    {"flag": {"k": None}, "x": {"k": 1}, "text": {"upper": "U"}},
    {"flag": -0.0, "num": -0.0},
    {"flag": 0.0, "num": 3.0000000000000004},
    {"flag": "false", "text": 5},
    {"flag": "", "text": "SAMPLE"},
    # a == b == c
    {"a": 1, "b": 1, "c": 1},
    {"a": 1, "b": None, "c": 1},
    {"a": None, "b": None, "c": None},
    {"a": 1, "b": 1.0, "c": True},
    {"a": "x", "b": "x", "c": "y"},
    {"a": [1, {"k": "v"}], "b": [1, {"k": "v"}], "c": [1, {"k": "v"}]},
    {"a": 1, "b": 1},
    {"a": 2, "b": 1, "c": None},
    # strings, lists, dicts
    {"s": "é", "lst": [1, 2, 3], "lst2": [1, 2, 4],
     "d": {"a": 1, "b": [1]}, "d2": {"b": [1], "a": 1}},
    {"s": "😀", "lst": [1, 2], "lst2": [1, 2, 0], "d": {"a": 1}, "d2": {"a": 1.0}},
    {"s": "～", "lst": [1, "a"], "lst2": [1, 2], "d": {"a": 1}, "d2": {"a": 2}},
    {"s": "ｚ", "lst": [], "lst2": [], "d": {}, "d2": {}},
    {"s": "Z", "lst": [None], "lst2": [None], "d": {"a": None}, "d2": {"a": None}},
    {"s": "", "lst": [1, None], "lst2": [1, 2], "d": {"a": 1}, "d2": {"a": 1, "b": 2}},
    {"s": "z", "lst": "abc", "lst2": "abd", "d": [1], "d2": [1]},
    {"s": "\u0000", "lst": [[1, 2], [3]], "lst2": [[1, 2], [4]], "d": {"a": 1}, "d2": None},
    {"s": "e\u0301", "lst": [True], "lst2": [1], "d": {"a": {"b": 1}}, "d2": {"a": {"b": True}}},
    {"s": 5, "lst": [1], "lst2": None, "d": "x", "d2": "x"},
    # __dj__stats__ / __dj__meta__
    {"__dj__stats__": {"some_stat": 0.5}, "__dj__meta__": {"a": 2}},
    {"__dj__stats__": {"some_stat": 0.49999999999999994, "other": 1}},
    {"__dj__stats__": {"some_stat": "0.9"}},
    {"__dj__stats__": {"some_stat": None}, "__dj__meta__": {"a": None}},
    {"__dj__stats__": {"general_field_filter_condition": "cached"}, "num": 15},
    {"__dj__stats__": {"general_field_filter_condition": False, "some_stat": 1}},
    {"__dj__stats__": {"general_field_filter_condition": None}},
    {"__dj__stats__": {}, "__dj__meta__": {"a": 2.0}, "num": 15},
    {"__dj__meta__": "a", "num": 12},
    {"__dj__meta__": ["a"], "num": 12},
    {"__dj__meta__": {"a": True}},
    # meta paths
    {"meta": {"src": {"deep": {"val": 1000}}}},
    {"meta": {"src": {"deep": {"val": 999.9999}}}},
    {"meta": {"src": {"deep": "val"}}},
    {"meta": "src"},
    {"meta": ["src"]},
    {"meta": {"src": None}},
    {"meta": {"src": {"deep": {"val": [1000]}}}},
    {"meta": {"src": {"deep": {"val": 1e3, "get": 5}}}},
    # string literals
    {"text": "a\nb"},
    {"text": "it's"},
    {"text": "\\d"},
    {"text": "ab"},
    {"text": "a\\nb"},
]
RECORDS = [dict([("id", "gff-%02d" % i)] + list(r.items()))
           for i, r in enumerate(_R)]


# ---------------------------------------------------------------- stand-ins

class _Filter:
    """Stand-in for data_juicer.ops.base_op.Filter (nothing of it is used)."""
    _batched_op = False

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")

    def is_batched_op(self):
        return self._batched_op


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


def install_stubs(dj_root):
    for name in ("loguru", "zstandard"):
        try:
            importlib.import_module(name)
        except ImportError:
            m = types.ModuleType(name)
            m.logger = _Logger()
            sys.modules[name] = m
    return dj.install_framework(dj_root, "filter", "Filter", _Filter)


def _record(self, dataset, op, target):
    # RECORDED: (op instance, samples, expected kept rows)
    dj.RECORDED.append((op, [dict(s) for s in dataset.samples], list(target)))


def _patch_test_class(c):
    for k in list(vars(c)):
        if k.startswith("_run_"):
            setattr(c, k, _record)


# ------------------------------------------------------------------ running

def enc(v, seen=()):
    """v as JSON can hold it (see the module docstring)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else {"$py": "float", "repr": repr(v)}
    if isinstance(v, (list, dict)):
        if id(v) in seen:
            return {"$py": "circular"}
        seen = seen + (id(v),)
        if isinstance(v, list):
            return [enc(x, seen) for x in v]
        return {k: enc(x, seen) for k, x in v.items()}
    return {"$py": type(v).__name__,
            "repr": re.sub(r" at 0x[0-9a-fA-F]+", "", repr(v))}


def run_condition(cls, cond, records):
    args = {"filter_condition": cond}
    try:
        op = cls(**args)
    except Exception as e:
        return [{"op": OP, "args": args, "input": None, "output_text": None,
                 "error": err_str(e), "stats": None, "keep": None}]
    vecs = []
    for rec in records:
        v = {"op": OP, "args": args, "input": copy.deepcopy(rec),
             "output_text": None}
        sample = copy.deepcopy(rec)
        if "__dj__stats__" not in sample:
            sample["__dj__stats__"] = {}
        try:
            sample = op.compute_stats_single(sample)
            keep = op.process_single(sample)
            v["stats"] = enc(sample["__dj__stats__"])
            v["keep"] = enc(keep)
            v["_truthy"] = bool(keep)  # for the unit-test check, not written
        except Exception as e:
            v["error"] = err_str(e)
            v["stats"] = None
            v["keep"] = None
        vecs.append(v)
    return vecs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dj_root", help="root of a Data-Juicer 1.4.3 checkout")
    ap.add_argument("out", nargs="?", help="output .jsonl (default stdout)")
    a = ap.parse_args()
    dj_root = os.path.abspath(a.dj_root)
    registry = install_stubs(dj_root)
    cls = dj.load_op_classes(registry, "filter", [OP])[OP]

    problems = []
    vectors = []
    for cond in CONDITIONS:
        vectors += run_condition(cls, cond, RECORDS)

    # unit-test cases: their records (with an added id) and conditions,
    # checked against the rows the tests expect to be kept
    unit = list(dj.unit_test_records(dj_root, "filter", OP, _patch_test_class))
    uids = {}
    for op, samples, target in unit:
        for s in samples:
            key = json.dumps(s, sort_keys=True)
            if key not in uids:
                uids[key] = "dj-unit-%s-%02d" % (OP, len(uids))
    n_unit = 0
    for op, samples, target in unit:
        recs = [dict([("id", uids[json.dumps(s, sort_keys=True)])] + list(s.items()))
                for s in samples]
        cond = op._vector_args.get("filter_condition", "")
        vs = run_condition(cls, cond, recs)
        kept = [{"text": v["input"]["text"]} for v in vs if v.get("_truthy")]
        if kept != target:
            problems.append("unit mismatch: %r kept %r expected %r"
                            % (cond, kept, target))
        vectors += vs
        n_unit += len(vs)
    # test_invalid_condition: the constructor must raise ValueError
    try:
        cls(filter_condition="invalid syntax")
        problems.append("unit mismatch: 'invalid syntax' did not raise")
    except ValueError:
        pass

    summary = {}
    for v in vectors:
        c = summary.setdefault(v["args"]["filter_condition"], [0, 0, 0, 0, 0])
        c[0] += 1
        if "error" in v:
            c[3] += 1
        elif not isinstance(v["keep"], bool):
            c[4] += 1
        elif v["keep"]:
            c[1] += 1
        else:
            c[2] += 1
        v.pop("_truthy", None)
    dj.write_jsonl(a.out, vectors)
    for p in problems:
        print(p, file=sys.stderr)
    print("  total  true false error other  condition", file=sys.stderr)
    for cond, (n, t, f, e, o) in summary.items():
        print("%7d %5d %5d %5d %5d  %r" % (n, t, f, e, o, cond), file=sys.stderr)
    print("%d vectors (%d unit-test), %d conditions, %d records"
          % (len(vectors), n_unit, len(CONDITIONS), len(RECORDS)), file=sys.stderr)


if __name__ == "__main__":
    main()
