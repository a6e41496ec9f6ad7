#!/usr/bin/env bash
# Expand/gather lineage benchmark (SPEC-lineage §7) on workload W1: parents
# whose child counts are min(2000, floor(Pareto(1.16, 1))) (seed 7), 512-code-
# point paragraphs, and djshard_bench_model_op as one accelerator replica
# (2,000 us per call + 50 us per item, sleeping while it holds the replica),
# batch_size 64, --threads 2. Modes:
#   (a) coarse per-parent batching (batching_policy: single_parent),
#   (b) flat explode + regroup with barriers (bench/lineage_bench.cc flat),
#   (c) djshard lineage (any_parent, one ready queue across reader batches).
# All three must write the same bytes (sha256 checked first). Then the poison
# experiment: m1 (2 ms/call, 10 us/item) raises on a poison child at ordinal 0
# of 1% of the parents with >= 16 children (seed 11); m2 costs 2 ms/call and
# 1 ms/item; with and without sibling suppression.
#
# W2 (reported, not gated): the same three modes with a real model stage,
# djshard_bench_torch_op running bench/make_w2_mlp.py's TorchScript MLP (3 x
# Linear 1024, fp32, CPU, one intra-op thread) on --w2-parents parents of the
# W1 distribution; skipped when /usr/bin/python3 has no torch.
#
#   bench/lineage_bench.sh [--workdir DIR] [--parents 20000] [--poison-parents 20000]
#                          [--w2-parents 1000] [--bench PATH]
#                          (default bench: build/bin/djshard_lineage_bench)
#
# Goals (W1): (c) >= 2x (a) and >= 1.2x (b) in parents/s; (c)'s p99 latency
# below (b)'s; poison: >= 90% of the poisoned parents' siblings never reach m2.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-lineage-bench
parents=20000
poison_parents=20000
w2_parents=1000
threads=2
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --parents) parents=$2; shift 2 ;;
    --poison-parents) poison_parents=$2; shift 2 ;;
    --w2-parents) w2_parents=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--parents N] [--poison-parents N] [--w2-parents N]" \
         "[--bench PATH]" >&2; exit 2 ;;
  esac
done
bench=${bench:-"$root/build/bin/djshard_lineage_bench"}
[ -x "$bench" ] || { echo "build it first: cmake --build build --target djshard_lineage_bench" >&2; exit 2; }
py=/usr/bin/python3
export DJSHARD_ENABLE_TEST_OPERATORS=1
mkdir -p "$workdir"
cd "$workdir"

$py "$root/tests/cli/tools/lineage_expected.py" w1_corpus w1.jsonl "$parents" 7 512 > w1.counts.json
op="djshard_bench_model_op: {batch_size: 64, call_overhead_us: 2000, item_us: 50"
gather="gather: {name: p, into: [text, list], list: [{from: __dj__meta__.bench_score, to: scores}]}"
printf 'process:\n  - expand: {name: p, by: paragraph}\n  - %s, batching_policy: single_parent}\n  - %s\n' "$op" "$gather" > a.yaml
printf 'process:\n  - expand: {name: p, by: paragraph}\n  - %s}\n  - %s\n' "$op" "$gather" > c.yaml
printf 'process:\n  - %s}\n' "$op" > b.yaml

"$bench" run a.yaml w1.jsonl a.jsonl "$threads" > a.json
"$bench" flat b.yaml w1.jsonl b.jsonl "$threads" > b.json
"$bench" run c.yaml w1.jsonl c.jsonl "$threads" > c.json

