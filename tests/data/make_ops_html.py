#!/usr/bin/python3
"""Writes tests/data/ops-html.jsonl(.zst) and ops-html-tables.jsonl(.zst):
reference vectors for Data-Juicer's clean_html_mapper and
extract_tables_from_html_mapper, in the layout of ops.jsonl.

What it runs
------------
Data-Juicer's own operator code, unchanged, imported from a Data-Juicer
checkout given on the command line:

  data_juicer/ops/mapper/clean_html_mapper.py
  data_juicer/ops/mapper/extract_tables_from_html_mapper.py
  data_juicer/utils/constant.py (Fields, MetaKeys)
  tests/ops/mapper/test_clean_html_mapper.py
  tests/ops/mapper/test_extract_tables_from_html_mapper.py

with the real parsing libraries, built or unpacked outside the project and put
first on sys.path (--selectolax DIR, --bs4 DIR):

- clean_html_mapper calls selectolax.parser.HTMLParser(text).text(), the
  Modest (MyHTML) backend. selectolax 0.4.0 (tag v0.4.0, the release current
  for Data-Juicer 1.4.3), Modest at its submodule commit 2540a03, built with
  Debian's cython3 0.29.32: `USE_LEXBOR= python3 setup.py build_ext --inplace`
  (the lexbor backend is not needed; pyproject's `license = 'MIT'` had to be
  written `{text = 'MIT'}` for Debian's setuptools).
- extract_tables_from_html_mapper calls bs4.BeautifulSoup(text, "html.parser"),
  i.e. Beautiful Soup over Python's standard html.parser. Beautiful Soup
  4.14.2 (pure Python, from its source tree) with Debian's soupsieve 2.3.2,
  on /usr/bin/python3 3.11.2's html.parser.

Stand-ins for the framework only (dj_stand_ins.py): base_op (OPERATORS,
TAGGING_OPS, a Mapper whose `run` adds an empty __dj__meta__ as Data-Juicer
does for tagging operators and calls process_single / process_batched),
LazyLoader (plain import), loguru and zstandard (imported by constant.py,
unused by these operators), NestedDataset.

The mappers run as the framework runs them: clean_html_mapper one sample per
batch through process_batched; extract_tables_from_html_mapper through
process_single on a sample whose __dj__meta__ is {} unless the input has one.

Vectors
-------
The layout of ops.jsonl, plus for extract_tables_from_html_mapper
`"output_meta"`: the whole __dj__meta__ after the operator. Inputs: the
distinct inputs of shared/testvectors/ops.jsonl, the unit tests' inputs
(dj-unit-<op>-NN; each unit test's assertions run and must pass), and
hand-written pages and fragments (hand-NN); for extract_tables_from_html_mapper
also tables written for Beautiful Soup's html.parser builder (tables-NN), 80
seeded random tables (tables-random-NN) and tables-meta-00. A vector with
"known_difference"
is one where djshard's parser (Gumbo for clean_html_mapper) builds another
tree than the reference's on malformed markup; the test leaves those out and
the string says how they differ (KNOWN_DIFFERENCES below).

Regenerate
----------
  mkdir -p /tmp/dj-src
  git -C <data-juicer mirror> archive c07c2d793cd85f7d5151ddc560fe92a0b6a0ba4b \\
      data_juicer/ops/mapper/clean_html_mapper.py \\
      data_juicer/ops/mapper/extract_tables_from_html_mapper.py \\
      data_juicer/utils/constant.py \\
      tests/ops/mapper/test_clean_html_mapper.py \\
      tests/ops/mapper/test_extract_tables_from_html_mapper.py | tar -x -C /tmp/dj-src
  /usr/bin/python3 tests/data/make_ops_html.py --selectolax SELECTOLAX_DIR \\
      --bs4 BS4_DIR --tables-out tests/data/ops-html-tables.jsonl \\
      /tmp/dj-src tests/data/ops-html.jsonl
  for f in ops-html ops-html-tables; do
    zstd -19 -f tests/data/$f.jsonl && rm tests/data/$f.jsonl; done
"""
import copy
import importlib
import json
import os
import sys
import types

