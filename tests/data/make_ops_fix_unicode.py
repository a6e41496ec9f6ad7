#!/usr/bin/python3
"""Writes tests/data/ops-fix-unicode.jsonl(.zst): reference vectors for
Data-Juicer's fix_unicode_mapper, in the layout of ops.jsonl.

What it runs
------------
Data-Juicer's own operator code, unchanged, imported from a Data-Juicer
checkout given on the command line:

  data_juicer/ops/mapper/fix_unicode_mapper.py
  tests/ops/mapper/test_fix_unicode_mapper.py (unit tests, to harvest cases)

with the real ftfy (a checkout of https://github.com/rspeer/python-ftfy at tag
v6.3.1, the version Data-Juicer 1.4.3's uv.lock pins; it needs `wcwidth`,
Debian's python3-wcwidth) put first on sys.path by --ftfy. The mapper calls
ftfy.fix_text(text, normalization=...) on each text.

Stand-ins for the framework only (dj_stand_ins.py, shared with the other
make_ops_*.py): the OPERATORS registry and Mapper base, LazyLoader (imports the
module at once), and for the unit tests NestedDataset / DataJuicerTestCaseBase.

The mapper is run as the framework runs batched mappers:
op.process_batched({"text": [text]}), one sample per batch; the script checks
that one batch of all inputs gives the same texts.

Inputs
------
- the distinct inputs of shared/testvectors/ops.jsonl (edge cases and
  gen_corpus.py rows);
- Data-Juicer's unit-test texts;
- every "original" text of ftfy's tests/test_cases.json (its own fix_text
  cases, passing and known-failing alike) and the strings of its other tests;
- hand-written texts: HTML entities (named, upper-case, numeric, invalid; a
  '<' that turns entity decoding off for the rest of the text), terminal
  escapes, control characters, line breaks, ligatures, full-width and
  half-width forms, curly quotes, C1 controls, normalization cases, already
  clean text (ASCII, CJK, emoji);
- mojibake made here: sentences in many languages encoded as UTF-8 and decoded
  as each encoding ftfy repairs (Windows-125x, Latin-1, ISO-8859-2, MacRoman,
  cp437), twice (double mojibake), only in part (mixed with clean text), with
  U+00A0 turned into a space, with undecodable bytes lost as U+FFFD or '?',
  CESU-8 and Java's C0 80;
- seeded random strings over the characters ftfy's heuristics look at;
- one line longer than ftfy's max_decode_length (1,000,000 code points).
Lone surrogates are not used: djshard's records are valid UTF-8.

Variants: normalization absent (None: NFC), NFC, NFKC, NFD, NFKD on every
input; "nfkc", "Nfd", "nFkD", "", false and 0 (false values mean NFC) on a
sample of inputs; "NFX" and "NFC " (ValueError in the constructor), true and 1
(TypeError: no len()) are refused.

Versions used for the committed file
------------------------------------
- Data-Juicer 1.4.3, mirror commit c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b
- ftfy 6.3.1 (python-ftfy tag v6.3.1), wcwidth 0.2.5 (Debian)
- Debian bookworm /usr/bin/python3 3.11.2, unicodedata 14.0.0

Regenerate
----------
  apt-get install python3-wcwidth
  git clone https://github.com/rspeer/python-ftfy /tmp/ftfy && git -C /tmp/ftfy checkout v6.3.1
  mkdir -p /tmp/dj-src
  git -C /work/.mirror/modelscope+data-juicer/repo archive \\
      c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \\
      data_juicer/ops/mapper/fix_unicode_mapper.py \\
      tests/ops/mapper/test_fix_unicode_mapper.py | tar -x -C /tmp/dj-src
  FTFY=/tmp/ftfy /usr/bin/python3 tests/data/make_ops_fix_unicode.py /tmp/dj-src \\
      tests/data/ops-fix-unicode.jsonl
  zstd -19 -f tests/data/ops-fix-unicode.jsonl && rm tests/data/ops-fix-unicode.jsonl
Run from the repository root. The script is deterministic (seeded random
strings, fixed input order).
"""
import importlib
import json
import os
import random
import sys
import unicodedata

import dj_stand_ins as dj
from dj_stand_ins import err_str

