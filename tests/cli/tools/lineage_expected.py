#!/usr/bin/python3
"""Independent model of djshard's expand/gather (SPEC-lineage §1) for the black-box
lineage tests: generates corpora and computes expected outputs with Python's own
string and regex machinery, never with djshard.

Usage: lineage_expected.py COMMAND ARGS...  (see the functions below)
"""
import json
import math
import random
import re
import sys

# ---------------------------------------------------------------- splitting

PARA_SEP = re.compile(r"\r?\n(?:[ \t\f\v\r]*\r?\n)+")
TERMINATORS = set(".!?…。！？")
CJK_TERMINATORS = set("。！？")
CLOSERS = set("\"'”’)]}」』）》")


def strip_parts(text):
    """(prefix, content, tail) with str.isspace() whitespace at both ends."""
    stripped_left = text.lstrip()
    prefix = text[: len(text) - len(stripped_left)]
    content = stripped_left.rstrip()
    tail = stripped_left[len(content):]
    return prefix, content, tail


def split_paragraph(text):
    prefix, content, tail = strip_parts(text)
    if not content:
        return prefix, []
    pieces = []
    pos = 0
    for m in PARA_SEP.finditer(content):
        pieces.append([content[pos:m.start()], m.group(0)])
        pos = m.end()
    pieces.append([content[pos:], tail])
    return prefix, pieces


def split_sentence(text):
    prefix, content, tail = strip_parts(text)
    if not content:
        return prefix, []
    body = content + tail
    pieces = []
    start = 0
    i = 0
    n = len(body)
    while i < n:
        ch = body[i]
        if ch.isspace():
            j = i
            while j < n and body[j].isspace():
                j += 1
            if i > start and ("\n" in body[i:j] or j == n):
                pieces.append([body[start:i], body[i:j]])
                start = j
            i = j
            continue
        if ch in TERMINATORS:
            j = i
            while j < n and body[j] in TERMINATORS:
                j += 1
            run = body[i:j]
            while j < n and body[j] in CLOSERS:
                j += 1
            if any(c in CJK_TERMINATORS for c in run) or j == n or body[j].isspace():
                k = j
                while k < n and body[k].isspace():
                    k += 1
                pieces.append([body[start:j], body[j:k]])
                start = k
                i = k
                continue
            i = j
            continue
        i += 1
    if start < n:
        pieces.append([body[start:], ""])
    return prefix, pieces


def split_lines(text):
    pieces = []
    for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
        pieces.append([line, "\n"])
    if not text:
        return "", []
    if not text.endswith("\n"):
        pieces[-1][1] = ""
    for p in pieces:
        if p[1] == "\n" and p[0].endswith("\r"):
            p[0], p[1] = p[0][:-1], "\r\n"
    return "", pieces


def split_chars(text, n):
    return "", [[text[i:i + n], ""] for i in range(0, len(text), n)]


def split(text, by):
    if by == "paragraph":
        return split_paragraph(text)
    if by == "sentence":
        return split_sentence(text)
    if by == "lines":
        return split_lines(text)
    if by.startswith("chars:"):
        return split_chars(text, int(by[6:]))
    raise SystemExit("unknown mode " + by)


def rejoin(prefix, pieces, keep):
    """Text of a parent rebuilt from the kept pieces (separator: original)."""
    kept = [p for p, k in zip(pieces, keep) if k]
    out = prefix
    for idx, p in enumerate(kept):
        out += p[0] + (pieces[-1][1] if idx == len(kept) - 1 else p[1])
    return out


def dumps(value):
    return json.dumps(value, ensure_ascii=False)


def py_float(v):
    return repr(float(v))

# ---------------------------------------------------------------- corpora


