#!/usr/bin/env bash
# Runs Data-Juicer's elastic sharding GPU demo recipe (configs/gpu_demo.yaml)
# end to end through `djshard dlc`. The recipe names three Hugging Face models;
# this script builds small local stand-ins under those ids (the real
# tokenizers, seeded random weights: NOT trained models, so the labels and
# scores mean nothing) in build/gpu-demo/models and points DJSHARD_MODEL_HOME
# at them. With real snapshots in the Hugging Face cache, run the dlc command
# below without DJSHARD_MODEL_HOME.
#
#   scripts/gpu_demo.sh [--device cpu|cuda] [--config configs/gpu_demo_4gpu.yaml]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
device=cpu
config="$root/configs/gpu_demo.yaml"
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --config) config=$2; shift 2 ;;
    *) echo "usage: $0 [--device cpu|cuda] [--config RECIPE]" >&2; exit 2 ;;
  esac
done
"$root/scripts/build.sh"
bin="$root/build/bin/djshard"
work="$root/build/gpu-demo"
models="$work/models"
if [ ! -d "$models/openai--clip-vit-base-patch32" ]; then
  rm -rf "$work/tiny"
  /usr/bin/python3 "$root/tools/tiny_models.py" make "$work/tiny"
  mkdir -p "$models"
  ln -sfn "$work/tiny/roberta-sentiment-st" \
    "$models/mrm8488--distilroberta-finetuned-financial-news-sentiment-analysis"
  ln -sfn "$work/tiny/roberta-topic-st" "$models/dstefa--roberta-base_topic_classification_nyt_news"
  ln -sfn "$work/tiny/clip-st" "$models/openai--clip-vit-base-patch32"
fi
rm -rf "$work/job"
DJSHARD_MODEL_HOME="$models" "$bin" dlc --run-id gpu-demo --job-dir "$work/job" --config "$config" --nodes 1 \
  --num-shards 1 --device "$device" --output "$work/processed.jsonl"
echo
head -n 4 "$work/processed.jsonl"
echo "PASS: $(wc -l <"$work/processed.jsonl") rows in $work/processed.jsonl"
