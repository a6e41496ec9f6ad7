#!/usr/bin/env bash
# extract_tables_from_html_mapper, one thread: djshard (its port of Beautiful
# Soup's html.parser tree) against Data-Juicer's operator code on Beautiful
# Soup, on the same HTML pages, for retain_html_tags false and true.
#
#   bench/ops_bench_html_tables.sh --dj DJ_SRC --bs4 DIR [--mb 24] [--workdir DIR]
#
# DJ_SRC holds data_juicer/ops/mapper/extract_tables_from_html_mapper.py (a
# Data-Juicer 1.4.3 checkout); DIR holds the bs4 package (Beautiful Soup
# 4.14.2's source tree; soupsieve from Debian's python3-soupsieve). The pages
# are made from gen_corpus.py's text: each record becomes one page (head with
# title, meta, style and script, a nav list, headed sections of paragraphs with
# inline markup and entities, a table every few sections with a header row,
# attributes, entities and inline markup in its cells, now and then a nested
# table, comments, a footer), 5-60 KB each. Prints MB/s of input HTML (CPU
# time) for both and the ratio; also checks that the outputs agree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=24
workdir=${TMPDIR:-/tmp}/djshard-html-tables-bench
dj="" bs4=""
while [ $# -gt 0 ]; do
  case $1 in
    --dj) dj=$2; shift 2 ;;
    --bs4) bs4=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$dj" ] && [ -n "$bs4" ] || { sed -n 2,16p "$0" >&2; exit 2; }
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build it first" >&2; exit 2; }
py=/usr/bin/python3
mkdir -p "$workdir"
gen=$root/shared/data/gen_corpus.py
[ -f "$gen" ] || gen=$root/../shared/data/gen_corpus.py
$py "$gen" "$workdir/text.jsonl" --mb "$mb" --seed 3 >/dev/null
$py - "$workdir/text.jsonl" "$workdir/pages.jsonl" <<'PY'
import html, json, random, sys
rng = random.Random(7)
src, out = sys.argv[1], open(sys.argv[2], "w")
texts = [json.loads(l)["text"] for l in open(src)]
def para(t):
    words = t.split(" ")
    for _ in range(3):
        if len(words) > 4:
            i = rng.randrange(len(words) - 2)
            tag = rng.choice(["b", "i", "a href=\"/x?a=1&amp;b=2\"", "span class=\"k\"", "em"])
            words[i] = "<%s>%s</%s>" % (tag, html.escape(words[i]), tag.split()[0])
    return "<p>%s</p>" % " ".join(words)
def table(t, nested):
    words = html.escape(t).split()
    rows = []
    for r in range(rng.randrange(2, 8)):
        cells = words[r * 3:r * 3 + 3] or ["-"]
        rows.append("<tr>%s</tr>" % "".join(
            '<td class="c%d" data-k="%d">%s%s</td>' % (k, r, w, rng.choice(["", "&nbsp;&euro;", " <b>x</b>", "<br>"]))
            for k, w in enumerate(cells)))
    if nested:
        rows.append("<tr><td>%s</td></tr>" % table(t[::-1], False))
    return ('<table class="data  wide" border=1><caption>%s</caption><thead><tr><th scope="col">A</th>'
            '<th>B &amp; C</th><th>D</th></tr></thead><tbody>\n%s\n</tbody></table>') % (
                html.escape(t[:20]), "\n".join(rows))
i = 0
while i < len(texts):
    body, size = [], 0
    target = rng.randrange(5000, 60000)
    while size < target and i < len(texts):
        t = texts[i]; i += 1
        body.append("<h2>%s</h2>" % html.escape(t[:40]))
        body.append(para(t.replace("&", "&amp;").replace("<", "&lt;")))
        if rng.random() < 0.4:
            body.append(table(t, rng.random() < 0.2))
        if rng.random() < 0.2:
            body.append("<!-- section %d -->" % i)
        size += len(t)
    page = ("<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>Page %d</title>"
            "<style>body{margin:0} .k{color:red}</style>"
            "<script>var cfg = {a: 1, b: [1, 2]}; if (a < b) run();</script></head><body>"
            "<nav><ul><li><a href=\"/\">Home</a></li><li><a href=\"/about\">About</a></li></ul></nav>"
            "<main>%s</main><footer><p>&copy; 2024 Example &mdash; all rights reserved</p></footer>"
            "</body></html>") % (i, "\n".join(body))
    out.write(json.dumps({"text": page}, ensure_ascii=False) + "\n")