def corpus(path, n, seed):
    """Varied documents: \\r\\n, blank lines at both ends, CJK punctuation, emoji,
    NBSP and ideographic spaces, empty and whitespace-only texts, escapes."""
    rnd = random.Random(int(seed))
    words = ["alpha", "beta", "gamma", "delta", "数据", "处理", "😀", "naïve", "x", "3.14",
             "e.g.", "\"quoted\"", "(paren)", "tab\there"]
    ends = [".", "!", "?", "...", "。", "！", "？", "…", ".\"", "!)", "", "」"]
    with open(path, "w", encoding="utf-8", newline="") as f:
        for i in range(int(n)):
            kind = rnd.random()
            if kind < 0.04:
                text = ""
            elif kind < 0.08:
                text = rnd.choice([" ", "\n\n", "\u3000\u00a0", "\r\n \r\n"])
            else:
                paras = []
                for _ in range(rnd.randint(1, 6)):
                    sents = []
                    for _ in range(rnd.randint(1, 4)):
                        s = " ".join(rnd.choice(words) for _ in range(rnd.randint(1, 8)))
                        sents.append(s + rnd.choice(ends))
                    paras.append(rnd.choice([" ", "", "\u3000", "\n"]).join(sents))
                text = ""
                for k, p in enumerate(paras):
                    text += p
                    if k < len(paras) - 1:
                        text += rnd.choice(["\n\n", "\r\n\r\n", "\n \n\n", "\n\t\r\n", "\n"])
                text = rnd.choice(["", "\n\n", "  ", "\r\n"]) + text + rnd.choice(
                    ["", "\n", "\n\n", " \u00a0", "\r\n"])
            ascii_only = rnd.random() < 0.3
            f.write('{"id": %d, "text": %s, "src": "gen"}\n' %
                    (i, json.dumps(text, ensure_ascii=ascii_only)))


def paragraphs_corpus(path, n, seed, poison_every=0):
    """Documents of 1..12 paragraphs with lengths spread around 20 code points.
    With poison_every > 0, every poison_every-th document has POISON in its first
    paragraph."""
    rnd = random.Random(int(seed))
    with open(path, "w", encoding="utf-8", newline="") as f:
        for i in range(int(n)):
            paras = []
            for _ in range(rnd.randint(1, 12)):
                length = rnd.randint(3, 40)
                paras.append("".join(rnd.choice("abcdefghij klmnop数据😀") for _ in range(length))
                             .strip() or "z")
            if poison_every and i % int(poison_every) == 0:
                paras[0] = "POISON " + paras[0]
            text = rnd.choice(["", "\n"]) + "\n\n".join(paras) + rnd.choice(["", "\n"])
            f.write('{"id": %d, "text": %s}\n' % (i, dumps(text)))


def images_corpus(path, n, seed):
    rnd = random.Random(int(seed))
    with open(path, "w", encoding="utf-8", newline="") as f:
        for i in range(int(n)):
            imgs = ["img/%d_%d.%s" % (i, k, rnd.choice(["jpg", "png", "gif"]))
                    for k in range(rnd.randint(0, 5))]
            f.write('{"id": %d, "images": %s, "text": "sample %d", "meta": {"k": [1, 2]}}\n' %
                    (i, json.dumps(imgs), i))


