"""Shared by the make_ops_*.py generators in this folder, which import
Data-Juicer's operator code, unchanged, from an extracted source tree and run
it with stand-ins for its framework.

What is here
------------
- stub_module(name, path): an empty module put in sys.modules (a package when
  `path` is given, so that Data-Juicer's real files below it import).
- install_framework(dj_root, kind, base_name, base_cls): the stand-ins every
  generator needs: packages data_juicer, data_juicer.ops,
  data_juicer.ops.<kind>, data_juicer.utils and data_juicer.core;
  data_juicer.ops.base_op with an OPERATORS registry (Registry) and
  `base_name` (e.g. "Mapper") set to `base_cls`; for the unit tests
  data_juicer.core.data.NestedDataset (FakeDataset) and
  data_juicer.utils.unittest_utils.DataJuicerTestCaseBase
  (unittest.TestCase). Returns the registry.
- Mapper: stand-in for data_juicer.ops.base_op.Mapper.
- stub_model_utils(): data_juicer.utils.model_utils whose
  prepare_model(model_type="sentencepiece", lang=...) / get_model(key) give a
  real sentencepiece.SentencePieceProcessor loaded from
  tests/data/sentencepiece/en.sp.model FOR EVERY lang (the real code would
  download "<lang>.sp.model"); get_model(None) is None.
- load_op_classes(registry, kind, names): imports
  data_juicer/ops/<kind>/<name>.py and wraps each class's __init__ so that the
  instance keeps the arguments it was built with (self._vector_args: bound
  parameters and **kwargs, without self and *args).
- RECORDED and unit_test_records(dj_root, kind, name): runs Data-Juicer's
  tests/ops/<kind>/test_<name>.py method by method and yields what each
  method left in RECORDED (FakeDataset.map records (op, samples); a script
  may record otherwise). mapper_unit_cases() turns a mapper's records into
  (args, text, target) cases.
- load_corpus(path): the distinct inputs ({"id", "text"}) of
  shared/testvectors/ops.jsonl, in order.
- parse_command_line(doc): `dj_root [out] [--corpus PATH]`; the corpus
  defaults to shared/testvectors/ops.jsonl next to or above the repository.
  start(): that, then the stand-ins, the op classes and the corpus.
  generate(): a whole main() built on start() (see there).
- unit_inputs(name, texts): ids for the unit tests' input texts.
- err_str(e), write_jsonl(path, vectors).
"""
import argparse
import importlib
import importlib.util
import inspect
import json
import os
import sys
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SP_MODEL = os.path.join(HERE, "sentencepiece", "en.sp.model")


# ------------------------------------------------------------ framework

class Registry:
    def __init__(self, name):
        self.name = name
        self.modules = {}

    def register_module(self, name=None, module=None):
        def deco(cls):
            self.modules[name or cls.__name__] = cls
            return cls
        if module is not None:
            return deco(module)
        return deco


class Mapper:
    """Stand-in for data_juicer.ops.base_op.Mapper."""
    _batched_op = False

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")
        # the real Mapper wraps process_batched in catch_map_batches_exception,
        # which re-raises when skip_op_error is False (the default)
        self.process = self.process_batched

    def is_batched_op(self):
        return self._batched_op


RECORDED = []  # what the unit test being run handed to the framework


class FakeDataset:
    """Stand-in for data_juicer.core.data.NestedDataset."""

    def __init__(self, samples):
        self.samples = [dict(s) for s in samples]

    @classmethod
    def from_list(cls, samples):
        return cls(samples)

    def map(self, fn, *args, **kwargs):
        RECORDED.append((fn.__self__, [dict(s) for s in self.samples]))
        # hand back the targets so the test's own assertions pass; the real
        # comparison is done by the generator
        out = []
        for s in self.samples:
            s = dict(s)
            if "target" in s:
                s["text"] = s["target"]
            out.append(s)
        return FakeDataset(out)

    def __iter__(self):
        return iter(self.samples)

    def __len__(self):
        return len(self.samples)


def stub_module(name, path=None):
    m = types.ModuleType(name)
    if path is not None:
        m.__path__ = [path]
    sys.modules[name] = m
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, m)
    return m


def install_framework(dj_root, kind, base_name, base_cls):
    src = os.path.join(dj_root, "data_juicer")
    stub_module("data_juicer", src)
    stub_module("data_juicer.ops", os.path.join(src, "ops"))
    stub_module("data_juicer.ops." + kind, os.path.join(src, "ops", kind))
    base_op = stub_module("data_juicer.ops.base_op")
    base_op.OPERATORS = Registry("Operators")
    setattr(base_op, base_name, base_cls)
    stub_module("data_juicer.utils", os.path.join(src, "utils"))
    stub_module("data_juicer.core", os.path.join(src, "core"))
    data = stub_module("data_juicer.core.data")
    data.NestedDataset = FakeDataset
    uu = stub_module("data_juicer.utils.unittest_utils")
    uu.DataJuicerTestCaseBase = unittest.TestCase
    return base_op.OPERATORS


# -------------------------------------------------- sentencepiece models

class _SPKey(tuple):
    pass


_SP_CACHE = {}


def _prepare_model(model_type, **model_kwargs):
    assert model_type == "sentencepiece", model_type
    return _SPKey(("sentencepiece", model_kwargs.get("lang")))


def _get_model(model_key=None, rank=None, use_cuda=False):
    if model_key is None:
        return None
    if model_key not in _SP_CACHE:
        import sentencepiece
        sp = sentencepiece.SentencePieceProcessor()
        sp.load(SP_MODEL)  # every lang gets the same small English model
        _SP_CACHE[model_key] = sp
    return _SP_CACHE[model_key]


