#!/usr/bin/python3
"""Writes tests/data/ops-chinese-convert.jsonl(.zst): reference vectors for
Data-Juicer's chinese_convert_mapper, in the layout of ops.jsonl.

What it runs
------------
Data-Juicer's own operator code, unchanged, imported from a Data-Juicer
checkout given on the command line:

  data_juicer/ops/mapper/chinese_convert_mapper.py
  tests/ops/mapper/test_chinese_convert_mapper.py (unit tests, to harvest cases)

Data-Juicer calls the Python `opencc` package (PyPI opencc==1.1.9, a pybind11
wrapper around the OpenCC C++ library with its own bundled dictionaries):
`opencc.OpenCC(mode + ".json").convert(text)`. That package is not installable
here, so this script defines a minimal stand-in module `opencc` (see
_make_opencc_module) with a class OpenCC(config) whose `.config` is the config
string it was given and whose `.convert(text)` encodes the text as UTF-8
(strict), calls Debian's libopencc through ctypes
(opencc_open / opencc_convert_utf8(handle, bytes, len) /
opencc_convert_utf8_free) and decodes the result as UTF-8 (strict). It is put
in sys.modules["opencc"] before Data-Juicer's module is imported.

Stand-ins for the framework only (see install_stubs, and dj_stand_ins.py,
shared with the other make_ops_*.py):
- data_juicer.ops.base_op: an OPERATORS registry with register_module and a
  Mapper base whose __init__ takes *args, **kwargs, sets
  self.text_key = kwargs.get("text_key", "text") and, like the real one with
  skip_op_error=False (the default), makes `process` the batched method
  (exceptions propagate).
- data_juicer.utils.lazy_loader.LazyLoader(name): returns
  importlib.import_module(name), i.e. the stand-in from sys.modules (the real
  one imports lazily and may pip-install; it needs tomli and loguru).
- For harvesting the unit tests only: data_juicer.core.data.NestedDataset (a
  recorder of the samples and the op given to .map) and
  data_juicer.utils.unittest_utils.DataJuicerTestCaseBase (unittest.TestCase).

The mapper is run as the framework runs batched mappers:
op.process_batched({"text": [text]}), one sample per batch; the script checks
that one batch of all inputs gives the same texts, and that interleaving two
instances of different modes (which share Data-Juicer's module-global
OPENCC_CONVERTER) gives the same texts too.

Versions used for the committed file
------------------------------------
- Data-Juicer 1.4.3, mirror commit c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b
- OpenCC library AND dictionaries: Debian's 1.1.6
  (`dpkg-query -W libopencc1.1` -> 1.1.6+ds1-1; libopencc.so.1.1, configs and
  .ocd2 dictionaries in /usr/share/opencc). Data-Juicer pins the PyPI package
  opencc==1.1.9, whose bundled dictionaries may differ for some words.
- Debian bookworm /usr/bin/python3 3.11.2

With these dictionaries 40 of Data-Juicer's 42 unit-test cases give the
expected text; the two others differ because Debian 1.1.6's TWPhrases maps
信息安全 -> 資訊保安 (and TWPhrasesRev 資訊保安 -> 信息安全):
  s2twp 网络连接异常，请检查信息安全: expected 網路連線異常，請檢查資訊安全,
        got 網路連線異常，請檢查資訊保安
  tw2sp 網路連線異常，請檢查資訊保安: expected 网络连接异常，请检查信息保安,
        got 网络连接异常，请检查信息安全
The vectors record what the code gives here (the "got" texts).

Regenerate
----------
  apt-get install libopencc1.1 libopencc-data
  mkdir -p /tmp/dj-src
  git -C /work/.mirror/modelscope+data-juicer/repo archive \\
      c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \\
      data_juicer/ops/mapper/chinese_convert_mapper.py \\
      tests/ops/mapper/test_chinese_convert_mapper.py | tar -x -C /tmp/dj-src
  /usr/bin/python3 tests/data/make_ops_chinese_convert.py /tmp/dj-src \\
      tests/data/ops-chinese-convert.jsonl
  zstd -19 -f tests/data/ops-chinese-convert.jsonl && rm tests/data/ops-chinese-convert.jsonl
(git archive may print "error: invalid object ... video3-no-audio.mp4" for a
file outside those paths in the partial mirror; it exits 0.)
Run from the repository root. Summary counts and any unit-test mismatch go to
stderr. The corpus defaults to shared/testvectors/ops.jsonl next to or above
the repo (--corpus to override). The output goes to stdout when no path is
given. The script is deterministic: no randomness, fixed input order.
"""
import ctypes
import ctypes.util
import importlib
import json
import os
import sys
import types

