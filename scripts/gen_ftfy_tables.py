#!/usr/bin/env python3
"""Generates src/ops/ftfy/ftfy_tables.cc: the character data of ftfy 6.3.1 (the
version Data-Juicer 1.4.3 locks), read from ftfy itself and from Python 3.11
(Unicode 14.0), for djshard's native port of ftfy.fix_text.

    python3 scripts/gen_ftfy_tables.py PATH/TO/python-ftfy > src/ops/ftfy/ftfy_tables.cc
    clang-format -i src/ops/ftfy/ftfy_tables.cc

PATH/TO/python-ftfy is a checkout of https://github.com/rspeer/python-ftfy at
tag v6.3.1. ftfy needs the `wcwidth` package (Debian: python3-wcwidth).
"""
import html
import html.entities
import re
import sys
import unicodedata

assert unicodedata.unidata_version == "14.0.0", unicodedata.unidata_version
sys.path.insert(0, sys.argv[1])
import ftfy  # noqa: E402
from ftfy import badness, chardata, fixes  # noqa: E402
from ftfy.bad_codecs import sloppy  # noqa: E402,F401  (registers the codecs)

assert ftfy.__version__ == "6.3.1", ftfy.__version__
_parser = re._parser
_c = re._constants

ALL = [cp for cp in range(0x110000)]


def c_string(s):
    """A C++ string literal holding the UTF-8 of `s` (octal escapes, no run-on)."""
    out = []
    for b in s.encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if 0x20 <= b < 0x7F and ch not in '"\\?':
            out.append(ch)
        else:
            out.append("\\%03o" % b)
    return '"' + "".join(out) + '"'


# ---------------------------------------------------------------------------
# The badness regex, flattened into branches of character classes.

class CharClass:
    """A regex character class: explicit code points, \\s / \\w, negation."""

    def __init__(self, explicit=(), space=False, word=False, negate=False):
        self.explicit = set(explicit)
        self.space, self.word, self.negate = space, word, negate

    def contains(self, cp, is_space, is_word):
        hit = cp in self.explicit or (self.space and is_space) or (self.word and is_word)
        return hit != self.negate


def class_from_in(items):
    cls = CharClass()
    for op, av in items:
        if op is _c.LITERAL:
            cls.explicit.add(av)
        elif op is _c.RANGE:
            cls.explicit.update(range(av[0], av[1] + 1))
        elif op is _c.NEGATE:
            cls.negate = True
        elif op is _c.CATEGORY and av is _c.CATEGORY_SPACE:
            cls.space = True
        elif op is _c.CATEGORY and av is _c.CATEGORY_WORD:
            cls.word = True
        else:
            raise ValueError("unsupported class item %s" % (op,))
    return cls


def flatten_items(seq):
    """A parsed sequence -> list of (kind, CharClass) with kind in class/optional/bol."""
    out = []
    for op, av in seq:
        if op is _c.LITERAL:
            out.append(("class", CharClass([av])))
        elif op is _c.IN:
            out.append(("class", class_from_in(av)))
        elif op is _c.ANY:
            out.append(("class", CharClass([ord("\n")], negate=True)))
        elif op is _c.AT and av is _c.AT_BEGINNING:
            out.append(("bol", None))
        elif op is _c.MAX_REPEAT and av[0] == 0 and av[1] == 1 and len(av[2]) == 1:
            (kind, cls), = flatten_items(av[2])
            out.append(("optional", cls))
        elif op is _c.SUBPATTERN:
            out.extend(flatten_items(av[3]))
        else:
            raise ValueError("unsupported regex item %s" % (op,))
    return out


def badness_branches():
    parsed = _parser.parse(badness.BADNESS_RE.pattern, badness.BADNESS_RE.flags)
    assert len(parsed.data) == 1 and parsed.data[0][0] is _c.BRANCH
    return [flatten_items(alt) for alt in parsed.data[0][1][1]]


def is_space(cp):
    return bool(re.match(r"\s", chr(cp)))


def is_word(cp):
    return bool(re.match(r"\w", chr(cp)))


