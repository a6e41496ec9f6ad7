#!/usr/bin/python3
"""Writes tests/data/ops-perplexity.jsonl: Data-Juicer 1.4.3's perplexity_filter
run, unchanged, on the operator corpus, the unit-test texts and hand-written
inputs, with the real sentencepiece and kenlm Python modules.

Data-Juicer's own code is imported from an extracted source tree:
data_juicer/ops/filter/perplexity_filter.py, data_juicer/ops/common
(get_words_from_document) and data_juicer/utils/constant.py. Stand-ins
(dj_stand_ins.py and below): base_op (OPERATORS, a Filter with Data-Juicer's
get_keep_boolean and reversed_range handling), op_fusion (INTER_WORDS) and
model_utils, whose prepare_model / get_model give
- "sentencepiece": tests/data/sentencepiece/en.sp.model for every lang;
- "kenlm": kenlm.Model(<the test model of LANG_MODELS[lang]>) from
  tests/data/kenlm (decompressed), where Data-Juicer would download
  <lang>.arpa.bin from its model hub.
The operator runs as the framework runs it: compute_stats_batched on a batch
of one sample (stats {}), then process_batched.

kenlm is the Python module of github.com/kpu/kenlm built from its
python/kenlm.cpp (KENLM_MAX_ORDER=6), e.g.
  g++ -O2 -shared -fPIC -DKENLM_MAX_ORDER=6 -DNDEBUG -I. -I/usr/include/python3.11 \\
      python/kenlm.cpp python/score_sentence.cc build/lib/libkenlm.a build/lib/libkenlm_util.a \\
      -lz -lbz2 -llzma -o kenlm$(python3-config --extension-suffix)
(after `cmake .. && make kenlm kenlm_util` in kenlm/build).

Usage (from the repository root):
  /usr/bin/python3 tests/data/make_ops_perplexity.py DJ_ROOT KENLM_MODULE_DIR OUT \\
      [--corpus shared/testvectors/ops.jsonl]
  zstd -19 -f --rm OUT
"""
import argparse
import importlib
import json
import os
import subprocess
import sys
import tempfile
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dj_stand_ins as dj  # noqa: E402
from dj_stand_ins import err_str  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
KENLM_DIR = os.path.join(HERE, "kenlm")

# lang -> test model served as <lang>.arpa.bin (tests/unit/operator_vectors_test.cc
# copies the same files under the same names).
LANG_MODELS = {
    "en": "o5.probing",      # order 5, probing: how cc_net built Data-Juicer's models
    "zz": "o3.trie",         # order 3, trie
    "yy": "o4-pruned.arpa",  # order 4, pruned, ARPA text under the .arpa.bin name
    "ww": "o5-pruned.trie",  # order 5, pruned, trie
}

VARIANTS = [
    {},
    {"lang": "en", "max_ppl": 900},
    {"lang": "en", "min_ppl": 200, "max_ppl": 2000, "reversed_range": True},
    {"lang": "zz", "min_ppl": 100, "max_ppl": 3000},
    {"lang": "yy", "min_ppl": 50.5, "max_ppl": 800, "min_closed_interval": False},
    {"lang": "ww", "max_ppl": 1200},
]

HAND = [
    "", " ", "\n", "\n\n\n", "a", "the the the the the the",
    "one line\nsecond line\n\nfourth after an empty one",
    "tabs\tbetween\twords", "nul\x00inside the text", "\x00", "no-break\xa0space words",
    "line\x0bbreaks\x0cof\x1cevery\x1dkind\x1e\x85\u2028\u2029end", "crlf\r\nline\rcr",
    "Today is Sunday and it's a happy day!", "zzzz qqqq xxxx",
    "<s> </s> <unk> markers as words", "数据处理 中文文本", "emoji 😊😸 text",
    "a" * 500, " ".join(["word"] * 300), "UPPER case And MiXeD",
]


class _Filter:
    """Stand-in for data_juicer.ops.base_op.Filter (the parts this op uses)."""
    _batched_op = False

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")
        self.batch_size = kwargs.get("batch_size", 1000)
        self.min_closed_interval = kwargs.get("min_closed_interval", True)
        self.max_closed_interval = kwargs.get("max_closed_interval", True)
        self.reversed_range = kwargs.get("reversed_range", False)
        if self.reversed_range:
            self.min_closed_interval = not self.min_closed_interval
            self.max_closed_interval = not self.max_closed_interval

    def is_batched_op(self):
        return self._batched_op

    # as data_juicer/ops/base_op.py (Filter.get_keep_boolean)
    def get_keep_boolean(self, val, min_val=None, max_val=None):
        res_bool = True
        if min_val is not None:
            res_bool = res_bool and (val >= min_val if self.min_closed_interval else val > min_val)
        if max_val is not None:
            res_bool = res_bool and (val <= max_val if self.max_closed_interval else val < max_val)
        if self.reversed_range:
            res_bool = not res_bool
        return res_bool


class _Logger:
    def __getattr__(self, name):
        return lambda *a, **k: None


_MODELS = {}