OP = "fix_unicode_mapper"
FORMS = [{}, {"normalization": "NFC"}, {"normalization": "NFKC"},
         {"normalization": "NFD"}, {"normalization": "NFKD"}]
ALIASES = [{"normalization": "nfkc"}, {"normalization": "Nfd"},
           {"normalization": "nFkD"}, {"normalization": ""},
           {"normalization": False}, {"normalization": 0}]
REFUSED = [{"normalization": "NFX"}, {"normalization": "NFC "},
           {"normalization": True}, {"normalization": 1}]


def _LazyLoader(module_name, package_name=None, package_url=None,
                auto_install=True):
    return importlib.import_module(module_name)


def install_stubs(dj_root):
    ftfy_root = os.environ.get("FTFY")
    if not ftfy_root:
        sys.exit("set FTFY to a python-ftfy v6.3.1 checkout")
    sys.path.insert(0, ftfy_root)
    import ftfy
    assert ftfy.__version__ == "6.3.1", ftfy.__version__
    assert unicodedata.unidata_version == "14.0.0"
    registry = dj.install_framework(dj_root, "mapper", "Mapper", dj.Mapper)
    ll = dj.stub_module("data_juicer.utils.lazy_loader")
    ll.LazyLoader = _LazyLoader
    return registry


# ------------------------------------------------------------------ inputs

