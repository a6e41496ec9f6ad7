#!/usr/bin/env python3
"""Steps 2-7 of the GPU check (SPEC-models §8); tools/gpu_check.sh runs it.

Makes seeded random-init models with transformers (a RoBERTa-base-size 3-label
classifier, a CLIP ViT-B/32-size text tower, a TorchScript package), compares
djshard's outputs with transformers' (fp32 and bf16), and times djshard
against eager PyTorch and transformers.pipeline on 50,000 queries, sampling
GPU utilisation and memory every 100 ms. Writes gpu_check.json and
gpu_check.md to --out.
"""
import argparse
import json
import math
import os
import random
import shutil
import subprocess
import sys
import threading
import time

import torch

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
T0 = time.time()


def say(msg):
    print("[%6.1f s] %s" % (time.time() - T0, msg), flush=True)


class GpuSampler:
    """nvidia-smi every 100 ms: utilisation % and memory used (MiB)."""

    def __init__(self):
        self.util, self.mem, self.stop = [], [], threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                line = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                       "--format=csv,noheader,nounits", "-i", "0"],
                                      stdout=subprocess.PIPE, timeout=2).stdout.decode()
                u, m = (float(x) for x in line.strip().split(","))
                self.util.append(u)
                self.mem.append(m)
            except Exception:
                pass
            time.sleep(0.1)

    def __enter__(self):
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()

    def summary(self):
        busy = sum(1 for u in self.util if u > 0) / len(self.util) * 100 if self.util else None
        mean = sum(self.util) / len(self.util) if self.util else None
        return {"gpu_busy_pct": busy, "gpu_util_mean_pct": mean,
                "peak_mem_mib": max(self.mem) if self.mem else None}


def make_models(work):
    import transformers
    torch.manual_seed(0)
    tok_dir = os.path.join(ROOT, "tests", "data", "tokenizers")
    models = {}
    cfg = transformers.RobertaConfig(vocab_size=50265, hidden_size=768, num_hidden_layers=12,
                                     num_attention_heads=12, intermediate_size=3072,
                                     max_position_embeddings=514, type_vocab_size=1,
                                     pad_token_id=1, bos_token_id=0, eos_token_id=2,
                                     layer_norm_eps=1e-5, num_labels=3,
                                     id2label={0: "negative", 1: "neutral", 2: "positive"},
                                     label2id={"negative": 0, "neutral": 1, "positive": 2})
    m = transformers.RobertaForSequenceClassification(cfg).eval()
    d = os.path.join(work, "roberta")
    m.save_pretrained(d, safe_serialization=True)
    shutil.copy(os.path.join(tok_dir, "roberta-base", "tokenizer.json"), d)
    models["roberta"] = d
    torch.manual_seed(1)
    ccfg = transformers.CLIPTextConfig(vocab_size=49408, hidden_size=512, intermediate_size=2048,
                                       num_hidden_layers=12, num_attention_heads=8,
                                       max_position_embeddings=77, projection_dim=512,
                                       eos_token_id=2, bos_token_id=49406, pad_token_id=1)
    c = transformers.CLIPTextModelWithProjection(ccfg).eval()
    d = os.path.join(work, "clip")
    c.save_pretrained(d, safe_serialization=True)
    shutil.copy(os.path.join(tok_dir, "clip-vit-base-patch32", "tokenizer.json"), d)
    models["clip"] = d
    pkg = os.path.join(work, "roberta-ts")
    subprocess.run([sys.executable, os.path.join(ROOT, "tools", "export_torchscript.py"),
                    models["roberta"], pkg], check=True)
    models["package"] = pkg
    return models