def install_stubs(dj_root, model_dir):
    import kenlm
    import sentencepiece
    for name in ("loguru", "zstandard"):
        try:
            importlib.import_module(name)
        except ImportError:
            m = types.ModuleType(name)
            m.logger = _Logger()
            sys.modules[name] = m
    registry = dj.install_framework(dj_root, "filter", "Filter", _Filter)
    fusion = dj.stub_module("data_juicer.ops.op_fusion")
    fusion.INTER_WORDS = dj.Registry("InterWords")
    mu = dj.stub_module("data_juicer.utils.model_utils")

    def prepare_model(model_type, **kw):
        return (model_type, kw.get("lang"))

    def get_model(key=None, rank=None, use_cuda=False):
        if key is None:
            return None
        if key not in _MODELS:
            kind, lang = key
            if kind == "sentencepiece":
                sp = sentencepiece.SentencePieceProcessor()
                sp.load(dj.SP_MODEL)
                _MODELS[key] = sp
            else:
                assert kind == "kenlm", kind
                # KeyError for a lang without a model, as a failed download raises
                _MODELS[key] = kenlm.Model(os.path.join(model_dir, LANG_MODELS[lang]))
        return _MODELS[key]

    mu.prepare_model = prepare_model
    mu.get_model = get_model
    return registry


def harvest_unit_cases(dj_root):
    """[(args, [texts], [expected kept texts])] of test_perplexity_filter.py."""
    cases = []

    def record(self, dataset, target_list, op, context=False):
        cases.append((dict(op._vector_args), [s["text"] for s in dataset.samples],
                      [t["text"] for t in target_list]))
        raise StopIteration  # the test goes on to inspect a real dataset

    path = os.path.join(dj_root, "tests", "ops", "filter", "test_perplexity_filter.py")
    spec = importlib.util.spec_from_file_location("dj_unit_test_perplexity", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    c = m.PerplexityFilterTest
    c._run_perplexity_filter = record
    for meth in [k for k in vars(c) if k.startswith("test")]:
        try:
            getattr(c(meth), meth)()
        except StopIteration:
            pass
    return cases


def run_one(op, text):
    samples = {"text": [text], "__dj__stats__": [{}]}
    samples = op.compute_stats_batched(samples)
    keep = list(op.process_batched(samples))[0]
    return samples["__dj__stats__"][0], keep


def run_variant(cls, args, inputs):
    try:
        op = cls(**args)
        op.compute_stats_batched({"text": [""], "__dj__stats__": [{}]})  # loads both models
    except Exception as e:
        return [{"op": "perplexity_filter", "args": args, "input": None, "output_text": None,
                 "error": err_str(e), "stats": None, "keep": None}]
    out = []
    for inp in inputs:
        v = {"op": "perplexity_filter", "args": args, "input": dict(inp), "output_text": None}
        try:
            v["stats"], v["keep"] = run_one(op, inp["text"])
        except Exception as e:
            v.update({"error": err_str(e), "stats": None, "keep": None})
        out.append(v)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dj_root")
    ap.add_argument("kenlm_module_dir")
    ap.add_argument("out")
    ap.add_argument("--corpus", default=os.path.join(dj.ROOT, "..", "shared", "testvectors",
                                                     "ops.jsonl"))
    a = ap.parse_args()
    sys.path.insert(0, os.path.abspath(a.kenlm_module_dir))
    with tempfile.TemporaryDirectory() as model_dir:
        for name in set(LANG_MODELS.values()):
            subprocess.run(["zstd", "-dqf", os.path.join(KENLM_DIR, name + ".zst"), "-o",
                            os.path.join(model_dir, name)], check=True)
        registry = install_stubs(os.path.abspath(a.dj_root), model_dir)
        cls = dj.load_op_classes(registry, "filter", ["perplexity_filter"])["perplexity_filter"]
        corpus = dj.load_corpus(a.corpus)
        unit = harvest_unit_cases(os.path.abspath(a.dj_root))
        uids, unit_inputs = dj.unit_inputs("perplexity_filter",
                                           [t for _, texts, _ in unit for t in texts])
        hand = [{"id": "hand-%02d" % i, "text": t} for i, t in enumerate(HAND)]
        inputs = corpus + unit_inputs + hand
        vectors = []
        for args in VARIANTS:
            vectors += run_variant(cls, args, inputs)
        # a language without a model: Data-Juicer fails to load it
        vectors += run_variant(cls, {"lang": "qq"}, inputs[:1])
        problems = []
        for args, texts, targets in unit:
            args = {k: v for k, v in args.items() if k != "batch_size"}
            vs = run_variant(cls, args, [{"id": uids[t], "text": t} for t in texts])
            if args not in VARIANTS:
                vectors += vs
            kept = [v["input"]["text"] for v in vs if v.get("keep")]
            if kept != targets:
                problems.append("unit test expects %r kept, the test models keep %r (%r)"
                                % (targets, kept, [v.get("stats") for v in vs]))
    dj.write_jsonl(a.out, vectors)
    for p in problems:
        print(p, file=sys.stderr)
    print("%d vectors" % len(vectors), file=sys.stderr)


if __name__ == "__main__":
    main()