import dj_stand_ins as dj
from dj_stand_ins import err_str

CLEAN = "clean_html_mapper"
TABLES = "extract_tables_from_html_mapper"
META = "__dj__meta__"

TABLE_VARIANTS = [
    {},
    {"retain_html_tags": True},
    {"include_header": False},
    {"retain_html_tags": True, "include_header": False},
    {"tables_field_name": "tables"},
]

# id -> how Gumbo's tree differs from MyHTML's (clean_html_mapper).
KNOWN_DIFFERENCES = {
    "hand-40": "U+0000 in text: MyHTML repeats the text node's last character "
               "('nul\\x00char' gives 'nulcharr'), Gumbo drops the U+0000 ('nulchar')",
    "hand-77": "U+0000 in a table cell: MyHTML repeats the last character, "
               "Gumbo drops the U+0000",
    "hand-74": "a text holding both a code point Gumbo replaces (U+0084) and one of "
               "U+10FE00-10FEEF, which djshard uses to carry such code points through "
               "Gumbo: djshard gives U+FFFD for the U+0084",
}


def take_path_option(name):
    """Removes `--name PATH` from sys.argv and returns PATH."""
    if name not in sys.argv:
        sys.exit("usage: make_ops_html.py --selectolax DIR --bs4 DIR "
                 "--tables-out PATH dj_root OUT")
    i = sys.argv.index(name)
    path = os.path.abspath(sys.argv[i + 1])
    del sys.argv[i:i + 2]
    return path


# ---------------------------------------------------------------- stand-ins

class Dataset:
    """What the unit tests read back from op.run(): rows by index."""

    def __init__(self, rows):
        self.rows = rows

    def __getitem__(self, i):
        return self.rows[i]

    def __iter__(self):
        return iter(self.rows)

    def __len__(self):
        return len(self.rows)


class TaggingMapper(dj.Mapper):
    """dj.Mapper plus run(): __dj__meta__ {} added when absent, one sample at
    a time through process_single (or one batch for batched ops)."""

    def __init__(self, *args, **kwargs):
        self.text_key = kwargs.get("text_key", "text")
        self.process = self.process_batched if self._batched_op else self.process_single

    def remove_extra_parameters(self, param_dict, keys=None):
        return {k: v for k, v in param_dict.items()
                if k not in ("self", "args", "kwargs", "__class__")}

    def run(self, dataset):
        rows = [dict(s) for s in dataset]
        dj.RECORDED.append((self, copy.deepcopy(rows)))
        for r in rows:
            r.setdefault(META, {})
        if self.is_batched_op():
            return Dataset([{**r, "text": t} for r, t in zip(
                rows, self.process_batched({"text": [r["text"] for r in rows]})["text"])])
        return Dataset([self.process_single(r) for r in rows])


def install_stubs(dj_root):
    registry = dj.install_framework(dj_root, "mapper", "Mapper", TaggingMapper)
    sys.modules["data_juicer.ops.base_op"].TAGGING_OPS = dj.Registry("Tagging")
    ll = dj.stub_module("data_juicer.utils.lazy_loader")
    ll.LazyLoader = lambda name, *a, **k: importlib.import_module(name)
    loguru = types.ModuleType("loguru")
    loguru.logger = types.SimpleNamespace(info=lambda *a, **k: None,
                                          warning=lambda *a, **k: None,
                                          debug=lambda *a, **k: None,
                                          error=lambda *a, **k: None)
    sys.modules.setdefault("loguru", loguru)
    sys.modules.setdefault("zstandard", types.ModuleType("zstandard"))
    importlib.import_module("selectolax.parser")
    return registry


# ------------------------------------------------------------------ inputs