def make_queries(n, seed=5):
    rng = random.Random(seed)
    words = ["market", "rates", "profit", "loss", "growth", "bank", "stock", "quarter", "news",
             "the", "a", "of", "and", "to", "in", "is", "for", "on", "with", "company", "shares",
             "investors", "report", "sales", "record", "fell", "rose", "sharply", "strong", "weak"]
    rows = []
    for i in range(n):
        k = max(4, min(200, int(rng.lognormvariate(math.log(20), 0.8))))
        rows.append({"id": i, "text": " ".join(rng.choice(words) for _ in range(k))})
    return rows


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def djshard_run(djshard, recipe_text, data, out, threads=16):
    recipe = out + ".yaml"
    with open(recipe, "w") as f:
        f.write(recipe_text)
    began = time.time()
    with GpuSampler() as s:
        subprocess.run([djshard, "run", "--config", recipe, "--dataset-path", data,
                        "--export-path", out, "--threads", str(threads), "--device", "cuda"],
                       check=True, stdout=subprocess.DEVNULL)
    secs = time.time() - began
    rows = [json.loads(line) for line in open(out, encoding="utf-8")]
    return rows, secs, s.summary()


def sentiment_recipe(model, dtype):
    return ("process:\n  - query_sentiment_detection_mapper:\n      query_key: text\n"
            "      hf_model: %s\n      zh_to_en_hf_model: null\n      batch_size: 64\n"
            "      dtype: %s\n      truncation: true\n" % (model, dtype))


def eager(model_dir, texts, dtype, batch=64, window=512):
    """PyTorch eager: HF fast tokenizer, inference_mode, pad to longest,
    sorted within windows of 512; model load excluded."""
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(model_dir)
    m = transformers.AutoModelForSequenceClassification.from_pretrained(
        model_dir, torch_dtype=dtype).cuda().eval()
    torch.cuda.synchronize()
    began = time.time()
    labels, scores = [None] * len(texts), [None] * len(texts)
    with GpuSampler() as s, torch.inference_mode():
        for w in range(0, len(texts), window):
            idx = sorted(range(w, min(w + window, len(texts))), key=lambda i: len(texts[i]))
            for b in range(0, len(idx), batch):
                part = idx[b:b + batch]
                enc = tok([texts[i] for i in part], padding=True, truncation=True,
                          return_tensors="pt").to("cuda")
                p = torch.softmax(m(**enc).logits.float(), dim=-1).cpu()
                for j, i in enumerate(part):
                    best = int(p[j].argmax())
                    labels[i] = m.config.id2label[best]
                    scores[i] = float(p[j, best])
    torch.cuda.synchronize()
    return labels, scores, time.time() - began, s.summary()