def badness_kinds(classes):
    """Partitions code points into kinds that no class tells apart."""
    explicit = set()
    for cls in classes:
        explicit |= cls.explicit
    named = sorted(explicit | set(range(128)))
    signature_kind = {}
    kind_of = {}

    def kind_for(sig):
        if sig not in signature_kind:
            signature_kind[sig] = len(signature_kind)
        return signature_kind[sig]

    for cp in named:
        s, w = is_space(cp), is_word(cp)
        kind_of[cp] = kind_for(tuple(cls.contains(cp, s, w) for cls in classes))
    other = {}
    for s in (False, True):
        for w in (False, True):
            # A code point outside every explicit set; -1 stands for it.
            other[(s, w)] = kind_for(tuple(cls.contains(-1, s, w) for cls in classes))
    return kind_of, other, signature_kind


# ---------------------------------------------------------------------------
# Per-character data.

DETECTOR_SETS = ["utf8_first_of_2", "utf8_first_of_3", "utf8_first_of_4",
                 "utf8_continuation", "utf8_continuation_strict"]


def detector_members(name):
    cls = chardata.UTF8_CLUES[name]
    return {cp for cp in range(0x10000) if re.match("[%s]" % cls, chr(cp))}


def special_chars(kind_of):
    """Non-ASCII code points that any fixer or heuristic of ftfy looks at."""
    flags = {}
    for bit, name in enumerate(DETECTOR_SETS):
        for cp in detector_members(name):
            flags[cp] = flags.get(cp, 0) | (1 << bit)
    special = set(cp for cp in kind_of if cp >= 0x80) | set(flags)
    special |= set(range(0x80, 0xA0))
    special |= set(chardata.LIGATURES) | set(chardata.WIDTH_MAP)
    special |= {cp for cp in range(0x80, 0x10000)
                if chardata.SINGLE_QUOTE_RE.match(chr(cp)) or chardata.DOUBLE_QUOTE_RE.match(chr(cp))}
    special |= {0x85, 0x2028, 0x2029}
    special |= {cp for cp in chardata.CONTROL_CHARS if cp >= 0x80}
    assert all(cp < 0x10000 for cp in special)
    return sorted(special), flags


def decode_table(encoding):
    if encoding.startswith("sloppy-"):
        return [ord(c) for c in bytes(range(256)).decode(encoding)]
    return [ord(c) for c in bytes(range(256)).decode(encoding)]


def check_decode_tables():
    """The encodable characters of each encoding are the image of its table."""
    for enc in chardata.CHARMAP_ENCODINGS:
        table = decode_table(enc)
        assert len(set(table)) == 256, enc
        for b, cp in enumerate(table):
            if b != 0x1A or not enc.startswith("sloppy"):
                assert chr(cp).encode(enc) == bytes([b]), (enc, b)
        pattern = chardata.ENCODING_REGEXES[enc]
        for cp in range(0x10000):
            if 0xD800 <= cp < 0xE000:
                continue
            assert bool(pattern.match(chr(cp))) == (cp in table), (enc, cp)


# ---------------------------------------------------------------------------