import dj_stand_ins as dj
from dj_stand_ins import err_str

OP = "chinese_convert_mapper"
MODES = ["s2t", "t2s", "s2tw", "tw2s", "s2hk", "hk2s", "s2twp", "tw2sp",
         "t2tw", "tw2t", "hk2t", "t2hk", "t2jp", "jp2t"]
# the listed modes, then one invalid mode (the constructor asserts)
VARIANTS = [{"mode": m} for m in MODES] + [{"mode": "xx"}]


# ------------------------------------------------------- opencc stand-in

def _load_libopencc():
    for name in ("libopencc.so.1.1", ctypes.util.find_library("opencc"),
                 "libopencc.so"):
        if not name:
            continue
        try:
            return ctypes.CDLL(name)
        except OSError:
            pass
    raise OSError("libopencc not found")


def _make_opencc_module():
    lib = _load_libopencc()
    lib.opencc_open.argtypes = [ctypes.c_char_p]
    lib.opencc_open.restype = ctypes.c_void_p
    lib.opencc_close.argtypes = [ctypes.c_void_p]
    lib.opencc_close.restype = ctypes.c_int
    lib.opencc_convert_utf8.argtypes = [ctypes.c_void_p, ctypes.c_char_p,
                                        ctypes.c_size_t]
    lib.opencc_convert_utf8.restype = ctypes.c_void_p
    lib.opencc_convert_utf8_free.argtypes = [ctypes.c_void_p]
    lib.opencc_convert_utf8_free.restype = None
    lib.opencc_error.argtypes = []
    lib.opencc_error.restype = ctypes.c_char_p

    m = types.ModuleType("opencc")
    m.__file__ = "<make_ops_chinese_convert stand-in>"
    m.__version__ = "libopencc (Debian 1.1.6) via ctypes"

    class OpenCC:
        """Stand-in for the PyPI opencc.OpenCC (pybind11 on OpenCC C++).

        The real class appends ".json" when missing and, when the file does
        not exist, joins it to its bundled share dir; its `.config` is then a
        full path ending in "<mode>.json". libopencc resolves a bare
        "<mode>.json" against its own data dir (/usr/share/opencc), so here
        `.config` stays the string given; Data-Juicer only tests
        `.config.endswith(mode + ".json")`, which holds either way.
        """

        def __init__(self, config="t2s"):
            if not config.endswith(".json"):
                config += ".json"
            h = lib.opencc_open(config.encode("utf-8"))
            if not h or h == ctypes.c_void_p(-1).value:
                err = lib.opencc_error()
                raise Exception((err or b"").decode("utf-8", "replace"))
            self._h = h
            self.config = config

        def convert(self, text):
            if isinstance(text, str):
                text = text.encode("utf-8")  # strict, as the real wrapper
            p = lib.opencc_convert_utf8(self._h, text, len(text))
            if not p:
                err = lib.opencc_error()
                raise Exception((err or b"").decode("utf-8", "replace"))
            try:
                out = ctypes.string_at(p)
            finally:
                lib.opencc_convert_utf8_free(p)
            return out.decode("utf-8")  # pybind11 decodes std::string strictly

        def __del__(self):
            h = getattr(self, "_h", None)
            if h:
                lib.opencc_close(h)
                self._h = None

    m.OpenCC = OpenCC
    m.CONFIGS = sorted(f for f in os.listdir("/usr/share/opencc")
                       if f.endswith(".json")) \
        if os.path.isdir("/usr/share/opencc") else []
    return m


# ---------------------------------------------------------------- stand-ins

def _LazyLoader(module_name, package_name=None, package_url=None,
                auto_install=True):
    return importlib.import_module(module_name)


def install_stubs(dj_root):
    sys.modules["opencc"] = _make_opencc_module()
    registry = dj.install_framework(dj_root, "mapper", "Mapper", dj.Mapper)
    ll = dj.stub_module("data_juicer.utils.lazy_loader")
    ll.LazyLoader = _LazyLoader
    return registry


# ------------------------------------------------------------------ inputs

