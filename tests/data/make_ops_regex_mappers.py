#!/usr/bin/python3
"""Writes tests/data/ops-regex-mappers.jsonl(.zst): reference vectors for
Data-Juicer's regex-based text mappers, in the layout of ops.jsonl.

What it runs
------------
Data-Juicer's own operator code, unchanged, imported from a Data-Juicer
checkout given on the command line:

  data_juicer/ops/mapper/{remove_header, remove_comments, remove_bibliography,
  expand_macro, clean_ip, replace_content, remove_table_text,
  remove_non_chinese_character, remove_words_with_incorrect_substrings}_mapper.py
  data_juicer/ops/common/ (helper_func.py, special_characters.py: real code)
  tests/ops/mapper/test_<op>.py (Data-Juicer's unit tests, to harvest cases)

Only the framework around them is replaced by stand-ins (see install_stubs
and dj_stand_ins.py, shared with the other make_ops_*.py):
- data_juicer.ops.base_op: an OPERATORS registry with register_module and a
  Mapper base whose __init__ takes *args, **kwargs, sets
  self.text_key = kwargs.get("text_key", "text") and, like the real one with
  skip_op_error=False (the default), makes `process` the batched method
  (exceptions propagate).
- data_juicer.utils.model_utils: prepare_model(model_type="sentencepiece",
  lang=...) / get_model(key) return a real sentencepiece.SentencePieceProcessor
  loaded from tests/data/sentencepiece/en.sp.model, FOR EVERY lang (the real
  code would download "<lang>.sp.model").
- For harvesting the unit tests only: data_juicer.core.data.NestedDataset (a
  recorder of the samples and the op given to .map) and
  data_juicer.utils.unittest_utils.DataJuicerTestCaseBase (unittest.TestCase).
Each operator is run as the framework runs batched mappers:
op.process_batched({"text": [text]}) (one sample per batch), and the result is
checked to equal one batch of all inputs.

Versions used for the committed file
------------------------------------
- Data-Juicer 1.4.3, mirror commit c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b
- Debian bookworm /usr/bin/python3 3.11.2 (Unicode 14.0)
- regex 2022.10.31 (python3-regex 0.1.20221031-1+b1; regex.__version__ 2.5.123)
- sentencepiece 0.1.97 (python3-sentencepiece 0.1.97-3+b1)
- emoji 2.2.0 (python3-emoji 2.2.0-2), needed by ops/common/special_characters.py
- pydantic 1.10.4 (python3-pydantic), only for `Field` in remove_table_text's
  signature (no validation happens at construction)

Regenerate
----------
  apt-get install python3-regex python3-sentencepiece python3-emoji python3-pydantic
  mkdir -p /tmp/dj-src
  git -C /work/.mirror/modelscope+data-juicer/repo archive \
      c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \
      data_juicer/ops/common data_juicer/ops/mapper tests/ops/mapper \
      | tar -x -C /tmp/dj-src
  /usr/bin/python3 tests/data/make_ops_regex_mappers.py /tmp/dj-src \
      tests/data/ops-regex-mappers.jsonl
  zstd -19 -f tests/data/ops-regex-mappers.jsonl && rm tests/data/ops-regex-mappers.jsonl
(git archive may print "error: invalid object ... video3-no-audio.mp4" for a
file outside those paths in the partial mirror; it exits 0 and the extraction
is complete.) Run from the repository root. Summary counts and any unit-test
mismatch go to stderr.
The first argument is the root of a Data-Juicer checkout (a work tree or an
extracted archive). The output goes to stdout when no path is given. The
corpus defaults to shared/testvectors/ops.jsonl next to or above the repo.

The script is deterministic: no randomness, fixed input order.
"""
import json
import sys

import dj_stand_ins as dj
from dj_stand_ins import err_str

OPS = [
    "remove_header_mapper",
    "remove_comments_mapper",
    "remove_bibliography_mapper",
    "expand_macro_mapper",
    "clean_ip_mapper",
    "replace_content_mapper",
    "remove_table_text_mapper",
    "remove_non_chinese_character_mapper",
    "remove_words_with_incorrect_substrings_mapper",
]

