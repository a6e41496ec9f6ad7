#!/usr/bin/python3
"""Tiny Hugging Face model snapshots and an independent reference of their math.

djshard's model operators (SPEC-models) read Hugging Face snapshot directories
as `save_pretrained` writes them. This script makes such directories with
seeded random weights and the real tokenizers, and computes what Hugging Face's
modeling code would output for them, with its own plain-PyTorch code (it does
not import transformers, tokenizers or safetensors, none of which need to be
installed). Needs only Debian's python3-torch and python3-numpy.

  tiny_models.py make OUT_DIR [--seed 1234] [--size tiny|distilroberta]
      [--tokenizers DIR]
  tiny_models.py reference --model DIR --ids FILE [--batch-size 64]
      [--threads N] [--time] [--device cpu|cuda] [--dtype float32|bfloat16]
  tiny_models.py selftest [--keep DIR]

`make --size tiny` writes these directories (hidden 32, 2 layers, 4 heads,
intermediate 64, float32):

  roberta-sentiment-st/       RobertaForSequenceClassification, roberta-base
                              tokenizer (vocab 50265), 3 labels negative/
                              neutral/positive, max_position_embeddings 130,
                              model.safetensors
  roberta-sentiment-bin/      the same weights as pytorch_model.bin (torch.save
                              of a state_dict, with the position_ids buffer
                              that older transformers versions saved)
  roberta-sentiment-sharded/  the same weights in two safetensors shards with
                              model.safetensors.index.json
  roberta-topic-st/           another seed, 8 news-topic labels,
                              problem_type single_label_classification
  bert-st/                    BertForSequenceClassification, bert-base-uncased
                              tokenizer (vocab 30522), 2 labels, with pooler
  clip-st/                    CLIPModel (text tower, text_projection, and a
                              small vision tower a text reader must ignore),
                              clip-vit-base-patch32 tokenizer, projection 16,
                              text_config eos_token_id 2 (pool at argmax id)
  clip-bin/                   the same text weights as
                              CLIPTextModelWithProjection (model_type
                              clip_text_model, flat config) in
                              pytorch_model.bin
  clip-st-eos/                clip-st with text_config eos_token_id 49407
                              (pool at the first id equal to 49407)
  clip-st-defaults/           clip-st-eos as transformers >= 4.31 writes it:
                              text_config and vision_config hold only keys
                              that differ from the CLIP defaults, so
                              eos_token_id, vocab_size, hidden_act,
                              layer_norm_eps, ... are absent

`make --size distilroberta` writes only roberta-sentiment-st/ and -bin/ at
distilroberta-base size (6 layers, hidden 768, 12 heads, intermediate 3072,
max_position_embeddings 514), for speed benchmarks.

`reference` reads JSONL lines {"ids": [...]} (classifiers) or
{"ids": [...], "ids2": [...]} (CLIP text pairs), token ids with special tokens
as the tokenizer gives them, and writes one JSON line per input line, in order:
  classifier: {"logits": [...], "label": id2label[argmax], "score": p}
      p = softmax (sigmoid when num_labels == 1 or problem_type is
      multi_label_classification) at the argmax, float32, as Hugging Face's
      text-classification pipeline returns it
  CLIP pair:  {"embeds1": [...], "embeds2": [...], "cos": cosine}
      text_embeds of each text and their cosine similarity
  a row longer than the model's positions: {"error": "too_long", ...}
Numbers are float32 values printed as repr(float(x)). Rows are sorted by
length, batched with padding and attention masks; results do not depend on
the batch beyond float rounding. --time prints rows/s to stderr (model load
excluded).

The weights come from torch.Generator(seed); they are reproducible with one
torch version, so tests make the snapshots and the expected outputs on the
same machine.
"""

import argparse
import collections
import json
import hashlib
import math
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

TRANSFORMERS_VERSION = "4.46.3"
# The real tokenizer.json files the project carries for its tokenizer tests.
DEFAULT_TOKENIZERS = os.path.normpath(
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "tokenizers"))

SENTIMENT_LABELS = ["negative", "neutral", "positive"]
# dstefa/roberta-base_topic_classification_nyt_news style names; one has a
# non-ASCII letter (config.json escapes it as \u00e9, as json.dumps does).
TOPIC_LABELS = ["Sports", "Arts, Culture, and Entertainment", "Business and Finance",
                "Health and Wellness", "Lifestyle, Fashion & Caf\u00e9", "Science and Technology",
                "Politics", "Crime"]

# ---------------------------------------------------------------------------
# safetensors, written and read by hand


ST_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
             torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
ST_TORCH = {v: k for k, v in ST_DTYPES.items()}


def tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.bfloat16, torch.float16):
        return t.view(torch.int16).numpy().tobytes()
    return t.numpy().tobytes()


