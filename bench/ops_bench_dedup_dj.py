#!/usr/bin/env python3
"""Data-Juicer's deduplicators' compute_hash on one thread: MB/s of input text.

usage: ops_bench_dedup_dj.py DJ_ROOT SIMHASH_DIR INPUT.jsonl VARIANT...
VARIANT is "op_name" or "op_name:{json args}". The operator files are imported unchanged
through tests/data/make_dedup_vectors.py's stand-ins; only compute_hash is timed
(time.process_time), over every row of INPUT's "text".
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "data"))
import make_dedup_vectors as mdv  # noqa: E402


def main():
    dj_root, simhash_dir, path = sys.argv[1:4]
    classes = mdv.install(os.path.abspath(dj_root), os.path.abspath(simhash_dir))
    with open(path, encoding="utf-8") as f:
        texts = [json.loads(line)["text"] for line in f if line.strip()]
    mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
    for variant in sys.argv[4:]:
        name, _, args = variant.partition(":")
        op = classes[name](**(json.loads(args) if args else {}))
        rows = [{"text": t} for t in texts]
        start = time.process_time()
        for r in rows:
            try:
                op.compute_hash(r)
            except ValueError:  # minhash: a text without shingles
                pass
        secs = time.process_time() - start
        print("%s %s %.2f MB %.3f s %.3f MB/s" % (name, args or "{}", mb, secs, mb / secs))


if __name__ == "__main__":
    main()