# The variants asked for, plus a few (marked "extra") that show when
# Data-Juicer's code raises.
VARIANTS = {
    "remove_header_mapper": [{}, {"drop_no_head": False}],
    "remove_comments_mapper": [{}, {"inline": False}, {"multiline": False},
                               {"inline": False, "multiline": False}],
    "remove_bibliography_mapper": [{}],
    "expand_macro_mapper": [{}],
    "clean_ip_mapper": [
        {}, {"repl": "<IP>"}, {"pattern": "r'\\d+\\.\\d+'", "repl": "X"},
        {"pattern": "(\\d+)\\.(\\d+)", "repl": "\\2.\\1"},
        # extra: bad escape in repl raises only where the pattern matches
        # (process_batched skips texts with no re.search match)
        {"repl": "\\q"},
        # extra: invalid pattern raises on every input (in re.search)
        {"pattern": "(", "repl": ""},
    ],
    "replace_content_mapper": [
        {"pattern": "\\s+", "repl": " "},
        {"pattern": ["http\\S+", "@\\w+"], "repl": ["<URL>", ""]},
        {"pattern": "r'(\\w+) (\\w+)'", "repl": "\\g<2> \\1"},
        {"pattern": "[0-9]+", "repl": "#"},
        {},
        # extra: invalid pattern raises in the constructor (re.compile)
        {"pattern": "(", "repl": ""},
        # extra: fewer repls than patterns raises ValueError on every input
        {"pattern": ["a", "b"], "repl": ["x"]},
        # extra: bad escape in repl raises on every input (template compiled
        # even when nothing matches)
        {"pattern": "a", "repl": "\\q"},
        # extra: group reference past the last group raises only on a match
        {"pattern": "(a)", "repl": "\\2"},
    ],
    "remove_table_text_mapper": [{}, {"min_col": 3, "max_col": 5},
                                 {"min_col": 2, "max_col": 2}],
    "remove_non_chinese_character_mapper": [
        {}, {"keep_alphabet": False}, {"keep_number": False},
        {"keep_punc": False},
        {"keep_alphabet": False, "keep_number": False, "keep_punc": False},
    ],
    "remove_words_with_incorrect_substrings_mapper": [
        {}, {"substrings": ["a", "the"]}, {"tokenization": True, "lang": "en"},
        {"substrings": []},
    ],
}


# ---------------------------------------------------------------- stand-ins

def install_stubs(dj_root):
    registry = dj.install_framework(dj_root, "mapper", "Mapper", dj.Mapper)
    dj.stub_model_utils()
    return registry


# ------------------------------------------------------------------ inputs

def harvest_unit_cases(dj_root):
    """Returns {op: [(args, text, target), ...]} from Data-Juicer's tests."""
    return {name: dj.mapper_unit_cases(dj_root, name) for name in OPS}