def write_safetensors(path, tensors, metadata=None):
    """Writes {name: tensor} as safetensors: u64 LE header size, JSON header
    ("__metadata__" first, then tensors in data order), space padding to a
    multiple of 8, then the raw little-endian data. Data order is the one of
    the Rust writer: larger dtypes first, then by name."""
    names = sorted(tensors, key=lambda n: (-tensors[n].element_size(), n))
    header = collections.OrderedDict()
    header["__metadata__"] = metadata if metadata is not None else {"format": "pt"}
    blobs = []
    offset = 0
    for name in names:
        t = tensors[name]
        blob = tensor_bytes(t)
        header[name] = {"dtype": ST_DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for blob in blobs:
            f.write(blob)
    return offset


def read_safetensors(path):
    """Returns {name: tensor} (views into one buffer holding the file)."""
    size = os.path.getsize(path)
    buf = bytearray(size)
    with open(path, "rb") as f:
        f.readinto(buf)
    if size < 8:
        raise ValueError("%s: shorter than a safetensors header" % path)
    (n,) = struct.unpack("<Q", bytes(buf[:8]))
    if 8 + n > size:
        raise ValueError("%s: header length %d exceeds the file" % (path, n))
    header = json.loads(bytes(buf[8:8 + n]).decode("utf-8"))
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = ST_TORCH[info["dtype"]]
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        itemsize = torch.empty((), dtype=dtype).element_size()
        if end - begin != count * itemsize or base + end > size:
            raise ValueError("%s: tensor %s: bad data_offsets" % (path, name))
        if count == 0:
            t = torch.empty(info["shape"], dtype=dtype)
        else:
            t = torch.frombuffer(buf, dtype=dtype, count=count, offset=base + begin)
        out[name] = t.reshape(info["shape"])
    return out


def load_state(model_dir):
    """Reads the weights of a snapshot: model.safetensors, its sharded index,
    pytorch_model.bin or its sharded index, in that order of preference."""
    def p(name):
        return os.path.join(model_dir, name)
    if os.path.exists(p("model.safetensors")):
        return read_safetensors(p("model.safetensors"))
    for index, reader in (("model.safetensors.index.json", read_safetensors),
                          ("pytorch_model.bin.index.json", load_bin)):
        if os.path.exists(p(index)):
            with open(p(index), encoding="utf-8") as f:
                weight_map = json.load(f)["weight_map"]
            state = {}
            for shard in sorted(set(weight_map.values())):
                state.update(reader(p(shard)))
            return state
    if os.path.exists(p("pytorch_model.bin")):
        return load_bin(p("pytorch_model.bin"))
    raise FileNotFoundError("%s: no model.safetensors or pytorch_model.bin" % model_dir)


def load_bin(path):
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except TypeError:  # torch without weights_only
        return torch.load(path, map_location="cpu")


# ---------------------------------------------------------------------------
# module trees with transformers' parameter names (for `make`)


def node(**children):
    m = nn.Module()
    for name, child in children.items():
        m.add_module(name, child)
    return m


def bert_like_body(c, with_position_ids):
    h, inter = c["hidden_size"], c["intermediate_size"]
    eps = c["layer_norm_eps"]
    emb = node(word_embeddings=nn.Embedding(c["vocab_size"], h),
               position_embeddings=nn.Embedding(c["max_position_embeddings"], h),
               token_type_embeddings=nn.Embedding(c["type_vocab_size"], h),
               LayerNorm=nn.LayerNorm(h, eps=eps))
    if with_position_ids:
        emb.register_buffer("position_ids",
                            torch.arange(c["max_position_embeddings"]).expand((1, -1)))
    layers = nn.ModuleList()
    for _ in range(c["num_hidden_layers"]):
        layers.append(node(
            attention=node(self=node(query=nn.Linear(h, h), key=nn.Linear(h, h),
                                     value=nn.Linear(h, h)),
                           output=node(dense=nn.Linear(h, h), LayerNorm=nn.LayerNorm(h, eps=eps))),
            intermediate=node(dense=nn.Linear(h, inter)),
            output=node(dense=nn.Linear(inter, h), LayerNorm=nn.LayerNorm(h, eps=eps))))
    return emb, node(layer=layers)


def roberta_classifier(c, with_position_ids):
    emb, enc = bert_like_body(c, with_position_ids)
    h, n = c["hidden_size"], len(c["id2label"])
    # RobertaForSequenceClassification builds RobertaModel(add_pooling_layer=False).
    return node(roberta=node(embeddings=emb, encoder=enc),
                classifier=node(dense=nn.Linear(h, h), out_proj=nn.Linear(h, n)))


def bert_classifier(c, with_position_ids):
    emb, enc = bert_like_body(c, with_position_ids)
    h, n = c["hidden_size"], len(c["id2label"])
    return node(bert=node(embeddings=emb, encoder=enc, pooler=node(dense=nn.Linear(h, h))),
                classifier=nn.Linear(h, n))


def clip_text_tower(t, with_position_ids):
    h, inter, eps = t["hidden_size"], t["intermediate_size"], t["layer_norm_eps"]
    emb = node(token_embedding=nn.Embedding(t["vocab_size"], h),
               position_embedding=nn.Embedding(t["max_position_embeddings"], h))
    if with_position_ids:
        emb.register_buffer("position_ids",
                            torch.arange(t["max_position_embeddings"]).expand((1, -1)))
    layers = nn.ModuleList()
    for _ in range(t["num_hidden_layers"]):
        layers.append(clip_layer(h, inter, eps))
    return node(embeddings=emb, encoder=node(layers=layers),
                final_layer_norm=nn.LayerNorm(h, eps=eps))


def clip_layer(h, inter, eps):
    return node(self_attn=node(k_proj=nn.Linear(h, h), v_proj=nn.Linear(h, h),
                               q_proj=nn.Linear(h, h), out_proj=nn.Linear(h, h)),
                layer_norm1=nn.LayerNorm(h, eps=eps),
                mlp=node(fc1=nn.Linear(h, inter), fc2=nn.Linear(inter, h)),
                layer_norm2=nn.LayerNorm(h, eps=eps))


def clip_vision_tower(v):
    h, eps = v["hidden_size"], v["layer_norm_eps"]
    positions = (v["image_size"] // v["patch_size"]) ** 2 + 1
    emb = node(patch_embedding=nn.Conv2d(v["num_channels"], h, kernel_size=v["patch_size"],
                                         stride=v["patch_size"], bias=False),
               position_embedding=nn.Embedding(positions, h))
    emb.class_embedding = nn.Parameter(torch.empty(h))
    layers = nn.ModuleList(clip_layer(h, v["intermediate_size"], eps)
                           for _ in range(v["num_hidden_layers"]))
    # "pre_layrnorm" is transformers' spelling.
    return node(embeddings=emb, pre_layrnorm=nn.LayerNorm(h, eps=eps),
                encoder=node(layers=layers), post_layernorm=nn.LayerNorm(h, eps=eps))


def clip_model(c):
    t, v = c["text_config"], c["vision_config"]
    m = node(text_model=clip_text_tower(t, False), vision_model=clip_vision_tower(v),
             visual_projection=nn.Linear(v["hidden_size"], c["projection_dim"], bias=False),
             text_projection=nn.Linear(t["hidden_size"], c["projection_dim"], bias=False))
    m.logit_scale = nn.Parameter(torch.tensor(c["logit_scale_init_value"]))
    return m


def clip_text_with_projection(t):
    return node(text_model=clip_text_tower(t, True),
                text_projection=nn.Linear(t["hidden_size"], t["projection_dim"], bias=False))


def is_layer_norm(name):
    return any(k in name for k in ("LayerNorm.", "layer_norm", "layrnorm", "layernorm."))


def init_weights(module, seed):
    """Seeded random weights that make bugs show: embeddings N(0, 0.02),
    linear weights N(0, 1/fan_in) so activations keep unit scale and logits
    vary between inputs, nonzero biases, LayerNorm weights 1 + N(0, 0.1) and
    biases N(0, 0.05). Parameters are drawn in state-dict order."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name == "logit_scale":
                continue
            if is_layer_norm(name):
                noise = torch.randn(p.shape, generator=g)
                p.copy_(1.0 + 0.1 * noise if name.endswith("weight") else 0.05 * noise)
            elif name.endswith("bias"):
                p.copy_(0.02 * torch.randn(p.shape, generator=g))
            elif p.dim() == 2 and "embedding" not in name:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            else:
                p.copy_(0.02 * torch.randn(p.shape, generator=g))


# ---------------------------------------------------------------------------
# configs as transformers' to_json_string writes them


def labels(names):
    return ({str(i): n for i, n in enumerate(names)}, {n: i for i, n in enumerate(names)})


def roberta_config(size, names, name_or_path, problem_type=None):
    id2label, label2id = labels(names)
    c = {"_name_or_path": name_or_path, "architectures": ["RobertaForSequenceClassification"],
         "attention_probs_dropout_prob": 0.1, "bos_token_id": 0, "classifier_dropout": None,
         "eos_token_id": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
         "id2label": id2label, "initializer_range": 0.02, "label2id": label2id,
         "layer_norm_eps": 1e-05, "model_type": "roberta", "pad_token_id": 1,
         "position_embedding_type": "absolute", "torch_dtype": "float32",
         "transformers_version": TRANSFORMERS_VERSION, "type_vocab_size": 1, "use_cache": True,
         "vocab_size": 50265}
    if size == "distilroberta":
        c.update(hidden_size=768, num_hidden_layers=6, num_attention_heads=12,
                 intermediate_size=3072, max_position_embeddings=514)
    else:
        c.update(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                 intermediate_size=64, max_position_embeddings=130)
    if problem_type:
        c["problem_type"] = problem_type
    return c


def bert_config():
    id2label, label2id = labels(["LABEL_0", "LABEL_1"])
    return {"_name_or_path": "djshard-tiny/bert",
            "architectures": ["BertForSequenceClassification"],
            "attention_probs_dropout_prob": 0.1, "classifier_dropout": None, "hidden_act": "gelu",
            "hidden_dropout_prob": 0.1, "hidden_size": 32, "id2label": id2label,
            "initializer_range": 0.02, "intermediate_size": 64, "label2id": label2id,
            "layer_norm_eps": 1e-12, "max_position_embeddings": 128, "model_type": "bert",
            "num_attention_heads": 4, "num_hidden_layers": 2, "pad_token_id": 0,
            "position_embedding_type": "absolute", "torch_dtype": "float32",
            "transformers_version": TRANSFORMERS_VERSION, "type_vocab_size": 2, "use_cache": True,
            "vocab_size": 30522}


def clip_text_config(eos_token_id):
    return {"attention_dropout": 0.0, "bos_token_id": 49406, "dropout": 0.0,
            "eos_token_id": eos_token_id, "hidden_act": "quick_gelu", "hidden_size": 32,
            "initializer_factor": 1.0, "initializer_range": 0.02, "intermediate_size": 64,
            "layer_norm_eps": 1e-05, "max_position_embeddings": 77,
            "model_type": "clip_text_model", "num_attention_heads": 4, "num_hidden_layers": 2,
            "pad_token_id": 1, "projection_dim": 16, "vocab_size": 49408}


def clip_config(eos_token_id):
    vision = {"attention_dropout": 0.0, "dropout": 0.0, "hidden_act": "quick_gelu",
              "hidden_size": 16, "image_size": 32, "initializer_factor": 1.0,
              "initializer_range": 0.02, "intermediate_size": 32, "layer_norm_eps": 1e-05,
              "model_type": "clip_vision_model", "num_attention_heads": 2, "num_channels": 3,
              "num_hidden_layers": 1, "patch_size": 16, "projection_dim": 16}
    return {"_name_or_path": "djshard-tiny/clip", "architectures": ["CLIPModel"],
            "initializer_factor": 1.0, "logit_scale_init_value": 2.6592, "model_type": "clip",
            "projection_dim": 16, "text_config": clip_text_config(eos_token_id),
            "torch_dtype": "float32", "transformers_version": TRANSFORMERS_VERSION,
            "vision_config": vision}


def clip_config_defaults_omitted():
    """A CLIPModel config as transformers >= 4.31 saves it: nested configs
    hold only the keys that differ from CLIPTextConfig/CLIPVisionConfig
    defaults (plus model_type), so eos_token_id (49407), bos/pad ids, vocab
    size, positions, hidden_act and layer_norm_eps are absent."""
    c = clip_config(49407)
    text_keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers",
                 "projection_dim", "model_type")
    vision_keep = ("hidden_size", "intermediate_size", "num_attention_heads",
                   "num_hidden_layers", "projection_dim", "image_size", "patch_size",
                   "model_type")
    c["text_config"] = {k: v for k, v in c["text_config"].items() if k in text_keep}
    c["vision_config"] = {k: v for k, v in c["vision_config"].items() if k in vision_keep}
    return c


def clip_text_model_config():
    c = clip_text_config(2)
    c.update({"_name_or_path": "djshard-tiny/clip",
              "architectures": ["CLIPTextModelWithProjection"], "torch_dtype": "float32",
              "transformers_version": TRANSFORMERS_VERSION})
    return c


def tokenizer_files(family, max_length):
    """tokenizer_config.json and special_tokens_map.json for a family."""
    if family == "roberta-base":
        special = {"bos_token": "<s>", "cls_token": "<s>", "eos_token": "</s>",
                   "mask_token": {"content": "<mask>", "lstrip": True, "normalized": False,
                                  "rstrip": False, "single_word": False},
                   "pad_token": "<pad>", "sep_token": "</s>", "unk_token": "<unk>"}
        config = {"add_prefix_space": False, "bos_token": "<s>",
                  "clean_up_tokenization_spaces": True, "cls_token": "<s>", "eos_token": "</s>",
                  "errors": "replace", "mask_token": "<mask>", "model_max_length": max_length,
                  "pad_token": "<pad>", "sep_token": "</s>", "tokenizer_class": "RobertaTokenizer",
                  "trim_offsets": True, "unk_token": "<unk>"}
    elif family == "bert-base-uncased":
        special = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
                   "sep_token": "[SEP]", "unk_token": "[UNK]"}
        config = {"clean_up_tokenization_spaces": True, "cls_token": "[CLS]", "do_lower_case": True,
                  "mask_token": "[MASK]", "model_max_length": max_length, "pad_token": "[PAD]",
                  "sep_token": "[SEP]", "strip_accents": None, "tokenize_chinese_chars": True,
                  "tokenizer_class": "BertTokenizer", "unk_token": "[UNK]"}
    else:
        special = {"bos_token": "<|startoftext|>", "eos_token": "<|endoftext|>",
                   "pad_token": "<|endoftext|>", "unk_token": "<|endoftext|>"}
        config = {"bos_token": "<|startoftext|>", "clean_up_tokenization_spaces": True,
                  "do_lower_case": True, "eos_token": "<|endoftext|>", "errors": "replace",
                  "model_max_length": max_length, "pad_token": "<|endoftext|>",
                  "tokenizer_class": "CLIPTokenizer", "unk_token": "<|endoftext|>"}
    return config, special


# ---------------------------------------------------------------------------
# make


def copy_tokenizer(src_dir, dst_dir):
    """Copies src_dir's tokenizer.json (or tokenizer.json.zst, as the
    repository keeps them) to dst_dir/tokenizer.json."""
    src = os.path.join(src_dir, "tokenizer.json")
    dst = os.path.join(dst_dir, "tokenizer.json")
    if os.path.exists(src):
        shutil.copyfile(src, dst)
    else:
        with open(dst, "wb") as f:
            subprocess.run(["zstd", "-dcq", src + ".zst"], stdout=f, check=True)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


class SnapshotWriter:
    def __init__(self, out_dir, tokenizers):
        self.out_dir = out_dir
        self.tokenizers = tokenizers

    def write(self, name, config, state, fmt, family, max_length, shards=1):
        """Writes directory `name`: config.json, weights in `fmt` ("st" or
        "bin"), tokenizer files; prints one summary line."""
        d = os.path.join(self.out_dir, name)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        write_json(os.path.join(d, "config.json"), config)
        copy_tokenizer(os.path.join(self.tokenizers, family), d)
        tok_config, special = tokenizer_files(family, max_length)
        write_json(os.path.join(d, "tokenizer_config.json"), tok_config)
        write_json(os.path.join(d, "special_tokens_map.json"), special)
        if fmt == "bin":
            torch.save(state, os.path.join(d, "pytorch_model.bin"))
            files = ["pytorch_model.bin"]
        elif shards == 1:
            write_safetensors(os.path.join(d, "model.safetensors"),
                              {k: v for k, v in state.items()})
            files = ["model.safetensors"]
        else:
            files = self.write_shards(d, state, shards)
        params = sum(v.numel() for k, v in state.items() if v.is_floating_point())
        size = sum(os.path.getsize(os.path.join(d, f)) for f in files)
        arch = config["architectures"][0]
        extra = ""
        if "id2label" in config:
            extra = ", %d labels" % len(config["id2label"])
        text = config.get("text_config", config)
        if text.get("model_type", "").startswith("clip"):
            extra += ", eos_token_id %s" % text.get("eos_token_id", "absent (default 49407)")
        print("%s: %s%s, %d tensors, %d params, %s (%.1f MB)" %
              (d, arch, extra, len(state), params, " + ".join(files), size / 1e6))

    def write_shards(self, d, state, shards):
        names = list(state)
        per = (len(names) + shards - 1) // shards
        weight_map = {}
        total = 0
        files = []
        for i in range(shards):
            f = "model-%05d-of-%05d.safetensors" % (i + 1, shards)
            part = {n: state[n] for n in names[i * per:(i + 1) * per]}
            total += write_safetensors(os.path.join(d, f), part)
            weight_map.update({n: f for n in part})
            files.append(f)
        write_json(os.path.join(d, "model.safetensors.index.json"),
                   {"metadata": {"total_size": total}, "weight_map": weight_map})
        return files


def without(state, suffix):
    """A state dict without the buffers that newer transformers do not save."""
    out = collections.OrderedDict((k, v) for k, v in state.items() if not k.endswith(suffix))
    out._metadata = getattr(state, "_metadata", None)
    return out


def make(out_dir, seed, size, tokenizers):
    os.makedirs(out_dir, exist_ok=True)
    w = SnapshotWriter(out_dir, tokenizers)
    max_len = 512 if size == "distilroberta" else 128

    c = roberta_config(size, SENTIMENT_LABELS, "djshard-tiny/roberta-sentiment")
    m = roberta_classifier(c, with_position_ids=True)
    init_weights(m, seed)
    state = m.state_dict()  # an OrderedDict with _metadata, position_ids included
    w.write("roberta-sentiment-st", c, without(state, "position_ids"), "st", "roberta-base",
            max_len)
    w.write("roberta-sentiment-bin", c, state, "bin", "roberta-base", max_len)
    if size == "distilroberta":
        return
    w.write("roberta-sentiment-sharded", c, without(state, "position_ids"), "st", "roberta-base",
            max_len, shards=2)

    c = roberta_config(size, TOPIC_LABELS, "djshard-tiny/roberta-topic",
                       problem_type="single_label_classification")
    m = roberta_classifier(c, with_position_ids=False)
    init_weights(m, seed + 1)
    w.write("roberta-topic-st", c, m.state_dict(), "st", "roberta-base", max_len)

    c = bert_config()
    m = bert_classifier(c, with_position_ids=False)
    init_weights(m, seed + 2)
    w.write("bert-st", c, m.state_dict(), "st", "bert-base-uncased", 128)

    c = clip_config(2)
    m = clip_model(c)
    init_weights(m, seed + 3)
    state = m.state_dict()
    w.write("clip-st", c, state, "st", "clip-vit-base-patch32", 77)
    w.write("clip-st-eos", clip_config(49407), state, "st", "clip-vit-base-patch32", 77)
    w.write("clip-st-defaults", clip_config_defaults_omitted(), state, "st",
            "clip-vit-base-patch32", 77)
    t = clip_text_with_projection(clip_text_model_config())
    text_state = collections.OrderedDict((k, v) for k, v in state.items()
                                         if k.startswith("text_"))
    t.load_state_dict(text_state, strict=False)  # all but the position_ids buffer
    w.write("clip-bin", clip_text_model_config(), t.state_dict(), "bin",
            "clip-vit-base-patch32", 77)


# ---------------------------------------------------------------------------
# reference: the math of transformers' modeling code, eval mode


ACTIVATIONS = {
    "gelu": lambda x: F.gelu(x),  # exact erf GELU
    "relu": F.relu,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
}

CLIP_TEXT_DEFAULTS = {"vocab_size": 49408, "hidden_size": 512, "intermediate_size": 2048,
                      "projection_dim": 512, "num_hidden_layers": 12, "num_attention_heads": 8,
                      "max_position_embeddings": 77, "hidden_act": "quick_gelu",
                      "layer_norm_eps": 1e-5, "pad_token_id": 1, "bos_token_id": 49406,
                      "eos_token_id": 49407}


class Reference:
    """Loads a snapshot and runs rows of token ids through it."""

    def __init__(self, model_dir, device="cpu", dtype=torch.float32):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.config = json.load(f)
        self.device = torch.device(device)
        self.dtype = dtype
        state = load_state(model_dir)
        self.w = {k: v.to(self.device, dtype if v.is_floating_point() else v.dtype)
                  for k, v in state.items()}
        mt = self.config["model_type"]
        if mt in ("roberta", "xlm-roberta", "bert"):
            self.kind = "classifier"
            self.setup_classifier(mt)
        elif mt in ("clip", "clip_text_model"):
            self.kind = "clip"
            text = dict(CLIP_TEXT_DEFAULTS)
            text.update(self.config.get("text_config", {}) if mt == "clip" else self.config)
            self.text = text
            self.heads = text["num_attention_heads"]
            self.eps = text["layer_norm_eps"]
            self.act = ACTIVATIONS[text["hidden_act"]]
            self.layers = text["num_hidden_layers"]
            self.max_positions = text["max_position_embeddings"]
        else:
            raise ValueError("%s: model_type %r is not supported" % (model_dir, mt))

    def setup_classifier(self, mt):
        c = self.config
        self.roberta = mt != "bert"
        self.prefix = "roberta." if self.roberta else "bert."
        self.pad = c.get("pad_token_id", 1 if self.roberta else 0)
        self.heads = c["num_attention_heads"]
        self.eps = c.get("layer_norm_eps", 1e-12)
        self.act = ACTIVATIONS[c.get("hidden_act", "gelu")]
        self.layers = c["num_hidden_layers"]
        # RoBERTa positions start at pad + 1.
        self.max_positions = c["max_position_embeddings"] - (self.pad + 1 if self.roberta else 0)
        self.id2label = {int(k): v for k, v in c["id2label"].items()}
        n = len(self.id2label)
        sigmoid = n == 1 or c.get("problem_type") == "multi_label_classification"
        self.function = "sigmoid" if sigmoid else "softmax"

    # -- building blocks ---------------------------------------------------

    def linear(self, x, name, bias=True):
        return F.linear(x, self.w[name + ".weight"], self.w[name + ".bias"] if bias else None)

    def norm(self, x, name):
        return F.layer_norm(x, x.shape[-1:], self.w[name + ".weight"], self.w[name + ".bias"],
                            self.eps)

    def attention(self, x, p, names, add_mask, scale_query):
        """Multi-head self-attention. names: (q, k, v, out). scale_query: CLIP
        scales q before q·k; BERT divides the scores by sqrt(head_dim)."""
        b, t, h = x.shape
        d = h // self.heads

        def heads(y):
            return y.view(b, t, self.heads, d).transpose(1, 2)
        q = self.linear(x, p + names[0])
        if scale_query:
            q = q * d ** -0.5
        q, k, v = heads(q), heads(self.linear(x, p + names[1])), heads(self.linear(x, p + names[2]))
        scores = torch.matmul(q, k.transpose(-1, -2))
        if not scale_query:
            scores = scores / math.sqrt(d)
        probs = torch.softmax(scores + add_mask, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, t, h)
        return self.linear(ctx, p + names[3])

    # -- BERT / RoBERTa ----------------------------------------------------

    def classifier_logits(self, ids, mask):
        """ids, mask: [B, T] (padding: pad id, mask 0). Returns float32 [B, labels]."""
        P = self.prefix
        e = P + "embeddings."
        if self.roberta:
            # create_position_ids_from_input_ids: from the ids, not the mask.
            real = ids.ne(self.pad).long()
            pos = torch.cumsum(real, dim=1) * real + self.pad
        else:
            pos = torch.arange(ids.shape[1], device=ids.device).expand_as(ids)
        x = (self.w[e + "word_embeddings.weight"][ids] +
             self.w[e + "token_type_embeddings.weight"][0] +
             self.w[e + "position_embeddings.weight"][pos])
        x = self.norm(x, e + "LayerNorm")
        add_mask = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for i in range(self.layers):
            p = "%sencoder.layer.%d." % (P, i)
            a = self.attention(x, p + "attention.", ("self.query", "self.key", "self.value",
                                                     "output.dense"), add_mask, False)
            x = self.norm(a + x, p + "attention.output.LayerNorm")
            y = self.act(self.linear(x, p + "intermediate.dense"))
            x = self.norm(self.linear(y, p + "output.dense") + x, p + "output.LayerNorm")
        first = x[:, 0]
        if self.roberta:
            y = torch.tanh(self.linear(first, "classifier.dense"))
            logits = self.linear(y, "classifier.out_proj")
        else:
            pooled = torch.tanh(self.linear(first, P + "pooler.dense"))
            logits = self.linear(pooled, "classifier")
        return logits.float()

    def classify(self, logits_row):
        """{"logits", "label", "score"} as the text-classification pipeline
        computes them (numpy, float32)."""
        out = np.asarray(logits_row, dtype=np.float32)
        if self.function == "sigmoid":
            scores = 1.0 / (1.0 + np.exp(-out))
        else:
            maxes = np.max(out, axis=-1, keepdims=True)
            shifted = np.exp(out - maxes)
            scores = shifted / shifted.sum(axis=-1, keepdims=True)
        best = int(scores.argmax())
        return {"logits": [float(v) for v in out], "label": self.id2label[best],
                "score": float(scores[best])}

    # -- CLIP text ------------------------------------------------------------

    def clip_embeds(self, ids, mask, pool):
        """ids, mask: [B, T]; pool: [B] positions. Returns float32 [B, proj]."""
        t = ids.shape[1]
        e = "text_model.embeddings."
        x = self.w[e + "token_embedding.weight"][ids] + self.w[e + "position_embedding.weight"][:t]
        neg = torch.finfo(x.dtype).min
        causal = torch.full((t, t), neg, dtype=x.dtype, device=x.device).triu(1)
        add_mask = causal[None, None] + (1.0 - mask[:, None, None, :].to(x.dtype)) * neg
        for i in range(self.layers):
            p = "text_model.encoder.layers.%d." % i
            r = x
            y = self.norm(x, p + "layer_norm1")
            x = r + self.attention(y, p + "self_attn.", ("q_proj", "k_proj", "v_proj", "out_proj"),
                                   add_mask, True)
            y = self.norm(x, p + "layer_norm2")
            x = x + self.linear(self.act(self.linear(y, p + "mlp.fc1")), p + "mlp.fc2")
        x = self.norm(x, "text_model.final_layer_norm")
        pooled = x[torch.arange(x.shape[0], device=x.device), pool]
        return F.linear(pooled, self.w["text_projection.weight"]).float()

    def pool_position(self, ids):
        """CLIPTextTransformer's pooling rule, on one row's ids."""
        row = torch.tensor(ids, dtype=torch.int64)
        if self.text["eos_token_id"] == 2:
            return int(row.argmax())  # first occurrence of the highest id
        return int((row == self.text["eos_token_id"]).int().argmax())  # first eos, else 0

    # -- batching -----------------------------------------------------------

    def run_sequences(self, seqs, batch_size, timer):
        """Runs token id lists through the model in length-sorted padded
        batches; returns one float32 tensor row per sequence, in order."""
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i]))
        out = [None] * len(seqs)
        pad = self.pad if self.kind == "classifier" else self.text["pad_token_id"]
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            t = max(len(seqs[i]) for i in chunk)
            ids = torch.full((len(chunk), t), pad, dtype=torch.int64)
            mask = torch.zeros((len(chunk), t), dtype=torch.int64)
            for r, i in enumerate(chunk):
                ids[r, :len(seqs[i])] = torch.tensor(seqs[i], dtype=torch.int64)
                mask[r, :len(seqs[i])] = 1
            ids, mask = ids.to(self.device), mask.to(self.device)
            began = time.perf_counter()
            if self.kind == "classifier":
                y = self.classifier_logits(ids, mask)
            else:
                pool = torch.tensor([self.pool_position(seqs[i]) for i in chunk],
                                    device=self.device)
                y = self.clip_embeds(ids, mask, pool)
            y = y.cpu()
            timer[0] += time.perf_counter() - began
            for r, i in enumerate(chunk):
                out[i] = y[r]
        return out

    def run_rows(self, rows, batch_size=64, timer=None):
        """rows: parsed JSONL objects. Returns output objects, in order."""
        timer = timer if timer is not None else [0.0]
        results = [None] * len(rows)
        seqs, owners = [], []
        keys = ("ids",) if self.kind == "classifier" else ("ids", "ids2")
        for n, row in enumerate(rows):
            lengths = [len(row[k]) for k in keys]
            if max(lengths) > self.max_positions:
                results[n] = {"error": "too_long", "length": max(lengths),
                              "max_length": self.max_positions}
                continue
            if min(lengths) == 0:
                raise ValueError("row %d: empty ids" % (n + 1))
            for k in keys:
                seqs.append(row[k])
                owners.append(n)
        with torch.inference_mode():
            ys = self.run_sequences(seqs, batch_size, timer)
        if self.kind == "classifier":
            for n, y in zip(owners, ys):
                results[n] = self.classify(y.tolist())
        else:
            for j in range(0, len(ys), 2):
                a, b = ys[j], ys[j + 1]
                cos = F.cosine_similarity(a[None], b[None], dim=1)[0]
                results[owners[j]] = {"embeds1": [float(v) for v in a.tolist()],
                                      "embeds2": [float(v) for v in b.tolist()],
                                      "cos": float(cos)}
        return results


def read_rows(path):
    rows = []
    f = sys.stdin if path == "-" else open(path, encoding="utf-8")
    with f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise SystemExit("ERROR: %s:%d: not JSON (%s)" % (path, n, e))
            if not isinstance(row, dict) or not isinstance(row.get("ids"), list):
                raise SystemExit("ERROR: %s:%d: expected {\"ids\": [...]}" % (path, n))
            rows.append(row)
    return rows


def reference(args):
    if args.threads:
        torch.set_num_threads(args.threads)
    dtype = {"float32": torch.float32, "bfloat16": torch.bfloat16}[args.dtype]
    ref = Reference(args.model, args.device, dtype)
    began = time.perf_counter()
    rows = read_rows(args.ids)
    if ref.kind == "clip" and any("ids2" not in r for r in rows):
        raise SystemExit("ERROR: %s: a CLIP model needs \"ids2\" on every line" % args.ids)
    timer = [0.0]
    results = ref.run_rows(rows, args.batch_size, timer)
    out = sys.stdout
    for r in results:
        out.write(json.dumps(r, ensure_ascii=False) + "\n")
    out.flush()
    total = time.perf_counter() - began
    if args.time:
        sys.stderr.write(
            "reference: %d rows, forward %.3f s = %.1f rows/s; read+forward+write %.3f s = "
            "%.1f rows/s; batch %d, threads %d, %s %s\n" %
            (len(rows), timer[0], len(rows) / max(timer[0], 1e-9), total,
             len(rows) / max(total, 1e-9), args.batch_size, torch.get_num_threads(),
             args.device, args.dtype))


# ---------------------------------------------------------------------------
# selftest


def random_rows(rng, n, first, last, vocab, max_len, pair=False):
    """Rows of ids [first, random ids, last] with lengths 0..max_len-2 between
    the special tokens; the random ids avoid the special ids 0..3 and the top."""
    def seq():
        k = rng.choice([0, 1, 2, 3, 5, 8, 13, 21, 40, rng.randint(0, max_len - 2), max_len - 2])
        return [first] + [rng.randint(4, vocab - 3) for _ in range(k)] + [last]
    rows = []
    for _ in range(n):
        row = {"ids": seq()}
        if pair:
            row["ids2"] = seq()
        rows.append(row)
    return rows


def max_diff(a, b):
    """Largest difference between two output lists; a list's differences are
    relative to its largest magnitude when that is above 1 (float32 rounding
    in a matrix product scales with the vector, not with the element)."""
    worst = 0.0
    for x, y in zip(a, b):
        for k, v in x.items():
            if isinstance(v, list):
                scale = max(1.0, max(abs(p) for p in v))
                worst = max(worst, max(abs(p - q) for p, q in zip(v, y[k])) / scale)
            elif isinstance(v, float):
                worst = max(worst, abs(v - y[k]))
            elif v != y[k]:
                return math.inf
    return worst


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAILED", what))
    if not ok:
        raise SystemExit(1)


def torch_layer_cross_check(ref, rows):
    """Recomputes the encoder with torch.nn.TransformerEncoderLayer (post-LN
    for BERT/RoBERTa, pre-LN with a causal mask for CLIP) and compares."""
    w = ref.w
    seqs = [r["ids"] for r in rows]
    t = max(len(s) for s in seqs)
    pad = ref.pad if ref.kind == "classifier" else ref.text["pad_token_id"]
    ids = torch.full((len(seqs), t), pad, dtype=torch.int64)
    mask = torch.zeros((len(seqs), t), dtype=torch.bool)
    for r, s in enumerate(seqs):
        ids[r, :len(s)] = torch.tensor(s)
        mask[r, :len(s)] = True
    clip = ref.kind == "clip"
    h = w["text_model.embeddings.token_embedding.weight" if clip else
          ref.prefix + "embeddings.word_embeddings.weight"].shape[1]
    inter_name = "mlp.fc1.weight" if clip else "intermediate.dense.weight"
    first = "text_model.encoder.layers.0." if clip else ref.prefix + "encoder.layer.0."
    layers = []
    for i in range(ref.layers):
        layer = nn.TransformerEncoderLayer(
            h, ref.heads, dim_feedforward=w[first + inter_name].shape[0], dropout=0.0,
            activation=ref.act, layer_norm_eps=ref.eps, batch_first=True, norm_first=clip)
        if clip:
            p = "text_model.encoder.layers.%d." % i
            names = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                     "self_attn.out_proj", "layer_norm1", "layer_norm2", "mlp.fc1", "mlp.fc2"]
        else:
            p = "%sencoder.layer.%d." % (ref.prefix, i)
            names = ["attention.self.query", "attention.self.key", "attention.self.value",
                     "attention.output.dense", "attention.output.LayerNorm", "output.LayerNorm",
                     "intermediate.dense", "output.dense"]
        sd = {"self_attn.in_proj_weight": torch.cat([w[p + n + ".weight"] for n in names[:3]]),
              "self_attn.in_proj_bias": torch.cat([w[p + n + ".bias"] for n in names[:3]])}
        for ours, theirs in zip(["self_attn.out_proj", "norm1", "norm2", "linear1", "linear2"],
                                names[3:]):
            sd[ours + ".weight"] = w[p + theirs + ".weight"]
            sd[ours + ".bias"] = w[p + theirs + ".bias"]
        layer.load_state_dict(sd)
        layers.append(layer.eval())
    with torch.inference_mode():
        if clip:
            e = "text_model.embeddings."
            x = w[e + "token_embedding.weight"][ids] + w[e + "position_embedding.weight"][:t]
            causal = torch.ones((t, t), dtype=torch.bool).triu(1)
            for layer in layers:
                x = layer(x, src_mask=causal, src_key_padding_mask=~mask)
            x = F.layer_norm(x, (h,), w["text_model.final_layer_norm.weight"],
                             w["text_model.final_layer_norm.bias"], ref.eps)
            pool = torch.tensor([ref.pool_position(s) for s in seqs])
            got = F.linear(x[torch.arange(len(seqs)), pool], w["text_projection.weight"])
            want = ref.clip_embeds(ids, mask.long(), pool)
        else:
            e = ref.prefix + "embeddings."
            pos = (torch.cumsum(mask.long(), 1) + ref.pad) if ref.roberta else torch.arange(t)
            x = (w[e + "word_embeddings.weight"][ids] + w[e + "position_embeddings.weight"][pos] +
                 w[e + "token_type_embeddings.weight"][0])
            x = F.layer_norm(x, (h,), w[e + "LayerNorm.weight"], w[e + "LayerNorm.bias"], ref.eps)
            for layer in layers:
                x = layer(x, src_key_padding_mask=~mask)
            first_tok = x[:, 0]
            if ref.roberta:
                got = F.linear(torch.tanh(F.linear(first_tok, w["classifier.dense.weight"],
                                                   w["classifier.dense.bias"])),
                               w["classifier.out_proj.weight"], w["classifier.out_proj.bias"])
            else:
                pooled = torch.tanh(F.linear(first_tok, w[ref.prefix + "pooler.dense.weight"],
                                             w[ref.prefix + "pooler.dense.bias"]))
                got = F.linear(pooled, w["classifier.weight"], w["classifier.bias"])
            want = ref.classifier_logits(ids, mask.long())
    return float((got - want).abs().max())


def selftest(args):
    torch.set_num_threads(1)
    tmp = args.keep or tempfile.mkdtemp(prefix="tiny_models.")
    try:
        make(tmp, 1234, "tiny", args.tokenizers)
        d = lambda name: os.path.join(tmp, name)  # noqa: E731
        rng = random.Random(7)
        rob_rows = random_rows(rng, 48, 0, 2, 50265, 128)
        bert_rows = random_rows(rng, 48, 101, 102, 30522, 128)
        clip_rows = random_rows(rng, 40, 49406, 49407, 49406, 77, pair=True)

        refs = {n: Reference(d(n)) for n in ("roberta-sentiment-st", "roberta-sentiment-bin",
                                             "roberta-sentiment-sharded", "roberta-topic-st",
                                             "bert-st", "clip-st", "clip-bin", "clip-st-eos",
                                             "clip-st-defaults")}
        rows_for = lambda n: clip_rows if n.startswith("clip") else (  # noqa: E731
            bert_rows if n.startswith("bert") else rob_rows)
        base = {n: r.run_rows(rows_for(n), 64) for n, r in refs.items()}

        # (a) weight formats
        for other in ("roberta-sentiment-bin", "roberta-sentiment-sharded"):
            check(base[other] == base["roberta-sentiment-st"],
                  "%s gives the outputs of roberta-sentiment-st exactly" % other)
        check(base["clip-st-defaults"] == base["clip-st-eos"],
              "clip-st-defaults (text_config without defaults) equals clip-st-eos")
        check(base["clip-bin"] == base["clip-st"],
              "clip-bin (CLIPTextModelWithProjection, .bin) equals clip-st (CLIPModel, "
              "safetensors)")
        st = read_safetensors(os.path.join(d("roberta-sentiment-st"), "model.safetensors"))
        bn = load_bin(os.path.join(d("roberta-sentiment-bin"), "pytorch_model.bin"))
        check(set(bn) - set(st) == {"roberta.embeddings.position_ids"} and
              all(torch.equal(st[k], bn[k]) for k in st) and hasattr(bn, "_metadata"),
              "the .bin state dict has the safetensors tensors, position_ids and _metadata")

        # (b) batch composition
        for n, ref in refs.items():
            rows = rows_for(n)
            perm = list(range(len(rows)))
            random.Random(3).shuffle(perm)
            worst = 0.0
            for bs in (1, 5, 17):
                shuffled = ref.run_rows([rows[i] for i in perm], bs)
                unshuffled = [None] * len(rows)
                for j, i in enumerate(perm):
                    unshuffled[i] = shuffled[j]
                worst = max(worst, max_diff(base[n], unshuffled))
            check(worst <= 1e-6, "%s: batch size and order change outputs by %.2g <= 1e-6 "
                  "(of the largest element above 1)" %
                  (n, worst))

        # (c) outputs differ across inputs
        for n in ("roberta-sentiment-st", "roberta-topic-st", "bert-st"):
            logits = torch.tensor([r["logits"] for r in base[n]])
            spread = float((logits - logits.mean(0)).abs().max(1).values.min())
            nlabels = len({r["label"] for r in base[n]})
            check(spread > 1e-3 and nlabels >= 2,
                  "%s: every row's logits are > 1e-3 from the mean (min %.3g); %d labels seen" %
                  (n, spread, nlabels))
        embeds = torch.tensor([r["embeds1"] for r in base["clip-st"]])
        spread = float((embeds - embeds.mean(0)).abs().max(1).values.min())
        coss = [r["cos"] for r in base["clip-st"]]
        check(spread > 1e-3 and max(coss) - min(coss) > 0.05,
              "clip-st: embeddings differ across texts (min %.3g), cos in [%.3f, %.3f]" %
              (spread, min(coss), max(coss)))

        # invariants of the Hugging Face math
        ref = refs["roberta-sentiment-st"]
        with torch.inference_mode():
            row = rob_rows[3]["ids"]
            ids = torch.tensor([row + [1] * 9, row + [rng.randint(4, 50000) for _ in range(9)]])
            mask = torch.tensor([[1] * len(row) + [0] * 9] * 2)
            a = ref.classifier_logits(ids, mask)
            check(torch.equal(a[0], a[1]),
                  "roberta: tokens after the padding (mask 0) do not change the logits")
            one = ref.classifier_logits(torch.tensor([row]), torch.ones((1, len(row)),
                                                                        dtype=torch.int64))
            check(float((one[0] - a[0]).abs().max()) <= 1e-6,
                  "roberta: a padded row equals the row alone")
            ref = refs["clip-st"]
            row = clip_rows[0]["ids"]
            tail = [rng.randint(4, 40000) for _ in range(5)]
            ids = torch.tensor([row + [49407] * 5, row + tail])
            pool = torch.tensor([ref.pool_position(row)] * 2)
            e = ref.clip_embeds(ids, torch.ones_like(ids), pool)
            check(float((e[0] - e[1]).abs().max()) <= 1e-6,
                  "clip: tokens after the pooled eos (even with mask 1) do not change text_embeds")
        raw = [{"ids": r["ids"][1:-1] or [5], "ids2": r["ids2"]} for r in clip_rows[:8]]
        plain = refs["clip-st"].run_rows(raw)
        eos = refs["clip-st-eos"].run_rows(raw)
        moved = [refs["clip-st"].pool_position(r["ids"]) != 0 for r in raw]
        check(base["clip-st-eos"] == base["clip-st"] and any(moved) and
              all((p["embeds1"] != q["embeds1"]) == m for p, q, m in zip(plain, eos, moved)),
              "clip: argmax pooling (eos_token_id 2) and first-eos pooling (49407) agree on "
              "tokenized rows and differ on rows without an eos token")
        too_long = refs["roberta-sentiment-st"].run_rows([{"ids": [0] + [5] * 127 + [2]}])
        check(too_long[0].get("error") == "too_long", "roberta: 129 ids are too_long (max 128)")

        for n, ref in refs.items():
            diff = torch_layer_cross_check(ref, rows_for(n)[:12])
            check(diff <= 1e-5, "%s: torch.nn.TransformerEncoderLayer agrees within %.2g" %
                  (n, diff))
        print("selftest passed")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


class _TracedClassifier(torch.nn.Module):
    """The reference classifier as a module torch.jit.trace can record."""

    def __init__(self, ref):
        super().__init__()
        self.ref = ref

    def forward(self, ids, mask):
        return self.ref.classifier_logits(ids, mask)


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def package(args):
    """Writes a TorchScript package (model.ts.pt, djshard_model.json,
    tokenizer.json) of a classifier snapshot, traced from the reference
    implementation, with reference texts and their logits."""
    ref = Reference(args.model)
    if ref.kind != "classifier":
        raise SystemExit("ERROR: %s: package supports sequence classifiers" % args.model)
    os.makedirs(args.out, exist_ok=True)
    module = _TracedClassifier(ref)

    def example(b, t):
        g = torch.Generator().manual_seed(b * 1000 + t)
        ids = torch.randint(3, 1000, (b, t), generator=g)
        mask = torch.ones((b, t), dtype=torch.int64)
        mask[0, t // 2:] = 0
        ids[0, t // 2:] = ref.pad
        return ids, mask
    with torch.inference_mode(False), torch.no_grad():
        traced = torch.jit.trace(module, example(2, 16), check_trace=False)
        for b, t in ((3, 37), (1, 5)):
            want = module(*example(b, t))
            got = traced(*example(b, t))
            if (want - got).abs().max().item() > 1e-5:
                raise SystemExit("ERROR: the traced module differs from eager at shape (%d, %d)"
                                 % (b, t))
    traced.save(os.path.join(args.out, "model.ts.pt"))
    shutil.copy(os.path.join(args.model, "tokenizer.json"), os.path.join(args.out, "tokenizer.json"))
    texts = ["profits fell sharply", "Great results, the company beat every estimate!",
             "a neutral remark", ""]
    tok_in = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    tok = subprocess.run([args.djshard, "tokenize", "--tokenizer", args.model, "-"],
                         input=tok_in.encode(), stdout=subprocess.PIPE, check=True)
    ids = [json.loads(line)["ids"] for line in tok.stdout.decode().splitlines()]
    outputs = [r["logits"] for r in ref.run_rows([{"ids": i} for i in ids], batch_size=1)]
    description = {
        "task": "sequence_classification",
        "inputs": ["input_ids", "attention_mask"],
        "max_length": ref.max_positions,
        "pad_token_id": ref.pad,
        "id2label": {str(k): v for k, v in sorted(ref.id2label.items())},
        "function_to_apply": ref.function,
        "files": {name: sha256_of(os.path.join(args.out, name))
                  for name in ("model.ts.pt", "tokenizer.json")},
        "reference": {"texts": texts, "ids": ids, "outputs": outputs, "atol": 1e-4},
    }
    write_json(os.path.join(args.out, "djshard_model.json"), description)
    print("%s: TorchScript package of %s" % (args.out, args.model))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    mk = sub.add_parser("make", help="write Hugging Face snapshot directories")
    mk.add_argument("out_dir")
    mk.add_argument("--seed", type=int, default=1234)
    mk.add_argument("--size", choices=("tiny", "distilroberta"), default="tiny")
    mk.add_argument("--tokenizers", default=DEFAULT_TOKENIZERS,
                    help="directory of <family>/tokenizer.json (default %(default)s)")
    rf = sub.add_parser("reference", help="compute outputs with the independent implementation")
    rf.add_argument("--model", required=True, help="snapshot directory")
    rf.add_argument("--ids", required=True, help="JSONL of {\"ids\": [...]} ('-' for stdin)")
    rf.add_argument("--batch-size", type=int, default=64)
    rf.add_argument("--threads", type=int, default=0, help="torch.set_num_threads(N)")
    rf.add_argument("--time", action="store_true", help="print rows/s to stderr")
    rf.add_argument("--device", default="cpu")
    rf.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    st = sub.add_parser("selftest", help="make the tiny models and check the reference")
    st.add_argument("--keep", metavar="DIR", help="make the models in DIR and keep them")
    st.add_argument("--tokenizers", default=DEFAULT_TOKENIZERS)
    pk = sub.add_parser("package", help="write a TorchScript package of a classifier snapshot")
    pk.add_argument("--model", required=True, help="snapshot directory")
    pk.add_argument("--out", required=True, help="package directory to write")
    pk.add_argument("--djshard", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "..", "build", "bin", "djshard"),
                    help="djshard binary, for the reference texts' token ids")
    args = ap.parse_args()
    if args.command == "package":
        package(args)
    elif args.command == "make":
        make(args.out_dir, args.seed, args.size, args.tokenizers)
    elif args.command == "reference":
        reference(args)
    else:
        selftest(args)


if __name__ == "__main__":
    main()
