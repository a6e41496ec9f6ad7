#!/usr/bin/python3
"""clean_html_mapper against Data-Juicer's parser on random malformed documents.

Makes N random documents from pieces of markup (tags of every insertion mode,
tables, raw text elements, comments, character references, CR LF, control
characters, unclosed tags), runs `djshard run` with clean_html_mapper over
them, and computes Data-Juicer's result for each with selectolax's MyHTML
(HTMLParser(text).text() after Data-Juicer's four replacements). Prints how
many agree, and, for those that do not, which departure of MyHTML from the
HTML5 specification each document holds (a document can hold several):

    "</>"                 MyHTML keeps it as text; HTML5 drops it
    "<xmp> left open"     (and the other raw text elements) to the end of the
                          document: MyHTML decodes some of its references
    "ends inside a tag"   MyHTML ends a document cut short in a tag (or in a
                          comment, or with a '<') its own way
    "'<' in a tag name"   "a<b</ol>" gives "ab" in MyHTML
    "raw text holding a reference"
                          what is left of MyHTML's decoding of references in
                          <xmp>, <iframe> and <noembed> text once djshard
                          decodes them where the text holds an end tag of
                          letters, as MyHTML does
    "SVG or MathML"       foreign content
    "U+0000"              MyHTML repeats the character before it

A document with none of these that still differs is printed in full: that is
a difference nobody has explained yet.

    /usr/bin/python3 bench/html_agreement.py --selectolax DIR [--djshard BIN]
        [--count 30000] [--seed 1] [--workdir DIR]

DIR is a selectolax 0.4.0 tree built in place (see tests/data/make_ops_html.py).
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys

PIECES = [
    "<!DOCTYPE html>", "<html>", "<head>", "</head>", "<body>", "</body>", "</html>",
    "<title>T&amp;</title>", "<style>p > b {}</style>", "<script>a<b</script>",
    "<script>x = '</scrip'</script>", "<meta charset=utf-8>", "<link rel=x>",
    "<p>", "</p>", "<b>", "</b>", "<i>", "</i>", "<a href='x>y'>", "</a>", "<div class=c>",
    "</div>", "<span>", "</span>", "<br>", "<br/>", "</br>", "<img src=x alt=\"<b>\">",
    "<pre>", "</pre>", "<textarea>", "</textarea>", "<xmp>", "</xmp>", "<listing>",
    "<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>", "<th>", "</th>", "<tbody>",
    "</tbody>", "<thead>", "</thead>", "<tfoot>", "<caption>", "</caption>", "<ul>", "</ul>",
    "<li>", "</li>", "<ol>", "</ol>", "<h1>", "</h1>", "<button>", "<form>",
    "<input type=hidden>", "<select>", "<option>", "<svg>", "<template>", "<noscript>",
    "<iframe>", "</iframe>", "<noembed>", "<!-- c -->", "<!-->", "<!--->", "<!-- a --!>",
    "<?x?>", "<!x>", "</ x>", "</>", "<![CDATA[c]]>", "&amp;", "&lt;", "&nbsp;", "&copy",
    "&#39;", "&#x27;", "&#128;", "&bogus;", "&", "&#", "<", "a<b", " ", "  ", "\n", "\r\n",
    "\r", "\t", "text", "more words", "\u00e9", "\u4e2d\u6587", "\u00a0", "\u0084", "\f",
    "&euro;", "&mdash;", "&#8217;", "<P>", "</P>", "<TABLE>", "<TD>", "<Br>",
    "<SCRIPT>u</SCRIPT>", "<!doctype html>", "<p title=\"unclosed", "<!-- unclosed",
    "<frameset>", "<math>", "<col>", "<n>", "</n>", "<object>", "</object>", "<h2>", "</h2>",
    "<nobr>", "</nobr>", "<u>", "</u>", "<dd>", "<dt>", "</dl>", "<em>", "</em>", "<strong>",
    "</strong>", "<section>", "</section>", "<nav>", "</nav>",
]
RAW_TEXT = ["noembed", "iframe", "xmp", "noframes", "textarea", "title", "style", "script",
            "plaintext"]


def departures(doc):
    """The departures of MyHTML from HTML5 that `doc` may run into."""
    low = doc.lower()
    found = []
    if "</>" in doc:
        found.append("</>")
    for tag in RAW_TEXT:
        at = low.rfind("<" + tag)
        if at >= 0 and low.find("</" + tag, at) < 0:
            found.append("<%s> left open" % tag)
    last = doc.rfind("<")
    if last >= 0 and doc.find(">", last) < 0 and last + 1 < len(doc):
        found.append("ends inside a tag")
    if "<!--" in doc and doc.rfind("-->") < doc.rfind("<!--"):
        found.append("ends inside a comment")
    if doc.rstrip(" \t\n\r\f").endswith("<"):
        found.append("ends with '<'")
    if re.search(r"<[A-Za-z][^\s/>]*<", doc):
        found.append("'<' in a tag name")
    if re.search(r"<(xmp|iframe|noembed|noframes)[\s>].*&", doc, re.I | re.S):
        found.append("raw text holding a reference")
    if "<svg" in low or "<math" in low:
        found.append("SVG or MathML")
    if "\x00" in doc:
        found.append("U+0000")
    return found


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--selectolax", required=True)
    ap.add_argument("--djshard", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "bin", "djshard"))
    ap.add_argument("--count", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workdir", default="/tmp/djshard-html-agreement")
    args = ap.parse_args()
    sys.path.insert(0, args.selectolax)
    from selectolax.parser import HTMLParser

    os.makedirs(args.workdir, exist_ok=True)
    docs_path = os.path.join(args.workdir, "docs.jsonl")
    out_path = os.path.join(args.workdir, "out.jsonl")
    recipe = os.path.join(args.workdir, "recipe.yaml")
    rng = random.Random(args.seed)
    docs = ["".join(rng.choice(PIECES) for _ in range(rng.randrange(1, 40)))
            for _ in range(args.count)]
    with open(docs_path, "w") as f:
        for k, doc in enumerate(docs):
            f.write(json.dumps({"id": k, "text": doc}, ensure_ascii=False) + "\n")
    with open(recipe, "w") as f:
        f.write("process:\n  - clean_html_mapper:\n")
    subprocess.run([args.djshard, "run", "--config", recipe, "--dataset-path", docs_path,
                    "--export-path", out_path, "--threads", "2"], check=True,
                   stdout=subprocess.DEVNULL)
    got = {}
    with open(out_path) as f:
        for line in f:
            row = json.loads(line)
            got[row["id"]] = row["text"]
    agree, explained, unexplained, by_reason = 0, 0, [], {}
    for k, doc in enumerate(docs):
        text = doc.replace("<li>", "\n*").replace("</li>", "")
        text = text.replace("<ol>", "\n*").replace("</ol>", "")
        want = HTMLParser(text).text()
        if got[k] == want:
            agree += 1
            continue
        reasons = departures(doc)
        if not reasons:
            unexplained.append((doc, got[k], want))
            continue
        explained += 1
        for r in reasons:
            by_reason[r] = by_reason.get(r, 0) + 1
    print("%d documents: %d agree with selectolax, %d differ where MyHTML departs from HTML5, "
          "%d differ otherwise" % (len(docs), agree, explained, len(unexplained)))
    for reason, n in sorted(by_reason.items(), key=lambda kv: -kv[1]):
        print("  %6d hold %s" % (n, reason))
    for doc, g, w in unexplained[:10]:
        print("unexplained: %r\n  djshard:    %r\n  selectolax: %r" % (doc, g, w))


if __name__ == "__main__":
    main()