def hand_inputs():
    fam = {}
    fam["header"] = [
        "\\section{Intro}\nText",
        "Preamble\n\\section{Intro}\nBody\n\\section{Two}\nMore",
        "\\subsection*{Star}\nx",
        "pre \\chapter[short]{Long title}\nbody",
        "pre \\chapter[short]{Long}",
        "\\paragraph{P} text",
        "x \\paragraph{P}\\subparagraph{S} text",
        "x \\paragraph{P} \\subparagraph{S} text",
        "x \\subparagraph{S} text",
        "no header at all",
        "",
        "\n",
        "\\part{One}\n",
        "\\part*{One}",
        "\\subsubsection{Deep} x",
        "\\subsubsection*[d]{Deep} x",
        "\\sectionfoo{x} y",
        "x \\section {x} y",
        "x \\section*[a]{b} y",
        "x \\section[a]*{b} y",
        "x \\section{} y",
        "x \\section{unclosed y",
        "a\n\\section{x}\nb\n\\chapter{y}\nc",
        "x\\section{A}{B}",
        "\\section{a}\n\\section{b}",
        "multi \\section{a\nb} rest",
        "x \\\\section{x} y",
        "x \\Section{x} y",
        "text \\subsection{é 中文} 😀",
        "x \\section[opt]{x}",
        "x \\section[{x}]{y}",
        "%\\section{commented}\nbody",
        "\\chapter*{x}",
        "intro\r\n\\section{x}\r\nbody",
        "a \\paragraph*{x}\\subparagraph*{y}rest",
        "\\begin{document}\n\\maketitle\n\\section{Introduction}\nHello",
        "aa \\subsection{A}\\section{B} bb",
        "x\\section{a}}b",
        "x \\section{a{b}c} d",
        "\\documentclass{article}\n\\begin{document}\nplain body without headers\n\\end{document}\n",
        "x \\chapter[a][b]{c} y",
        "x \\section{ } y",
        "前言\\section{第一章}正文",
        "\u00a0\\section{nbsp}",
        "x\u2028\\section{ls}\u2028y",
        "A \\section*{B}\\label{s} C \\subsection{D} E",
        "\\section\\section{x}",
        "x \\section*{\\textbf{bold}} y",
        "x \\part[p]{q} y \\part[r]{s}",
        "\\sub\\section{x}",
    ]
    fam["comments"] = [
        "a % comment",
        "a% comment",
        "% whole line\nb",
        "%\nb",
        "b\n% c",
        "b\n%c\n",
        "100\\% sure",
        "100\\% sure % real comment",
        "x %",
        "x %%",
        "%% double\n%%\n",
        "a\n%b",
        "line1 % c1\nline2 % c2",
        "\\%\\% x",
        "%comment at end of file without newline",
        "text\n%comment at end of file without newline",
        "  % indented comment\nx",
        "\t%tab",
        "%",
        "",
        "url http://x.com/a%20b",
        "50%off",
        "a\r\n% c\r\nb",
        "%中文注释\n正文",
        "正文 %注释 😀",
        "\\begin{verbatim}\n% not a comment?\n\\end{verbatim}",
        "a%b%c",
        "\\\\% after double backslash",
        "%a\n%b\n%c",
        "\n%x",
        "\n\n%x\n\n",
        "a %\nb",
        "%\n%\n%\n",
        "x\\%y%z",
        "é%ü",
        "😀%😀",
        "a\u0085%b",
        "a\u2028%b\u2028c",
        "line %comment\r\nnext",
        "%first\nsecond % inline\n%third",
        "\\newcommand{\\cmark}{\\ding{51}\\xspace}%\nnext",
        "\\affiliation{%\n  \\institution{X}}",
        "%%%%%%%%%%\n% BOX %\n%%%%%%%%%%\nbody",
        "a%\n%b\nc",
        "%\n",
        "\n%",
        " %",
        "a\t%\tb",
        "x%%y",
        "% only\r",
    ]
    fam["bib"] = [
        "body\n\\appendix\nmore",
        "\\appendix",
        "body \\begin{thebibliography}{9}\n\\bibitem{a} A\n\\end{thebibliography}\n\\end{document}",
        "body\n\\bibliography{refs}\n\\end{document}",
        "\\bibliographystyle{plain}\n\\bibliography{refs}",
        "x \\bibliography{a}\n\\bibliography{b} after",
        "x \\bibliography{unclosed",
        "x \\bibliography{a\nb} after",
        "x \\begin{references}y",
        "x \\begin{REFERENCES}y",
        "x \\begin{References}y",
        "x \\appendixfoo y",
        "x \\Appendix y",
        "no bibliography here",
        "",
        "x \\bibliography{} y",
        "intro\n\\appendix\n\\section{A}\n\\begin{thebibliography}",
        "中文\\appendix中文",
        "text\n\\bibliography{x}\n",
        "x \\\\appendix y",
        "x \\begin {thebibliography} y",
        "x \\bibliographystyle{plain} y",
        "\\bibliography{a}}}",
        "x\n\\bibliography{refs}%comment\nz",
        "before \\begin{thebibliography}{99}",
        "a\r\n\\appendix\r\nb",
        "😀\\appendix😀",
        "appendix without backslash",
        "x \\appendix\n\\bibliography{r}",
        "x \\bibliography{r} \\appendix",
        "\\begin{references}",
        "x \\bibliography{a} and } later",
        "\\end{document}\n\\appendix",
        "\\begin{thebibliography}\\end{thebibliography}",
        "x\u2028\\appendix\u2028y",
        "x \\bibliography {r} y",
        "x \\bibliography{r y",
        "x \\bibliography{}",
        "\\appendix\n",
        "text \\begin{REFERENCES} \\begin{references}",
    ]
    fam["macro"] = [
        "\\newcommand{\\foo}{bar}\n\\foo is here.",
        "\\newcommand*{\\x}{XX}\nuse \\x, and \\x.",
        "\\def\\y{why}\n\\y!",
        "\\def \\y {why}\n\\y ",
        "\\def\\y{why}\n\\y",
        "\\newcommand{\\f}{F}\n\\f ",
        "\\newcommand{\\n}{N}\n\\n.",
        "\\newcommand{\\t}{T}\n\\t;",
        "\\newcommand{\\b}{B}\n\\b,",
        "\\newcommand{\\a}{A}\n\\a)",
        "\\newcommand{\\r}{R}\n\\r\n",
        "\\newcommand{\\v}{V}\n\\v:",
        "\\newcommand{\\x}{X}\n\\x\\x.",
        "\\newcommand{\\bfx}{\\textbf{x}}\n\\bfx ",
        "\\newcommand{\\al}{\\alpha}\n$\\al$",
        "\\newcommand{\\nl}{\\\\}\na\\nl b",
        "\\newcommand{\\g}{\\g<1>}\n\\g.",
        "\\newcommand{\\q}{\\1 and \\2}\n\\q.",
        "\\newcommand{\\e}{é😀中}\n\\e.",
        "\\newcommand{\\tb}{a\tb}\n\\tb.",
        "\\newcommand{\\foo}{bar}\n\\foobar \\foo1 \\foo_",
        "\\newcommand{\\foo}{bar}\n\\foo\\foo\\foo.",
        "\\newcommand{\\foo}{bar}%\n\\foo.",
        "\\newcommand{\\foo}{bar}\r\n\\foo.",
        "\\newcommand{\\foo}{a}\n\\newcommand{\\foo}{b}\n\\foo.",
        "\\newcommand{\\foo}{\\bar}\n\\newcommand{\\bar}{X}\n\\foo.",
        "\\newcommand{\\bar}{X}\n\\newcommand{\\foo}{\\bar}\n\\foo.",
        "\\def\\a{1}\n\\newcommand{\\a}{2}\n\\a.",
        "\\newcommand{\\x}[1]{#1}\n\\x{y}",
        "\\newcommand\\x{y}\n\\x.",
        "\\newcommand{\\x}{}\n\\x.",
        "\\newcommand{\\x}{a}{b}\n\\x.",
        "\\newcommand{\\x}{\\textbf{a}}\n\\x.",
        "\\newcommand{\\x_y}{a}\n\\x_y.",
        "\\newcommand{\\X1}{one}\n\\X1 \\X12",
        "\\renewcommand{\\x}{a}\n\\x.",
        "\\def\\x{a}%\n\\x.",
        "\\def\n\\x\n{a}\n\\x.",
        "\\def\\x {a} \n\\x.",
        "\\def\\x{a}\n\\def\\y{\\x}\n\\y.",
        "\\newcommand{\\foo}{bar}\n\\foo\n",
        "\\newcommand{\\foo}{bar}\n\\fooé",
        "\\newcommand{\\foo}{bar}\n\\foo中",
        "\\newcommand{\\foo}{$x^2$}\n\\foo.",
        "\\newcommand{\\foo}{a\\\\b}\n\\foo.",
        "\\newcommand{\\foo}{\\n}\n\\foo.",
        "\\newcommand{\\foo}{\\\\g<0>}\n\\foo.",
        "\\newcommand{\\foo}{'q\"}\n\\foo.",
        "\\newcommand{\\foo}{\x01ctl}\n\\foo.",
        "\\newcommand{\\foo}{a\u0085b}\n\\foo.",
        "\\newcommand{\\foo}{a\u2028b}\n\\foo.",
        "\\newcommand{\\1}{one}\n\\1.",
        "\\newcommand{\\foo}{\\}\n\\foo.",
        "\\newcommand{\\foo}{x}\\newcommand{\\bar}{y}\n\\foo.\\bar.",
        "\\newcommand{\\Foo}{U}\n\\newcommand{\\foo}{L}\n\\Foo \\foo \\FOO ",
        "\\newcommand{\\foo}{\\foo\\foo}\n\\foo.",
        "\\newcommand{\\foo}{bar} \n\\foo.",
        "\\def\\zz{\\g<2>\\0}\n\\zz.",
        "\\def\\zz{a}}\n\\zz.",
        "\\newcommand{\\x}{y}\n\\x\u00a0and \\x\u3000and \\x😀",
        "no macros \\foo here",
        "",
        "\\def\\x{\\U0001F600 \\N{DASH}}\n\\x.",
        "\\newcommand{\\x}{1}\n\\newcommand{\\xx}{2}\n\\x \\xx \\x.",
        "\\newcommand{\\xx}{2}\n\\newcommand{\\x}{1}\n\\x \\xx \\x.",
    ]
    fam["ip"] = [
        "server 192.168.1.1 up",
        "10.0.0.255",
        "256.1.1.1",
        "1.2.3.256",
        "999.999.999.999",
        "0.0.0.0",
        "01.02.03.004",
        "1.2.3",
        "1.2.3.4.5",
        "12345.1.2.3",
        "1.2.3.4567",
        "192.168.001.001",
        "ip:8.8.8.8:53",
        "(127.0.0.1)",
        "a1.2.3.4b",
        "1.1.1.1,2.2.2.2",
        "1.1.1.1.1.1.1.1",
        "255.255.255.255",
        "249.250.251.252",
        "v1.2.3.4 release",
        "version 2.0.1.12",
        "１.２.３.４",
        "١.٢.٣.٤ and ١.٢",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "2001:db8::1",
        "fe80::1%eth0",
        "::1",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7:8:9",
        "12345:2:3:4:5:6:7:8",
        "ABCD:EF01:2345:6789:ABCD:EF01:2345:6789",
        "gggg:1:2:3:4:5:6:7",
        "::ffff:192.168.1.1",
        "[2001:db8:0:0:0:0:2:1]:80",
        "mac 00:1A:2B:3C:4D:5E",
        "time 12:30:45",
        "a\n1.2.3.4\nb",
        "\t10.1.1.1\t",
        "3.14159",
        "pi 3.14 and e 2.718",
        "1.2 3.4 5.6",
        "date 2024.01.02",
        "IP地址是192.168.0.1。",
        "1.2.3.4😀5.6.7.8",
        "10.0.0.1/24",
        "http://172.16.254.1:8080/path",
        "300.300.300.300.1.2.3.4",
        "1..2.3.4",
        "1.2.3.04",
        "100.200.250.199",
        "09.09.09.09",
        "",
        "no ip here",
        "1.2.3.4\r\n5.6.7.8",
        "0:0:0:0:0:0:0:0",
        "fffff:1:2:3:4:5:6:7:8",
    ]
    fam["replace"] = [
        "hello   world",
        "a\tb\nc",
        " lead",
        "trail ",
        "\u3000full width space",
        "@user hi @other_2!",
        "see http://x.com/a?b=c and https://y.org.",
        "email@domain.com",
        "word1 word2 word3",
        "one two",
        "中文 English 混合",
        "123abc456",
        "a1b22c333",
        "\r\n",
        "é è",
        "emoji 😀 😀",
        "",
        " ",
        "\u00a0nbsp\u00a0",
        "\u200bzw\u200b",
        "x\u0085y",
        "a\u2028b",
        "http://a http://b",
        "http",
        "@",
        "@@x",
        "a@b",
        "https://例子.测试/路径 text",
        "first second third fourth fifth",
        "x\n\ny",
        "\t\t\t",
        "١٢٣ arabic digits",
        "１２３ fullwidth",
        "price: 1,234.56",
        "ab cd\nef gh",
        "Ünïcödé wörds",
        "under_score words",
        "a-b c-d",
        "\\g<2> literal",
        "word",
    ]
    fam["table"] = [
        "Intro:\na b\nc d\nEnd",
        "a b\nc d\n",
        "\na b\nc d\n",
        "Title\nx\ty\nz\tw\nend",
        "Title\nx|y\nz|w\nend",
        "Title\n| a | b |\n| c | d |\nend",
        "Title\na b c\nd e f\ng h i\nend",
        "Title\na b c d e f\ng h i j k l\nend",
        "Title\na b c d\ne f g h\nend",
        "Title\na b c d e\nf g h i j\nend",
        "Title\na  b\nc  d\nend",
        "Title\na b\nc d e\nend",
        "Title\na b\n\n\nc d\nend",
        "Title\na b\nc d",
        "Title\na b\nc d\ne f\ng h\n",
        "Title\n1 2\n3 4\nend",
        "Title\n中 文\n表 格\nend",
        "This is a table:\n编号 分行\n① 北京分行\n② 大连分行\nThe end.",
        "Title\na b \nc d \nend",
        "Title\r\na b\r\nc d\r\nend",
        "Title\na\u3000b\nc\u3000d\nend",
        "Title\na\u00a0b\nc\u00a0d\nend",
        "Title\na b\nc d\nTitle2\ne f g\nh i j\nend",
        "Title\nx\ny\nend",
        "Title\na||b\nc||d\nend",
        "Title\na b\nc d\ne f g\nh i j\nend",
        "Title\na b c\nd e f\n",
        "Title\na b c d e f g\nh i j k l m n\nend",
        "Title\na\tb\tc\nd\te\tf\nend",
        "Title\na b\tc\nd\te f\nend",
        "Title\na b\n",
        "",
        "\n\n\n",
        "Title\n😀 😀\n😀 😀\nend",
        "Title\na b\nc d\n\n\nafter blank lines",
        "Title\n a b\n c d\nend",
        "Title\na b\nc d\u2028e f\nend",
        "Title\na b\u0085c d\u0085end\n",
        "Title\n- -\n- -\nend",
        "Title\nname age city\nTom 12 NYC\nAnn 13 LA\nBob 14 SF\nend",
        "T\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21\nend",
        "T\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\nend",
        "T\na b\nc d\ne f g h\ni j k l\nm n o\np q r\nend",
        "T\na b c\nd e\nf g h\ni j\nend",
        "Line one is prose.\nLine two is prose too.\nLine three.",
    ]
    fam["zh"] = [
        "中文English123，。！",
        "特殊的康熙部首⼏几⺇",
        "全角Ａｂ１２３",
        "日本語のテキスト",
        "한국어 텍스트",
        "龥龦鿿㐀𠀀",
        "一丁",
        "标点：；？！“”‘’（）《》【】…—·",
        "ASCII punct: .,;:!?'\"()[]{}<>/\\|-_=+*&^%$#@~`",
        "空格 \t\n\r\u3000\u00a0",
        "emoji😀表情👍🏽",
        "数字١٢٣和१२३",
        "繁體字與簡體字",
        "",
        "abc",
        "123",
        "。。。",
        "a-b/c*d&e＆f(g)h（i）j+k：l？m!n！o“p”q·r•s、t—u%v《w》x.y，z",
        "e\u0301 é ñ",
        "http://例子.cn/路径?查询=1",
        "价格：¥100.00元",
        "温度25℃",
        "第1章 第2节",
        "Ⅰ Ⅱ Ⅲ 罗马数字",
        "①②③圆圈数字",
        "中\u200b文",
        "〇零",
        "\u2028中\u0085文",
        "a\nb",
        "混合 mixed 文本 text 123 ,.;",
        "ｈｅｌｌｏ全角字母",
        "中文\t制表符",
        "《红楼梦》第1回",
        "电话：010-12345678",
        "邮箱：test@example.com",
        "百分比50%和５０％",
        "价格$5",
        "（括号）(brackets)[方括号]",
        "省略号……和破折号——",
        "“引号”与\"quotes\"",
        "顿号、逗号，句号。",
        "中\r\n文",
        "Ｃ语言",
        "ⅰⅱ小写罗马",
        "㊣㊤",
        "⿰氵工",
        "\ufeff中文BOM",
        "中文\x00NUL",
        "ＡＢＣ１２３：？！",
        "~`!@#$%^&*()_+-={}|[]\\:\";'<>?,./ 英文标点全集",
        "中文 中文  中文   中文",
        "·•",
        "English only sentence.",
        "12:30 下午",
        "3.14159 圆周率",
        "−5度（负号）",
        "零一二三四五六七八九十百千万亿",
        "中文\u2014破折号\u2013短横",
    ]
    fam["words"] = [
        "visit http://example.com now",
        "see www.site.org.",
        "go to site.com, ok",
        "<a href='x'>link</a>",
        "path//to//file",
        "a//b c",
        "(http://x.y)",
        "\"www.x\"",
        "https://x\nnext line",
        "tab\thttp://x\tend",
        "  leading  spaces  ",
        "line1\n\nline3",
        "\t\t",
        "",
        "word.com.",
        ".com",
        "...www...",
        "HTTP://UPPER.COM",
        "the theme of a cat",
        "The Theme",
        "中文http://x.com中文",
        "😀http😀",
        "xhttpx",
        "example.COM",
        "a\r\nhttp://x\r\nb",
        "\u00a0http://x",
        "https://x.com/\u200b",
        "mail: a@b.com",
        "ftp://host",
        "file:///path",
        "htt p",
        "w w w",
        "foo//",
        "//",
        "/ /",
        "\\\\server\\share",
        "keep all of these words",
        "one\ttwo\tthree\nfour five",
        "\n\nlead newlines",
        "trail newlines\n\n",
        "a \n b",
        "x\u3000www.y\u3000z",
        "\u2028http://a\u2028b",
        "www",
        "wwwasdasd fonc",
        "plusieurs èrdash@hqbchd.ckd d'accéder",
        "This paper proposed a novel https://whiugc.com method on LLM",
        "'http'",
        "«http»",
        "http:",
        "1.com 2.com",
        "Hello World",
    ]
    out = []
    for name, texts in fam.items():
        for i, t in enumerate(texts):
            out.append({"id": "hand-%s-%02d" % (name, i), "text": t})
    return out


