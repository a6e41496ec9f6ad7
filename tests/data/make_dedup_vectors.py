#!/usr/bin/env python3
"""Writes dedup-vectors.jsonl: Data-Juicer 1.4.3's deduplicators run on small datasets.

Usage:
  make_dedup_vectors.py DJ_ROOT SIMHASH_DIR [OUT] [--corpus ops.jsonl]

DJ_ROOT is an extracted Data-Juicer 1.4.3 tree (data_juicer/ and tests/ops/deduplicator/);
SIMHASH_DIR is a directory that holds the `simhash` package of simhash-pybind (the import
`simhash` must give unsigned_hash, compute and find_all). numpy, scipy and sentencepiece come
from the Python running this script.

The operators' own files are imported unchanged; only the framework around them is replaced:
a list-backed stand-in for the HuggingFace dataset (map, filter, column access), the
Deduplicator / Filter base classes (text_key), a synchronous in-process stand-in for Ray (actors
run their methods at once) and small loguru/tqdm stand-ins. A dataset is run as
Deduplicator.run runs it with the recipe default skip_op_error: true: compute_hash on every row,
a row whose compute_hash raises is dropped (and recorded in "errors"), then process() over the
rest.

One JSON object a line:
  {"kind": "dataset", "op", "args", "dataset": name, "rows": [record...],
   "kept": [row indices, in output order], "errors": {row: "Type: message"},
   "sig": [per row: md5 hex | simhash uint64 as a decimal string | minhash band keys
           (hex of the bytes Data-Juicer groups on) | null for an errored row],
   "minhash": [per row: the 32-bit minhash values, or null]  (minhash ops only)}
  {"kind": "load_error", "op", "args", "error": "Type: message"}
  {"kind": "optimal_param", "threshold", "num_perm", "bands", "rows"}
  {"kind": "permutations", "num_perm", "a": [...], "b": [...]}   (decimal strings)
  {"kind": "unit", "op", "test": "Class.method", "args", "rows", "kept", "result"}
"""
import argparse
import hashlib
import importlib
import json
import os
import random
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import dj_stand_ins as dsi  # noqa: E402

SP_MODEL = os.path.join(HERE, "sentencepiece", "en.sp.model")
SP_ARG = "@DATA@/sentencepiece/en.sp.model"

# ------------------------------------------------------------------ stand-ins


class Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


class Deduplicator:
    """Stand-in for data_juicer.ops.base_op.Deduplicator (OP.__init__'s keys)."""
    _batched_op = False
    _accelerator = "cpu"

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")
        self.work_dir = kwargs.get("work_dir", None)

    def use_cuda(self):
        return False

    def is_batched_op(self):
        return self._batched_op


class Filter(Deduplicator):
    """Stand-in for data_juicer.ops.base_op.Filter (ray_basic_deduplicator's base)."""


class Ref:
    def __init__(self, value):
        self.value = value


class Actor:
    def __init__(self, obj):
        self._obj = obj

    def __getattr__(self, name):
        fn = getattr(self._obj, name)
        return types.SimpleNamespace(remote=lambda *a, **k: Ref(fn(*a, **k)))


class FakeRay(types.ModuleType):
    """Ray with every actor in this process and every call done at once."""
    cpus = 2

    def cluster_resources(self):
        return {"CPU": float(FakeRay.cpus)}

    def remote(self, *args, **kwargs):
        def wrap(cls):
            return types.SimpleNamespace(remote=lambda *a, **k: Actor(cls(*a, **k)))
        if args and isinstance(args[0], type):
            return wrap(args[0])
        return wrap

    def method(self, **kwargs):
        return lambda fn: fn

    def get(self, refs):
        if isinstance(refs, list):
            return [r.value for r in refs]
        return refs.value

    def wait(self, refs, num_returns=1):
        return refs[:num_returns], refs[num_returns:]


def lazy_loader(module_name, package_name=None, **kwargs):
    return importlib.import_module(module_name)


