#!/usr/bin/python3
"""Writes tests/data/ops-word-lists.jsonl(.zst): reference vectors for
Data-Juicer's flagged_words_filter and stopwords_filter, in the layout of
ops.jsonl (see ops-vectors-README.md).

What it runs
------------
Data-Juicer's own code, unchanged, imported from a Data-Juicer checkout given
on the command line:
  data_juicer/ops/filter/flagged_words_filter.py, stopwords_filter.py
  data_juicer/ops/common/ (helper_func.py, special_characters.py)
  data_juicer/utils/asset_utils.py (load_words_asset), utils/constant.py
  tests/ops/filter/test_{flagged_words,stopwords}_filter.py (unit tests,
  harvested for their inputs, args and expected results)
Only the framework around them is replaced by stand-ins (install_stubs, and
dj_stand_ins.py, shared with the other make_ops_*.py):
- data_juicer.ops.base_op: OPERATORS registry; a Filter base whose __init__
  takes *args, **kwargs and sets text_key (default "text"),
  min_closed_interval / max_closed_interval (default True) and
  reversed_range (default False; when true both closed flags are flipped), and
  whose get_keep_boolean is Data-Juicer's (base_op.py) verbatim.
- data_juicer.ops.op_fusion: an INTER_WORDS registry.
- data_juicer.utils.model_utils: prepare_model(model_type="sentencepiece",
  lang=...) / get_model(key) give a real sentencepiece.SentencePieceProcessor
  loaded from tests/data/sentencepiece/en.sp.model FOR EVERY lang (the real
  code would download "<lang>.sp.model"); get_model(None) is None.
- data_juicer.utils.cache_utils: only DATA_JUICER_ASSETS_CACHE (= ASSET_DIR,
  the default word-list directory), set to tests/data/assets so that the unit
  tests, which pass no directory, read the same lists.
- loguru / zstandard (imported by asset_utils / constant, unused here):
  empty stand-ins when not installed.
- for harvesting the unit tests: data_juicer.core.data.NestedDataset and
  data_juicer.utils.unittest_utils.DataJuicerTestCaseBase (unittest.TestCase);
  each test's _run_*_filter helper is replaced by a recorder.
Word lists: tests/data/assets/{flagged_words,stopwords}.json, built by
tests/data/assets/make_word_assets.py from the npm packages naughty-words
1.2.0 and stopwords-iso 1.1.0 (NOT the lists Data-Juicer downloads). In
"args" the directory is written as "@ASSETS@".

How each op is run, as the framework does:
- flagged_words_filter (batched): samples = {"text": [t],
  "__dj__stats__": [{}]}; op.compute_stats_batched(samples);
  keep = list(op.process_batched(samples))[0]. One batch of all inputs is
  checked to give the same stats and keeps.
- stopwords_filter (single): sample = {"text": t, "__dj__stats__": {}};
  op.compute_stats_single(sample); keep = op.process_single(sample).
An exception gives "error": "<Type>: <message>", stats null, keep null; a
constructor exception gives one vector with "input": null.

Versions used for the committed file
------------------------------------
- Data-Juicer 1.4.3, mirror commit c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b
- Debian bookworm /usr/bin/python3 3.11.2 (Unicode 14.0)
- regex 2022.10.31 (regex.__version__ 2.5.123), sentencepiece 0.1.97,
  emoji 2.2.0, pydantic 1.10.4 (PositiveInt in the signatures only)
- naughty-words 1.2.0, stopwords-iso 1.1.0 (npm)

Regenerate (from the repository root)
-------------------------------------
  apt-get install python3-regex python3-sentencepiece python3-emoji python3-pydantic
  mkdir -p /tmp/dj-src
  git -C /work/.mirror/modelscope+data-juicer/repo archive \
      c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \
      data_juicer/ops data_juicer/utils tests/ops/filter | tar -x -C /tmp/dj-src
  /usr/bin/python3 tests/data/make_ops_word_lists.py /tmp/dj-src \
      tests/data/ops-word-lists.jsonl
  zstd -19 -f tests/data/ops-word-lists.jsonl && rm tests/data/ops-word-lists.jsonl
(git archive may print "error: invalid object ... video3-no-audio.mp4"; it
exits 0 and the extraction is complete.) Counts and any unit-test mismatch go
to stderr. The corpus defaults to shared/testvectors/ops.jsonl next to or
above the repo (--corpus to override).

Deterministic: no randomness, fixed input and variant order.
"""
import importlib
import json
import os
import sys
import types