# ------------------------------------------------------------------ running

def run_single(op, text):
    samples = {"text": [text]}
    res = op.process_batched(samples)
    return res["text"][0]


def run_variant(cls, op_name, args, inputs, problems):
    """Returns vectors for one (op, args) over inputs."""
    vecs = []
    try:
        op = cls(**args)
    except Exception as e:
        vecs.append({"op": op_name, "args": args, "input": None,
                     "output_text": None, "error": err_str(e),
                     "stats": {}, "keep": None})
        return vecs
    outs = []
    for inp in inputs:
        try:
            o = run_single(op, inp["text"])
            outs.append(o)
            vecs.append({"op": op_name, "args": args, "input": dict(inp),
                         "output_text": o, "stats": {}, "keep": None})
        except Exception as e:
            outs.append(e)
            vecs.append({"op": op_name, "args": args, "input": dict(inp),
                         "output_text": None, "error": err_str(e),
                         "stats": {}, "keep": None})
    # one batch of all inputs that did not raise must give the same result
    ok = [i for i, o in enumerate(outs) if not isinstance(o, Exception)]
    if ok:
        op2 = cls(**args)
        res = op2.process_batched({"text": [inputs[i]["text"] for i in ok]})
        for j, i in enumerate(ok):
            if res["text"][j] != outs[i]:
                problems.append("batch != single: %s %r %r" % (op_name, args, inputs[i]["id"]))
    return vecs


