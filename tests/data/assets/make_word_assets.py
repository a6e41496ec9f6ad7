#!/usr/bin/python3
"""Builds flagged_words.json and stopwords.json (this folder) in Data-Juicer's
word-asset format: one JSON object mapping a language code to a list of words,
as load_words_asset (data_juicer/utils/asset_utils.py) reads it.

Sources (npm packages, installed OUTSIDE the project):
- naughty-words 1.2.0 (the LDNOOBW "List of Dirty, Naughty, Obscene and
  Otherwise Bad Words", which Data-Juicer's flagged_words list comes from):
  one <lang>.json list per language; ALL of its languages are kept (ar cs da
  de en eo es fa fi fil fr fr-CA-u-sd-caqc hi hu it ja kab ko nl no pl pt ru
  sv th tlh tr zh), keys as in its index.js. It has no "vi" list.
- stopwords-iso 1.1.0 (stopwords-iso.json): only the languages in
  STOPWORD_LANGS below.
Words are written exactly as the packages give them, in their order (no
lower-casing, stripping or de-duplication): Data-Juicer uses its asset lists
as they are.

Regenerate:
  mkdir -p /tmp/npm && cd /tmp/npm && npm init -y >/dev/null && \
      npm install naughty-words@1.2.0 stopwords-iso@1.1.0
  /usr/bin/python3 tests/data/assets/make_word_assets.py /tmp/npm/node_modules
(run from the repository root; the argument defaults to /tmp/npm/node_modules).
Deterministic: keys sorted, lists in package order, json.dumps(ensure_ascii=
False, indent=1), UTF-8, trailing newline.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

STOPWORD_LANGS = ["ar", "de", "el", "en", "es", "fr", "it", "ja", "ko", "nl",
                  "pt", "ru", "tr", "uk", "vi", "zh"]
SKIP = {"package.json", "bower.json", "package-lock.json"}


def write(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write(json.dumps(obj, ensure_ascii=False, indent=1) + "\n")


def main():
    nm = sys.argv[1] if len(sys.argv) > 1 else "/tmp/npm/node_modules"
    nw = os.path.join(nm, "naughty-words")
    flagged = {}
    for fn in sorted(os.listdir(nw)):
        if fn.endswith(".json") and fn not in SKIP:
            with open(os.path.join(nw, fn), encoding="utf-8") as f:
                words = json.load(f)
            assert isinstance(words, list) and all(isinstance(w, str) for w in words), fn
            flagged[fn[:-len(".json")]] = words
    flagged = dict(sorted(flagged.items()))
    with open(os.path.join(nm, "stopwords-iso", "stopwords-iso.json"), encoding="utf-8") as f:
        iso = json.load(f)
    stop = {k: iso[k] for k in sorted(STOPWORD_LANGS)}
    for k, words in stop.items():
        assert isinstance(words, list) and all(isinstance(w, str) for w in words), k
    write(os.path.join(HERE, "flagged_words.json"), flagged)
    write(os.path.join(HERE, "stopwords.json"), stop)
    for name, d in (("flagged_words", flagged), ("stopwords", stop)):
        print(name, {k: len(v) for k, v in d.items()}, file=sys.stderr)


if __name__ == "__main__":
    main()