def w1_corpus(path, parents, seed, child_chars):
    """W1 of SPEC-lineage §7: child counts min(2000, floor(Pareto(1.16, 1)))."""
    rnd = random.Random(int(seed))
    counts = []
    with open(path, "w", encoding="utf-8", newline="") as f:
        for i in range(int(parents)):
            u = rnd.random()
            c = min(2000, int(math.floor(1.0 / ((1.0 - u) ** (1.0 / 1.16)))))
            counts.append(c)
            paras = []
            for k in range(c):
                base = "p%d c%d " % (i, k)
                paras.append((base * (int(child_chars) // len(base) + 1))[: int(child_chars)].strip())
            f.write('{"id": %d, "text": %s}\n' % (i, dumps("\n\n".join(paras))))
    print(json.dumps({"parents": len(counts), "children": sum(counts),
                      "single_parent_calls_64": sum((c + 63) // 64 for c in counts)}))

# ---------------------------------------------------------------- expectations


def read_rows(path):
    with open(path, encoding="utf-8", newline="") as f:
        for line in f:
            line = line.rstrip("\n")
            yield line, json.loads(line, object_pairs_hook=dict)


def changed_line(obj, updates, appended=()):
    """A record djshard changed: members written compactly ("key":value, no
    spaces between members), untouched values as this script wrote them
    (json.dumps with its default separators), replaced values re-encoded
    (ensure_ascii=False), new members last."""
    members = []
    for k, v in obj.items():
        if k in updates and isinstance(updates[k], RawJson):
            raw = updates[k].raw
        else:
            raw = dumps(updates[k]) if k in updates else json.dumps(v, ensure_ascii=False)
        members.append(dumps(k) + ":" + raw)
    for k, raw in appended:
        members.append(dumps(k) + ":" + raw)
    return "{" + ",".join(members) + "}"


class RawJson:
    def __init__(self, raw):
        self.raw = raw


def count(by, path):
    total = 0
    for _, obj in read_rows(path):
        total += len(split(obj["text"], by)[1])
    print(total)


def child_filter(path, out, min_len, ratio):
    """text_length_filter(min_len) on paragraphs, min_present 1, min_present_ratio."""
    min_len, ratio = int(min_len), float(ratio)
    with open(out, "w", encoding="utf-8", newline="") as f:
        for line, obj in read_rows(path):
            prefix, pieces = split_paragraph(obj["text"])
            if not pieces:
                continue  # on_empty: drop
            keep = [len(p[0]) >= min_len for p in pieces]
            present = sum(keep)
            if present < 1 or present / len(pieces) < ratio:
                continue
            text = rejoin(prefix, pieces, keep)
            if text != obj["text"]:
                line = changed_line(obj, {"text": text})
            f.write(line + "\n")


def child_stats(path, out, min_len, min_present, on_empty):
    """text_length_filter(min_len) on paragraphs; gather into text and stats
    (mean, min, max, sum, count of text_len) with min_present and on_empty."""
    min_len, min_present = int(min_len), int(min_present)
    with open(out, "w", encoding="utf-8", newline="") as f:
        for line, obj in read_rows(path):
            prefix, pieces = split_paragraph(obj["text"])
            if not pieces and on_empty == "drop":
                continue
            if not pieces and on_empty == "keep_original":
                f.write(line + "\n")
                continue
            lens = [len(p[0]) for p in pieces]
            keep = [n >= min_len for n in lens]
            present = [n for n, k in zip(lens, keep) if k]
            if pieces and len(present) < min_present:
                continue
            text = rejoin(prefix, pieces, keep)
            stats = []
            if present:
                stats.append(("len_mean", py_float(sum(present) / len(present))))
                stats.append(("len_min", str(min(present))))
                stats.append(("len_max", str(max(present))))
            stats.append(("len_sum", str(sum(present))))
            stats.append(("len_count", str(len(present))))
            # djshard's key order: the gather's stats list order, absent ones left out.
            order = ["len_mean", "len_min", "len_max", "len_sum", "len_count"]
            d = dict(stats)
            body = ",".join('"%s":%s' % (k, d[k]) for k in order if k in d)
            updates = {"text": text} if text != obj["text"] else {}
            f.write(changed_line(obj, updates, [("__dj__stats__", "{" + body + "}")]) + "\n")


def image_field(path, out, *suffixes):
    """specified-suffix image filter on field:images children, into: field."""
    with open(out, "w", encoding="utf-8", newline="") as f:
        for line, obj in read_rows(path):
            imgs = obj["images"]
            if not imgs:
                f.write(line + "\n")  # on_empty: keep_original
                continue
            kept = [p for p in imgs if any(p.endswith(s) for s in suffixes)]
            if not kept:
                continue
            if len(kept) != len(imgs):
                raw = "[" + ",".join(json.dumps(p) for p in kept) + "]"
                line = changed_line(obj, {"images": RawJson(raw)})
            f.write(line + "\n")


def drop_child(path, out, marker):
    """Children containing `marker` dropped (on_child_error: drop_child)."""
    with open(out, "w", encoding="utf-8", newline="") as f:
        for line, obj in read_rows(path):
            prefix, pieces = split_paragraph(obj["text"])
            keep = [marker not in p[0] for p in pieces]
            if not pieces or sum(keep) < 1:
                continue
            text = rejoin(prefix, pieces, keep)
            if text != obj["text"]:
                line = changed_line(obj, {"text": text})
            f.write(line + "\n")


def image_targets(path, *suffixes):
    """The image paths of the corpus with one of the suffixes, as a JSON list."""
    out = []
    for _, obj in read_rows(path):
        out += [p for p in obj["images"] if any(p.endswith(s) for s in suffixes)]
    print(json.dumps(out))


def huge_parent(path, megabytes):
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"id": 0, "text": "')
        chunk = "abcdefghij" * 1024 * 100
        for _ in range(int(megabytes)):
            f.write(chunk)
        f.write('"}\n{"id": 1, "text": "small one"}\n')


def huge_array(path, megabytes):
    """A parent whose list `images` is `megabytes` MB of 0 elements, then a small one."""
    with open(path, "w", encoding="utf-8") as f:
        f.write('{"id": 0, "images": [0')
        chunk = ",0" * 512 * 1024
        for _ in range(int(megabytes)):
            f.write(chunk)
        f.write(']}\n{"id": 1, "images": ["a.jpg"]}\n')


if __name__ == "__main__":
    commands = {f.__name__: f for f in (corpus, paragraphs_corpus, images_corpus, w1_corpus, count,
                                         child_filter, child_stats, image_field, image_targets, drop_child,
                                         huge_parent, huge_array)}
    commands[sys.argv[1]](*sys.argv[2:])