def pipeline_path(model_dir, texts, dtype):
    import transformers
    pipe = transformers.pipeline("text-classification", model=model_dir, device=0,
                                 torch_dtype=dtype, batch_size=64, truncation=True)
    began = time.time()
    with GpuSampler() as s:
        out = pipe(texts)
    return [o["label"] for o in out], time.time() - began, s.summary()


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--djshard", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ctest-rc", type=int, default=0)
    ap.add_argument("--rows", type=int, default=50000)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    report = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
              "ctest_gpu_rc": args.ctest_rc, "steps": {}}
    say("step 2: models")
    models = make_models(args.work)
    say("step 3: data")
    rows = make_queries(args.rows)
    data = os.path.join(args.work, "queries.jsonl")
    write_jsonl(data, rows)
    texts = [r["text"] for r in rows]
    agreement = {}
    for dtype_name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
        say("step 4: eager PyTorch %s" % dtype_name)
        e_labels, e_scores, e_secs, e_gpu = eager(models["roberta"], texts, dtype)
        report["steps"]["eager_" + dtype_name] = dict(rows_per_s=len(texts) / e_secs, **e_gpu)
        say("step 5: djshard %s" % dtype_name)
        out, secs, gpu = djshard_run(args.djshard, sentiment_recipe(models["roberta"], dtype_name),
                                     data, os.path.join(args.work, "out-%s.jsonl" % dtype_name))
        report["steps"]["djshard_" + dtype_name] = dict(rows_per_s=len(texts) / secs, **gpu)
        got = {r["id"]: r["__dj__meta__"] for r in out}
        same = sum(1 for i in range(len(texts))
                   if got[i]["query_sentiment_label"] == e_labels[i])
        err = max(abs(got[i]["query_sentiment_label_score"] - e_scores[i])
                  for i in range(len(texts)))
        agreement[dtype_name] = {"labels_equal": same / len(texts), "max_score_error": err}
    say("step 4: transformers.pipeline float32")
    p_labels, p_secs, p_gpu = pipeline_path(models["roberta"], texts, torch.float32)
    report["steps"]["pipeline_float32"] = dict(rows_per_s=len(texts) / p_secs, **p_gpu)
    say("step 5: text_pair_similarity_filter")
    pairs = [dict(r, target_text=r["text"][::-1]) for r in rows[:10000]]
    pair_data = os.path.join(args.work, "pairs.jsonl")
    write_jsonl(pair_data, pairs)
    recipe = ("process:\n  - text_pair_similarity_filter:\n      hf_clip: %s\n"
              "      text_key_second: target_text\n      min_score: -1\n      truncation: true\n"
              % models["clip"])
    _, secs, gpu = djshard_run(args.djshard, recipe, pair_data,
                               os.path.join(args.work, "pairs-out.jsonl"))
    report["steps"]["djshard_clip_pairs"] = dict(rows_per_s=len(pairs) / secs, **gpu)
    say("step 6: bitwise row invariance (512 rows, two shuffled orders)")
    sample = rows[:512]
    outputs = []
    for seed in (1, 2):
        shuffled = list(sample)
        random.Random(seed).shuffle(shuffled)
        path = os.path.join(args.work, "inv-%d.jsonl" % seed)
        write_jsonl(path, shuffled)
        out, _, _ = djshard_run(args.djshard, sentiment_recipe(models["roberta"], "float32"),
                                path, path + ".out")
        outputs.append({r["id"]: json.dumps(r["__dj__meta__"], sort_keys=True) for r in out})
    report["row_invariance_bitwise"] = outputs[0] == outputs[1]
    say("step 6: TorchScript package")
    check = subprocess.run([args.djshard, "model", "check", models["package"], "--device", "cuda:0"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    report["package_check_rc"] = check.returncode
    report["agreement"] = agreement
    s = report["steps"]
    report["ratios"] = {
        "djshard_vs_eager_fp32": s["djshard_float32"]["rows_per_s"] / s["eager_float32"]["rows_per_s"],
        "djshard_vs_eager_bf16": s["djshard_bfloat16"]["rows_per_s"] / s["eager_bfloat16"]["rows_per_s"],
        "djshard_vs_pipeline_fp32":
            s["djshard_float32"]["rows_per_s"] / s["pipeline_float32"]["rows_per_s"],
    }
    report["goals"] = {
        "eager_ratio_ge_1.0": report["ratios"]["djshard_vs_eager_fp32"] >= 1.0,
        "pipeline_ratio_ge_1.3": report["ratios"]["djshard_vs_pipeline_fp32"] >= 1.3,
        "gpu_busy_ge_80": (s["djshard_float32"]["gpu_busy_pct"] or 0) >= 80,
        "labels_fp32_ge_99.9": agreement["float32"]["labels_equal"] >= 0.999,
        "score_err_fp32_le_1e-4": agreement["float32"]["max_score_error"] <= 1e-4,
        "labels_bf16_ge_99": agreement["bfloat16"]["labels_equal"] >= 0.99,
        "row_invariance": report["row_invariance_bitwise"],
        "ctest_gpu": args.ctest_rc == 0,
        "package_check": check.returncode == 0,
    }
    report["seconds"] = time.time() - T0
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(report, f, indent=2)
    lines = ["# djshard GPU check", "", "Device: %s, torch %s" % (report["device"], report["torch"]),
             "", "| run | rows/s | GPU busy % | peak MiB |", "|---|---|---|---|"]
    for name, v in s.items():
        lines.append("| %s | %.0f | %s | %s |" % (name, v["rows_per_s"], v["gpu_busy_pct"],
                                                   v["peak_mem_mib"]))
    lines += ["", "| goal | met |", "|---|---|"]
    lines += ["| %s | %s |" % (k, v) for k, v in report["goals"].items()]
    lines += ["", "Ratios: %s" % json.dumps(report["ratios"]),
              "Agreement: %s" % json.dumps(agreement)]
    with open(os.path.join(args.out, "gpu_check.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    say("goals: %s" % json.dumps(report["goals"]))
    sys.exit(0 if all(report["goals"].values()) else 1)


if __name__ == "__main__":
    main()
