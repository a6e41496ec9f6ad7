#!/usr/bin/python3
"""Builds the small KenLM models of tests/data/kenlm with KenLM's own tools.

The training text is the SentencePiece pieces (tests/data/sentencepiece/en.sp.model)
of gen_corpus.py rows, one line of a row per line, pieces joined by spaces: the
way Data-Juicer's perplexity models (cc_net's) were trained. Models:

  o2.arpa          order 2, ARPA text
  o2.probing       order 2, build_binary's default data structure (probing)
  o3.trie          order 3, trie
  o4-pruned.arpa   order 4, --prune 0 1 1 1, ARPA text
  o4-pruned.probing / o4-pruned.trie
  o5.probing       order 5 (as cc_net builds its <lang>.arpa.bin: -o 5, build_binary)
  o5-pruned.trie   order 5, --prune 0 0 1 1 1, trie
  sri-blanks.arpa / .probing / .trie   a hand-written order-3 ARPA file in which
                   some n-grams lack their shorter suffix (as SRILM's pruning leaves
                   them; KenLM fills in "blank" entries)
  quant.trie       order 2, build_binary -q 8 -b 8 trie (quantized), refused by djshard

Every model is compressed with zstd -19 (the tests decompress them).

Usage (from the repository root):
  /usr/bin/python3 tests/data/kenlm/make_kenlm_models.py KENLM_BUILD_BIN GEN_CORPUS_PY
e.g. KENLM_BUILD_BIN=/path/kenlm/build/bin (holding lmplz and build_binary, from
github.com/kpu/kenlm) and GEN_CORPUS_PY=/work/shared/data/gen_corpus.py.
"""
import json
import os
import subprocess
import sys
import tempfile

import sentencepiece

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)


def training_text(gen_corpus, tmp):
    rows = os.path.join(tmp, "rows.jsonl")
    subprocess.run([sys.executable, gen_corpus, rows, "--rows", "6", "--seed", "11"], check=True)
    sp = sentencepiece.SentencePieceProcessor()
    sp.load(os.path.join(DATA, "sentencepiece", "en.sp.model"))
    lines = []
    with open(rows, encoding="utf-8") as f:
        for row in f:
            for line in json.loads(row)["text"].splitlines():
                pieces = sp.encode_as_pieces(line)
                if pieces:
                    lines.append(" ".join(pieces))
    path = os.path.join(tmp, "train.txt")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path


def lmplz(bin_dir, text, order, prune, out):
    cmd = [os.path.join(bin_dir, "lmplz"), "-o", str(order), "-S", "100M", "--discount_fallback"]
    if prune:
        cmd += ["--prune"] + [str(p) for p in prune]
    with open(text, "rb") as src, open(out, "wb") as dst:
        subprocess.run(cmd, stdin=src, stdout=dst, stderr=subprocess.DEVNULL, check=True)


def build_binary(bin_dir, arpa, out, *options):
    # build_binary [-q bits] [-b bits] [-r] ARPA OUT, or ... trie ARPA OUT.
    subprocess.run([os.path.join(bin_dir, "build_binary"), *options, arpa, out],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)


SRI_BLANKS = """\\data\\
ngram 1=6
ngram 2=8
ngram 3=4

\\1-grams:
-1.5\t<unk>\t0
0\t<s>\t-0.5
-0.7\t</s>
-0.6\tx\t-0.2
-0.8\ty\t-0.35
-0.9\tz\t-0.1

\\2-grams:
-0.3\t<s> x\t-0.1
-0.4\tx y\t-0.25
-0.45\ty x\t-0.15
-0.5\ty </s>
-0.35\tz y\t0
-0.55\tx x
-0.65\tz x\t-0.05
-0.6\t<s> y

\\3-grams:
-0.2\t<s> x y
-0.22\t<s> x </s>
-0.15\tx y x
-0.12\tz y z

\\end\\
"""


def main():
    bin_dir, gen_corpus = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        text = training_text(gen_corpus, tmp)
        arpa = {}
        for name, order, prune in [("o2", 2, None), ("o3", 3, None), ("o4-pruned", 4, [0, 1, 1, 1]),
                                   ("o5", 5, None), ("o5-pruned", 5, [0, 0, 1, 1, 1])]:
            arpa[name] = os.path.join(tmp, name + ".arpa")
            lmplz(bin_dir, text, order, prune, arpa[name])
        arpa["sri-blanks"] = os.path.join(tmp, "sri-blanks.arpa")
        with open(arpa["sri-blanks"], "w") as f:
            f.write(SRI_BLANKS)
        outputs = {
            "sri-blanks.arpa": None,
            "sri-blanks.probing": (arpa["sri-blanks"], []),
            "sri-blanks.trie": (arpa["sri-blanks"], ["trie"]),
            "o2.arpa": None, "o4-pruned.arpa": None,
            "o2.probing": (arpa["o2"], []), "o3.trie": (arpa["o3"], ["trie"]),
            "o4-pruned.probing": (arpa["o4-pruned"], []),
            "o4-pruned.trie": (arpa["o4-pruned"], ["trie"]),
            "o5.probing": (arpa["o5"], []), "o5-pruned.trie": (arpa["o5-pruned"], ["trie"]),
            "quant.trie": (arpa["o2"], ["-q", "8", "-b", "8", "trie"]),
        }
        for name, how in outputs.items():
            out = os.path.join(tmp, name)
            if how is None:
                out = arpa[name[:-len(".arpa")]]
            else:
                src, options = how
                *flags, kind = options if options else ["probing"]
                build_binary(bin_dir, src, out, *flags, kind)
            subprocess.run(["zstd", "-19", "-q", "-f", out, "-o", os.path.join(HERE, name + ".zst")],
                           check=True)
            print(name, os.path.getsize(out), os.path.getsize(os.path.join(HERE, name + ".zst")))


if __name__ == "__main__":
    main()