def ftfy_test_texts():
    """ftfy's own test inputs: test_cases.json and strings of its tests."""
    import ftfy
    root = os.path.dirname(os.path.dirname(os.path.abspath(ftfy.__file__)))
    with open(os.path.join(root, "tests", "test_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    texts = [c["original"] for c in cases]
    texts += [
        # test_characters.py / test_entities.py / test_encodings.py / docs
        "âœ” No problems", "&macr;\\_(ã\x83\x84)_/&macr;",
        "Broken text&hellip; it&#x2019;s ﬂubberiﬁc!", "ＬＯＵＤ　ＮＯＩＳＥＳ",
        "Ｕﾀｰﾝ", "ﬂuﬃeﬆ", "\u201chere\u2019s a test\u201d",
        "&lt;tag&gt;", "&Jscr;ohn &HilbertSpace;ancock", "&checkmark;",
        "P&eacute;rez", "P&EACUTE;REZ", "BUNDESSTRA&SZLIG;E",
        "&ntilde; &Ntilde; &NTILDE; &nTILDE;", "&ATILDE;&SUP3;",
        "\033[36;44mI'm blue, da ba dee da ba doo...\033[0m",
        "This string is made of two things:\u20291. Unicode\u20282. Spite",
        "Content-type: text/plain\r\n\r\nHi.", "This is how Microsoft \r trolls Mac users",
        "What is this \x85 I don't even", "sÃ³", "voilÃ le travail", "Ã³",
        "\ufeffWhere do you want to go today?", "\u2014a\u2014 \u2013b\u2013",
        "&amp;", "&amp;amp;", "&lt;&gt;", "&#39;", "&#x27;", "&#1234;",
        "this&not that", "&nbsp;&NBSP;", "&EUR;", "&euro;", "&Euro;",
        "\x1a", "\u00a0", "ÃƒÂ©", "Ã©", "Ã\xa0 bientÃ´t", "Ã  bientÃ´t",
        "ICH VERSTEHE NICHT WARUM &SZLIG;", "l'humanitÃ©", "Ã¢â‚¬Å“",
        "\xa0", "Ã©tÃ©", "BroadwayÂ\xa0", "here comes a null! \xc0\x80",
    ]
    return texts


def html_texts():
    t = [
        "AT&T", "AT&amp;T", "a &amp b", "x &lt;= y", "&LT;&GT;&AMP;&QUOT;",
        "&eacute;&Eacute;&EACUTE;&eACUTE;", "caf&eacute; na&iuml;ve",
        "&#233;&#xe9;&#XE9;&#x0000e9;", "&#0;", "&#1;", "&#8;", "&#9;", "&#10;",
        "&#13;", "&#31;", "&#59;", "&#127;", "&#128;", "&#129;", "&#141;",
        "&#150;", "&#159;", "&#160;", "&#55296;", "&#xD800;", "&#xDFFF;",
        "&#1114111;", "&#1114112;", "&#x10FFFF;", "&#x110000;",
        "&#99999999999999999999;", "&#x999999999999999999999;",
        "&#xFDD0;", "&#xFFFE;", "&#x1FFFF;", "&#x10FFFE;", "&#11;",
        "&#12ab;", "&#x12G;", "&#xyz;", "&#x;", "&#;", "&;", "&#12", "&eacute",
        "&aaaaaaaaaaaaaaaaaaaaaaaaa;", "&#123456789012345678901234;",
        "&#1234567890123456789012345;", "&abcdefghijklmnopqrstuvwx;",
        "&abcdefghijklmnopqrstuvwxy;", "&frac12;&frac34;&sup2;",
        "&ETH;&eth;&THORN;&thorn;&SZLIG;&szlig;", "&AELIG;&aelig;&OELIG;",
        "&Aring;&ARING;&aring;", "&NotNestedGreaterGreater;&nGtv;",
        "&fjlig;&ThickSpace;&bne;", "&unknown; &Unknown; &UNKNOWN;",
        "&amp;eacute;", "&amp;#233;", "&#38;eacute;", "&#x26;lt;",
        "&&amp;;", "&&&", "&#&#35;", "& amp;", "&amp ;", "&a;b&c;",
        "Tom &amp; Jerry <b>bold</b> &amp; more",
        "no tag here &amp;\nbut <here> &amp;\nand after &amp;",
        "first &lt; line\nsecond &amp; line", "a < b &amp; c",
        "line &amp;\r\nline < &amp;\r\nlast &amp;",
        "&lt;p&gt;caf&eacute;&lt;/p&gt;", "&ouml;&Ouml;&OUML;&uuml;&UUML;",
        "&dollar;&cent;&pound;&yen;&euro;", "&quot;&apos;&QUOT;",
        "&hellip;&mdash;&ndash;&lsquo;&rsquo;&ldquo;&rdquo;",
        "&fflig;&filig;&fllig;&ffilig;&ffllig;", "&#xFB01;&#64258;",
        "&#x201C;quoted&#x201D;", "&#133;", "&#x85;", "&#x2028;&#x2029;",
        "&#x1b;[31mred&#x1b;[0m", "&#xFEFF;bom", "&#x3000;&#xFF21;",
        "&#x1F600;&#128512;", "&#x301;e", "e&#x301;", "&#x212B;&#x2126;",
        "&#xC3;&#xA9;", "&Atilde;&copy;", "&Atilde;&brvbar;",
        "&ATILDE;&COPY;", "&#195;&#169;t&#195;&#169;",
    ]
    return t


def misc_texts():
    t = [
        # terminal escapes
        "\x1b[0m", "\x1b[1;31mbold red\x1b[0m", "\x1b[m", "\x1b[;;m", "\x1b[12",
        "\x1b[12;", "\x1b[1;2;3;4H", "\x1b]0;title\x07", "\x1b(B", "\x1b",
        "\x1b[\u0661\u0662m arabic digits", "\x1b[\uff11m fullwidth digit",
        "\x1b[\u00b2m superscript", "\x1b[1é", "\x1b\x1b[0m", "a\x1b[0mb\x1b[K",
        "\x1b[3\x1b[0m", "\x1b[ m",
        # control characters
        "\x00", "a\x00b", "\x01\x02\x03\x04\x05\x06\x07\x08", "\t\n\x0b\x0c\r",
        "\x0e\x0f\x10\x1f", "\x7f", "a\x7fb", "\u206a\u206b\u206c\u206d\u206e\u206f",
        "\ufeff", "\ufeffBOM", "mid\ufeffdle", "\ufff9\ufffa\ufffb\ufffc\ufffd",
        "\u200b\u200c\u200d\u200e\u200f", "\u202a\u202b\u202c\u202d\u202e",
        "\U000e0001\U000e0067\U000e0062", "\U0001d173\U0001d17a",
        # line breaks
        "a\r\nb", "a\rb", "a\r\r\nb", "a\n\rb", "\r", "\r\n", "\n\r",
        "a\u2028b\u2029c", "a\x85b", "a\x0bb\x0cc", "\r\n\r\n\r\n", "x\r",
        "\u2028", "\u2029\u2029",
        # ligatures
        "ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ", "Ĳsselmeer ĳs", "ŉ", "Ǳ ǲ ǳ Ǆ ǅ ǆ Ǉ ǈ ǉ Ǌ ǋ ǌ",
        "ﬓ ﬔ ﬕ", "æ œ Æ Œ",
        # width
        "ＡＢＣａｂｃ０１２", "！＂＃＄％＆＇（）＊＋，－．／", "：；＜＝＞？＠［＼］＾＿｀｛｜｝～",
        "｟｠｡｢｣､･", "ｦｧｨｩｪｫｬｭｮｯｰｱｲｳｴｵﾝﾞﾟ", "ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟ", "ﾠﾡﾢﾣ ￂￃￄ",
        "￠￡￢￣￤￥￦", "￨￩￪￫￬￭￮", "\u3000", "全角\u3000空格", "ﾀﾞﾒ",
        # quotes
        "\u2018single\u2019", "\u201cdouble\u201d", "\u201a\u201b\u201e\u201f",
        "it\u02bcs", "\u2032prime\u2033", "\u00ab\u00bb\u2039\u203a",
        "\u300c\u300d\u300e\u300f",
        # C1 controls
        "\x80\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a\x8b\x8c\x8d\x8e\x8f",
        "\x90\x91\x92\x93\x94\x95\x96\x97\x98\x99\x9a\x9b\x9c\x9d\x9e\x9f",
        "price \x80 5", "\x93quoted\x94", "it\x92s", "caf\xe9 \x96 ok",
        "\x81", "\x8d\x8f\x90\x9d", "\x81\x80", "日本\x85語",
        # normalization
        "e\u0301", "\u00e9", "a\u0308\u0301", "a\u0301\u0308", "o\u031b\u0323",
        "o\u0323\u031b", "\u1e69", "s\u0323\u0307", "s\u0307\u0323",
        "\u0041\u030a", "\u212b", "\u2126", "\u1100\u1161", "\u1100\u1161\u11a8",
        "\uac00\u11a8", "\ud55c\uad6d\uc5b4", "\u1112\u1161\u11ab",
        "\u0344", "\u0f73", "\u0958", "\u2460\u00bd\u00b2\u33a1", "\u2126\u212a",
        "\ufb01\ufb02", "\u1e9b\u0323", "\u0387\u037e", "\u2000\u2001\u2002",
        "Vi\u1ec7t Nam", "Vie\u0302\u0323t Nam", "\u0915\u093c\u094d\u0937",
        "\u0928\u093e\u0902\u0915\u093c", "\u0e01\u0e38\u0e4d\u0e49", "\u05d0\u05b8\u05bc",
        "\u0627\u064e\u0651", "\u0627\u0651\u064e", "\u1100\u1100\u1161\u1161",
        "\u0301", "\u0301a", "\u0308\u0301", "a\u0315\u0300\u0301",
        "\U0001d15e\U0001d15f", "\U0001d400\U0001d41a", "\U0002f800", "\U0001f130",
        "\u00c5\u0301", "\u01fa", "\u3131\u314f", "\uff76\uff9e", "\u30ab\u3099",
        "\u30f4\u309b", "\u2fd5\u2e9f", "\u1fbf\u1fc0\u1fc1", "\u0385\u1fee",
        "\ufdfa\ufdfb", "\u3300\u32ff", "\u01c4\u01c5\u01c6", "\u017f\u0307",
        "\u1e9e\u00df", "\u0130\u0131", "\u2075\u2085\u207f", "\u00b5\u03bc",
        "\u2163\u216b\u217f", "\u3251\u32b1", "\u2474\u2488\u249c",
        # clean text
        "Plain ASCII sentence. With punctuation; numbers 123, and (brackets)!",
        "中文文本，没有任何问题。", "日本語のテキストです。", "한국어 텍스트입니다.",
        "Ελληνικά κείμενα", "Русский текст без ошибок", "עברית", "العربية",
        "हिन्दी पाठ", "ภาษาไทย", "Tiếng Việt", "Čeština, Polski: zażółć gęślą jaźń",
        "Ünïcödé façade naïve café résumé", "😀😃😄 👨‍👩‍👧‍👦 🇫🇷 1️⃣ 👍🏽",
        "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝓜𝓪𝓽𝓱", "\U0001f600" * 20, "°C ± 5 × 10² µm ÷ 2 ½ ¼ ¾",
        "© ® ™ § ¶ † ‡ • … ‰ ′ ″", "£100 €50 ¥1000 ¢5", "— – - ‐ ‑ ‒",
        "Straße Größe Maß", "¿Qué? ¡Sí!", "«Bonjour» ‹oui›", "Ω ≈ ≠ ≤ ≥ ∞ √ ∫ ∂ ∑ ∏",
        "│┌┐└┘├┤┬┴┼ ═║╔╗╚╝ ▀▄█▌▐░▒▓", "(╯°□°）╯︵ ┻━┻", "¯\\_(ツ)_/¯", "ʕ•ᴥ•ʔ",
        "(ಠ_ಠ)", "ÀÉÎÕÜ àéîõü", "Ø ø Å å Æ æ", "Łódź Gdańsk Kraków",
        "İstanbul ığdır şeker çay", "Þórr Ægir Óðinn", "Ё ё Ђ ђ Ѓ ѓ", "Ą ą Ę ę",
        "A\u00a0B", "x\u00adY", "\u00a0\u00a0", "Â", "Ã", "Â ", "Ã ", " Â ",
        "a Â b", ". Â «", "Ã ", "×²", "×³", "à²", "√±", "≈°", "вЂ", "ā€",
        "Œx", "œ1", "ÂÃ", "Ðœ", "ÎŸ",
    ]
    return t


SENTENCES = [
    "The café served crème brûlée and a piña colada.",
    "Voilà — l’été à Paris, naïve façade, où ça?",
    "Größenwahn: Ärger über Öl und Übermaß in der Straße.",
    "El niño pidió una canción: “¡Olé!” dijo él.",
    "A mãe não está em São Paulo, irmã.",
    "Zażółć gęślą jaźń — Łódź, Kraków, Gdańsk.",
    "Příliš žluťoučký kůň úpěl ďábelské ódy.",
    "Ελληνικά: Καλημέρα κόσμε, τι κάνεις;",
    "Русский: Съешь же ещё этих мягких французских булок.",
    "Українська: Гей, хлопці, вставаймо, ґанок і їжак.",
    "Türkçe: Pijamalı hasta yağız şoföre çabucak güvendi.",
    "Lietuvių: Įlinkdama fechtuotojo špaga sublykčiojusi pragręžė apvalų arbūzą.",
    "Latviešu: Glāžšķūņa rūķīši dzērumā čiepj Baha koncertflīģeļu vākus.",
    "Magyar: Árvíztűrő tükörfúrógép.",
    "Română: Înjurând pițigăiat, zoofobul comandă vexat whisky și tequila.",
    "Hrvatski: Gojazni đačić s biciklom drži hmelj i finu vatu u džepu nošnje.",
    "中文：我能吞下玻璃而不伤身体。",
    "日本語：私はガラスを食べられます。それは私を傷つけません。",
    "한국어: 나는 유리를 먹을 수 있어요.",
    "Emoji time 😀👍🏽 and ✔ checkmarks ✨ plus ❤️.",
    "Quotes: “double” ‘single’ – en dash — em dash … ellipsis • bullet",
    "Math: 5 × 3 ÷ 2 ± 1 ≤ 10 ≥ 0 ≠ π ≈ 3.14 ∞ √2 ½ ¼ ¾ ² ³ °C µ",
    "Money: €100, £50, ¥1000, ¢25, ₹500, ₩1000",
    "Symbols: © ® ™ § ¶ † ‡ ‰ № ℃",
    "Ñandú, Ågren, Øresund, Æsir, Þingvellir, Ðakovo.",
    "Tiếng Việt có dấu: Điều này thật tuyệt vời.",
    "¯\\_(ツ)_/¯ and (╯°□°）╯︵ ┻━┻",
    "العربية: أنا قادر على أكل الزجاج و هذا لا يؤلمني.",
    "עברית: אני יכול לאכול זכוכית וזה לא מזיק לי.",
    "हिन्दी: मैं काँच खा सकता हूँ और मुझे उससे कोई चोट नहीं पहुंचती.",
    "It’s a “test” of the don’t-break-it kind…",
    "naïve café à la carte",
    "à",
    "é",
    "ü ö ä",
    "Ω",
    "—",
    "’",
    "…",
    "€",
    "😀",
    "𝔘",
]

MOJIBAKE_ENCODINGS = ["windows-1252", "latin-1", "windows-1251", "windows-1250",
                      "windows-1253", "windows-1254", "windows-1257", "iso-8859-2",
                      "macroman", "cp437", "sloppy-windows-1252", "sloppy-windows-1251",
                      "sloppy-windows-1250", "sloppy-windows-1253", "sloppy-windows-1254",
                      "sloppy-windows-1257", "iso-8859-15", "cp850", "koi8-r", "mac-cyrillic"]


def mojibake(text, enc, errors="replace"):
    return text.encode("utf-8").decode(enc, errors)


def cesu8(ch):
    """Java's modified UTF-8 of one character (CESU-8, NUL as C0 80)."""
    if ch == "\x00":
        return b"\xc0\x80"
    if ord(ch) < 0x10000:
        return ch.encode("utf-8")
    v = ord(ch) - 0x10000
    pair = chr(0xD800 + (v >> 10)) + chr(0xDC00 + (v & 0x3FF))
    return pair.encode("utf-8", "surrogatepass")


def mojibake_texts():
    out = []
    for s in SENTENCES:
        for enc in MOJIBAKE_ENCODINGS:
            out.append(mojibake(s, enc))
    rng = random.Random(11)
    for s in SENTENCES:
        for enc in ("windows-1252", "sloppy-windows-1252", "latin-1", "windows-1251",
                    "macroman", "windows-1250"):
            once = mojibake(s, enc)
            out.append(mojibake(once, enc))                       # double
            out.append(mojibake(once, "sloppy-windows-1252"))     # mixed double
            out.append(mojibake(mojibake(once, enc), enc))        # triple
            out.append(once.replace("\xa0", " "))                 # nbsp lost
            out.append(mojibake(s, enc, "replace").replace("\ufffd", "?"))
            words = s.split(" ")
            mixed = [mojibake(w, enc) if rng.random() < 0.5 else w for w in words]
            out.append(" ".join(mixed))                           # partial
            out.append(s + " " + once)                            # clean + broken
            out.append(once + "\n" + s + "\n" + once)             # across lines
    # lossy: undecodable bytes lost as U+FFFD (strict codecs, errors=replace)
    for s in SENTENCES[:20]:
        for enc in ("windows-1252", "windows-1251", "windows-1253", "windows-1257"):
            out.append(s.encode("utf-8").decode(enc, "replace"))
    # CESU-8 and Java nulls, read as Windows-1252 / Latin-1
    for s in ["emoji 😀 here", "𝔘𝔫𝔦 text", "null \x00 char", "mix 😀 and \x00 é"]:
        cesu = b"".join(cesu8(ch) for ch in s)
        for enc in ("sloppy-windows-1252", "latin-1", "windows-1250"):
            out.append(cesu.decode(enc, "replace"))
    return out


def fuzz_texts(n):
    """Seeded random strings over the characters ftfy's heuristics see."""
    import ftfy.badness as badness
    import ftfy.chardata as chardata
    pool = set()
    for v in badness.MOJIBAKE_CATEGORIES.values():
        pool.update(c for c in v if c != "-")
    for v in chardata.UTF8_CLUES.values():
        pool.update(c for c in v if c != "-")
    for enc in ("sloppy-windows-1252", "sloppy-windows-1251", "macroman", "cp437",
                "iso-8859-2", "sloppy-windows-1253", "sloppy-windows-1257"):
        pool.update(bytes(range(0x80, 0x100)).decode(enc))
    pool.update("\x80\x85\x9f\u2018\u2019\u201c\u201d\u02bc\ufb01\uff21\u3000\ufeff\u2028")
    pool = sorted(pool)
    ascii_pool = list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
    ascii_pool += list(" .,?!;:'\"-&#<>\n\r\t\x1a\x1b[")
    rng = random.Random(7)
    out = []
    for _ in range(n):
        k = rng.randint(1, 24)
        chars = []
        for _ in range(k):
            r = rng.random()
            if r < 0.55:
                chars.append(rng.choice(pool))
            elif r < 0.9:
                chars.append(rng.choice(ascii_pool))
            else:
                # a UTF-8 sequence read as some charmap
                ch = chr(rng.choice([rng.randint(0xA0, 0x800), rng.randint(0x800, 0xFFFF),
                                     rng.randint(0x10000, 0x1FFFF)]))
                if 0xD800 <= ord(ch) < 0xE000:
                    ch = "é"
                enc = rng.choice(["sloppy-windows-1252", "latin-1", "sloppy-windows-1251",
                                  "macroman", "cp437", "sloppy-windows-1250"])
                chars.append(mojibake(ch, enc))
        out.append("".join(chars))
    # random normalization material
    marks = [chr(c) for c in range(0x300, 0x370)] + ["\u0f71", "\u0f72", "\u0f74", "\u0f80",
                                                      "\u05b0", "\u05bc", "\u0651", "\u064e",
                                                      "\u093c", "\u094d", "\u3099", "\u309a"]
    bases = list("aeiouAEIOUnNcCsSzZ") + ["\u1100", "\u1161", "\u11a8", "\uac00", "\u0391",
                                          "\u03b9", "\u0915", "\u30ab", "\u00c5", "\u212b",
                                          "\u1e9b", "\u0f40", "\u05d0", "\u0627", "\u2126"]
    for _ in range(n // 4):
        k = rng.randint(1, 12)
        out.append("".join(rng.choice(marks) if rng.random() < 0.45 else rng.choice(bases)
                           for _ in range(k)))
    return out


def hand_inputs():
    texts = ftfy_test_texts() + html_texts() + misc_texts() + mojibake_texts() + \
        fuzz_texts(1200)
    seen = set()
    out = []
    for t in texts:
        if t in seen or any(0xD800 <= ord(c) < 0xE000 for c in t):
            continue
        seen.add(t)
        out.append({"id": "hand-%04d" % len(out), "text": t})
    # a line longer than max_decode_length, split in the middle of "e" + U+0301
    long_line = "e" * 999999 + "e\u0301 caf\u00c3\u00a9\nnext &amp; line"
    out.append({"id": "long-line", "text": long_line})
    return out


# -------------------------------------------------------------------- run

def main():
    dj_root, out_path, classes, corpus = dj.start(__doc__, install_stubs,
                                                  "mapper", [OP])
    cls = classes[OP]

    unit = dj.mapper_unit_cases(dj_root, OP)
    unit_mismatch = []
    uids, unit_plain = dj.unit_inputs(OP, [text for _, text, _ in unit])
    for args, text, target in unit:
        got = cls(**args).process_batched({"text": [text]})["text"][0]
        if got != target:
            unit_mismatch.append((args, text, target, got))

    hand = hand_inputs()
    inputs = corpus + unit_plain + hand
    ids = [i["id"] for i in inputs]
    assert len(ids) == len(set(ids)), "duplicate ids"
    sample = inputs[::40]

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

    for args in FORMS + ALIASES + REFUSED:
        try:
            op = cls(**args)
        except Exception as e:  # noqa: BLE001
            emit(args, None, None, err_str(e))
            continue
        outs = []
        for inp in (inputs if args in FORMS else sample):
            out = op.process_batched({"text": [inp["text"]]})["text"][0]
            emit(args, {"id": inp["id"], "text": inp["text"]}, out)
            outs.append(out)
        if args in FORMS:
            batch = op.process_batched({"text": [i["text"] for i in inputs]})["text"]
            assert batch == outs, "batch differs from singles for %r" % args

    dj.write_jsonl(out_path, vectors)
    changed = sum(1 for v in vectors if v["input"] and v["output_text"] != v["input"]["text"])
    print("inputs: %d (corpus %d, unit %d, hand %d)" % (
        len(inputs), len(corpus), len(unit_plain), len(hand)), file=sys.stderr)
    for k, c in counts.items():
        print("  %s: %d" % (k, c), file=sys.stderr)
    print("total %d vectors, %d change the text" % (len(vectors), changed), file=sys.stderr)
    print("unit-test cases: %d, mismatches: %d" % (len(unit), len(unit_mismatch)),
          file=sys.stderr)
    for args, text, target, got in unit_mismatch:
        print("  MISMATCH %r %r: expected %r got %r" % (args, text, target, got),
              file=sys.stderr)


if __name__ == "__main__":
    main()