import dj_stand_ins as dj
from dj_stand_ins import err_str

ASSETS = os.path.join(dj.HERE, "assets")
ASSETS_TOKEN = "@ASSETS@"

OPS = ["flagged_words_filter", "stopwords_filter"]
DIR_ARG = {"flagged_words_filter": "flagged_words_dir",
           "stopwords_filter": "stopwords_dir"}

# The variants asked for, then a few marked "extra". The directory argument is
# added to every variant (as "@ASSETS@").
VARIANTS = {
    "flagged_words_filter": [
        {"lang": "en"},
        {"lang": "all"},
        {"lang": "zh", "use_words_aug": True, "words_aug_group_sizes": [2],
         "words_aug_join_char": ""},
        # naughty-words has no "vi" list: raises KeyError wherever there is a
        # word left after refinement
        {"lang": "vi", "use_words_aug": True, "words_aug_group_sizes": [2, 3],
         "words_aug_join_char": " "},
        {"lang": "en", "tokenization": True},
        {"lang": "en", "min_ratio": 0.01, "max_ratio": 0.02},
        {"lang": "xx"},
        # extra: multi-word entries ("blue waffle") can only match through
        # augmentation joined with " "
        {"lang": "en", "use_words_aug": True, "words_aug_group_sizes": [2, 3],
         "words_aug_join_char": " "},
    ],
    "stopwords_filter": [
        {"lang": "en"},
        {"lang": "all"},
        {"lang": "fr", "min_ratio": 0.1},
        {"lang": "zh", "use_words_aug": True, "words_aug_group_sizes": [2]},
        {"lang": "en", "tokenization": True},
        {"lang": "en", "max_ratio": 0.4},
        {"lang": "xx"},
        # extra: Vietnamese multi-syllable stopwords ("bao giờ") through
        # augmentation joined with " "
        {"lang": "vi", "use_words_aug": True, "words_aug_group_sizes": [2, 3],
         "words_aug_join_char": " "},
    ],
}


# ---------------------------------------------------------------- stand-ins

class _Filter:
    """Stand-in for data_juicer.ops.base_op.Filter (the parts these ops use)."""
    _batched_op = False

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")
        self.min_closed_interval = kwargs.get("min_closed_interval", True)
        self.max_closed_interval = kwargs.get("max_closed_interval", True)
        self.reversed_range = kwargs.get("reversed_range", False)
        if self.reversed_range:
            self.min_closed_interval = not self.min_closed_interval
            self.max_closed_interval = not self.max_closed_interval

    def is_batched_op(self):
        return self._batched_op

    # copied from data_juicer/ops/base_op.py (Filter.get_keep_boolean)
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


def _record(self, dataset, target_list, op):
    # RECORDED: (op instance, input texts, expected kept texts)
    dj.RECORDED.append((op, [s["text"] for s in dataset.samples],
                        [t["text"] for t in target_list]))


def install_stubs(dj_root):
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
    cu = dj.stub_module("data_juicer.utils.cache_utils")
    cu.DATA_JUICER_ASSETS_CACHE = ASSETS
    dj.stub_model_utils()
    return registry


# ------------------------------------------------------------------ inputs

def _patch_test_class(c):
    # each test's _run_*_filter helper is replaced by the recorder
    for k in list(vars(c)):
        if k.startswith("_run_"):
            setattr(c, k, _record)


def harvest_unit_cases(dj_root):
    """Returns {op: [(args, [texts], [expected kept texts]), ...]}."""
    return {name: [(dict(op._vector_args), texts, targets)
                   for op, texts, targets in dj.unit_test_records(
                       dj_root, "filter", name, _patch_test_class)]
            for name in OPS}


