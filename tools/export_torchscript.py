#!/usr/bin/env python3
"""Exports a Hugging Face model as a djshard TorchScript package.

djshard runs RoBERTa/XLM-R, BERT and CLIP-text snapshots natively. Any other
architecture runs as a package: model.ts.pt (traced with eager attention),
djshard_model.json (task, inputs, max_length, pad_token_id, id2label,
function_to_apply, the sha256 of every file, and reference texts with the
outputs they must give) and tokenizer.json. Needs PyTorch and transformers
(a connected machine, or any machine with the snapshot in its cache).

  tools/export_torchscript.py MODEL_DIR_OR_ID OUT_DIR [--task sequence_classification|clip_text]

Check the result with `djshard model check OUT_DIR`.
"""
import argparse
import hashlib
import json
import os
import sys

import torch

REFERENCE_TEXTS = [
    "profits fell sharply this quarter",
    "Great results, the company beat every estimate!",
    "a neutral remark about the weather",
    "",
]


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class Classifier(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits


class ClipText(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        return self.model(input_ids=input_ids, attention_mask=attention_mask).text_embeds


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--task", choices=("sequence_classification", "clip_text"),
                    default="sequence_classification")
    args = ap.parse_args()
    import transformers  # noqa: only needed here
    tok = transformers.AutoTokenizer.from_pretrained(args.model)
    if not getattr(tok, "is_fast", False):
        sys.exit("ERROR: %s: djshard needs a fast tokenizer (tokenizer.json)" % args.model)
    if args.task == "sequence_classification":
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            args.model, attn_implementation="eager", torchscript=True)
        wrapper = Classifier(model)
    else:
        model = transformers.CLIPTextModelWithProjection.from_pretrained(
            args.model, attn_implementation="eager", torchscript=True)
        wrapper = ClipText(model)
    wrapper.eval()
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0

    def example(b, t):
        g = torch.Generator().manual_seed(b * 1000 + t)
        ids = torch.randint(5, min(1000, tok.vocab_size), (b, t), generator=g)
        mask = torch.ones((b, t), dtype=torch.int64)
        if b > 1:
            mask[0, t // 2:] = 0
            ids[0, t // 2:] = pad
        return ids, mask

    with torch.no_grad():
        traced = torch.jit.trace(wrapper, example(2, 16), check_trace=False)
        for b, t in ((3, 37), (1, 5)):
            diff = (wrapper(*example(b, t)) - traced(*example(b, t))).abs().max().item()
            if diff > 1e-4:
                sys.exit("ERROR: the traced module differs from eager by %g at shape (%d, %d): "
                         "the architecture does not trace to a shape-independent graph" % (diff, b, t))
        os.makedirs(args.out, exist_ok=True)
        traced.save(os.path.join(args.out, "model.ts.pt"))
        tok.backend_tokenizer.save(os.path.join(args.out, "tokenizer.json"))
        ids, outputs = [], []
        for text in REFERENCE_TEXTS:
            enc = tok(text, return_tensors="pt")
            ids.append(enc["input_ids"][0].tolist())
            outputs.append(wrapper(enc["input_ids"], enc["attention_mask"])[0].float().tolist())
    config = model.config
    max_length = getattr(config, "max_position_embeddings", 512)
    if config.model_type in ("roberta", "xlm-roberta", "camembert"):
        max_length -= pad + 1
    description = {
        "task": args.task,
        "inputs": ["input_ids", "attention_mask"],
        "max_length": int(max_length),
        "pad_token_id": int(pad),
        "files": {name: sha256_of(os.path.join(args.out, name))
                  for name in ("model.ts.pt", "tokenizer.json")},
        "reference": {"texts": REFERENCE_TEXTS, "ids": ids, "outputs": outputs, "atol": 1e-4},
    }
    if args.task == "sequence_classification":
        description["id2label"] = {str(k): v for k, v in sorted(config.id2label.items())}
        multi = config.problem_type == "multi_label_classification" or config.num_labels == 1
        description["function_to_apply"] = "sigmoid" if multi else "softmax"
    else:
        description["embedding_dim"] = int(config.projection_dim)
    with open(os.path.join(args.out, "djshard_model.json"), "w", encoding="utf-8") as f:
        json.dump(description, f, indent=2, sort_keys=True)
        f.write("\n")
    print("%s: %s package of %s" % (args.out, args.task, args.model))


if __name__ == "__main__":
    main()
