#!/usr/bin/python3
"""Helpers of bench/ops_bench_fix_unicode.sh.

  ops_bench_fix_unicode.py mojibake CLEAN.jsonl OUT.jsonl
      writes OUT: every row of CLEAN with its text turned into mojibake
      (UTF-8 read as Windows-1252, Latin-1, Windows-1251, MacRoman or cp437,
      one encoding a row in turn; every fourth row twice over).
  ops_bench_fix_unicode.py ftfy DJ_ROOT FTFY_ROOT CORPUS.jsonl OUT.jsonl
      runs Data-Juicer's fix_unicode_mapper (its code, the real ftfy) over
      CORPUS in batches of 1000 texts, one thread, writes the texts to OUT and
      prints "seconds=S mb_per_s=M" (MB of input text, process time only).
"""
import importlib
import json
import os
import sys
import time


def mojibake(clean_path, out_path):
    sys.path.insert(0, os.environ["FTFY"])
    import ftfy  # noqa: F401  (registers the sloppy codecs)
    encodings = ["sloppy-windows-1252", "latin-1", "sloppy-windows-1251", "macroman", "cp437"]
    with open(clean_path, encoding="utf-8") as f, open(out_path, "w", encoding="utf-8") as out:
        for n, line in enumerate(f):
            row = json.loads(line)
            text = row["text"].encode("utf-8").decode(encodings[n % len(encodings)], "replace")
            if n % 4 == 0:
                text = text.encode("utf-8").decode("sloppy-windows-1252", "replace")
            row["text"] = text
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


def run_ftfy(dj_root, ftfy_root, corpus, out_path):
    sys.path.insert(0, ftfy_root)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "tests", "data"))
    import dj_stand_ins as dj
    registry = dj.install_framework(dj_root, "mapper", "Mapper", dj.Mapper)
    dj.stub_module("data_juicer.utils.lazy_loader").LazyLoader = \
        lambda name, *a, **k: importlib.import_module(name)
    cls = dj.load_op_classes(registry, "mapper", ["fix_unicode_mapper"])["fix_unicode_mapper"]
    op = cls()
    with open(corpus, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f]
    size = sum(len(t.encode("utf-8")) for t in texts)
    start = time.process_time()
    fixed = []
    for i in range(0, len(texts), 1000):
        fixed += op.process_batched({"text": texts[i:i + 1000]})["text"]
    seconds = time.process_time() - start
    with open(out_path, "w", encoding="utf-8") as out:
        for t in fixed:
            out.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    print("seconds=%.2f mb_per_s=%.3f" % (seconds, size / 1e6 / seconds))


if __name__ == "__main__":
    if sys.argv[1] == "mojibake":
        mojibake(sys.argv[2], sys.argv[3])
    else:
        run_ftfy(*sys.argv[2:6])
