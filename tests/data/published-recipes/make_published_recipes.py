#!/usr/bin/python3
"""Writes tests/data/published-recipes/*.yaml: Data-Juicer's published text
recipes, with their operator lists and arguments as published, for the test
that runs each one through djshard (tests/cli/recipes_cli_test.cc).

  make_published_recipes.py DATA_JUICER_CHECKOUT [COMMIT]

COMMIT names the checkout's commit when it is not a git work tree (an
export made with `git archive`).

Each recipe is copied line for line from Data-Juicer's configs/, except that
dataset_path and export_path name the test's files (data.jsonl and
out/result.jsonl), and a header says where it came from. The recipes that
need images or videos are left out.

It also writes corpus.jsonl, the small corpus the test runs them on: English
prose of many lengths (some with e-mails, links, boilerplate, mojibake and
HTML entities), Chinese prose, LaTeX papers, StackExchange-like HTML pages and
source files (with the __dj__suffix__ field Data-Juicer's formatter adds), from a seeded generator, so that every operator of every recipe
keeps some rows and drops others.
"""
import json
import os
import random
import re
import subprocess
import sys

RECIPES = [
    "data_juicer_recipes/alpaca_cot/alpaca-cot-en-refine.yaml",
    "data_juicer_recipes/alpaca_cot/alpaca-cot-zh-refine.yaml",
    "data_juicer_recipes/github_code/redpajama-code-refine.yaml",
    "data_juicer_recipes/github_code/redpajama-stack-code-deduplicate.yaml",
    "data_juicer_recipes/github_code/stack-code-refine.yaml",
    "data_juicer_recipes/pile-europarl-refine.yaml",
    "data_juicer_recipes/pile-freelaw-refine.yaml",
    "data_juicer_recipes/pile-hackernews-refine.yaml",
    "data_juicer_recipes/pile-nih-refine.yaml",
    "data_juicer_recipes/pile-philpaper-refine.yaml",
    "data_juicer_recipes/pile-pubmed-abstract-refine.yaml",
    "data_juicer_recipes/pile-pubmed-central-refine.yaml",
    "data_juicer_recipes/pile-uspto-refine.yaml",
    "data_juicer_recipes/redpajama-arxiv-refine.yaml",
    "data_juicer_recipes/redpajama-book-refine.yaml",
    "data_juicer_recipes/redpajama-c4-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2019-30-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2020-05-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2021-04-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2022-05-refine.yaml",
    "data_juicer_recipes/redpajama-cc-2023-06-refine.yaml",
    "data_juicer_recipes/redpajama-pile-stackexchange-refine.yaml",
    "data_juicer_recipes/redpajama-wiki-refine.yaml",
    "reproduced_bloom/bloom-oscar.yaml",
    "reproduced_redpajama/redpajama-arxiv.yaml",
    "reproduced_redpajama/redpajama-books.yaml",
    "reproduced_redpajama/redpajama-code.yaml",
    "reproduced_redpajama/redpajama-stackexchange.yaml",
]


WORDS = ("the of and to in is that for it as was with be by on not this are or from at which but have "
         "an they you were there been one all we their has would when if so will can more out up into "
         "model data training language corpus filter quality process record document sentence research "
         "result method performance system network memory storage compute court patent patient study "
         "evidence analysis protein cell theorem proof parliament committee story").split()
CJK = "数据处理模型训练语料质量过滤分片节点集群管道文档句子段落研究结果方法性能系统网络内存存储计算你好世界欢迎来到我们"


def sentence(r):
    words = [r.choice(WORDS) for _ in range(r.randint(6, 22))]
    if r.random() < 0.05:
        words.insert(r.randrange(len(words)), "contact%d@example.org" % r.randint(1, 99))
    if r.random() < 0.05:
        words.insert(r.randrange(len(words)), "https://www.example.com/p/%d" % r.randint(1, 999))
    if r.random() < 0.04:
        words.insert(r.randrange(len(words)), r.choice(["cafÃ©", "donâ€™t", "&amp;", "naÃ¯ve", "&quot;x&quot;"]))
    text = " ".join(words)
    return text[:1].upper() + text[1:] + r.choice([".", ".", "!", "?"])