PAGE_NEWS = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Local council approves new bike lanes &mdash; The Daily Example</title>
  <style>body { font-family: sans-serif; } .ad { display:none }</style>
  <script>window.dataLayer = window.dataLayer || []; if (a < b && c > d) {}</script>
</head>
<body>
<header><nav><ul><li><a href="/">Home</a></li><li><a href="/news">News</a></li>
<li class="active"><a href="/city">City</a></li></ul></nav></header>
<main>
<article>
<h1>Local council approves new bike lanes</h1>
<p class="byline">By <b>Jane Doe</b> &middot; March 3, 2024</p>
<!-- ad slot -->
<p>The council voted 7&ndash;2 on Tuesday to approve   a network of
protected bike lanes &amp; new crossings.</p>
<p>"It's a good day," said the mayor.<br>Work starts in <em>May</em>.</p>
<ol><li>Phase one: Main St.</li><li>Phase two: 5th Ave.</li></ol>
<blockquote>Cycling is up 40%&nbsp;since 2019.</blockquote>
<pre>
  line one
    line two
</pre>
<table class="data">
  <caption>Budget</caption>
  <thead><tr><th>Item</th><th>Cost</th></tr></thead>
  <tbody>
    <tr><td>Paint</td><td>$10,000</td></tr>
    <tr><td>Signals</td><td>$250,000</td></tr>
  </tbody>
  <tfoot><tr><td>Total</td><td>$260,000</td></tr></tfoot>
</table>
</article>
</main>
<footer><p>&copy; 2024 The Daily Example</p></footer>
<script type="text/javascript">
  var x = "<p>not a tag</p>";
</script>
</body>
</html>
"""

PAGE_WIKI = """<html><head><title>Lists</title></head><body>
<div id="content"><h2>Nested lists</h2>
<ul>
  <li>Fruit
    <ul><li>Apple</li><li>Pear</li></ul>
  </li>
  <li>Vegetables<ol><li>Carrot<li>Leek</ol></li>
</ul>
<dl><dt>Term</dt><dd>Definition</dd></dl>
<table border=1 cellpadding=2>
<tr><th colspan=2>Header spanning</th></tr>
<tr><td rowspan="2">A</td><td>B</td></tr>
<tr><td>C <sup>[1]</sup></td></tr>
<tr><th>Row head</th><td>value</td></tr>
</table>
<p>See <a href="#">also</a>.</p>
</div></body></html>
"""

PAGE_CJK = """<html><head><meta charset="utf-8"><title>中文页面</title></head>
<body><h1>北京天气</h1><p>今天晴，最高气温２５度。</p>
<table><tr><th>日期</th><th>天气</th></tr><tr><td>周一</td><td>晴</td></tr>
<tr><td>周二</td><td>多云&nbsp;转&nbsp;小雨</td></tr></table>
<p>日本語：東京は晴れです。한국어: 서울은 맑음.</p></body></html>"""

PAGE_MALFORMED = """<html><body><p>Unclosed paragraph
<p>Another <b>bold <i>both</b> italic?</i> end
<div>stray </p> closing</div>
<table><td>cell without row</td><td>second</td></table>
<ul><li>one<li>two</ul>
<p>Text & more &lt; and &gt; and &#169; and &#x263A; and &bogus; and &amp
</body></html> trailing text"""

PAGE_FORM = """<form action="/s"><label>Name <input name="q" value="a&amp;b"></label>
<select><option>One</option><option selected>Two</option></select>
<textarea>
raw <b>text</b> area</textarea><button>Go</button></form>
<img src="x.png" alt="An image"><br/><hr>
<noscript>Enable JS</noscript><iframe src="x">iframe text</iframe>"""

TABLE_PAGE = """<html><body>
<table id="t1" class="  a   b ">
 <tr><th>Name</th><th>Age</th></tr>
 <tr><td> Alice </td><td>30</td></tr>
 <tr><td>Bob<br>Jr.</td><td><b>25</b></td></tr>
 <tr><th>Total</th><td>55</td></tr>
 <tr></tr>
 <tr><td></td><td>  </td></tr>