def op_vectors(name, cls, corpus, hand, unit, problems):
    """The vectors of one op: its variants over all inputs, then its
    unit-test cases with their own args."""
    vectors = []
    # the unit-test inputs, one id per distinct text
    uids, unit_inputs = dj.unit_inputs(name, [t for _, t, _ in unit])
    inputs = corpus + unit_inputs + hand
    seen = set()
    for args in VARIANTS[name]:
        vectors += run_variant(cls, name, args, inputs, problems)
    # the unit-test cases themselves, with their own args, checked
    # against the expected text in Data-Juicer's tests
    for args, text, target in unit:
        inp = {"id": uids[text], "text": text}
        v = run_variant(cls, name, args, [inp], problems)[0]
        key = json.dumps([args, uids[text]], sort_keys=True)
        if args not in VARIANTS[name] and key not in seen:
            seen.add(key)
            vectors.append(v)
        if v.get("output_text") != target:
            problems.append("unit mismatch: %s %s args=%r got=%r expected=%r"
                            % (name, uids[text], args,
                               v.get("output_text", v.get("error"))[:300],
                               (target or "")[:300]))
    return vectors


def report(vectors):
    counts = {}
    for v in vectors:
        k = (v["op"], json.dumps(v["args"], ensure_ascii=False))
        counts[k] = counts.get(k, 0) + 1
    for (op, args), n in counts.items():
        print("%6d  %s %s" % (n, op, args), file=sys.stderr)


def main():
    dj.generate(__doc__, install_stubs, "mapper", OPS, harvest_unit_cases,
                hand_inputs, op_vectors, report)


if __name__ == "__main__":
    main()