def stub_model_utils():
    """Call after install_framework (needs data_juicer.utils)."""
    mu = stub_module("data_juicer.utils.model_utils")
    mu.prepare_model = _prepare_model
    mu.get_model = _get_model
    return mu


# ------------------------------------------------------------ operators

def capture_args(cls):
    """Wraps cls.__init__ so that instances keep their arguments."""
    orig = cls.__init__
    sig = inspect.signature(orig)

    def init(self, *a, __orig=orig, __sig=sig, **kw):
        bound = __sig.bind(self, *a, **kw)
        args = {}
        for k, v in bound.arguments.items():
            if k in ("self", "args"):
                continue
            if k == "kwargs":
                args.update(v)
            else:
                args[k] = v
        self._vector_args = args
        __orig(self, *a, **kw)

    cls.__init__ = init
    return cls


def load_op_classes(registry, kind, names):
    """{name: class} for data_juicer/ops/<kind>/<name>.py, args captured."""
    classes = {}
    for name in names:
        importlib.import_module("data_juicer.ops.%s.%s" % (kind, name))
        classes[name] = capture_args(registry.modules[name])
    return classes


# ----------------------------------------------------------- unit tests

def unit_test_records(dj_root, kind, name, patch_class=None):
    """Runs tests/ops/<kind>/test_<name>.py; yields each RECORDED entry.

    Test classes in name order, their test methods in source order, each
    with setUp / tearDown; patch_class(c) is called on each class first.
    """
    path = os.path.join(dj_root, "tests", "ops", kind, "test_%s.py" % name)
    spec = importlib.util.spec_from_file_location("dj_unit_test_" + name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    for cname in sorted(vars(m)):
        c = getattr(m, cname)
        if not (isinstance(c, type) and issubclass(c, unittest.TestCase)
                and c.__module__ == m.__name__):
            continue
        if patch_class is not None:
            patch_class(c)
        meths = [k for k, v in vars(c).items() if k.startswith("test") and callable(v)]
        for meth in meths:
            del RECORDED[:]
            t = c(meth)
            t.setUp()
            getattr(t, meth)()
            t.tearDown()
            for rec in list(RECORDED):
                yield rec


def mapper_unit_cases(dj_root, name):
    """[(args, text, target), ...] from a mapper's unit tests: every sample
    of every dataset .map()-ed with an op (ops only built are left out)."""
    return [(dict(op._vector_args), s["text"], s.get("target"))
            for op, samples in unit_test_records(dj_root, "mapper", name)
            for s in samples]


# ----------------------------------------------------- inputs, outputs

def load_corpus(path):
    """The distinct inputs of ops.jsonl, {"id", "text"}, first seen first."""
    seen = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            i = json.loads(line)["input"]
            if i is not None and i["id"] not in seen:
                seen[i["id"]] = {"id": i["id"], "text": i["text"]}
    return list(seen.values())


def parse_command_line(doc):
    """Returns (absolute dj_root, out path or None, corpus path)."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("dj_root", help="root of a Data-Juicer 1.4.3 checkout")
    ap.add_argument("out", nargs="?", help="output .jsonl (default stdout)")
    ap.add_argument("--corpus", help="shared/testvectors/ops.jsonl")
    a = ap.parse_args()

    corpus_path = a.corpus
    if corpus_path is None:
        for c in (os.path.join(ROOT, "shared", "testvectors", "ops.jsonl"),
                  os.path.join(ROOT, "..", "shared", "testvectors", "ops.jsonl")):
            if os.path.exists(c):
                corpus_path = c
                break
    if corpus_path is None:
        sys.exit("corpus not found; pass --corpus")
    return os.path.abspath(a.dj_root), a.out, corpus_path


def start(doc, install_stubs, kind, names):
    """Parses the command line, installs the stand-ins (install_stubs(dj_root)
    returns the OPERATORS registry) and imports the ops.

    Returns (absolute dj_root, out path or None, {name: class}, corpus).
    """
    dj_root, out_path, corpus_path = parse_command_line(doc)
    registry = install_stubs(dj_root)
    classes = load_op_classes(registry, kind, names)
    return dj_root, out_path, classes, load_corpus(corpus_path)


def generate(doc, install_stubs, kind, names, harvest_unit_cases,
             hand_inputs, op_vectors, report):
    """The main() of a generator that collects problems for stderr.

    After start(): for each op name, op_vectors(name, cls, corpus, hand,
    unit[name], problems) gives its vectors (hand = hand_inputs(),
    unit = harvest_unit_cases(dj_root)); they are written with
    write_jsonl, then each problem and report(vectors) go to stderr.
    """
    dj_root, out_path, classes, corpus = start(doc, install_stubs, kind, names)
    hand = hand_inputs()
    unit = harvest_unit_cases(dj_root)

    problems = []
    vectors = []
    for name in names:
        vectors += op_vectors(name, classes[name], corpus, hand, unit[name],
                              problems)
    write_jsonl(out_path, vectors)
    for p in problems:
        print(p, file=sys.stderr)
    report(vectors)


def unit_inputs(name, texts):
    """({text: id}, [{"id", "text"}]): one "dj-unit-<name>-NN" id per
    distinct text, in first-seen order."""
    uids = {}
    for text in texts:
        if text not in uids:
            uids[text] = "dj-unit-%s-%02d" % (name, len(uids))
    return uids, [{"id": i, "text": t} for t, i in uids.items()]


def err_str(e):
    return "%s: %s" % (type(e).__name__, e)


def write_jsonl(path, vectors):
    """One JSON object a line (UTF-8, "\\n") to path, or stdout if None."""
    out = open(path, "w", encoding="utf-8", newline="\n") if path else sys.stdout
    for v in vectors:
        out.write(json.dumps(v, ensure_ascii=False) + "\n")
    if path:
        out.close()