def paragraph(r):
    # Lines of one or two sentences, as in wiki and news text.
    lines = [" ".join(sentence(r) for _ in range(r.randint(1, 2))) for _ in range(r.randint(1, 5))]
    return "\n".join(lines)


def prose(r, paragraphs):
    paras = [paragraph(r) for _ in range(paragraphs)]
    if r.random() < 0.2:
        paras.append(r.choice(["All rights reserved.", "Click here to subscribe!", "Read more..."]))
    return r.choice(["\n\n", "\n"]).join(paras)


def chinese(r):
    return "\n".join("".join(r.choice(CJK) for _ in range(r.randint(30, 120))) + "。"
                     for _ in range(r.randint(1, 6)))


def latex(r):
    body = "\n\n".join(prose(r, 1) for _ in range(r.randint(3, 8)))
    return ("%% generated paper\n\\documentclass{article}\n\\newcommand{\\R}{\\mathbb{R}}\n"
            "\\begin{document}\n\\section{Introduction}\n" + body +
            " We work in $\\R^n$. % a comment\n\\section{Results}\n" + prose(r, 2) +
            "\n\\bibliography{refs}\n\\end{document}\n")


def html(r):
    items = "".join("<li>%s</li>" % sentence(r) for _ in range(r.randint(1, 4)))
    return ("<html><head><title>Q</title><style>p{}</style></head><body><h1>%s</h1><p>%s</p>"
            "<ul>%s</ul><p>%s &amp; more</p><script>var x=1;</script></body></html>"
            % (sentence(r), prose(r, 2), items, prose(r, 1)))


def code(r):
    lines = ["# Copyright (c) 2020 Example", "import os", ""]
    for f in range(r.randint(3, 12)):
        lines.append("def handler_%d(data, limit=%d):" % (f, r.randint(1, 99)))
        lines.append("    \"\"\"%s\"\"\"" % sentence(r))
        for _ in range(r.randint(2, 8)):
            lines.append("    data = [x for x in data if len(x) < limit]  # %s" % r.choice(WORDS))
        lines.append("    return data")
        lines.append("")
    return "\n".join(lines)


def write_corpus(path):
    r = random.Random(2026)
    rows = []
    for i in range(60):
        rows.append(prose(r, r.choice([1, 2, 4, 8, 16])))
    rows += [chinese(r) for _ in range(15)]
    rows += [latex(r) for _ in range(12)]
    rows += [html(r) for _ in range(12)]
    # Source files carry the suffix Data-Juicer's formatter gives rows read
    # from code files (what the code recipes' suffix_filter reads).
    rows += [(code(r), r.choice([".py", ".py", ".pyc"])) for _ in range(12)]
    rows += ["", "short", "x" * 3000]
    r.shuffle(rows)
    with open(path, "w", encoding="utf-8") as f:
        for i, row in enumerate(rows):
            text, suffix = row if isinstance(row, tuple) else (row, None)
            record = {"id": i, "text": text, "meta": {"source": "test"}}
            if suffix:
                record["__dj__suffix__"] = suffix
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


def main():
    dj = sys.argv[1]
    out_dir = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "-C", dj, "rev-parse", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = sys.argv[2] if len(sys.argv) > 2 else "unknown"
    for rel in RECIPES:
        with open(os.path.join(dj, "configs", rel), encoding="utf-8") as f:
            text = f.read()
        text = re.sub(r"(?m)^dataset_path:.*$", "dataset_path: data.jsonl", text)
        text = re.sub(r"(?m)^export_path:.*$", "export_path: out/result.jsonl", text)
        header = ("# Data-Juicer's configs/%s (commit %s), as published except for\n"
                  "# dataset_path and export_path. Made by make_published_recipes.py.\n"
                  % (rel, commit[:12]))
        name = rel.split("/")[-1]
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.write(header + text)
    write_corpus(os.path.join(out_dir, "corpus.jsonl"))


if __name__ == "__main__":
    main()