def emit(kind_of, other, signature_kind, branches, classes):
    print("// Generated by scripts/gen_ftfy_tables.py from ftfy %s and Python %s (Unicode %s)."
          % (ftfy.__version__, sys.version.split()[0], unicodedata.unidata_version))
    print("// Do not edit.")
    print('#include "src/ops/ftfy/ftfy_tables.h"')
    print()
    print("#include <iterator>")
    print()
    print("namespace djshard::ops::ftfy {")
    print()
    encs = chardata.CHARMAP_ENCODINGS
    assert len(encs) == 10
    print("const Charmap kCharmaps[] = {")
    for enc in encs:
        table = decode_table(enc)
        print("    {%s, %s, {" % (c_string(enc), "true" if enc.startswith("sloppy") else "false"))
        for i in range(0, 256, 8):
            print("        " + " ".join("0x%04X," % cp for cp in table[i:i + 8]))
        print("    }},")
    print("};")
    print()

    special, detector = special_chars(kind_of)
    print("const SpecialChar kSpecialChars[] = {")
    for cp in special:
        s, w = is_space(cp), is_word(cp)
        kind = kind_of.get(cp, other[(s, w)])
        print("    {0x%04X, %d, 0x%02X}," % (cp, kind, detector.get(cp, 0)))
    print("};")
    print("const size_t kSpecialCharsSize = std::size(kSpecialChars);")
    print()
    print("const uint8_t kAsciiBadnessKind[128] = {")
    for i in range(0, 128, 16):
        print("    " + " ".join("%d," % kind_of[cp] for cp in range(i, i + 16)))
    print("};")
    print("const uint8_t kOtherBadnessKind[4] = {%s};"
          % ", ".join(str(other[(s, w)]) for s in (False, True) for w in (False, True)))
    print()
    nkinds = len(signature_kind)
    assert nkinds <= 256, nkinds
    print("const size_t kNumBadnessKinds = %d;" % nkinds)
    print("const KindSet kBadnessClasses[] = {")
    for cls_index in range(len(classes)):
        words = [0, 0, 0, 0]
        for sig, kind in signature_kind.items():
            if sig[cls_index]:
                words[kind // 64] |= 1 << (kind % 64)
        print("    {{%s}}," % ", ".join("0x%XULL" % w for w in words))
    print("};")
    print()
    print("const BadnessItem kBadnessItems[] = {")
    item_index = 0
    branch_rows = []
    class_ids = {id(c): i for i, c in enumerate(classes)}
    for branch in branches:
        branch_rows.append((item_index, len(branch)))
        for kind, cls in branch:
            code = {"class": "BadnessItem::kClass", "optional": "BadnessItem::kOptional",
                    "bol": "BadnessItem::kBeginning"}[kind]
            print("    {%s, %d}," % (code, class_ids[id(cls)] if cls is not None else 0))
            item_index += 1
    print("};")
    print("const BadnessBranch kBadnessBranches[] = {")
    for first, count in branch_rows:
        print("    {%d, %d}," % (first, count))
    print("};")
    print("const size_t kBadnessBranchesSize = std::size(kBadnessBranches);")
    print()

    entities = sorted(chardata.HTML_ENTITIES.items())
    print("const HtmlEntity kHtmlEntities[] = {")
    for name, value in entities:
        print("    {%s, %s}," % (c_string(name), c_string(value)))
    print("};")
    print("const size_t kHtmlEntitiesSize = std::size(kHtmlEntities);")
    print()
    print("const CharRef kInvalidCharRefs[] = {")
    for num, value in sorted(html._invalid_charrefs.items()):
        assert len(value) == 1
        print("    {0x%X, 0x%X}," % (num, ord(value)))
    print("};")
    print("const size_t kInvalidCharRefsSize = std::size(kInvalidCharRefs);")
    print("const uint32_t kInvalidCodePoints[] = {")
    cps = sorted(html._invalid_codepoints)
    for i in range(0, len(cps), 8):
        print("    " + " ".join("0x%X," % cp for cp in cps[i:i + 8]))
    print("};")
    print("const size_t kInvalidCodePointsSize = std::size(kInvalidCodePoints);")
    print()
    for name, table in (("kLigatures", chardata.LIGATURES), ("kWidthMap", chardata.WIDTH_MAP)):
        print("const Replacement %s[] = {" % name)
        for cp, value in sorted(table.items()):
            print("    {0x%04X, %s}," % (cp, c_string(value)))
        print("};")
        print("const size_t %sSize = std::size(%s);" % (name, name))
        print()
    digits = [cp for cp in ALL if not 0xD800 <= cp < 0xE000 and re.match(r"\d", chr(cp))]
    runs = []
    for cp in digits:
        if runs and runs[-1][1] + 1 == cp:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    print("const unicode::CodePointRange kDecimalDigits[] = {")
    for lo, hi in runs:
        print("    {0x%X, 0x%X}," % (lo, hi))
    print("};")
    print("const size_t kDecimalDigitsSize = std::size(kDecimalDigits);")
    print()
    print("}  // namespace djshard::ops::ftfy")


def main():
    check_decode_tables()
    branches = badness_branches()
    classes = [cls for branch in branches for kind, cls in branch if cls is not None]
    kind_of, other, signature_kind = badness_kinds(classes)
    # djshard skips the regex for text without special characters: each branch
    # needs one (a class of only explicit non-ASCII code points).
    for branch in branches:
        assert any(kind == "class" and not (cls.negate or cls.space or cls.word)
                   and min(cls.explicit) >= 0x80 for kind, cls in branch), branch
    assert len(branches) <= 64
    emit(kind_of, other, signature_kind, branches, classes)


if __name__ == "__main__":
    main()
