// Fuzzes the deduplicators' per-record signatures against their definitions.
// For any valid UTF-8 text (after a byte choosing the window, 1 to 8, and a
// byte choosing space, punctuation or character tokens):
// - document_simhash_deduplicator's simhash is the per-bit vote over the MD5
//   prefixes of the shingles Data-Juicer builds: str.lower(), then the text
//   split on ' ' with empty pieces dropped, or at each \p{P} (the table of
//   src/ops/dedup/dedup_tables.h, ASCII listed here) with empty pieces kept,
//   and `window` pieces joined by one space; or windows of `window` code
//   points;
// - document_minhash_deduplicator's values (16 permutations) are the minima
//   over the set of the shingles' SHA-1 prefixes under each permutation, and
//   a text without shingles is refused;
// with the CPU's kernels and with the portable ones alike.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/ops/dedup.h"
#include "djshard/ops/text.h"
#include "djshard/recipe/recipe.h"
#include "src/model/tokenizer/components.h"
#include "src/ops/dedup/dedup_tables.h"
#include "src/ops/dedup/hashes.h"

namespace {

using namespace djshard::ops;

dedup::DedupConfig Config(const std::string& op, const std::string& yaml) {
  return dedup::ParseDedupConfig(op,
                                 djshard::recipe::OperatorArgs(YAML::Load(yaml), "fuzz", op, 1));
}

enum Tokens { kSpace, kPunctuation, kCharacter };
const char* const kTokenNames[] = {"space", "punctuation", "character"};

// The configurations, made once: [window - 1][tokens].
struct Configs {
  std::unique_ptr<dedup::DedupConfig> simhash[8][3], minhash[8][3];
  Configs() {
    for (int w = 1; w <= 8; ++w) {
      for (int c = 0; c < 3; ++c) {
        const std::string args =
            "{window_size: " + std::to_string(w) + ", tokenization: " + kTokenNames[c];
        simhash[w - 1][c] = std::make_unique<dedup::DedupConfig>(
            Config("document_simhash_deduplicator", args + "}"));
        minhash[w - 1][c] = std::make_unique<dedup::DedupConfig>(
            Config("document_minhash_deduplicator", args + ", num_permutations: 16}"));
      }
    }
  }
};

bool IsPunctuation(uint32_t cp) {
  if (cp < 0x80)
    return cp != 0 && std::string_view("!\"#%&'()*,-./:;?@[\\]_{}").find(static_cast<char>(cp)) !=
                          std::string_view::npos;
  for (size_t i = 0; i < dedup::kRegexPunctuationSize; ++i) {
    if (cp >= dedup::kRegexPunctuation[i].lo && cp <= dedup::kRegexPunctuation[i].hi) return true;
  }
  return false;
}

std::vector<std::string> Shingles(std::string_view text, Tokens tokens, size_t w) {
  std::vector<std::string> pieces, out;
  if (tokens == kCharacter) {
    for (size_t i = 0; i < text.size(); i += text::SequenceLength(text[i])) {
      pieces.emplace_back(text.substr(i, text::SequenceLength(text[i])));
    }
  } else if (tokens == kPunctuation) {
    std::string piece;
    for (size_t i = 0; i < text.size();) {
      const size_t at = i;
      if (IsPunctuation(text::NextCodePoint(text, &i))) {
        pieces.push_back(piece);
        piece.clear();
      } else {
        piece.append(text.substr(at, i - at));
      }
    }
    pieces.push_back(piece);
  } else {
    for (size_t i = 0; i <= text.size();) {
      size_t j = text.find(' ', i);
      if (j == std::string_view::npos) j = text.size();
      if (j > i) pieces.emplace_back(text.substr(i, j - i));
      i = j + 1;
    }
  }
  for (size_t k = 0; k + w <= pieces.size(); ++k) {
    std::string s;
    for (size_t j = k; j < k + w; ++j) {
      if (tokens != kCharacter && j > k) s.push_back(' ');
      s += pieces[j];
    }
    out.push_back(std::move(s));
  }
  return out;
}

void Fail(const char* what) {
  std::fprintf(stderr, "%s differs from its definition\n", what);
  std::abort();
}

void Check(const Configs& configs, std::string_view text, size_t w, Tokens tokens) {
  const std::vector<std::string> shingles = Shingles(text::Lower(text), tokens, w);
  // simhash
  int64_t ones[64] = {};
  for (const std::string& s : shingles) {
    const uint64_t h = dedup::Md5High64(s);
    for (int b = 0; b < 64; ++b) ones[b] += static_cast<int64_t>((h >> b) & 1);
  }
  uint64_t want = 0;
  for (int b = 0; b < 64; ++b) {
    if (2 * ones[b] > static_cast<int64_t>(shingles.size())) want |= uint64_t{1} << b;
  }
  const dedup::DedupConfig& sc = *configs.simhash[w - 1][tokens];
  const dedup::DedupConfig& mc = *configs.minhash[w - 1][tokens];
  dedup::Signature sig;
  std::string error;
  dedup::Signer simhash(sc);
  if (!simhash.Sign(dedup::TextValue::String(text), &sig, &error) || sig.simhash != want) {
    Fail("simhash");
  }
  // minhash
  std::set<uint32_t> hashes;
  for (const std::string& s : shingles) hashes.insert(dedup::Sha1Low32Scalar(s));
  std::vector<uint32_t> minima(mc.perm_a.size(), UINT32_MAX);
  for (size_t j = 0; j < minima.size(); ++j) {
    for (const uint32_t hv : hashes) {
      const uint64_t x = (uint64_t{hv} * mc.perm_a[j] + mc.perm_b[j]) % ((uint64_t{1} << 61) - 1);
      minima[j] = std::min(minima[j], static_cast<uint32_t>(x & 0xFFFFFFFFu));
    }
  }
  dedup::Signer minhash(mc);
  const bool ok = minhash.Sign(dedup::TextValue::String(text), &sig, &error);
  if (ok != !shingles.empty() || (ok && sig.minhash != minima)) Fail("minhash");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Configs configs;
  if (size < 2) return 0;
  const size_t w = 1 + data[0] % 8;
  const auto tokens = static_cast<Tokens>(data[1] % 3);
  const std::string_view text(reinterpret_cast<const char*>(data) + 2, size - 2);
  if (!djshard::model::tokenizer::IsValidUtf8(text)) return 0;
  dedup::UsePortableKernelsOnly(false);
  Check(configs, text, w, tokens);
  dedup::UsePortableKernelsOnly(true);
  Check(configs, text, w, tokens);
  return 0;
}
