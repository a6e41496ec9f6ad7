#!/usr/bin/env bash
# Preflight's replica plan on the CPU (SPEC-checkpoints §10, issue 15 "Speed"):
# the input of bench/model_bench.sh (query_sentiment_detection_mapper, a
# distilroberta-sized classifier, batch size 64) run as a job by `djshard run
# --device cpu` with a hand-picked num_proc of 1, 2, 3 and 4 (preflight off,
# num_proc and mem_required explicit) and with the planned configuration
# (preflight on, no num_proc, no --threads): once with a fresh probe in every
# round (a new work dir), once reusing the probe of an earlier job. Best of
# --rounds rounds each, by wall time. Reports rows/s, CPU seconds (user+sys),
# peak RSS, what the plan chose, the probe's own time and the rows it read
# against the dataset's, and planned / best hand-picked.
#
#   bench/preflight_bench.sh [--workdir DIR] [--rows 2000] [--rounds 3]
#
# Target: the planned configuration within 10% of the best hand-picked num_proc.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
workdir=/tmp/djshard-model-bench
rows=2000
rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --workdir) workdir=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    *) echo "usage: $0 [--workdir DIR] [--rows N] [--rounds N]" >&2; exit 2 ;;
  esac
done
bin="$root/build/bin/djshard"
[ -x "$bin" ] || { echo "build it first: scripts/build.sh" >&2; exit 2; }
. "$root/bench/model_bench_input.sh"
bench="$workdir/preflight"
rm -rf "$bench"
mkdir -p "$bench"
# recipe NAME PARTITION_EXTRA OP_EXTRA
recipe() {
  cat >"$bench/$1.yaml" <<YAML
partition:
  mode: auto
$2
process:
  - query_sentiment_detection_mapper:
      hf_model: $model
      zh_to_en_hf_model: null
      query_key: query
      batch_size: 64
$3
YAML
}
configs="np1 np2 np3 np4 planned planned_reused"
for n in 1 2 3 4; do
  recipe "np$n" "  gpu_preflight_enabled: false" "      num_proc: $n
      mem_required: 1GiB"
done
recipe planned "  gpu_preflight_enabled: true" ""
# One job whose probe the planned_reused rounds reuse (same work dir).
"$bin" run --config "$bench/planned.yaml" --dataset-path "$workdir/queries.jsonl" \
  --export-path "$bench/seed.jsonl" --device cpu --work-dir "$bench/work_reused" \
  --job_id seed >/dev/null 2>"$bench/seed.log"
# run CONFIG ROUND: one timed job; appends "config round wall user sys rss_kb job_dir" to results.
run() {
  local c=$1 r=$2 yaml work
  yaml="$bench/${c%_reused}.yaml"
  work="$bench/work_${c}_$r"
  [ "$c" = planned_reused ] && work="$bench/work_reused"
  /usr/bin/time -f "%e %U %S %M" -o "$bench/time" "$bin" run --config "$yaml" \
    --dataset-path "$workdir/queries.jsonl" --export-path "$bench/out_$c.jsonl" --device cpu \
    --work-dir "$work" --job_id "${c}_$r" >/dev/null 2>"$bench/${c}_$r.log"
  echo "$c $r $(cat "$bench/time") $work/${c}_$r" >>"$bench/results"
}
: >"$bench/results"
# Rounds interleave the configurations, so that the machine's load falls on all alike.
for r in $(seq 1 "$rounds"); do
  for c in $configs; do run "$c" "$r"; done
done
$py - "$bench" "$workdir/queries.jsonl" "$rows" <<'PY'
import glob, json, os, sys
bench, data, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
best = {}
for line in open(bench + "/results"):
    c, r, wall, user, sys_, rss, job = line.split()
    wall, cpu, rss = float(wall), float(user) + float(sys_), int(rss)
    if c not in best or wall < best[c]["wall"]:
        best[c] = {"wall": wall, "cpu": cpu, "rss": rss, "job": job}
def events(job):
    out = []
    for f in glob.glob(job + "/events_*.jsonl"):
        out += [json.loads(l) for l in open(f)]
    return out
print("| configuration | threads | rows/s | wall s | CPU s | peak RSS MB | probe s |")
print("|---|---|---|---|---|---|---|")
for c in ["np1", "np2", "np3", "np4", "planned", "planned_reused"]:
    b = best[c]
    stats = json.load(open(glob.glob(bench + "/out_%s.jsonl.stats.json" % c)[0]))
    probe = sum(e.get("duration_secs", 0) for e in events(b["job"])
                if e.get("event_type") == "probe_complete")
    label = {"planned": "planned (preflight, fresh probe)",
             "planned_reused": "planned (preflight, probe reused)"}.get(c, "num_proc %s" % c[2:])
    print("| %s | %s | %.1f | %.2f | %.2f | %.0f | %s |" % (
        label, stats.get("threads", "?"), rows / b["wall"], b["wall"], b["cpu"], b["rss"] / 1024,
        "%.2f" % probe if c == "planned" else ("0 (reused)" if c == "planned_reused" else "")))
hand = min(best["np%d" % n]["wall"] for n in range(1, 5))
hand_n = min(range(1, 5), key=lambda n: best["np%d" % n]["wall"])
job = best["planned"]["job"]
plan = json.load(open(job + "/dag_execution_plan.json"))
model = [s for s in plan["stages"] if s["kind"] == "model"][0]
probe = json.load(open(job + "/gpu_probe_results.json"))["probes"][0]
t = probe["timings"]
mem = probe["memory"]
print()
print("plan: %d replica(s) on %s (bound: %s); probe: %.1f rows/s per replica, "
      "init %.2f s, warmup %.2f s, steady %s s" % (
          model["replicas"], ",".join(model["devices"]), model.get("bound"),
          probe["steady_rows_per_sec"], t["init_secs"], t["warmup_secs"],
          "+".join("%.2f" % s for s in t["steady_secs"])))
print("probe memory: weights %s bytes, activation peak %s bytes, memory_fraction %s" % (
    mem.get("weights_bytes"), mem.get("activation_peak_bytes"), mem.get("memory_fraction")))
print("probe sample: %d of %d rows read (%.1f%%; %d of %d bytes of the dataset's)" % (
    probe["sample"]["rows"], rows, 100.0 * probe["sample"]["rows"] / rows,
    sum(len(l) for l in open(data, "rb").readlines()[:probe["sample"]["rows"]]),
    os.path.getsize(data)))
print("planned / best hand-picked (num_proc %d), rows/s: fresh probe %.2f, probe reused %.2f "
      "(target >= 0.90)" % (hand_n, hand / best["planned"]["wall"],
                            hand / best["planned_reused"]["wall"]))
PY
