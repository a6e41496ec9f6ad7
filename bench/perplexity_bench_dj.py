#!/usr/bin/python3
"""Data-Juicer 1.4.3's perplexity_filter, its own code with the real
sentencepiece and kenlm modules, on one thread: batches of 1000 samples
through compute_stats_batched then process_batched, as the framework runs it
(the HuggingFace dataset layer left out). Prints MB/s and the time spent inside
SentencePiece's encode_as_pieces and KenLM's Model.score.

  perplexity_bench_dj.py DJ_ROOT KENLM_MODULE_DIR MODEL_HOME CORPUS.jsonl LANG

MODEL_HOME holds <LANG>.sp.model and <LANG>.arpa.bin.
"""
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests", "data"))


def main():
    dj_root, kenlm_dir, home, corpus, lang = sys.argv[1:6]
    sys.path.insert(0, os.path.abspath(kenlm_dir))
    import kenlm
    import sentencepiece
    import make_ops_perplexity as gen
    import dj_stand_ins as dj

    timers = {"sentencepiece": 0.0, "kenlm": 0.0}

    class TimedSP(sentencepiece.SentencePieceProcessor):
        def encode_as_pieces(self, text):
            t = time.perf_counter()
            out = super().encode_as_pieces(text)
            timers["sentencepiece"] += time.perf_counter() - t
            return out

    class TimedLM:
        def __init__(self, path):
            self.model = kenlm.Model(path)

        def score(self, line):
            t = time.perf_counter()
            out = self.model.score(line)
            timers["kenlm"] += time.perf_counter() - t
            return out

    registry = gen.install_stubs(os.path.abspath(dj_root), home)
    models = {}

    def get_model(key=None, rank=None, use_cuda=False):
        if key not in models:
            kind, lg = key
            if kind == "sentencepiece":
                sp = TimedSP()
                sp.load(os.path.join(home, lg + ".sp.model"))
                models[key] = sp
            else:
                models[key] = TimedLM(os.path.join(home, lg + ".arpa.bin"))
        return models[key]

    sys.modules["data_juicer.utils.model_utils"].get_model = get_model
    cls = dj.load_op_classes(registry, "filter", ["perplexity_filter"])["perplexity_filter"]
    # the module bound get_model at import: point it at the timed models
    sys.modules["data_juicer.ops.filter.perplexity_filter"].get_model = get_model
    texts = [json.loads(line)["text"] for line in open(corpus, encoding="utf-8")]
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    op = cls(lang=lang)
    t0 = time.perf_counter()
    kept = 0
    for i in range(0, len(texts), 1000):
        batch = texts[i:i + 1000]
        samples = {"text": batch, "__dj__stats__": [{} for _ in batch]}
        samples = op.compute_stats_batched(samples)
        kept += sum(op.process_batched(samples))
    seconds = time.perf_counter() - t0
    print("bytes %d rows %d kept %d" % (nbytes, len(texts), kept))
    print("operator %.3f s %.2f MB/s" % (seconds, nbytes / 1e6 / seconds))
    for k, v in timers.items():
        print("%s %.3f s (%.0f%%)" % (k, v, 100 * v / seconds))
    rest = seconds - sum(timers.values())
    print("rest %.3f s (%.0f%%)" % (rest, 100 * rest / seconds))


if __name__ == "__main__":
    main()