def harvest_unit_cases(dj_root):
    """Returns [(args, text, target), ...] from Data-Juicer's unit test."""
    # the test's setUp() builds an s2t op, then the test calls setUp(mode)
    # again: only ops that were given to .map count
    return dj.mapper_unit_cases(dj_root, OP)


def hand_inputs():
    t = [
        # simplified prose
        "中华人民共和国是一个统一的多民族国家。",
        "我们在这里学习汉语，并且练习书法和绘画。",
        "这个软件的鼠标操作很方便，打印机也连接上了。",
        "我打了一辆出租车去机场，路上听了一会儿广播。",
        "网络连接异常，请检查信息安全设置和服务器地址。",
        "他用优盘把视频文件拷贝到笔记本电脑上，然后发邮件。",
        "内存不足，程序运行太慢了，需要升级硬件。",
        "冰箱里有冰棍、奶酪、土豆和西红柿。",
        "我们一起去看电影吧，然后在快餐店吃汉堡。",
        "头发发型很好看，后来他们去了干燥的地方晒干衣服。",
        "这里面有很多面条，里程碑式的发展，一只钟表。",
        "乾隆皇帝在乾清宫里看《周易》的乾卦。",
        "台湾的台风很大，他在台上讲话。",
        "着急、着陆、看着、着名的作家。",
        "后面的皇后喜欢吃面包和松子。",
        "他系鞋带的时候想起了那个关系。",
        # traditional (Taiwan standard / OpenCC standard) prose
        "中華人民共和國是一個統一的多民族國家。",
        "這個軟體的滑鼠操作很方便，印表機也連線上了。",
        "我搭了一輛計程車去機場，路上聽了一會兒廣播。",
        "網路連線異常，請檢查資訊安全設定和伺服器位址。",
        "他用隨身碟把影片檔案複製到筆記型電腦上，然後發電子郵件。",
        "記憶體不足，程式執行太慢了，需要升級硬體。",
        "冰箱裡有冰棒、乳酪、馬鈴薯和番茄。",
        "爲什麼羣衆的意見裏面沒有說明？",
        "為什麼群眾的意見裡面沒有說明？",
        "臺灣大學的學生在台北市唸書。",
        "說他癡人說夢，他深感不悅，着急地走了。",
        "鍾表、鐘錶、乾燥、幹部、頭髮、發展、後面、皇后。",
        "一隻憂鬱的臺灣烏龜吃着麪包。",
        "粵語：佢哋喺度食緊嘢，唔該晒。",
        # Taiwan / Hong Kong vocabulary, one word each
        "软件", "軟體", "鼠标", "滑鼠", "出租车", "計程車", "的士",
        "信息", "資訊", "网络", "網路", "硬盘", "硬碟", "打印机", "印表機",
        "程序员", "程式設計師", "数据库", "資料庫",
        "新西兰", "紐西蘭", "马尔代夫", "馬爾地夫", "奔驰", "賓士",
        "自行车", "腳踏車",
        # Japanese (shinjitai / kyujitai)
        "日本語の文章を書きます。漢字と仮名を使います。",
        "旧字体歴史仮名遣 新字体現代仮名遣",
        "舊字體歷史假名遣 新字體現代假名遣",
        "芸術 欠航 飲料缶 広島 沢山 桜 亜細亜 国際",
        "藝術 缺航 飲料罐 廣島 澤山 櫻 亞細亞 國際",
        "東京駅から大阪まで新幹線で行きました。",
        "東京驛から大阪まで新幹線で行きました。",
        "気象庁によると、明日は晴れるでしょう。",
        # mixed with Latin, digits, emoji, punctuation
        "Hello 世界! 这是一个测试 test123。",
        "版本 v1.2.3 发布于 2024-05-06，下载地址 https://example.com/软件",
        "价格：￥1,234.56元（含税）",
        "😀 开心 🎉 庆祝 👨‍👩‍👧 家庭 🇨🇳 国旗 1️⃣",
        "「引号」『书名』“双引号”‘单引号’《书》〈篇〉",
        "「引號」『書名』“雙引號”‘單引號’《書》〈篇〉",
        "ＡＢＣ１２３全角字母数字，半角ABC123。",
        "C++ 编程语言与 Python 脚本；α β γ 希腊字母",
        "名字：张三\t年龄：25\t城市：北京",
        # newlines, whitespace, empty
        "",
        " ",
        "\n",
        "第一行\n第二行\n",
        "第一行\r\n第二行\r\n\r\n",
        "  前后空格  ",
        "\n\n头尾换行\n\n",
        "行一\u2028行二\u2029行三\x85行四",
        "\u3000全角空格\u3000开头",
        # no Chinese at all
        "Pure ASCII text, nothing to convert.",
        "12345 67890",
        "!@#$%^&*()_+-=[]{}|;':\",./<>?",
        "Ünïcödé façade naïve café",
        "한국어 텍스트입니다",
        "Русский текст",
        # embedded NUL and other controls
        "前\x00后",
        "\x00开头",
        "结尾\x00",
        "控制\x01字符\x1f测试\x7f",
        # astral / rare CJK
        "𠮷野家的𩸽鱼",
        "CJK扩展B：𠀀𠀁𪚥",
        "兼容汉字：豈更車",
        # combining marks
        "发\u0301展 后\u0300面",
        # variation selectors
        "葛\U000E0100城 辻\U000E0101",
        # long repeated
        "这是一个很长的句子，" * 50,
        "後" * 100 + "后" * 100,
    ]
    return [{"id": "hand-%02d" % i, "text": s} for i, s in enumerate(t)]