PY
bytes=$($py -c 'import json,sys; print(sum(len(json.loads(l)["text"].encode()) for l in open(sys.argv[1])))' "$workdir/pages.jsonl")
pages=$(wc -l <"$workdir/pages.jsonl")

report=()
for retain in false true; do
  printf 'process:\n  - extract_tables_from_html_mapper:\n      retain_html_tags: %s\n' \
    "$retain" >"$workdir/recipe.yaml"
  # CPU seconds (user + system), not wall time: a busy machine stretches the
  # latter for both alike. djshard's run is short: the best of three.
  dj_secs=""
  for _ in 1 2 3; do
    /usr/bin/time -f "%U %S" -o "$workdir/djshard.time" "$bin" run --config "$workdir/recipe.yaml" \
      --dataset-path "$workdir/pages.jsonl" --export-path "$workdir/djshard-$retain.jsonl" \
      --threads 1 >/dev/null
    secs=$(awk '{print $1 + $2}' "$workdir/djshard.time")
    dj_secs=$(awk -v a="$dj_secs" -v b="$secs" 'BEGIN {print (a == "" || b < a) ? b : a}')
  done

  # Data-Juicer's operator: only process_single is timed, one page per call.
  $py - "$dj" "$bs4" "$workdir/pages.jsonl" "$workdir/reference-$retain.jsonl" "$retain" \
    <<'PY' >"$workdir/ref.time"
import importlib.util, json, sys, time, types
dj, bs4_dir, pages, out, retain = sys.argv[1:6]
sys.path.insert(0, bs4_dir)
import bs4
base = types.ModuleType("data_juicer.ops.base_op")
class Reg:
    def register_module(self, name):
        return lambda c: c
class Mapper:
    def __init__(self, *a, **k):
        self.text_key = "text"
    def remove_extra_parameters(self, d, keys=None):
        return {}
base.OPERATORS, base.TAGGING_OPS, base.Mapper = Reg(), Reg(), Mapper
const = types.ModuleType("data_juicer.utils.constant")
const.Fields = types.SimpleNamespace(meta="__dj__meta__")
const.MetaKeys = types.SimpleNamespace(html_tables="html_tables")
for name in ("data_juicer", "data_juicer.ops", "data_juicer.ops.mapper", "data_juicer.utils"):
    m = types.ModuleType(name); m.__path__ = []; sys.modules[name] = m
sys.modules["data_juicer.ops.base_op"] = base
sys.modules["data_juicer.utils.constant"] = const
spec = importlib.util.spec_from_file_location(
    "data_juicer.ops.mapper.extract_tables_from_html_mapper",
    dj + "/data_juicer/ops/mapper/extract_tables_from_html_mapper.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
op = mod.ExtractTablesFromHtmlMapper(retain_html_tags=retain == "true")
samples = [{"text": json.loads(l)["text"], "__dj__meta__": {}} for l in open(pages)]
t0 = time.process_time()
res = [op.process_single(s) for s in samples]
secs = time.process_time() - t0
with open(out, "w") as f:
    for r in res:
        f.write(json.dumps(r["__dj__meta__"], ensure_ascii=False) + "\n")
print(secs)
PY
  ref_secs=$(cat "$workdir/ref.time")
  same=$($py -c 'import json,sys
a=[json.loads(l)["__dj__meta__"] for l in open(sys.argv[1])]
b=[json.loads(l) for l in open(sys.argv[2])]
print(sum(x==y for x,y in zip(a,b)), "of", len(b))' "$workdir/djshard-$retain.jsonl" \
    "$workdir/reference-$retain.jsonl")
  report+=("$retain $dj_secs $ref_secs $same")
done
$py - "$bytes" "$pages" "${report[@]}" <<'PY'
import sys
b, pages = int(sys.argv[1]), int(sys.argv[2])
mb = b / 1e6
print("%d pages, %.1f MB of HTML" % (pages, mb))
print("| extract_tables_from_html_mapper, 1 thread | MB/s | CPU seconds |")
print("|---|---|---|")
for line in sys.argv[3:]:
    retain, d, r, *same = line.split()
    d, r = float(d), float(r)
    print("| retain_html_tags: %s, djshard run (read, parse, write) | %.1f | %.2f |" % (retain, mb / d, d))
    print("| retain_html_tags: %s, Data-Juicer operator on bs4 (process_single only) | %.2f | %.2f |"
          % (retain, mb / r, r))
    print("ratio djshard / Data-Juicer (retain_html_tags: %s): %.1fx; outputs identical: %s"
          % (retain, r / d, " ".join(same)))
PY
