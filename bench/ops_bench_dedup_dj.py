#!/usr/bin/env python3
"""Data-Juicer's deduplicators' compute_hash on one thread: MB/s of input text.

usage: ops_bench_dedup_dj.py DJ_ROOT SIMHASH_DIR INPUT.jsonl VARIANT...
VARIANT is "op_name" or "op_name:{json args}". The operator files are imported unchanged
through tests/data/make_dedup_vectors.py's stand-ins; only compute_hash is timed
(time.process_time), over every row of INPUT's "text"; the best of up to 10 rounds
that together take about a second (one round for the slow variants).
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
        # best of up to 10 rounds while they take under a second of CPU in all,
        # as djshard's side takes the best of 10
        secs, spent, rounds = None, 0.0, 0
        while rounds < 10 and (rounds == 0 or spent < 1.0):
            rows = [{"text": t} for t in texts]
            start = time.process_time()
            for r in rows:
                try:
                    op.compute_hash(r)
                except ValueError:  # minhash: a text without shingles
                    pass
            took = time.process_time() - start
            secs = took if secs is None else min(secs, took)
            spent += took
            rounds += 1
        print("%s %s %.2f MB %.3f s %.3f MB/s" % (name, args or "{}", mb, secs, mb / secs))


if __name__ == "__main__":
    main()
