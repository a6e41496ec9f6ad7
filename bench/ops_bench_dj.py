#!/usr/bin/python3
"""The Data-Juicer side of bench/ops_bench.sh: Data-Juicer 1.4.3's own operator
code, unchanged, on one thread, with the framework stand-ins of
tests/data/dj_stand_ins.py and the install_stubs() of the make_ops_*.py
generators there (regex mappers, word lists, chinese_convert with Debian's
libopencc through ctypes, general_field). Also holds the operator table (the
arguments both sides get) and makes the derived corpora.

  ops_bench_dj.py list                       op and corpus kind, one a line
  ops_bench_dj.py recipe OP --assets DIR --tokenizer DIR   djshard's YAML recipe
  ops_bench_dj.py corpus latex|zh WEB.jsonl OUT.jsonl      derived corpus
  ops_bench_dj.py run DJ_ROOT OP CORPUS.jsonl --assets DIR --tokenizer DIR
                  [--check DJSHARD_OUT.jsonl]

run: loads the corpus (not timed), builds the operator, then times only the
operator calls, as Data-Juicer's framework makes them: batched ops
(_batched_op = True) get batches of 1000 rows (the OP default batch_size):
mappers process_batched({"text": [...]}), filters compute_stats_batched then
process_batched; single-sample filters (stopwords_filter, general_field_filter,
token_num_filter) get compute_stats_single(row) then process_single(row) per
row, as NestedDataset.map runs them with batch_size 1 (the per-row
conversions of the dataset layer left out, which favours Data-Juicer).
Prints "seconds S rows N kept K"; with --check, compares with djshard's output
of the same op: mappers row by row (text), filters by kept id.
token_num_filter needs a Hugging Face tokenizer: Data-Juicer loads it with
transformers' AutoTokenizer; here the `tokenizers` library's Tokenizer on the
same tokenizer.json stands in when transformers is missing (tokenize = the
encoding's tokens without special tokens); with neither, run prints "skipped".
"""
import argparse
import importlib
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "tests", "data"))

BATCH = 1000

# op: (kind, corpus, arguments). "@ASSETS@" / "@TOKENIZER@" are replaced by
# the --assets / --tokenizer directories. Data-Juicer's defaults otherwise.
OPS = {
    "clean_ip_mapper": ("mapper", "web", {}),
    "replace_content_mapper": ("mapper", "web", {"pattern": "\\d+", "repl": "<num>"}),
    "remove_table_text_mapper": ("mapper", "web", {}),
    "remove_non_chinese_character_mapper": ("mapper", "zh", {}),
    "remove_words_with_incorrect_substrings_mapper": ("mapper", "web", {}),
    "remove_header_mapper": ("mapper", "latex", {}),
    "remove_comments_mapper": ("mapper", "latex", {}),
    "remove_bibliography_mapper": ("mapper", "latex", {}),
    "expand_macro_mapper": ("mapper", "latex", {}),
    "flagged_words_filter": ("filter", "web", {"lang": "en", "flagged_words_dir": "@ASSETS@"}),
    "stopwords_filter": ("filter", "web", {"lang": "en", "stopwords_dir": "@ASSETS@"}),
    "token_num_filter": ("filter", "web", {"hf_tokenizer": "@TOKENIZER@"}),
    "chinese_convert_mapper": ("mapper", "zh", {"mode": "s2t"}),
    "general_field_filter": ("filter", "web",
                             {"filter_condition": "meta.lang == 'en' and meta.score >= 0.5"}),
}


def op_args(name, assets, tokenizer):
    out = {}
    for k, v in OPS[name][2].items():
        if isinstance(v, str):
            v = v.replace("@ASSETS@", assets).replace("@TOKENIZER@", tokenizer)
        out[k] = v
    return out


def cmd_list(a):
    for name, (_, corpus, _) in OPS.items():
        print(name, corpus)


def cmd_recipe(a):
    # JSON is valid YAML; one op, one thread
    args = op_args(a.op, a.assets, a.tokenizer)
    print("# bench/ops_bench.sh: %s alone" % a.op)
    print("np: 1")
    print("process:")
    if args:
        print("  - %s:" % a.op)
        for k, v in args.items():
            print("      %s: %s" % (k, json.dumps(v, ensure_ascii=False)))
    else:
        print("  - %s:" % a.op)


# ------------------------------------------------------------ corpora