def prepare_sentencepiece_model(model_path, **kwargs):
    import sentencepiece
    sp = sentencepiece.SentencePieceProcessor()
    sp.load(model_path)
    return sp


def install(dj_root, simhash_dir):
    sys.path.insert(0, simhash_dir)
    src = os.path.join(dj_root, "data_juicer")
    dsi.stub_module("data_juicer", src)
    dsi.stub_module("data_juicer.ops", os.path.join(src, "ops"))
    dsi.stub_module("data_juicer.ops.deduplicator", os.path.join(src, "ops", "deduplicator"))
    dsi.stub_module("data_juicer.ops.common", os.path.join(src, "ops", "common"))
    base_op = dsi.stub_module("data_juicer.ops.base_op")
    base_op.OPERATORS = dsi.Registry("Operators")
    base_op.Deduplicator = Deduplicator
    base_op.Filter = Filter
    dsi.stub_module("data_juicer.utils", os.path.join(src, "utils"))
    const = dsi.stub_module("data_juicer.utils.constant")
    const.HashKeys = types.SimpleNamespace(
        uid="__dj__uid", hash="__dj__hash", minhash="__dj__minhash",
        simhash="__dj__simhash", is_unique="__dj__is_unique")
    dsi.stub_module("data_juicer.utils.lazy_loader").LazyLoader = lazy_loader
    mu = dsi.stub_module("data_juicer.utils.model_utils")
    mu.prepare_sentencepiece_model = prepare_sentencepiece_model
    ru = dsi.stub_module("data_juicer.utils.ray_utils")
    ru.ray_available_gpu_memories = lambda: []
    ru.ray_gpu_count = lambda: 0
    sys.modules["ray"] = FakeRay("ray")
    sys.modules["redis"] = types.ModuleType("redis")
    sys.modules["pyarrow"] = types.SimpleNamespace(Table=object, Array=object)
    sys.modules["loguru"] = types.SimpleNamespace(logger=Logger())
    sys.modules["tqdm"] = types.SimpleNamespace(tqdm=lambda it, **k: it)
    dsi.stub_module("data_juicer.core", os.path.join(src, "core"))
    dsi.stub_module("data_juicer.core.data").NestedDataset = FakeDataset
    uu = dsi.stub_module("data_juicer.utils.unittest_utils")
    uu.DataJuicerTestCaseBase = TestCaseBase
    uu.TEST_TAG = lambda *tags: (lambda fn: fn)
    classes = {}
    for name in OPS:
        importlib.import_module("data_juicer.ops.deduplicator." + name)
        classes[name] = dsi.capture_args(base_op.OPERATORS.modules[name])
    return classes


# -------------------------------------------------------------- the dataset


class FakeDataset:
    """A list of samples, each carrying the index of the input row it came from."""

    def __init__(self, samples, ids=None, catch=None):
        self.samples = [dict(s) for s in samples]
        self.ids = list(range(len(samples))) if ids is None else list(ids)
        self.catch = catch  # dict row -> error, when compute_hash errors drop the row

    @classmethod
    def from_list(cls, samples):
        return cls(samples)

    def map(self, fn, *args, **kwargs):
        out, ids = [], []
        for s, i in zip(self.samples, self.ids):
            try:
                s = fn(dict(s))
            except Exception as e:  # noqa: BLE001 (catch_map_single_exception)
                if self.catch is None:
                    raise
                self.catch[i] = dsi.err_str(e)
                continue
            out.append(s)
            ids.append(i)
        UNIT_MAPS.append((getattr(fn, "__self__", None), [dict(s) for s in self.samples]))
        return FakeDataset(out, ids, self.catch)

    def filter(self, fn, fn_kwargs=None, with_indices=False, **kwargs):
        out, ids = [], []
        for k, (s, i) in enumerate(zip(self.samples, self.ids)):
            a = (s, k) if with_indices else (s,)
            if fn(*a, **(fn_kwargs or {})):
                out.append(s)
                ids.append(i)
        return FakeDataset(out, ids, self.catch)

    def __getitem__(self, key):
        if isinstance(key, str):
            return [s.get(key) for s in self.samples]
        return self.samples[key]

    def __len__(self):
        return len(self.samples)

    def remove_columns(self, cols):
        return FakeDataset([{k: v for k, v in s.items() if k not in cols} for s in self.samples],
                           self.ids, self.catch)

    def select_columns(self, column_names):
        return FakeDataset([{k: s[k] for k in column_names} for s in self.samples], self.ids,
                           self.catch)

    def to_list(self):
        UNIT_RESULTS.append(list(self.ids))
        return [dict(s) for s in self.samples]


