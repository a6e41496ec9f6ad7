// One-thread throughput of Hugging Face's tokenizers (Rust, through its Node
// binding) on the same corpus as djshard_tokenizer_bench; writes the ids the
// same way. Run with RAYON_NUM_THREADS=1 TOKENIZERS_PARALLELISM=false. Each
// pass loads the tokenizer again (untimed): every pass starts with an empty
// word cache, as djshard_tokenizer_bench's do.
//   node tokenizer_bench.js TOKENIZER.json CORPUS.jsonl IDS_OUT [REPEATS]
const fs = require('fs');
const { Tokenizer } = require('tokenizers');

async function main() {
  const [tokPath, corpus, idsOut, repeatsArg] = process.argv.slice(2);
  const texts = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l.length > 0)
    .map((l) => JSON.parse(l).text);
  const bytes = texts.reduce((n, t) => n + Buffer.byteLength(t, 'utf8'), 0);
  const repeats = Number(repeatsArg || 1);
  const chunk = 256;
  let best = Infinity;
  let lines = null;
  for (let r = 0; r < repeats; r++) {
    const tok = Tokenizer.fromFile(tokPath);
    let seconds = 0;
    const out = [];
    for (let i = 0; i < texts.length; i += chunk) {
      const part = texts.slice(i, i + chunk);
      const t0 = process.hrtime.bigint();
      const encs = await tok.encodeBatch(part, { addSpecialTokens: true });
      seconds += Number(process.hrtime.bigint() - t0) / 1e9;
      for (const e of encs) out.push(e.getIds().join(' '));
    }
    if (seconds < best) best = seconds;
    lines = out;
  }
  fs.writeFileSync(idsOut, lines.join('\n') + '\n');
  const mb = bytes / 1e6;
  console.log(`rows=${texts.length} mb=${mb.toFixed(1)} seconds=${best.toFixed(3)} ` +
              `mb_per_s=${(mb / best).toFixed(2)} rows_per_s=${(texts.length / best).toFixed(0)}`);
}
main().catch((e) => { console.error(e); process.exit(2); });