def hand_inputs():
    t = []
    # --- English prose, stopwords
    t += [
        "The quick brown fox jumps over the lazy dog.",
        "It is what it is, and there is nothing we can do about it.",
        "Do you need a cup of coffee?",
        "I'd rather not say; it's none of your business, isn't it?",
        "THE AND OF TO IN IS YOU THAT IT HE",
        "Photosynthesis converts luminous energy into chemical energy efficiently.",
        "a b c d e f g h i j k l m n o p q r s t u v w x y z",
        "The\u00a0cat sat\u00a0on the mat",  # NBSP: not a separator
        "the\u3000and of",  # U+3000 is special but not a separator
        "the\rand\x0bof\x0cto",  # \r \x0b \x0c: not separators
        "\u2028the\u2028 and\u2029",
        "the  \t\t  and\n\n\nof   ",
        "'tis the season, 'twas the night; you'll see, we've done it",
        "(the) [and] {of} \"to\" 'in' ...is... --you-- ¿that? ¡it!",
        "1the 2and3 of4 99to99",
    ]
    # --- English profanity, cases and punctuation
    t += [
        "Today is anal cumshot day",
        "Fuck you doggystyle!",
        "FUCK this SHIT, you Bastard!!!",
        "What the fuck? What the fuck!? (fuck) \"fuck\" 'fuck' fuck... fuck,",
        "fucking fuckin fucked fucker fucks",
        "f*ck sh!t a$$ b1tch",
        "Is the g-spot real? Ask about 2g1c and 2 girls 1 cup.",
        "I ate a blue waffle at the alabama hot pocket restaurant.",
        "You are such a blow job fan, said the ball gag salesman",
        "donkey punch",
        "the 🖕 gesture 🖕🏻 is rude",
        "fuck123 123fuck fu2ck",
        "ＦＵＣＫ full-width and Ｆｕｃｋ",
        "ass. Ass? ASS! aSs; Asshole asshole's",
        "bitch\tbitch\nbitch bitch",
        "clean sentence with one word: bastard",
        "Bastardo is Spanish, bastardo is in the English list too",
    ]
    # --- exact ratio boundaries (1 flagged in N words; k stopwords in N words)
    for n in (49, 50, 51, 99, 100, 101):
        t.append(" ".join(["fuck"] + ["lorem"] * (n - 1)))
    t += [
        "the and lorem ipsum dolor",          # 2/5 = 0.4
        "the and of lorem ipsum dolor sit",   # 3/7
        "le " + " ".join(["zzz"] * 9),        # 1/10 (fr)
        "le la " + " ".join(["zzz"] * 17),    # 2/19
        "the and of to lorem ipsum dolor sit amet consectetur",  # 0.4
    ]
    # --- French / German / Spanish
    t += [
        "Le chat est sur la table, et il dort depuis ce matin.",
        "C'est l'homme qui a dit qu'il viendrait demain avec nous.",
        "Quel bordel ! Ce connard a encore volé ma bite de fils de pute.",
        "Où est la gare ? Je ne sais pas, mais elle n'est pas loin d'ici.",
        "Der Hund und die Katze sind nicht hier, aber sie kommen bald.",
        "Scheiße! Du Arschloch, SCHEISSE, scheiße.",
        "Straße STRASSE Maß ẞ die Über über",
        "MILF milf Milf",
        "El perro y el gato están en la casa con nosotros.",
        "¿Por qué no vienes? Porque no quiero, ¡cabrón! Cabrón Hijo de puta",
        "Concha de tu madre, gilipollas, Gilipollas",
        "El niño comió pan; la niña bebió leche.",
    ]
    # --- Chinese (no spaces: one word per run; with spaces: augmentation)
    t += [
        "你是个卖淫女",
        "他 妈 的 这 是 什么",
        "他妈 的",
        "你 好 ， 请 问 你 是 谁",
        "一个 上 士 一 个",
        "一个人在上海",
        "根据算子使用情况增量安装方案确定",
        "三 级 片 和 打 飞 机",
        "我 的 天 啊 ！ 傻 逼",
        "这是一个测试。这是另一个测试！",
        "卖B 卖b 妈B",
        "13. 13点 十三 点",
        "emoji表情测试下😊，😸31231\n",
    ]
    # --- Vietnamese
    t += [
        "Tôi không biết bao giờ anh ấy sẽ đến.",
        "Bao giờ bạn về? Bao nhiêu tiền? Biết đâu chừng.",
        "a ha ai ai ai nấy bao giờ",
        "Việt Nam là một đất nước xinh đẹp",
        "biết bao nhiêu biết chừng nào",
    ]
    # --- Japanese / Russian / Greek / Turkish / other scripts
    t += [
        "これは テスト です アナル オナニー",
        "エクスタシー ー ッ ツ シ",
        "Это тест и он не работает, блядь",
        "Я НЕ ЗНАЮ ЧТО ДЕЛАТЬ",
        "ΟΔΟΣ οδος Σ ΣΑΣ και ΚΑΙ",
        "İstanbul İ ı DIYARBAKIR amcık amı",
        "ǅ ǈ Ǌ ﬀ ﬁ",
        "the 中文 and 日本語 of русский to",
        "مرحبا كيف حالك آه انه",
        "שלום עולם the",
    ]
    # --- separators, empty and degenerate texts
    t += [
        "",
        " ",
        "\n\t\n",
        "!!! ??? ...",
        "123 456 789",
        "😊 😸 🖕",
        "the",
        "fuck",
        "\u200bthe\u200b and\u200d",
        "\ufeffthe and",
        "the\u2581and ▁the ▁",
        "x" * 300 + " the",
    ]
    return [{"id": "hand-%02d" % i, "text": s} for i, s in enumerate(t)]