ZH = [
    "中华人民共和国是一个统一的多民族国家。", "我们在这里学习汉语，并且练习书法和绘画。",
    "这个软件的鼠标操作很方便，打印机也连接上了。", "我打了一辆出租车去机场，路上听了一会儿广播。",
    "网络连接异常，请检查信息安全设置和服务器地址。", "他用优盘把视频文件拷贝到笔记本电脑上，然后发邮件。",
    "内存不足，程序运行太慢了，需要升级硬件。", "冰箱里有冰棍、奶酪、土豆和西红柿。",
    "头发发型很好看，后来他们去了干燥的地方晒干衣服。", "这里面有很多面条，里程碑式的发展，一只钟表。",
    "数据处理模型训练语料质量过滤分片节点集群管道。", "研究结果表明，这种方法的性能明显优于传统系统。",
    "在大规模语言模型的预训练中，语料的质量决定了模型的上限。", "我们对每个文档进行了去重、清洗和语言识别。",
    "这些数据来自网页、书籍、论文和百科全书，总共约两万亿个词元。", "实验在八台机器上进行，每台机器有八块图形处理器。",
    "该系统支持断点续传，任务失败后可以从最近的检查点恢复。", "北京、上海、广州和深圳是中国最大的四个城市。",
    "经济发展离不开科技进步，教育是国家发展的基础。", "请在下载安装包之前阅读用户协议和隐私政策。",
    "这个问题的关键在于如何高效地处理海量的文本数据。", "他说：“明天我们一起去图书馆复习吧。”",
    "会议将于2024年5月6日上午9点在三号楼举行，请准时参加。", "为了保证结果的可靠性，每个实验都重复了三次。",
    "气象台预报，今天夜间到明天白天多云转阴，有小雨。", "历史学家认为，这座古城已经有两千多年的历史了。",
]


def _zh_text(r, nbytes):
    paras, size = [], 0
    while size < nbytes:
        p = "".join(r.choice(ZH) for _ in range(r.randint(3, 10)))
        if r.random() < 0.3:  # some Latin, digits and URLs, as in web text
            p += " See https://example.com/doc/%d for version %d.%d. " % (
                r.randint(1, 999), r.randint(1, 9), r.randint(0, 20))
        paras.append(p)
        size += len(p.encode("utf-8"))
    return "\n\n".join(paras)


MACROS = [("newcommand", "\\model", "\\textsc{Juicer}"), ("newcommand", "\\data", "\\mathcal{D}"),
          ("newcommand*", "\\etal", "et al.\\xspace"), ("def", "\\corpus", "\\textbf{corpus}"),
          ("def", "\\ie", "i.e.\\@"), ("renewcommand", "\\vec", "\\mathbf")]


def _latex_text(r, text, n):
    paras = [p for p in text.split("\n\n") if p.strip()]
    out = ["%% arXiv source %d, generated for bench/ops_bench.sh" % n,
           "\\documentclass[11pt]{article}", "\\usepackage{amsmath,graphicx}  % packages"]
    for kind, name, body in r.sample(MACROS, 4):
        if kind == "def":
            out.append("\\def%s{%s}" % (name, body))
        else:
            out.append("\\%s{%s}{%s}" % (kind, name, body))
    out += ["\\begin{document}", "\\title{%s}" % paras[0][:60].replace("\n", " "), "\\maketitle",
            "% TODO: rewrite the abstract", "\\begin{abstract}", paras[0], "\\end{abstract}"]
    names = [m[1] for m in MACROS]
    for i, p in enumerate(paras[1:]):
        if i % 2 == 0:
            out.append("\\%s{Part %d}\\label{sec:%d}" % (r.choice(["section", "subsection", "section*"]), i, i))
        words = p.split(" ")
        for _ in range(3):
            j = r.randrange(len(words))
            words[j] = words[j] + " " + r.choice(names) + " "
        p = " ".join(words)
        if r.random() < 0.5:
            p += "  %% note: check this claim \\cite{ref%d}" % i
        out.append(p)
        if r.random() < 0.2:
            out += ["%%%%%%%%%%%%%%%%%%%%", "% figure", "\\begin{figure}[t]",
                    "\\includegraphics{fig%d.pdf}  %% pdf" % i, "\\end{figure}"]
    out += ["\\appendix" if r.random() < 0.3 else "", "\\bibliographystyle{plain}",
            "\\bibliography{refs}", "\\begin{thebibliography}{9}",
            "\\bibitem{ref0} A. Author. A title. 2023.", "\\end{thebibliography}", "\\end{document}"]
    return "\n".join(out)


def cmd_corpus(a):
    r = random.Random(7)
    with open(a.src, encoding="utf-8") as f, open(a.out, "w", encoding="utf-8") as out:
        for n, line in enumerate(f):
            row = json.loads(line)
            if a.kind == "latex":
                row["text"] = _latex_text(r, row["text"], n)
            elif n % 3:  # zh: two rows in three Chinese, the third as it was
                row["text"] = _zh_text(r, len(row["text"].encode("utf-8")))
                row["meta"]["lang"] = "zh"
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


# ------------------------------------------------------------ Data-Juicer