</table>
<p>between</p>
<table>
 <thead><tr><th scope="col">K</th><th>V</th></tr></thead>
 <tbody><tr><td>x &amp; y</td><td>1 &lt; 2</td></tr></tbody>
</table>
<table><tr><td>outer<table><tr><td>inner</td></tr></table></td><td>o2</td></tr></table>
<table></table>
<table><caption>No rows</caption></table>
</body></html>"""

TABLE_ODD = """<TABLE BORDER="1"><TR><TD NOWRAP>Upper</TD><Td Class=x>mixed</tD></TR></TABLE>
<table><tr><td>unclosed cell<td>next cell<tr><td>next row</table>
<table><tr><td><!-- comment -->visible<script>hidden()</script><style>.x{}</style></td></tr></table>
<table><tr><th><p>para in th</p></th><td><span> a </span><span> b </span></td></tr></table>
<table><tr><td title='He said "hi"'>q</td><td data-x="it's">s</td><td a="1" a="2">dup</td></tr></table>
<table><tr><td>&nbsp;</td><td>&#32;x&#32;</td><td>&copy &amp &lt;</td></tr></table>
<table><tr><td>tab\there</td><td>line\nbreak</td><td>\u3000wide\u3000</td></tr></table>
<table><tr><td><ruby>漢<rt>kan</rt></ruby></td><td><template>tpl</template>after</td></tr></table>
<table><tr><td><![CDATA[cdata text]]></td><td><?php echo 1 ?>pi</td></tr></table>
<table><tbody><tr><th>h1</th><th>h2</th></tr></tbody><tr><td>direct</td></tr></table>
<table><tr><td><div><th>not direct</th></div></td></tr></table>
<table><tr><td>a</td></tr></table></table></table>
<table><tr><td>void <br/> and <img src="i.png"/> and <input></input>end</td></tr></table>"""

HAND = [
    "",
    " ",
    "\n\n",
    "plain text without tags",
    "line one\nline two\r\nline three\rfour",
    "<p>Hello</p>",
    "<P>UPPER <B>case</B></P>",
    "<li>a</li><li>b</li>",
    "<ol><li>x</li></ol>",
    "<ul><li class=\"c\">kept li</li></ul>",
    "<LI>upper li</LI>",
    "<ol start=\"3\"><li>three</li></ol>",
    "<script>var s = '<li>';</script>after",
    "<style>p{}</style>text",
    "<!-- comment only -->",
    "before<!-- c -->after",
    "<title>Only title</title>",
    "<head><title>T</title></head><body>B</body>",
    "a &amp; b &lt; c &gt; d &quot; e &#39; f &nbsp; g",
    "&notit; &notin; &ampx &AMP; &#0; &#x110000; &#128;",
    "<br>", "<p></p>", "<div> </div>",
    "<b><i>misnested</b></i>",
    "<p>one<p>two<p>three",
    "</p>stray close",
    "<table>text in table<tr><td>cell</td></tr></table>",
    "<table> <tr> <td> c </td> </tr> </table>",
    "<frameset><frame src=x></frameset>",
    "<html><head></head></html>",
    "<body>in body</body>after body",
    "</html>text after html",
    "<template>tpl content</template>visible",
    "<pre>\nleading newline</pre>",
    "<textarea>\nta</textarea>",
    "<svg><text>svg text</text></svg><math><mi>x</mi></math>",
    "<![CDATA[cdata]]>",
    "<?xml version=\"1.0\"?><p>x</p>",
    "<!DOCTYPE html><p>doc</p>",
    "<a href='x'>unclosed anchor<p>para",
    "<p>nul\x00char</p>",
    "tab\there",
    "<div>\u00a0nbsp\u3000ideographic</div>",
    "<p>😀 emoji 👨‍👩‍👧</p>",
    "<p>混合 mixed テキスト 텍스트</p>",
    "<noscript><p>ns</p></noscript>",
    "<xmp><b>xmp</b></xmp>",
    "<plaintext><b>plain",
    "<select><option>a<option>b</select>",
    "<h1>Title</h1>\n<p>Body</p>\n",
    "< p>not a tag</ p>",
    "a < b > c",
    "<>empty<>",
    "<a title=\"x>y\">attr gt</a>",
    "<ol><ol></ol></ol>",
    "<li><li></li></li>",
    PAGE_NEWS, PAGE_WIKI, PAGE_CJK, PAGE_MALFORMED, PAGE_FORM,
    TABLE_PAGE, TABLE_ODD,
    "<table><tr><td>only</td></tr></table>",
    "<table><tr><th>h</th></tr><tr><td>d</td></tr></table>",
    "<table><thead><tr><th>A</th><td>mixed</td></tr></thead></table>",
    "<table><tr><td>1</td></tr></table>" * 3,
    "<table><tr><td>unterminated",
    "<table><tr><td>x</td></tr></table><!-- <table><tr><td>in comment</td></tr></table> -->",
    "<script><table><tr><td>in script</td></tr></table></script>",
    "<table><tr><td>a</td></tr><tr><td>b</td></tr></table",
    "<table border=\"1\"\n><tr\n><td\n>newlines in tags</td></tr></table>",
    "&#1;&#x0b;&#x7f;&#xfdd0;&#x84;&#xd800;&#xfffe;",
    "ctl\x01\x0b\x1f\x7f\x85\x9f<b\x01>in tag</b\x01><i a\x02=\x03>x</i>\ufdd0\uffff\U0001fffe",
    "private \U0010fe41 use \U0010fe00 and \x84",
    "\x00", "\x00<p>\x00</p>", "<table><tr><td>nul\x00cell</td></tr></table>",
    "a\r\nb\rc<pre>\r\nx</pre>",
]


# extract_tables_from_html_mapper only: how Beautiful Soup's html.parser
# builder and Python's html.parser treat tables, cells and odd markup.
TABLES_ONLY = [
    # references in cells and attribute values
    "<table><tr><td>&amp;&lt;&gt;&quot;&apos;&nbsp;|&copy|&copyx|&COPY;|&notin;|&notit;"
    "|&bogus;|&amp.x|&a-b|&Aacute&aacute;</td></tr></table>",
    "<table><tr><td>&#65;&#x41;&#X41;&#0;&#13;&#128;&#129;&#141;&#150;&#159;&#160;&#255;"
    "&#256;&#1114111;&#1114112;&#99999999999;&#65x;&#x41g;&#x1F600;</td></tr></table>",
    "<table><tr><td>a &#z; b</td><td>c</td></tr></table>",
    "<table><tr><td>&#z;</td><td>&#q;<b>rest</b></td></tr></table>"
    "<table><tr><td>lost</td></tr></table>",
    "<table><tr><td>&#z</td></tr></table>",
    "<table><tr><td>x &ab",
    "<table><tr><td>x &a",
    "<table><tr><td>x &amp.b-c",
    "<table title=\"&amp;&lt;&copy &notit &#x26;&#0;&#128;&copyx\"><tr>"
    "<td data-x='&quot;'>v</td></tr></table>",
    # attributes: sorting, lists, duplicates, quoting, values without '='
    "<table class=\"  b   a \" id=x data-A='1' data-a=\"2\" nowrap CLASS=c><tr>"
    "<td headers=\" h1  h2 \" title='say \"hi\"' alt=\"it's\" both=\"it's &quot;x&quot;\">c</td>"
    "<th class=\"\u00a0x\u3000y\" rel=\" r \">h</th></tr></table>",
    "<table><tr><td title='oops>x</td><td>y</td></tr></table>",
    "<table><tr><td title='oops>x</td><td class='y'>z</td></tr></table>",
    "<table><tr><td a= 'x>bad</td></tr></table>",
    "<table><tr><td a=='x>v</td></tr></table>",
    "<table><tr><td a=\"x>v</td></tr></table>",
    "<table><tr><td\x00x>nul</td></tr></table>",
    "<table><tr><td/x=1>v</td><td / >w</td><td =x>u</td><td a=b=c>t</td></tr></table>",
    "<table><tr><td\u3000class=x>v</td><td class=\u3000x>w</td></tr></table>",
    # comments, CDATA, processing instructions and declarations in cells
    "<table><tr><td><!--c-->a<!---->b<!-- -->c<![CDATA[ d ]]><![CDATA[]]><?pi?>e"
    "<!DOCTYPE x><!bogus>f<![if x]>g<![endif]><![cdata[h]]></td></tr></table>",
    "<table><tr><td><!-->hidden--></td><td>shown</td></tr></table>",
    "<table><tr><td>a<!-- unclosed comment</td></tr></table>",
    "<table><tr><td><![foo[x]]></td></tr></table>",
    "<table><tr><td><![ x]]></td></tr></table>",
    "<table><tr><td><![CDATA[x</td></tr></table>",
    # script, style, template and ruby text
    "<table><tr><td>a<script>if (a<b) {x=\"</td>\"}</script>b<style>p>q{}</style>c</td></tr></table>",
    "<table><tr><td>a<script>never closed</td></tr></table>",
    "<table><tr><td>a<script>x</\u017fcript>y</SCRIPT >z</td><td>w</td></tr></table>",
    "<table><tr><td><template><b>t</b></template>u<ruby>\u6f22<rp>(</rp><rt>kan</rt><rp>)</rp>"
    "</ruby></td></tr></table>",
    "<table><tr><td><script/>after a self-closed script</td></tr></table>",
    "<table><tr><td><style>td > b {}</style><script>a&&b</script>&amp;</td></tr></table>",
    # upper case
    "<TABLE BORDER=1><TR><TH>H</TH><TD>D</td></tr></TABLE><Table><Tr><Td>m</tD></tR></tAbLe>",
    # whitespace
    "<table>\n <tr>\n  <td>\n   a \n  b\t</td>\n  <td>\u00a0\u3000</td><td> \x0b </td>"
    "<td>\x1c\x1d</td>\n </tr>\n</table>",
    "<table><tr><td><pre>\n  keep  \n</pre></td><td><pre>  </pre></td>"
    "<td><textarea> </textarea></td><td><pre><b> </b></pre></td></tr></table>",
    "<table>\n\n  <tr>  <td>  </td>\t</tr>\r\n</table>",
    "<table>\r\n<tr>\r\n<td>a\r\nb</td></tr></table>",
    # void elements
    "<table><tr><td>a<br>b<br/>c</td><td>d</td></tr></table>",
    "<table><tr><td><img src=x>i</img><input><hr/><col></td><td>x</br>y</td></tr></table>",
    "<table><tr><td><br/><br/></td><td><p/>p</td></tr></table>",
    # <meta> charsets, which Beautiful Soup writes as the output encoding
    "<table><tr><td><meta charset=\"latin1\"><meta http-equiv=\"Content-Type\" "
    "content=\"text/html; charset=latin1\"><meta content=\"a;charset=x;b\" "
    "http-equiv=content-type><meta content=\"charset=y\"></td></tr></table>",
    # structure
    "<table><tr><td><table><tr><td>in</td></tr></table></td></tr><tr><th>h</th></tr></table>",
    "<tr><td>no table</td></tr>",
    "<table><td>cell without tr</td></table>",
    "<table><tr><td>1<tr><td>2</table>",
    "</table></tr><table><tr></td><td>stray ends</td></tr></table>",
    "<table><tr><th>a<td>b</th></td></tr></table>",
    "<table><tbody><tr><td>x</td></tr></tbody><tfoot><tr><th>f</th></tr></tfoot></table>",
    "<table><tr><div><td>in div</td></div><td>direct</td></tr></table>",
    "<table><tr><td>a</td></tr>",
    "<x:table><tr><td>ns</td></tr></x:table><table:x><tr><td>t</td></tr>",
    "<table><tr><td>&lt;td&gt;text&lt;/td&gt;</td></tr></table>",
    "<tabl\u00e9><tr><td>\u00e9</td></tr></tabl\u00e9><table><tr><TD\u0130>x</TD\u0130><td>y</td>"
    "</tr></table>",
    "<table><tr><td>a < b & c <</td></tr></table>",
    "<table><tr><td>x<",
    "<table><tr><td>x</td x><td>y</ td><td>z</td\n></tr></table></>",
    "<table><tr><td>\U0001F600 emoji \u200b zero width \ufeff</td></tr></table>",
    "<table><tr><td>" + "long " * 400 + "</td></tr></table>",
    "<table><caption>cap</caption><colgroup><col></colgroup><tr><td>c</td></tr></table>",
]


def seeded_tables(count, seed=20240601):
    """Tables built at random (seeded) from rows, cells, attributes and the
    odd pieces above: what a fuzzer compared djshard with Data-Juicer on."""
    import random
    rnd = random.Random(seed)
    texts = ["cell", " padded ", "a &amp; b", "&copy", "&#128;", "&bogus;", "\n", "  ",
             "\u3000w\u3000", "<!-- c -->", "<![CDATA[cd]]>", "<br>", "<br/>", "<b>bold</b>",
             "<p>para", "</td>", "</tr>", "<td>", "<script>s()</script>", "&#", "<",
             "<?pi?>", "<rt>r</rt>", "<pre> p </pre>", "\u65e5\u672c", "</table>"]
    attrs = ["class=\" a  b \"", "id=x", "title='it''s'", "nowrap", "headers=h",
             "data-x=\"&lt;\"", "a='unclosed", "CLASS=C"]

    def open_tag(name):
        if rnd.random() < 0.7:
            return "<%s>" % name
        return "<%s %s>" % (name, " ".join(rnd.sample(attrs, rnd.randint(1, 2))))

    def table(depth):
        out = [open_tag(rnd.choice(["table", "TABLE"]))]
        for _ in range(rnd.randint(0, 4)):
            if rnd.random() < 0.2:
                out.append(rnd.choice(["<tbody>", "<thead>", "</tbody>", "\n  "]))
            out.append(open_tag("tr"))
            for _ in range(rnd.randint(0, 4)):
                name = rnd.choice(["td", "td", "th", "TD"])
                out.append(open_tag(name))
                out.append("".join(rnd.choice(texts) for _ in range(rnd.randint(0, 3))))
                if depth < 2 and rnd.random() < 0.1:
                    out.append(table(depth + 1))
                if rnd.random() < 0.85:
                    out.append("</%s>" % name)
            if rnd.random() < 0.85:
                out.append("</tr>")
        if rnd.random() < 0.9:
            out.append("</table>")
        return "".join(out)

    return [{"id": "tables-random-%02d" % i,
             "text": "".join(table(0) for _ in range(rnd.randint(1, 2)))}
            for i in range(count)]


def tables_only_inputs():
    out = [{"id": "tables-%02d" % i, "text": t} for i, t in enumerate(TABLES_ONLY)]
    out.append({"id": "tables-meta-00", "text": TABLE_PAGE, META: {"html_tables": None}})
    return out + seeded_tables(80)


def hand_inputs():
    out = [{"id": "hand-%02d" % i, "text": t} for i, t in enumerate(HAND)]
    # records whose __dj__meta__ already holds a value
    out.append({"id": "hand-meta-00", "text": TABLE_PAGE,
                META: {"html_tables": "kept", "other": 1}})
    out.append({"id": "hand-meta-01", "text": TABLE_PAGE,
                META: {"tables": [], "lang": "en"}})
    out.append({"id": "hand-meta-02", "text": TABLE_PAGE, META: {"lang": "en"}})
    return out


# -------------------------------------------------------------------- run

def clean_one(cls, args, text):
    return cls(**args).process_batched({"text": [text]})["text"][0]


def tables_one(op, inp):
    sample = copy.deepcopy(inp)
    sample.setdefault(META, {})
    out = op.process_single(sample)
    return out[META]


def main():
    selectolax_dir = take_path_option("--selectolax")
    bs4_dir = take_path_option("--bs4")
    tables_out = take_path_option("--tables-out")
    sys.path[:0] = [selectolax_dir, bs4_dir]
    dj_root, out_path, classes, corpus = dj.start(__doc__, install_stubs,
                                                  "mapper", [CLEAN, TABLES])
    import bs4
    import selectolax
    print("bs4 %s from %s; selectolax %s from %s; python %s" % (
        bs4.__version__, bs4.__file__, selectolax.__version__,
        selectolax.__file__, sys.version.split()[0]), file=sys.stderr)

    vectors = []

    def emit(op, args, inp, out_text, meta=None, error=None):
        v = {"op": op, "args": args, "input": inp, "output_text": out_text,
             "stats": {}, "keep": None}
        if meta is not None:
            v["output_meta"] = meta
        if error is not None:
            v["error"] = error
        if inp is not None and inp["id"] in KNOWN_DIFFERENCES and op == CLEAN:
            v["known_difference"] = KNOWN_DIFFERENCES[inp["id"]]
        vectors.append(v)

    # Data-Juicer's unit tests, run as written (their assertions must hold)
    unit = {}
    for name in (CLEAN, TABLES):
        recs = list(dj.unit_test_records(dj_root, "mapper", name))
        texts = [s["text"] for _, samples in recs for s in samples]
        _, unit[name] = dj.unit_inputs(name, texts)
        print("%s: %d unit-test datasets, %d distinct inputs" % (
            name, len(recs), len(unit[name])), file=sys.stderr)
        for op, samples in recs:
            for s in samples:
                if name == CLEAN:
                    assert clean_one(classes[CLEAN], op._vector_args, s["text"]) == s["target"]
    unit_args = {}
    for op, _ in dj.unit_test_records(dj_root, "mapper", TABLES):
        unit_args[json.dumps(op._vector_args, sort_keys=True)] = op._vector_args

    hand = hand_inputs()
    plain = corpus + unit[CLEAN] + unit[TABLES] + [
        {"id": h["id"], "text": h["text"]} for h in hand if META not in h]

    for inp in plain:
        try:
            emit(CLEAN, {}, inp, clean_one(classes[CLEAN], {}, inp["text"]))
        except Exception as e:  # noqa: BLE001
            emit(CLEAN, {}, inp, None, error=err_str(e))

    variants = TABLE_VARIANTS + [a for a in unit_args.values() if a not in TABLE_VARIANTS]
    for args in variants:
        op = classes[TABLES](**args)
        for inp in plain + [h for h in hand if META in h] + tables_only_inputs():
            try:
                meta = tables_one(op, inp)
                emit(TABLES, args, inp, inp["text"], meta=meta)
            except Exception as e:  # noqa: BLE001
                emit(TABLES, args, inp, None, error=err_str(e))

    dj.write_jsonl(out_path, [v for v in vectors if v["op"] == CLEAN])
    dj.write_jsonl(tables_out, [v for v in vectors if v["op"] == TABLES])
    by_op = {}
    for v in vectors:
        by_op[v["op"]] = by_op.get(v["op"], 0) + 1
    print("vectors: %s; known differences: %d" % (
        by_op, sum("known_difference" in v for v in vectors)), file=sys.stderr)


if __name__ == "__main__":
    main()