# ------------------------------------------------------------------ running

def run_one(op_name, op, text):
    """Returns (stats, keep) for one text, as the framework runs the op."""
    if op_name == "flagged_words_filter":
        samples = {"text": [text], "__dj__stats__": [{}]}
        samples = op.compute_stats_batched(samples)
        keep = list(op.process_batched(samples))[0]
        return samples["__dj__stats__"][0], keep
    sample = {"text": text, "__dj__stats__": {}}
    sample = op.compute_stats_single(sample)
    keep = op.process_single(sample)
    return sample["__dj__stats__"], keep


def run_variant(cls, op_name, args, inputs, problems):
    shown = dict(args)
    shown[DIR_ARG[op_name]] = ASSETS_TOKEN
    real = dict(args)
    real[DIR_ARG[op_name]] = ASSETS
    vecs = []
    try:
        op = cls(**real)
    except Exception as e:
        return [{"op": op_name, "args": shown, "input": None, "output_text": None,
                 "error": err_str(e), "stats": None, "keep": None}]
    ok = []
    for inp in inputs:
        v = {"op": op_name, "args": shown, "input": dict(inp), "output_text": None}
        try:
            stats, keep = run_one(op_name, op, inp["text"])
            v["stats"] = stats
            v["keep"] = keep
            ok.append(v)
        except Exception as e:
            v["error"] = err_str(e)
            v["stats"] = None
            v["keep"] = None
        vecs.append(v)
    if op_name == "flagged_words_filter" and ok:
        # one batch of all inputs that did not raise must agree
        op2 = cls(**real)
        samples = {"text": [v["input"]["text"] for v in ok],
                   "__dj__stats__": [{} for _ in ok]}
        samples = op2.compute_stats_batched(samples)
        keeps = list(op2.process_batched(samples))
        for j, v in enumerate(ok):
            if samples["__dj__stats__"][j] != v["stats"] or keeps[j] != v["keep"]:
                problems.append("batch != single: %s %r %s" % (op_name, args, v["input"]["id"]))
    return vecs


def op_vectors(name, cls, corpus, hand, unit, problems):
    """The vectors of one op: its variants over all inputs, then its
    unit-test cases with their own args."""
    vectors = []
    uids, unit_inputs = dj.unit_inputs(
        name, [s for _, texts, _ in unit for s in texts])
    inputs = corpus + unit_inputs + hand
    for args in VARIANTS[name]:
        vectors += run_variant(cls, name, args, inputs, problems)
    # the unit-test cases with their own args (the directory left out:
    # the tests use the default, which is tests/data/assets here), checked
    # against the kept texts the tests expect
    for args, texts, targets in unit:
        args = {k: v for k, v in args.items() if k != DIR_ARG[name]}
        inps = [{"id": uids[s], "text": s} for s in texts]
        vs = run_variant(cls, name, args, inps, problems)
        if args not in VARIANTS[name]:
            vectors += vs
        kept = [v["input"]["text"] for v in vs if v.get("keep")]
        if kept != targets:
            problems.append(
                "unit mismatch: %s args=%r\n    kept:     %r\n    expected: %r\n    stats: %r"
                % (name, args, kept, targets,
                   [(v["input"]["id"], v.get("stats"), v.get("keep"), v.get("error")) for v in vs]))
    return vectors


def report(vectors):
    counts = {}
    for v in vectors:
        k = (v["op"], json.dumps(v["args"], ensure_ascii=False))
        c = counts.setdefault(k, [0, 0, 0, 0])
        c[0] += 1
        if "error" in v:
            c[3] += 1
        elif v["keep"]:
            c[1] += 1
        else:
            c[2] += 1
    print("  total  keep  drop error  op args", file=sys.stderr)
    for (op, args), (n, k, d, e) in counts.items():
        print("%7d %5d %5d %5d  %s %s" % (n, k, d, e, op, args), file=sys.stderr)
    print("%7d vectors" % len(vectors), file=sys.stderr)


def main():
    dj.generate(__doc__, install_stubs, "filter", OPS, harvest_unit_cases,
                hand_inputs, op_vectors, report)


if __name__ == "__main__":
    main()
