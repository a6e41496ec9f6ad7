// Writes vectors in the shared layout for the texts of a JSONL file.
const fs = require('fs');
const { Tokenizer } = require('tokenizers');
function esc(s) {
  return JSON.stringify(s).replace(/[\u007f-\u009f\u2028\u2029]/g,
    (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'));
}
async function main() {
  const [tokPath, input] = process.argv.slice(2);
  const tok = Tokenizer.fromFile(tokPath);
  const lines = fs.readFileSync(input, 'utf8').split('\n').filter((l) => l.length > 0);
  const out = [];
  for (const l of lines) {
    const r = JSON.parse(l);
    const pair = r.pair === undefined ? null : r.pair;
    for (const special of [true, false]) {
      const e = await tok.encode(r.text, pair, { addSpecialTokens: special });
      out.push('{"text":' + esc(r.text) + ',"pair":' + (pair === null ? 'null' : esc(pair)) +
        ',"add_special_tokens":' + special +
        ',"ids":' + JSON.stringify(e.getIds()) + ',"tokens":[' + e.getTokens().map(esc).join(',') +
        '],"type_ids":' + JSON.stringify(e.getTypeIds()) + ',"offsets":' + JSON.stringify(e.getOffsets()) +
        ',"special_tokens_mask":' + JSON.stringify(e.getSpecialTokensMask()) + '}');
    }
  }
  fs.writeFileSync(1, out.join('\n') + '\n');
}
main().catch((e) => { console.error(e); process.exit(2); });