UNIT_MAPS = []     # (op, samples) of each map() in the unit test being run
UNIT_RESULTS = []  # kept row ids of each to_list()
RAY_RUNS = []      # (op, rows, kept) of each run_single_op


class TestCaseBase(unittest.TestCase):
    """Stand-in for DataJuicerTestCaseBase: Ray tests run on the in-process Ray."""

    def generate_dataset(self, ds_list):
        return ds_list

    def run_single_op(self, dataset, op, column_names):
        kept, _, _ = run_ray_op(op, dataset)
        RAY_RUNS.append((op, dataset, kept))
        return [{c: dataset[i][c] for c in column_names} for i in kept]


# ---------------------------------------------------------------- running

OPS = ["document_deduplicator", "document_simhash_deduplicator",
       "document_minhash_deduplicator", "ray_document_deduplicator",
       "ray_bts_minhash_deduplicator"]


def signature_of(name, sample):
    if name == "document_deduplicator":
        return sample["__dj__hash"]
    if name == "document_simhash_deduplicator":
        return sample["__dj__simhash"]
    return [h.hex() for h in sample["__dj__minhash"]]


def minhash_values(sample):
    """The 32-bit minhash values behind a document_minhash_deduplicator signature."""
    import numpy as np
    return [int(v) for h in sample["__dj__minhash"] for v in np.frombuffer(h, dtype=">u8")]


def run_single_process(name, op, rows):
    """Deduplicator.run with skip_op_error: true. Returns (kept, errors, sig, minhash)."""
    errors = {}
    ds = FakeDataset(rows, catch=errors).map(op.compute_hash)
    sig = [None] * len(rows)
    mh = [None] * len(rows)
    for s, i in zip(ds.samples, ds.ids):
        sig[i] = signature_of(name, s)
        if name == "document_minhash_deduplicator":
            mh[i] = minhash_values(s)
    ds, _ = op.process(ds)
    return list(ds.ids), errors, sig, mh


class ArrowText:
    def __init__(self, v):
        self.v = v

    def as_py(self):
        return self.v


