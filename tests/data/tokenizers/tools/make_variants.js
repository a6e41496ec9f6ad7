// Encodes texts with variants of the shared tokenizer files (tests/data/tokenizers/variants.json)
// through Hugging Face's tokenizers: one vectors line per variant and text, special tokens added.
//   node make_variants.js DATA_DIR variants.json texts.jsonl > variants.jsonl
const fs = require('fs');
const { execFileSync } = require('child_process');
const { Tokenizer } = require('tokenizers');
function esc(s) {
  return JSON.stringify(s).replace(/[\u007f-\u009f\u2028\u2029]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
// The "@..." patches djshard's test applies the same way (tokenizer_test.cc).
function patched(base, patch) {
  const j = JSON.parse(JSON.stringify(base));
  for (const [k, v] of Object.entries(patch)) {
    if (v === '@wordlevel') {
      j.model = { type: 'WordLevel', vocab: base.model.vocab, unk_token: '[UNK]' };
    } else if (v === '@added_flags') {
      j.added_tokens.push({ id: base.model.vocab.hello, content: 'hello', single_word: true,
        lstrip: true, rstrip: true, normalized: true, special: false });
      j.added_tokens.push({ id: base.model.vocab.ing, content: 'ing', single_word: false,
        lstrip: false, rstrip: true, normalized: false, special: true });
    } else {
      j[k] = v;
    }
  }
  return j;
}
async function main() {
  const [dataDir, variantsPath, textsPath] = process.argv.slice(2);
  const variants = JSON.parse(fs.readFileSync(variantsPath, 'utf8'));
  const texts = fs.readFileSync(textsPath, 'utf8').split('\n').filter((l) => l).map(JSON.parse);
  const out = [];
  for (const v of variants) {
    const base = JSON.parse(execFileSync('zstd', ['-dc', `${dataDir}/${v.base}/tokenizer.json.zst`],
      { maxBuffer: 1 << 26 }).toString());
    const tok = Tokenizer.fromString(JSON.stringify(patched(base, v.patch)));
    for (const r of texts) {
      const pair = r.pair === undefined ? null : r.pair;
      const e = await tok.encode(r.text, pair, { addSpecialTokens: true });
      out.push('{"variant":' + JSON.stringify(v.variant) + ',"text":' + esc(r.text) + ',"pair":' +
        (pair === null ? 'null' : esc(pair)) + ',"add_special_tokens":true,"ids":' +
        JSON.stringify(e.getIds()) + ',"tokens":[' + e.getTokens().map(esc).join(',') +
        '],"type_ids":' + JSON.stringify(e.getTypeIds()) + ',"offsets":' +
        JSON.stringify(e.getOffsets()) + ',"special_tokens_mask":' +
        JSON.stringify(e.getSpecialTokensMask()) + '}');
    }
  }
  fs.writeFileSync(1, out.join('\n') + '\n');
}
main().catch((e) => { console.error(e); process.exit(2); });
