# The input of the CPU model benchmarks (bench/model_bench.sh,
# bench/preflight_bench.sh), sourced by them: a distilroberta-sized classifier
# (seeded random weights, the real RoBERTa tokenizer) under $workdir/models and
# $rows queries of 4-60 words (log-normal around 14 words, seed 5) in
# $workdir/queries.jsonl. Sets $model. Needs $root, $workdir, $rows.
py=/usr/bin/python3
mkdir -p "$workdir"
model="$workdir/models/roberta-sentiment-st"
[ -d "$model" ] || $py "$root/tools/tiny_models.py" make "$workdir/models" --size distilroberta
echo "BLAS: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
$py - "$workdir/queries.jsonl" "$rows" <<'PY'
import json, math, random, sys
rng = random.Random(5)
words = ("market rates profit loss growth bank stock quarter news the a of and to in is for on "
         "with company shares investors report sales record fell rose sharply strong weak").split()
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        k = max(4, min(60, int(rng.lognormvariate(math.log(14), 0.6))))
        f.write(json.dumps({"id": i, "query": " ".join(rng.choice(words) for _ in range(k))}) + "\n")
PY
# Warm the page cache with the weights: runs are timed end to end, model load included.
cat "$model/model.safetensors" >/dev/null
