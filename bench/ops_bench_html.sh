#!/usr/bin/env bash
# clean_html_mapper, one thread: djshard (Gumbo) against Data-Juicer's operator
# code on selectolax (MyHTML), on the same HTML pages.
#
#   bench/ops_bench_html.sh --dj DJ_SRC --selectolax DIR [--mb 8] [--workdir DIR]
#
# DJ_SRC holds data_juicer/ops/mapper/clean_html_mapper.py (a Data-Juicer
# 1.4.3 checkout); DIR is a selectolax source tree built in place (see
# tests/data/make_ops_html.py). The pages are made from gen_corpus.py's text:
# each record becomes one page (head with title, style and script, a nav
# list, headed sections of paragraphs with inline markup and entities, an
# ordered list, a table, comments, a footer), 5-60 KB each. Prints MB/s of
# input HTML (CPU time) for both and the ratio; also checks that the outputs
# agree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mb=8
workdir=${TMPDIR:-/tmp}/djshard-html-bench
dj="" selectolax=""
while [ $# -gt 0 ]; do
  case $1 in
    --dj) dj=$2; shift 2 ;;
    --selectolax) selectolax=$2; shift 2 ;;
    --mb) mb=$2; shift 2 ;;
    --workdir) workdir=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$dj" ] && [ -n "$selectolax" ] || { sed -n 2,13p "$0" >&2; exit 2; }
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build it first" >&2; exit 2; }
py=/usr/bin/python3
mkdir -p "$workdir"
gen=$root/shared/data/gen_corpus.py
[ -f "$gen" ] || gen=$root/../shared/data/gen_corpus.py
$py "$gen" "$workdir/text.jsonl" --mb "$mb" --seed 3 >/dev/null
$py - "$workdir/text.jsonl" "$workdir/pages.jsonl" <<'PY'
import html, json, random, sys
rng = random.Random(5)
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
i = 0
while i < len(texts):
    body, size = [], 0
    target = rng.randrange(5000, 60000)
    while size < target and i < len(texts):
        t = texts[i]; i += 1
        body.append("<h2>%s</h2>" % html.escape(t[:40]))
        body.append(para(t.replace("&", "&amp;").replace("<", "&lt;")))
        if rng.random() < 0.3:
            body.append("<ol>" + "".join("<li>%s</li>" % html.escape(w) for w in t.split()[:5]) + "</ol>")
        if rng.random() < 0.2:
            rows = "".join("<tr><td>%d</td><td>%s&nbsp;&euro;</td></tr>" % (k, w)
                           for k, w in enumerate(html.escape(t).split()[:6]))
            body.append("<table><thead><tr><th>#</th><th>Item</th></tr></thead><tbody>%s</tbody></table>" % rows)
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

cat >"$workdir/recipe.yaml" <<YAML
process:
  - clean_html_mapper:
YAML
# CPU seconds (user + system), not wall time: a busy machine stretches the
# latter for both alike.
/usr/bin/time -f "%U %S" -o "$workdir/djshard.time" "$bin" run --config "$workdir/recipe.yaml" \
  --dataset-path "$workdir/pages.jsonl" --export-path "$workdir/djshard.jsonl" --threads 1 >/dev/null
dj_secs=$(awk '{print $1 + $2}' "$workdir/djshard.time")

# Data-Juicer's operator: only process_batched is timed, one page per batch.
$py - "$dj" "$selectolax" "$workdir/pages.jsonl" "$workdir/reference.jsonl" <<'PY' >"$workdir/ref.time"
import importlib.util, json, sys, time, types
dj, sx, pages, out = sys.argv[1:5]
sys.path.insert(0, sx)
import selectolax.parser
base = types.ModuleType("data_juicer.ops.base_op")
class Reg:
    def register_module(self, name):
        return lambda c: c
class Mapper:
    def __init__(self, *a, **k):
        self.text_key = "text"
base.OPERATORS, base.Mapper = Reg(), Mapper
ll = types.ModuleType("data_juicer.utils.lazy_loader")
ll.LazyLoader = lambda name, *a, **k: importlib.import_module(name)
for name in ("data_juicer", "data_juicer.ops", "data_juicer.ops.mapper", "data_juicer.utils"):
    m = types.ModuleType(name); m.__path__ = []; sys.modules[name] = m
sys.modules["data_juicer.ops.base_op"] = base
sys.modules["data_juicer.utils.lazy_loader"] = ll
spec = importlib.util.spec_from_file_location(
    "data_juicer.ops.mapper.clean_html_mapper", dj + "/data_juicer/ops/mapper/clean_html_mapper.py")
mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
op = mod.CleanHtmlMapper()
texts = [json.loads(l)["text"] for l in open(pages)]
t0 = time.process_time()
res = [op.process_batched({"text": [t]})["text"][0] for t in texts]
secs = time.process_time() - t0
with open(out, "w") as f:
    for r in res:
        f.write(json.dumps({"text": r}, ensure_ascii=False) + "\n")
print(secs)
PY
ref_secs=$(cat "$workdir/ref.time")
same=$($py -c 'import json,sys
a=[json.loads(l)["text"] for l in open(sys.argv[1])]
b=[json.loads(l)["text"] for l in open(sys.argv[2])]
print(sum(x==y for x,y in zip(a,b)), "of", len(b))' "$workdir/djshard.jsonl" "$workdir/reference.jsonl")
$py - "$bytes" "$pages" "$dj_secs" "$ref_secs" "$same" <<'PY'
import sys
b, pages, d, r, same = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
mb = b / 1e6
print("%d pages, %.1f MB of HTML; outputs identical: %s" % (pages, mb, same))
print("| clean_html_mapper, 1 thread | MB/s | CPU seconds |")
print("|---|---|---|")
print("| djshard run (read, parse, write) | %.1f | %.2f |" % (mb / d, d))
print("| Data-Juicer operator on selectolax (process_batched only) | %.1f | %.2f |" % (mb / r, r))
print("ratio djshard / Data-Juicer: %.2fx" % (r / d))
PY
