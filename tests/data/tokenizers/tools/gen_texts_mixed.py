import json, random, sys
random.seed(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
pools = {
 'latin': "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
 'digits': "0123456789",
 'punct': "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~—–…«»“”‘’·¡¿",
 'space': " \t\n\r\u00a0\u2003\u3000\u2028\u0085\u200b\u200d\ufeff\u000b\u000c",
 'accent': "éèêëàâäçñöüÅÆØøßİıŞğœ\u0301\u0300\u0308\u0323\u0302\u0327\u0338\u20dd\u05b8\u0e49",
 'cjk': "的一是不了人我在有他这中大来上国个到说们日本語東京한국어ひらがなカタカナ",
 'other': "ΣΊΣΥΦΟΣαβγпривет中文עבריתالعربيةहिन्दीไทย각가각ﬁﬂ①②Ⅻ½²ｆｕｌｌ",
 'emoji': "😀🧑🏾‍💻👨‍👩‍👧‍👦🤣✨🥲🇯🇵❤️\U0001F979\U0001FAE0",
 'ctrl': "\u0000\u0001\u001b\u007f\u0080\u009f\u00ad\u200e\u2066\ue000\U000F0000\ufffd",
 'special': ["<s>", "</s>", "<mask>", "[CLS]", "[SEP]", "[MASK]", "[UNK]", "<|endoftext|>", "<|startoftext|>", "<|STARTOFTEXT|>", "<|im_start|>", "<think>", "</think>", "<unk>", "<extra_id_0>", "<pad>", " <mask> ", "``", "''", "'s", "'LL", "'re", "'Ve", "http://x.org/a?b=1"],
}
def word():
    k = random.choice(list(pools))
    if k == 'special':
        return random.choice(pools['special'])
    n = random.choice([1, 1, 2, 3, 5, 8, 13, 40, 101, 150])
    return ''.join(random.choice(pools[k]) for _ in range(n))
def text():
    n = random.choice([0, 1, 2, 3, 5, 10, 30])
    out = ''
    for _ in range(n):
        out += word() + random.choice(['', ' ', ' ', '  ', '\t', '\n', ' \n ', '\u3000'])
    return out
for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3000):
    r = {"text": text()}
    if random.random() < 0.2: r["pair"] = text()
    print(json.dumps(r, ensure_ascii=False))