# -------------------------------------------------------------------- run

def run_one(cls, args, text):
    op = cls(**args)
    out = op.process_batched({"text": [text]})
    return out["text"][0]


def main():
    dj_root, out_path, classes, corpus = dj.start(__doc__, install_stubs,
                                                  "mapper", [OP])
    cls = classes[OP]

    unit = harvest_unit_cases(dj_root)
    unit_inputs = []
    unit_mismatch = []
    for n, (args, text, target) in enumerate(unit):
        got = run_one(cls, args, text)
        if got != target:
            unit_mismatch.append((args, text, target, got))
        unit_inputs.append(({"id": "dj-unit-%s-%02d" % (OP, n), "text": text}, args))

    inputs = corpus
    unit_plain = [inp for inp, _ in unit_inputs]
    inputs = inputs + unit_plain + hand_inputs()
    ids = [i["id"] for i in inputs]
    assert len(ids) == len(set(ids)), "duplicate ids"

    vectors = []
    counts = {}

    def emit(args, inp, out_text, error=None):
        v = {"op": OP, "args": args, "input": inp, "output_text": out_text,
             "stats": {}, "keep": None}
        if error is not None:
            v["error"] = error
        vectors.append(v)
        key = json.dumps(args, sort_keys=True)
        counts[key] = counts.get(key, 0) + 1

    for args in VARIANTS:
        try:
            op = cls(**args)
        except Exception as e:  # noqa: BLE001
            emit(args, None, None, err_str(e))
            continue
        singles = []
        for inp in inputs:
            try:
                out = op.process_batched({"text": [inp["text"]]})["text"][0]
                emit(args, {"id": inp["id"], "text": inp["text"]}, out)
                singles.append(out)
            except Exception as e:  # noqa: BLE001
                emit(args, {"id": inp["id"], "text": inp["text"]}, None, err_str(e))
                singles.append(e)
        if not any(isinstance(s, Exception) for s in singles):
            batch = op.process_batched({"text": [i["text"] for i in inputs]})["text"]
            assert batch == singles, "batch differs from singles for %r" % args

    # the converter is a module global shared by all instances: check that
    # interleaved instances of different modes still give their own results
    ops = {m: cls(mode=m) for m in MODES}  # the last one built sets the global
    for m in MODES + MODES[::-1]:
        for inp in inputs[:40] + hand_inputs()[:40]:
            got = ops[m].process_batched({"text": [inp["text"]]})["text"][0]
            assert got == run_one(cls, {"mode": m}, inp["text"])

    dj.write_jsonl(out_path, vectors)

    print("inputs per mode: %d (corpus %d, unit %d, hand %d)" % (
        len(inputs), len(inputs) - len(unit_plain) - len(hand_inputs()),
        len(unit_plain), len(hand_inputs())), file=sys.stderr)
    for k, c in counts.items():
        print("  %s: %d" % (k, c), file=sys.stderr)
    print("total %d vectors" % len(vectors), file=sys.stderr)
    print("unit-test cases: %d, mismatches: %d" % (len(unit), len(unit_mismatch)),
          file=sys.stderr)
    for args, text, target, got in unit_mismatch:
        print("  MISMATCH %r %r: expected %r got %r" % (args, text, target, got),
              file=sys.stderr)


if __name__ == "__main__":
    main()