# The poison experiment.
$py "$root/tests/cli/tools/lineage_expected.py" w1_corpus clean.jsonl "$poison_parents" 7 512 > /dev/null
$py - <<'PY'
import json, random
rows = [json.loads(l) for l in open("clean.jsonl", encoding="utf-8")]
big = [i for i, r in enumerate(rows) if r["text"].count("\n\n") + 1 >= 16]
rnd = random.Random(11)
poisoned = sorted(rnd.sample(big, max(1, len(rows) // 100)))
with open("poison.jsonl", "w", encoding="utf-8") as f:
    for i, r in enumerate(rows):
        if i in set(poisoned):
            r["text"] = "POISON " + r["text"]
        f.write('{"id": %d, "text": %s}\n' % (r["id"], json.dumps(r["text"], ensure_ascii=False)))
json.dump({"poisoned": poisoned,
           "siblings": sum(rows[i]["text"].count("\n\n") for i in poisoned)}, open("poison.meta.json", "w"))
PY
m1="djshard_bench_model_op: {batch_size: 64, call_overhead_us: 2000, item_us: 10, fail_marker: POISON}"
m2="djshard_bench_model_op: {batch_size: 64, call_overhead_us: 2000, item_us: 1000}"
for s in true false; do
  printf 'process:\n  - expand: {name: p, by: paragraph}\n  - %s\n  - %s\n  - gather: {name: p, suppress_siblings: %s}\n' "$m1" "$m2" "$s" > poison_$s.yaml
done
"$bench" run poison_true.yaml clean.jsonl clean_out.jsonl "$threads" > clean.json
"$bench" run poison_true.yaml poison.jsonl suppress.jsonl "$threads" > suppress.json
"$bench" run poison_false.yaml poison.jsonl nosuppress.jsonl "$threads" > nosuppress.json

# modes_table PREFIX TITLE: the table of modes (a), (b), (c) from PREFIX{a,b,c}.json
# and PREFIX.counts.json; fails when the modes wrote different bytes.
modes_table() {
  $py - "$1" "$2" <<'PY'
import json, sys
prefix, title = sys.argv[1], sys.argv[2]
a, b, c = (json.load(open(prefix + m + ".json")) for m in "abc")
counts = json.load(open((prefix or "w1") + ".counts.json"))
same = a["sha256"] == b["sha256"] == c["sha256"]
print("%s: %d parents, %d children; sha256 equal across modes: %s (%s)" %
      (title, counts["parents"], counts["children"], same, c["sha256"][:16]))
print("| mode | wall s | parents/s | children/s | model calls | mean batch fill | peak RSS MB | p50 latency s | p99 latency s |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, r in (("(a) per-parent batching", a), ("(b) flat explode + regroup", b), ("(c) djshard lineage", c)):
    m = r["model_ops"][0]
    print("| %s | %.2f | %.0f | %.0f | %d | %.1f | %.0f | %.3f | %.3f |" % (
        name, r["wall_s"], r["parents_per_s"], r["children_per_s"], m["calls"],
        m["mean_batch_fill"], r["peak_rss_mb"], r["latency_p50_s"], r["latency_p99_s"]))
print("ratios: (c)/(a) = %.2fx, (c)/(b) = %.2fx in parents/s; p99 (c) %.3f s vs (b) %.3f s" % (
    c["parents_per_s"] / a["parents_per_s"], c["parents_per_s"] / b["parents_per_s"],
    c["latency_p99_s"], b["latency_p99_s"]))
if not same:
    sys.exit(title + ": modes wrote different bytes")
PY
}

modes_table "" W1

$py - "$root" <<'PY'
import json, subprocess, sys
meta = json.load(open("poison.meta.json"))
clean, sup, nosup = (json.load(open(n + ".json")) for n in ("clean", "suppress", "nosuppress"))
def items(r, k):
    return r["model_ops"][k]["items"]
poisoned = set(meta["poisoned"])
def non_poisoned(path):
    out = []
    for line in open(path, encoding="utf-8"):
        if json.loads(line)["id"] not in poisoned:
            out.append(line)
    return out
identical = non_poisoned("clean_out.jsonl") == non_poisoned("suppress.jsonl") == non_poisoned("nosuppress.jsonl")
print()
print("Poison: %d poisoned parents, %d siblings; non-poisoned parents identical to the clean run: %s" %
      (len(poisoned), meta["siblings"], identical))
print("| run | items to m1 | items to m2 | children suppressed | late discarded | wall s |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for name, r in (("clean input", clean), ("suppression (default)", sup), ("suppress_siblings: false", nosup)):
    reg = r["regions"]["p"]
    print("| %s | %d | %d | %d | %d | %.2f |" % (name, items(r, 0), items(r, 1),
          reg["children_suppressed"], reg["late_discarded"], r["wall_s"]))
kept_from_m2 = items(nosup, 1) - items(sup, 1)
print("siblings kept from m2: %d of %d (%.1f%%); m2 item saving %.2f%%, wall-time saving %.2f%%" % (
    kept_from_m2, meta["siblings"], 100.0 * kept_from_m2 / max(1, meta["siblings"]),
    100.0 * kept_from_m2 / items(nosup, 1), 100.0 * (nosup["wall_s"] - sup["wall_s"]) / nosup["wall_s"]))
if not identical:
    sys.exit("non-poisoned parents differ from the clean run")
PY

# W2: a real model stage (reported, not gated).
if [ "$w2_parents" -gt 0 ] && $py -c "import torch" 2>/dev/null; then
  $py "$root/bench/make_w2_mlp.py" w2_mlp
  $py "$root/tests/cli/tools/lineage_expected.py" w1_corpus w2.jsonl "$w2_parents" 7 512 > w2.counts.json
  w2op="djshard_bench_torch_op: {model: $PWD/w2_mlp, batch_size: 64"
  printf 'process:\n  - expand: {name: p, by: paragraph}\n  - %s, batching_policy: single_parent}\n  - %s\n' "$w2op" "$gather" > w2a.yaml
  printf 'process:\n  - expand: {name: p, by: paragraph}\n  - %s}\n  - %s\n' "$w2op" "$gather" > w2c.yaml
  printf 'process:\n  - %s}\n' "$w2op" > w2b.yaml
  "$bench" run w2a.yaml w2.jsonl w2a.jsonl "$threads" > w2a.json
  "$bench" flat w2b.yaml w2.jsonl w2b.jsonl "$threads" > w2b.json
  "$bench" run w2c.yaml w2.jsonl w2c.jsonl "$threads" > w2c.json
  echo
  modes_table w2 "W2 (TorchScript MLP 3 x Linear 1024, fp32, CPU)"
elif [ "$w2_parents" -gt 0 ]; then
  echo "W2 skipped: $py has no torch (apt-get install python3-torch)"
fi