def _tokenizer_stand_in():
    """data_juicer.utils.model_utils for token_num_filter: the real one builds
    transformers.AutoTokenizer.from_pretrained(path); with transformers
    missing, tokenizers.Tokenizer.from_file(path/tokenizer.json)."""
    import dj_stand_ins as dj
    try:
        import transformers  # noqa: F401
        have_tf = True
    except ImportError:
        have_tf = False
        import tokenizers  # ImportError: the caller skips
        if not hasattr(tokenizers, "Tokenizer"):  # tests/data/tokenizers/, a folder
            raise ImportError("neither transformers nor tokenizers is importable")

    class HF:
        def __init__(self, path):
            if have_tf:
                self.tok = transformers.AutoTokenizer.from_pretrained(path)
                self.tokenize = self.tok.tokenize
            else:
                self.tok = tokenizers.Tokenizer.from_file(os.path.join(path, "tokenizer.json"))

        def tokenize(self, text):
            return self.tok.encode(text, add_special_tokens=False).tokens

    cache = {}
    mu = dj.stub_module("data_juicer.utils.model_utils")
    mu.prepare_model = lambda model_type, **kw: (model_type, kw.get("pretrained_model_name_or_path"))
    mu.get_model = lambda key=None, rank=None, use_cuda=False: (
        None if key is None else cache.setdefault(key, HF(key[1])))
    return mu


def load_op(dj_root, name):
    import dj_stand_ins as dj
    kind = OPS[name][0]
    if name == "chinese_convert_mapper":
        gen = importlib.import_module("make_ops_chinese_convert")
        registry = gen.install_stubs(dj_root)
    elif name == "general_field_filter":
        registry = importlib.import_module("make_ops_general_field").install_stubs(dj_root)
    elif kind == "filter":
        # Filter stand-in with Data-Juicer's get_keep_boolean, op_fusion,
        # cache_utils, sentencepiece model_utils
        registry = importlib.import_module("make_ops_word_lists").install_stubs(dj_root)
        if name == "token_num_filter":
            _tokenizer_stand_in()
    else:
        registry = importlib.import_module("make_ops_regex_mappers").install_stubs(dj_root)
    return dj.load_op_classes(registry, kind, [name])[name]


def cmd_run(a):
    name = a.op
    try:
        cls = load_op(os.path.abspath(a.dj_root), name)
    except ImportError as e:
        print("skipped: %s" % e)
        return
    rows = [json.loads(line) for line in open(a.corpus, encoding="utf-8")]
    op = cls(**op_args(name, a.assets, a.tokenizer))
    kind = OPS[name][0]
    batched = op.is_batched_op()
    # everything the calls get is built before the clock starts
    if kind == "mapper":
        work = [{"text": [r["text"] for r in rows[i:i + BATCH]]} for i in range(0, len(rows), BATCH)]
    elif batched:
        work = [{"text": [r["text"] for r in rows[i:i + BATCH]],
                 "__dj__stats__": [{} for _ in rows[i:i + BATCH]]}
                for i in range(0, len(rows), BATCH)]
    else:
        work = [dict(r, __dj__stats__={}) for r in rows]
    texts, keeps = [], []
    t0 = time.perf_counter()
    if kind == "mapper":
        for samples in work:
            texts += op.process_batched(samples)["text"]
    elif batched:
        for samples in work:
            samples = op.compute_stats_batched(samples)
            keeps += list(op.process_batched(samples))
    else:
        for sample in work:
            sample = op.compute_stats_single(sample)
            keeps.append(op.process_single(sample))
    seconds = time.perf_counter() - t0
    kept = len(texts) if kind == "mapper" else sum(1 for k in keeps if k)
    print("seconds %.4f rows %d kept %d" % (seconds, len(rows), kept))
    if a.check:
        out = [json.loads(line) for line in open(a.check, encoding="utf-8")]
        if kind == "mapper":
            if len(out) != len(texts):
                print("check: djshard kept %d rows, Data-Juicer %d" % (len(out), len(texts)))
            else:
                diff = [r["id"] for r, t in zip(out, texts) if r["text"] != t]
                print("check: %d of %d texts differ from djshard's%s" % (
                    len(diff), len(texts), (" (ids %s)" % diff[:5]) if diff else ""))
        else:
            mine = [r["id"] for r, k in zip(rows, keeps) if k]
            theirs = [r["id"] for r in out]
            only_dj = sorted(set(mine) - set(theirs))
            only_ds = sorted(set(theirs) - set(mine))
            print("check: kept Data-Juicer %d djshard %d; only Data-Juicer %d%s, only djshard %d%s" % (
                len(mine), len(theirs), len(only_dj), (" (ids %s)" % only_dj[:5]) if only_dj else "",
                len(only_ds), (" (ids %s)" % only_ds[:5]) if only_ds else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list").set_defaults(fn=cmd_list)
    p = sub.add_parser("recipe")
    p.add_argument("op", choices=sorted(OPS))
    p.add_argument("--assets", required=True)
    p.add_argument("--tokenizer", required=True)
    p.set_defaults(fn=cmd_recipe)
    p = sub.add_parser("corpus")
    p.add_argument("kind", choices=["latex", "zh"])
    p.add_argument("src")
    p.add_argument("out")
    p.set_defaults(fn=cmd_corpus)
    p = sub.add_parser("run")
    p.add_argument("dj_root")
    p.add_argument("op", choices=sorted(OPS))
    p.add_argument("corpus")
    p.add_argument("--assets", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--check")
    p.set_defaults(fn=cmd_run)
    a = ap.parse_args()
    a.fn(a)


if __name__ == "__main__":
    main()