def run_ray_op(op, rows):
    """The ray ops on the in-process Ray: (kept rows in input order, errors, sig)."""
    if isinstance(op, CLASSES["ray_document_deduplicator"]):
        kept, errors, sig = [], {}, []
        for i, r in enumerate(rows):
            try:
                s = op.compute_stats_single(dict(r))
            except Exception as e:  # noqa: BLE001
                errors[i] = dsi.err_str(e)
                sig.append(None)
                continue
            sig.append(op.calculate_hash(dict(r)))
            if op.process_single(s):
                kept.append(i)
        return kept, errors, sig
    # ray_bts_minhash_deduplicator: calc_minhash over batches of uids, merge, dup_idx
    errors = {}
    good = []
    for i, r in enumerate(rows):
        try:  # a row the CPU path cannot take fails its whole batch in Ray: recorded per row here
            op.calc_minhash([ArrowText(r.get(op.text_key))], [i])
            good.append(i)
        except Exception as e:  # noqa: BLE001
            errors[i] = dsi.err_str(e)
    op.merge()
    dup = set()
    for i in good:
        uf = op.union_find_list[i // 1000 % op.union_find_parallel_num]
        dup.update(u for u in uf._obj.dup_idx([(i, i)]))
    kept = [i for i in good if i not in dup]
    return kept, errors, [None] * len(rows)


def bts_band_keys(op, text):
    """The (band, key bytes) ray_bts_minhash_deduplicator sends for one text, hex."""
    pairs = []
    saved = op.union_find_list
    op.union_find_list = [types.SimpleNamespace(add_key_value_pairs=types.SimpleNamespace(
        remote=lambda p: Ref(pairs.extend(p))))] * op.union_find_parallel_num
    try:
        op.calc_minhash([ArrowText(text)], [0])
    finally:
        op.union_find_list = saved
    return sorted(k.hex() for k, _ in pairs)  # grouped by actor there; band order here


# ------------------------------------------------------------------ inputs

def edit_variants(text, rng, n):
    """n near-duplicates of text made by one small edit each."""
    words = text.split(" ")
    out = []
    for k in range(n):
        w = list(words)
        pos = rng.randrange(len(w))
        op = k % 4
        if op == 0:
            w[pos] = w[pos] + "s"
        elif op == 1 and len(w) > 1:
            del w[pos]
        elif op == 2:
            w.insert(pos, "very")
        else:
            w[pos] = w[pos].upper()
        out.append(" ".join(w))
    return out


def hand_rows():
    base = ("The quick brown fox jumps over the lazy dog while the farmer watches "
            "from the old wooden porch and drinks his morning coffee slowly.")
    zh = "欢迎来到阿里巴巴！今天天气很好，我们一起去公园散步吧。明天再见。"
    texts = [
        "", " ", "   ", "\t\n", "\u3000", "...!!!", "12345", "a", "a b c d e",
        "a b c d e f", "a b c d e f g", "A B C D E F G",
        base, base.upper(), base.replace(".", "!"), base + " ", " " + base,
        base.replace("lazy", "sleepy"), base.replace("  ", " "), base.replace(" ", "  "),
        base.replace(" ", "\n"), base.replace(" ", "\t"),
        zh, zh.replace("公园", "公圆"), zh.replace("！", "!"), zh[:10], zh + zh,
        "İstanbul ΟΔΟΣ Straße ǅemal ΣΑΣ", "istanbul οδος straße ǆemal σας",
        "i̇stanbul οδος strasse ǆemal σας",
        "Emoji 👍🏽 family 👨‍👩‍👧 flag 🇯🇵 keycap 1️⃣ end of the line here",
        "Emoji 👍🏽 family 👨‍👩‍👧 flag 🇯🇵 keycap 1️⃣ end of the line there",
        "e\u0301 café cafe\u0301 naïve résumé",
        "Digits ٣٤٥ and ١٢ and 12 and ① ² stay here in the text",
        "Digits and and and ① ² stay here in the text",
        "tab\u00a0nbsp\u2003emsp\u2028ls\u0085nel\x1cfs end",
        "tab nbsp emsp ls nel fs end",
        "«quoted» „text“ — with – dashes… and ‘marks’ ・ 、。",
        "quoted text with dashes and marks",
        "a,b.c;d:e!f?g(h)i[j]k{l}m\"n'o-p_q/r\\s@t#u$v%w^x&y*z+=~`|<>",
        "abcdefghijklmnopqrstuvwxyz",
        "x" * 3 + " " + "y" * 2,
        "word " * 50, "word " * 51, "Word " * 50,
        "\U0001F600\U0001F601\U0001F602\U0001F603\U0001F604\U0001F605",
        "\U0001F600\U0001F601\U0001F602\U0001F603\U0001F604\U0001F606",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝒶𝓁𝓅𝒽𝒶𝒷𝑒𝓉 letters in a sentence",
        "\u200b\u200c\u200d zero width \ufeff bom",
        "Русский текст для проверки дедупликации документов здесь",
        "русский текст для проверки дедупликации документов здесь",
        "עברית וערבית: مرحبا بالعالم وهذا نص طويل للاختبار",
        "ﬁ ﬂ ﬀ ligatures Ⅻ ⅻ ㎏ fullwidth ＡＢＣ ａｂｃ",
    ]
    texts += edit_variants(base, random.Random(3), 8)
    rows = [{"text": t} for t in texts]
    # records a text key cannot be read from
    rows += [{"other": "no text key"}, {"text": None}, {"text": 0}, {"text": 7},
             {"text": False}, {"text": True}, {"text": 1.5}, {"text": []}, {"text": ["a", "b"]},
             {"text": ["a", "b", "c", "d", "e", "f", "g"]}, {"text": {}}, {"text": {"a": 1}}]
    return rows


def corpus_rows(corpus_path, n):
    seen = []
    with open(corpus_path, encoding="utf-8") as f:
        for line in f:
            i = json.loads(line)["input"]
            if i is not None and i["text"] not in seen:
                seen.append(i["text"])
    texts = seen[:n]
    rng = random.Random(11)
    rows = []
    for k, t in enumerate(texts):
        rows.append(t)
        if k % 3 == 0 and len(t.split(" ")) > 3:
            rows += edit_variants(t, rng, 2)
        if k % 7 == 0:
            rows.append(t)
    long_text = " ".join(texts[:40])
    rows += [long_text, long_text.replace(" the ", " a ", 3), long_text[: len(long_text) // 2],
             (long_text + " ") * 4]
    rng.shuffle(rows)
    return [{"text": t} for t in rows]


def dj_unit_rows(dj_root):
    """The input texts of every unit test dataset of the three ops and the two ray ones."""
    rows = []
    for name in OPS:
        for rec in unit_records(dj_root, name):
            rows += [{"text": r["text"]} for r in rec["rows"] if "text" in r]
    seen, out = set(), []
    for r in rows:
        if r["text"] not in seen:
            seen.add(r["text"])
            out.append(r)
    return out


# ------------------------------------------------------------------ unit tests

def unit_records(dj_root, name, cache={}):
    if name in cache:
        return cache[name]
    path = os.path.join(dj_root, "tests", "ops", "deduplicator", "test_%s.py" % name)
    spec = importlib.util.spec_from_file_location("dj_unit_" + name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    out = []
    for cname in sorted(vars(m)):
        c = getattr(m, cname)
        if not (isinstance(c, type) and issubclass(c, unittest.TestCase)
                and c.__module__ == m.__name__):
            continue
        for meth in [k for k, v in vars(c).items() if k.startswith("test") and callable(v)]:
            del UNIT_MAPS[:]
            del UNIT_RESULTS[:]
            del RAY_RUNS[:]
            FakeRay.cpus = 2
            t = c(meth)
            result = "passed"
            try:
                t.setUp()
                getattr(t, meth)()
                t.tearDown()
            except Exception as e:  # noqa: BLE001
                result = "failed: " + dsi.err_str(e)
            test = "%s.%s" % (cname, meth)
            for op, rows, kept in RAY_RUNS:
                out.append({"kind": "unit", "op": name, "test": test,
                            "args": jsonable(op._vector_args), "rows": rows, "kept": kept,
                            "result": result})
            if not RAY_RUNS and UNIT_MAPS:
                op, rows = UNIT_MAPS[0]
                out.append({"kind": "unit", "op": name, "test": test,
                            "args": jsonable(op._vector_args), "rows": rows,
                            "kept": UNIT_RESULTS[0] if UNIT_RESULTS else None,
                            "result": result})
    cache[name] = out
    return out


def jsonable(args):
    out = {}
    for k, v in args.items():
        if k == "work_dir":
            continue
        if k == "tokenizer_model" and v == SP_MODEL:
            v = SP_ARG
        out[k] = v
    return out


# ------------------------------------------------------------------ variants

ARGS = {
    "document_deduplicator": [{}, {"lowercase": True}, {"ignore_non_character": True},
                              {"lowercase": True, "ignore_non_character": True}],
    "ray_document_deduplicator": [{}, {"lowercase": True}, {"ignore_non_character": True},
                                  {"lowercase": True, "ignore_non_character": True}],
    "document_simhash_deduplicator": [
        {}, {"tokenization": "character"}, {"tokenization": "punctuation"},
        {"window_size": 3}, {"window_size": 1}, {"lowercase": False},
        {"ignore_pattern": r"\p{P}"}, {"num_blocks": 4, "hamming_distance": 3},
        {"num_blocks": 6, "hamming_distance": 1}, {"num_blocks": 9, "hamming_distance": 8},
        {"num_blocks": 64, "hamming_distance": 2},
        {"tokenization": "character", "window_size": 2, "ignore_pattern": r"\d"},
        {"tokenization": "character", "lowercase": False, "window_size": 3},
        {"tokenization": "punctuation", "window_size": 2, "lowercase": False},
        {"window_size": 2, "num_blocks": 5, "hamming_distance": 4}],
    "document_minhash_deduplicator": [
        {}, {"tokenization": "character"}, {"tokenization": "punctuation"},
        {"tokenization": "sentencepiece", "tokenizer_model": SP_MODEL},
        {"tokenization": "sentencepiece", "tokenizer_model": SP_MODEL, "window_size": 2},
        {"window_size": 1}, {"window_size": 3, "lowercase": False},
        {"ignore_pattern": r"\p{P}"}, {"num_permutations": 64},
        {"num_permutations": 128, "jaccard_threshold": 0.5},
        {"jaccard_threshold": 0.9}, {"jaccard_threshold": 0.3, "num_permutations": 32},
        {"num_bands": 16, "num_rows_per_band": 8},
        {"num_bands": 20, "num_rows_per_band": 5, "num_permutations": 100},
        {"num_bands": 4, "num_rows_per_band": 3, "num_permutations": 10},
        {"num_bands": 10},
        {"num_bands": 3, "num_rows_per_band": 5, "num_permutations": 10},
        {"num_bands": 2, "num_rows_per_band": 6, "num_permutations": 8},
        {"tokenization": "character", "window_size": 2, "num_permutations": 16}],
    "ray_bts_minhash_deduplicator": [
        {}, {"tokenization": "character"}, {"tokenization": "punctuation"},
        {"tokenization": "sentencepiece", "tokenizer_model": SP_MODEL},
        {"window_size": 1}, {"ignore_pattern": r"\p{P}"},
        {"num_permutations": 128, "jaccard_threshold": 0.5},
        {"num_bands": 16, "num_rows_per_band": 8},
        {"num_bands": 3, "num_rows_per_band": 4, "num_permutations": 10},
        {"union_threshold": 2}],
}

BAD_ARGS = {
    "document_simhash_deduplicator": [{"num_blocks": 4, "hamming_distance": 4},
                                      {"num_blocks": 65, "hamming_distance": 4},
                                      {"tokenization": "words"}],
    "document_minhash_deduplicator": [{"tokenization": "sentencepiece"},
                                      {"tokenization": "words"}],
    "ray_bts_minhash_deduplicator": [{"tokenization": "sentencepiece"},
                                     {"tokenization": "words"},
                                     {"num_bands": 3, "num_rows_per_band": 5,
                                      "num_permutations": 10}],
}


def dataset_vectors(name, cls, datasets, problems):
    out = []
    for args in ARGS[name]:
        for dname, rows in datasets:
            if name.startswith("ray_"):
                for cpus in (2, 4, 6):  # 1, 2 and 3 union-find actors
                    FakeRay.cpus = cpus
                    op = cls(**args)
                    kept, errors, sig = run_ray_op(op, rows)
                    if cpus == 2:
                        first = kept
                    elif kept != first:
                        problems.append("%s %s %s: kept differs with %d actors"
                                        % (name, args, dname, cpus // 2))
                if name == "ray_bts_minhash_deduplicator":
                    sig = [bts_band_keys(op, r.get(op.text_key)) if i not in errors else None
                           for i, r in enumerate(rows)]
                v = {"kind": "dataset", "op": name, "args": jsonable(args), "dataset": dname,
                     "kept": first, "errors": errors, "sig": trim(sig, dname)}
            else:
                op = cls(**args)
                try:
                    kept, errors, sig, mh = run_single_process(name, op, rows)
                except Exception as e:  # noqa: BLE001
                    problems.append("%s %s %s: %s" % (name, args, dname, dsi.err_str(e)))
                    continue
                v = {"kind": "dataset", "op": name, "args": jsonable(args), "dataset": dname,
                     "kept": kept, "errors": errors, "sig": sig}
                if name == "document_minhash_deduplicator":
                    v["sig"] = trim(sig, dname)
                    v["minhash"] = mh if dname != "corpus" else trim(mh, dname)
            out.append(v)
    for args in BAD_ARGS.get(name, []):
        try:
            op = cls(**args)
            rows = [{"text": "a b c d e f g h"}, {"text": "a b c d e f g"}]
            if name.startswith("ray_"):
                _, errors, _ = run_ray_op(op, rows)
            else:
                _, errors, _, _ = run_single_process(name, op, rows)
            if not errors:
                problems.append("%s %s: expected an error" % (name, args))
                continue
            # every record fails in compute_hash: djshard refuses the recipe instead
            out.append({"kind": "load_error", "op": name, "args": jsonable(args),
                        "error": errors[0]})
        except Exception as e:  # noqa: BLE001
            out.append({"kind": "load_error", "op": name, "args": jsonable(args),
                        "error": dsi.err_str(e)})
    return out


def trim(sigs, dname, keep=6):
    """Per-row lists (band keys; minhash values of the corpus dataset) of the first `keep`
    rows only, null for the others; per-row strings are kept whole."""
    if not any(isinstance(x, list) for x in sigs):
        return sigs
    return [x if i < keep else None for i, x in enumerate(sigs)]


def param_vectors(dj_root):
    m = importlib.import_module("data_juicer.ops.deduplicator.document_minhash_deduplicator")
    import numpy as np
    out = []
    for num_perm in (1, 2, 3, 5, 8, 10, 16, 32, 64, 100, 128, 200, 256, 300, 512):
        for t in range(0, 21):
            th = t / 20
            b, r = m.optimal_param(th, num_perm)
            out.append({"kind": "optimal_param", "threshold": th, "num_perm": num_perm,
                        "bands": b, "rows": r})
    gen = np.random.RandomState(seed=42)
    a, b = np.array([(gen.randint(1, m.MERSENNE_PRIME, dtype=np.uint64),
                      gen.randint(0, m.MERSENNE_PRIME, dtype=np.uint64)) for _ in range(600)],
                    dtype=np.uint64).T
    out.append({"kind": "permutations", "num_perm": 600, "a": [str(x) for x in a],
                "b": [str(x) for x in b]})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dj_root")
    ap.add_argument("simhash_dir")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--corpus")
    a = ap.parse_args()
    corpus = a.corpus or os.path.join(dsi.ROOT, "..", "shared", "testvectors", "ops.jsonl")
    dj_root = os.path.abspath(a.dj_root)
    global CLASSES
    CLASSES = install(dj_root, os.path.abspath(a.simhash_dir))

    problems = []
    vectors = []
    for name in OPS:
        vectors += unit_records(dj_root, name)
    datasets = [("hand", hand_rows()), ("dj-unit", dj_unit_rows(dj_root)),
                ("corpus", corpus_rows(corpus, 120))]
    for name in OPS:
        vectors += dataset_vectors(name, CLASSES[name], datasets, problems)
    vectors += [{"kind": "rows", "dataset": d, "rows": rows} for d, rows in datasets]
    vectors += param_vectors(dj_root)
    dsi.write_jsonl(a.out, vectors)
    for p in problems:
        print(p, file=sys.stderr)
    kinds = {}
    for v in vectors:
        kinds[v["kind"]] = kinds.get(v["kind"], 0) + 1
    print("vectors:", kinds, file=sys.stderr)
    for v in vectors:
        if v["kind"] == "unit":
            print("unit", v["op"], v["test"], v["result"][:100], file=sys.stderr)


CLASSES = {}

if __name__ == "__main__":
    main()
