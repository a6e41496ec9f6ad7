"""Random Unicode stress texts (combining-mark stacks, jamo, compatibility
characters, code points assigned in Unicode 9.0 to 17.0, random code points,
special tokens): python3 gen_texts_unicode.py > texts.jsonl (seed 11)."""
import json, random, unicodedata
random.seed(11)
marks = [chr(c) for c in list(range(0x300, 0x370)) + [0x1AB0, 0x1DC0, 0x20D0, 0x302A, 0x3099, 0x309A, 0x0E31, 0x0E48, 0x0F71, 0x0F72, 0x0F80, 0x05B0, 0x0651, 0x064B]]
bases = list("aeiouAEIOUnNcCsSzZyYkK") + ["\u1100", "\u1161", "\u11a8", "\uac00", "\u3131", "\u0e01", "\u0f40", "\u05d0", "\u0627"]
compat = [chr(c) for c in [0xFB01, 0xFB02, 0x2460, 0x2167, 0x00BD, 0x00B2, 0xFF21, 0xFF41, 0x3000, 0x2126, 0x212B, 0x1E9B, 0x03D3, 0x0344, 0x0F77, 0x2F00, 0x32A4, 0x33C2, 0x1D400, 0x1D7D8, 0xFE30, 0x2474]]
newer = [chr(c) for c in [0x09FD, 0x0D04, 0x0C77, 0x0870, 0x0890, 0x08E2, 0x1B7D, 0x1E94B, 0x11A00, 0x1F979, 0x1FAF8, 0x10EAD, 0x1E2FF, 0x13430, 0x110CD, 0x2E52, 0x2E5D, 0x061D, 0x0C5D, 0x1734, 0x16FE4, 0x1CF00, 0x0897, 0x2FFC, 0x31E4]]
def rnd_cp():
    while True:
        c = random.randint(0x20, 0x2FFFF)
        if 0xD800 <= c <= 0xDFFF: continue
        return chr(c)
def piece():
    k = random.random()
    if k < 0.3:
        return random.choice(bases) + ''.join(random.choice(marks) for _ in range(random.randint(1, 4)))
    if k < 0.45: return random.choice(compat)
    if k < 0.6: return random.choice(newer)
    if k < 0.75: return rnd_cp()
    if k < 0.9: return random.choice(["hello", "World", "İstanbul", "'s", " ", "  ", "\t", "\n", "123", "don't", "<s>", "[CLS]", "<mask>", "``quote''"])
    return unicodedata.normalize(random.choice(["NFD", "NFKD"]), random.choice(["é", "ǖ", "ệ", "Å", "ﬁ", "가", "ḯ", "ǻ"]))
for i in range(6000):
    t = ''.join(piece() for _ in range(random.choice([1, 2, 5, 10, 30])))
    r = {"text": t}
    if random.random() < 0.15: r["pair"] = ''.join(piece() for _ in range(random.choice([1, 5, 10])))
    print(json.dumps(r, ensure_ascii=False))
