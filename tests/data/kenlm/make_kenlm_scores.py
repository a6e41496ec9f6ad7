#!/usr/bin/python3
"""Writes tests/data/kenlm/scores.jsonl.zst: KenLM's own scores of sentences under
each model of this directory, one line per sentence:

  {"sentence": "...", "scores": {"o2.arpa": -12.34, "o5.probing": ...}}

Each score is kenlm.Model(path).score(sentence, bos=True, eos=True), from the
kenlm Python module built from github.com/kpu/kenlm (python/kenlm.pyx with
KENLM_MAX_ORDER=6), printed with repr() (single precision widened to double).

Sentences: SentencePiece pieces (tests/data/sentencepiece/en.sp.model) of
gen_corpus.py rows with another seed than the training text (known and unknown
n-grams), of the odd inputs of ops.jsonl, and hand-written ones (empty, only
whitespace, <s> </s> <unk> inside, unknown words, NUL, tabs, vertical tabs).

Usage (from the repository root; zstd on PATH):
  PYTHONPATH=/dir/of/kenlm/module /usr/bin/python3 tests/data/kenlm/make_kenlm_scores.py GEN_CORPUS_PY
"""
import json
import os
import subprocess
import sys
import tempfile

import kenlm
import sentencepiece

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
MODELS = ["o2.arpa", "o2.probing", "o3.trie", "o4-pruned.arpa", "o4-pruned.probing",
          "o4-pruned.trie", "o5.probing", "o5-pruned.trie", "sri-blanks.arpa",
          "sri-blanks.probing", "sri-blanks.trie"]

HAND = [
    "", " ", "\t", "<s>", "</s>", "<unk>", "<UNK>", "<s> </s>", "▁the", "▁the ▁the ▁the",
    "zzqx ▁of ▁the", "▁of zzqx ▁the", "a\tb c", "a\x0bb", "a\x0cb\rc", "▁the\x00▁of ▁a",
    "\x00", "▁a\xa0▁b", "▁" * 3, "▁, ▁. ▁and ▁the ▁of ▁a ▁to ▁in",
    # for sri-blanks: n-grams whose suffixes are blanks
    "x", "y", "z", "x y", "x y x", "z y z", "z y z y x", "x x y x y", "y x y z y x </s> x",
    "z x y", "x z y z x x",
]


def sentences(gen_corpus, tmp):
    sp = sentencepiece.SentencePieceProcessor()
    sp.load(os.path.join(DATA, "sentencepiece", "en.sp.model"))
    out = list(HAND)
    rows = os.path.join(tmp, "rows.jsonl")
    subprocess.run([sys.executable, gen_corpus, rows, "--rows", "12", "--seed", "5"], check=True)
    texts = [json.loads(r)["text"] for r in open(rows, encoding="utf-8")]
    ops = subprocess.run(["zstd", "-dc", os.path.join(DATA, "ops.jsonl.zst")], check=True,
                         capture_output=True).stdout.decode("utf-8").split("\n")
    seen = set()
    for line in ops:
        if not line:
            continue
        inp = json.loads(line)["input"]
        if str(inp["id"]).startswith("edge-") and inp["id"] not in seen:
            seen.add(inp["id"])
            texts.append(inp["text"])
    for text in texts:
        for line in text.splitlines()[:12]:
            out.append(" ".join(sp.encode_as_pieces(line)))
    # The training text itself (every n-gram known): the first rows of seed 11.
    subprocess.run([sys.executable, gen_corpus, rows, "--rows", "2", "--seed", "11"], check=True)
    for r in open(rows, encoding="utf-8"):
        for line in json.loads(r)["text"].splitlines()[:20]:
            out.append(" ".join(sp.encode_as_pieces(line)))
    return out


def main():
    gen_corpus = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        models = {}
        for name in MODELS:
            path = os.path.join(tmp, name)
            subprocess.run(["zstd", "-dqf", os.path.join(HERE, name + ".zst"), "-o", path], check=True)
            models[name] = kenlm.Model(path)
        with open(os.path.join(HERE, "scores.jsonl"), "w", encoding="utf-8") as f:
            for s in sentences(gen_corpus, tmp):
                scores = {name: m.score(s, bos=True, eos=True) for name, m in models.items()}
                f.write(json.dumps({"sentence": s, "scores": scores}, ensure_ascii=False) + "\n")
        subprocess.run(["zstd", "-19", "-q", "-f", "--rm", os.path.join(HERE, "scores.jsonl")], check=True)


if __name__ == "__main__":
    main()
