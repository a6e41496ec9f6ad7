#!/usr/bin/python3
"""Writes tests/data/ops-tokenization.jsonl: expected results of Data-Juicer's
text filters with `tokenization: true`, in the layout of ops.jsonl.

The values are computed here, independently of djshard, following Data-Juicer
1.4.3's operator code:
- alphanumeric_filter: alpha_token_ratio = (chars with str.isalpha()) / (number
  of Hugging Face tokens without special tokens). The token counts are those of
  Hugging Face's own tokenizers library, read from the shared tokenizer vectors
  (tests/data/tokenizers/<family>/vectors.jsonl.zst, add_special_tokens false).
- token_num_filter: num_token = the number of those tokens (tokenizer.tokenize).
- words_num_filter / word_repetition_filter: SentencePiece pieces from the
  Python binding (python3-sentencepiece) of tests/data/sentencepiece/en.sp.model
  (a small unigram model trained with spm_train on the vector texts), then
  Data-Juicer's words_refinement (lower-casing for word_repetition_filter,
  stripping its SPECIAL_CHARACTERS, dropping empty words) and its ratio.
SPECIAL_CHARACTERS is read from djshard's src/ops/unicode_tables.cc (kSpecial),
the table that tests/data/ops.jsonl.zst checks against Data-Juicer.

Run with Debian's Python (it has the sentencepiece module):
  /usr/bin/python3 tests/data/make_ops_tokenization.py > tests/data/ops-tokenization.jsonl
"""
import json
import os
import re
import subprocess
import sys

import sentencepiece

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data")


def special_characters():
    src = open(os.path.join(ROOT, "src", "ops", "unicode_tables.cc")).read()
    body = src[src.index("kSpecial[]"):]
    body = body[:body.index("};")]
    chars = set()
    for lo, hi in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", body):
        chars.update(chr(c) for c in range(int(lo, 16), int(hi, 16) + 1))
    return chars


SPECIAL = special_characters()


def strip(word):
    b, e = 0, len(word)
    while b < e and word[b] in SPECIAL:
        b += 1
    while e > b and word[e - 1] in SPECIAL:
        e -= 1
    return word[b:e]


def refine(words, lower):
    if lower:
        words = [w.lower() for w in words]
    words = [strip(w) for w in words]
    return [w for w in words if w]


def vectors(family):
    out = subprocess.run(["zstd", "-dc", os.path.join(DATA, "tokenizers", family,
                                                       "vectors.jsonl.zst")],
                         check=True, capture_output=True).stdout.decode()
    return [json.loads(l) for l in out.split("\n") if l]


def emit(op, args, text, stats, keep, n):
    print(json.dumps({"op": op, "args": args, "input": {"id": "tok-%03d" % n, "text": text},
                      "output_text": None, "stats": stats, "keep": keep}, ensure_ascii=False))


n = 0
for family in ("roberta-base", "bert-base-uncased"):
    args = {"tokenization": True, "hf_tokenizer": "@DATA@/tokenizers/" + family,
            "min_ratio": 0.25, "max_ratio": 1.5}
    picked = [v for v in vectors(family)
              if v["pair"] is None and not v["add_special_tokens"]][::25]
    for v in picked:
        alpha = sum(1 for c in v["text"] if c.isalpha())
        tokens = len(v["tokens"])
        ratio = alpha / tokens if tokens else 0.0
        n += 1
        emit("alphanumeric_filter", args, v["text"], {"alpha_token_ratio": ratio},
             0.25 <= ratio <= 1.5, n)
        # token_num_filter: len(tokenizer.tokenize(text)), the tokens without special tokens.
        n += 1
        emit("token_num_filter", {"hf_tokenizer": args["hf_tokenizer"], "min_num": 5, "max_num": 30},
             v["text"], {"num_token": tokens}, 5 <= tokens <= 30, n)

sp = sentencepiece.SentencePieceProcessor()
sp.load(os.path.join(DATA, "sentencepiece", "en.sp.model"))
texts = [v["text"] for v in vectors("roberta-base")
         if v["pair"] is None and not v["add_special_tokens"]][3::40]
texts += [
    "the cat sat on the mat. The cat sat on the mat! the cat sat on the mat",
    "Buy now buy now BUY NOW, buy now... limited offer, buy now",
    "",
    "!!! ??? ...",
]
for text in texts:
    pieces = sp.encode_as_pieces(text)
    words = refine(pieces, lower=False)
    n += 1
    emit("words_num_filter", {"lang": "en", "tokenization": True, "min_num": 5, "max_num": 40},
         text, {"num_words": len(words)}, 5 <= len(words) <= 40, n)
    words = refine(pieces, lower=True)
    grams = [" ".join(words[i:i + 2]) for i in range(len(words) - 2 + 1)]
    freq = {}
    for g in grams:
        freq[g] = freq.get(g, 0) + 1
    if not freq:
        ratio = 0.0
    else:
        counts = list(freq.values())
        ratio = sum(c for c in counts if c > 1) / sum(counts)
    n += 1
    emit("word_repetition_filter",
         {"lang": "en", "tokenization": True, "rep_len": 2, "min_ratio": 0.0, "max_ratio": 0.2},
         text, {"word_rep_ratio": ratio}, 0.0 <= ratio <= 0.2, n)
print("wrote %d vectors" % n, file=sys.stderr)
