// Per-record signatures, as Data-Juicer's compute_hash computes them: the text
// preprocessing (lower(), the ignore pattern or the non-character removal,
// strip()), the tokenization and shingles, and the hashes over them.
#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <iterator>
#include <nlohmann/json.hpp>

#include "djshard/model/sentencepiece.h"
#include "djshard/ops/dedup.h"
#include "djshard/ops/sample.h"
#include "djshard/ops/text.h"
#include "src/ops/code_point_set.h"
#include "src/ops/dedup/dedup_tables.h"
#include "src/ops/dedup/hashes.h"
#include "src/ops/dedup/minhash_kernel.h"
#include "src/ops/regex.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace djshard::ops::dedup {
namespace {

// \p{P} (the regex module's, Unicode 14): ASCII's are listed here
// (!"#%&'()*,-./:;?@[\]_{}, not $+<=>^`|~, which are symbols).
bool IsRegexPunctuation(uint32_t cp) {
  if (cp < 0x80) {
    return cp != 0 && std::string_view("!\"#%&'()*,-./:;?@[\\]_{}").find(static_cast<char>(cp)) !=
                          std::string_view::npos;
  }
  static const CodePointSet set(kRegexPunctuation, kRegexPunctuationSize);
  return set.Contains(cp);
}

// document_deduplicator's ignore_non_character: \s+|\d+|[string.punctuation].
bool IsAsciiNonCharacter(unsigned char c) {
  return (c >= 0x09 && c <= 0x0D) || c == ' ' || (c >= '0' && c <= '9') ||
         (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) ||
         (c >= 0x7B && c <= 0x7E);
}

// The same beyond ASCII: \s and \d.
bool IsNonCharacter(uint32_t cp) {
  if (cp < 0x80) return IsAsciiNonCharacter(static_cast<unsigned char>(cp));
  static const CodePointSet space(kRegexSpace, kRegexSpaceSize);
  static const CodePointSet digit(kRegexDigit, kRegexDigitSize);
  return space.Contains(cp) || digit.Contains(cp);
}

const char* TypeName(TextValue::Type t) {
  switch (t) {
    case TextValue::Type::kNull:
      return "null";
    case TextValue::Type::kBool:
      return "a boolean";
    case TextValue::Type::kNumber:
      return "a number";
    case TextValue::Type::kArray:
      return "an array";
    case TextValue::Type::kObject:
      return "an object";
    default:
      return "a string";
  }
}

}  // namespace

namespace {

// Bit k set where p[k] is a space, for the 64 bytes at p.
uint64_t SpaceMask64(const char* p) {
  uint64_t mask = 0;
#ifdef __SSE2__
  const __m128i space = _mm_set1_epi8(' ');
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const auto bits = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(v, space)));
    mask |= static_cast<uint64_t>(bits) << (16 * k);
  }
#else
  for (int k = 0; k < 64; ++k) mask |= static_cast<uint64_t>(p[k] == ' ') << k;
#endif
  return mask;
}

// Data-Juicer's split_on_whitespace: the [begin, end) of each piece of `text`
// split on ' ', empty pieces dropped. Found 64 bytes at a time, as the bits
// where a space follows a non-space or the other way round.
void SplitOnSpaces(std::string_view text, std::vector<std::pair<uint32_t, uint32_t>>* words) {
  words->clear();
  uint64_t space_before = 1;  // a non-space first byte starts a word
  uint32_t start = 0;
  bool in_word = false;
  for (size_t base = 0; base < text.size(); base += 64) {
    const size_t left = text.size() - base;
    uint64_t spaces;
    if (left >= 64) {
      spaces = SpaceMask64(text.data() + base);
    } else {
      spaces = ~uint64_t{0} << left;  // past the end reads as spaces
      for (size_t k = 0; k < left; ++k) spaces |= static_cast<uint64_t>(text[base + k] == ' ') << k;
    }
    uint64_t edges = spaces ^ ((spaces << 1) | space_before);
    space_before = spaces >> 63;
    while (edges != 0) {
      const auto at = static_cast<uint32_t>(base + static_cast<size_t>(__builtin_ctzll(edges)));
      edges &= edges - 1;
      if (in_word) {
        words->emplace_back(start, at);
      } else {
        start = at;
      }
      in_word = !in_word;
    }
  }
  if (in_word) words->emplace_back(start, static_cast<uint32_t>(text.size()));
}

// `text` with the `words` found in it one space apart: `text` itself when
// they are, else a copy in *out, each run of words that are one space apart
// moved at once; the words' offsets are moved with them.
std::string_view OneSpaceApart(std::string_view text,
                               std::vector<std::pair<uint32_t, uint32_t>>* words,
                               std::string* out) {
  auto& ws = *words;
  size_t k = 0;
  while (k + 1 < ws.size() && ws[k + 1].first - ws[k].second == 1) ++k;
  if (k + 1 >= ws.size()) return text;
  out->clear();
  size_t run = 0;  // the first word of the run being moved
  for (k = 0; k < ws.size(); ++k) {
    if (k + 1 < ws.size() && ws[k + 1].first - ws[k].second == 1) continue;
    if (!out->empty()) out->push_back(' ');
    const auto to = static_cast<uint32_t>(out->size());
    const uint32_t from = ws[run].first;
    out->append(text.data() + from, ws[k].second - from);
    for (size_t j = run; j <= k; ++j) {
      ws[j].first = ws[j].first - from + to;
      ws[j].second = ws[j].second - from + to;
    }
    run = k + 1;
  }
  return *out;
}

// Calls f(shingle) for each shingle of `text` (Data-Juicer's list, in order,
// repeats included): windows of `w` code points (character), of `w` tokens
// split on ' ' (space) or at each \p{P} (punctuation) joined by ' ', or of
// `w` SentencePiece pieces concatenated.
template <typename F>
void ForEachShingle(const DedupConfig& c, std::string_view text, std::string* shingle,
                    std::string* spaced, std::vector<uint32_t>* offsets,
                    std::vector<std::pair<uint32_t, uint32_t>>* words,
                    model::SentencePieceScratch* pieces, F&& f) {
  const size_t w = static_cast<size_t>(c.window_size);
  if (c.tokenization == Tokenization::kCharacter) {
    offsets->clear();
    for (size_t i = 0; i < text.size(); i += text::SequenceLength(text[i])) {
      offsets->push_back(static_cast<uint32_t>(i));
    }
    offsets->push_back(static_cast<uint32_t>(text.size()));
    const size_t n = offsets->size() - 1;
    for (size_t i = 0; i + w <= n; ++i) {
      f(text.substr((*offsets)[i], (*offsets)[i + w] - (*offsets)[i]));
    }
    return;
  }
  if (c.tokenization == Tokenization::kSentencePiece) {
    const std::vector<std::string_view>& encoded = c.tokenizer->Encode(text, pieces);
    // Pieces that follow each other in one buffer (djshard's encoder's, in
    // its normalized text) make each shingle a slice of that buffer.
    bool adjacent = true;
    for (size_t j = 1; adjacent && j < encoded.size(); ++j) {
      adjacent = encoded[j - 1].data() + encoded[j - 1].size() == encoded[j].data();
    }
    for (size_t i = 0; i + w <= encoded.size(); ++i) {
      if (adjacent) {
        const std::string_view last = encoded[i + w - 1];
        f(std::string_view(encoded[i].data(),
                           static_cast<size_t>(last.data() + last.size() - encoded[i].data())));
        continue;
      }
      shingle->clear();
      for (size_t j = i; j < i + w; ++j) shingle->append(encoded[j]);
      f(std::string_view(*shingle));
    }
    return;
  }
  words->clear();
  if (c.tokenization == Tokenization::kPunctuation) {
    // regex.split(r"\p{P}", text), empty pieces kept: the text is copied with
    // each \p{P} made one space, so that pieces joined by ' ' are a slice.
    static const std::array<bool, 128> kAscii = [] {
      std::array<bool, 128> t{};
      for (uint32_t c = 0; c < 128; ++c) t[c] = IsRegexPunctuation(c);
      return t;
    }();
    spaced->clear();
    size_t run = 0;  // the first byte of text not yet in *spaced
    uint32_t start = 0;
    for (size_t i = 0; i < text.size();) {
      const size_t at = i;
      const auto b = static_cast<unsigned char>(text[i]);
      const bool split = b < 0x80 ? kAscii[b] : IsRegexPunctuation(text::NextCodePoint(text, &i));
      if (b < 0x80) ++i;
      if (!split) continue;
      spaced->append(text.data() + run, at - run);
      words->emplace_back(start, static_cast<uint32_t>(spaced->size()));
      spaced->push_back(' ');
      start = static_cast<uint32_t>(spaced->size());
      run = i;
    }
    spaced->append(text.data() + run, text.size() - run);
    words->emplace_back(start, static_cast<uint32_t>(spaced->size()));
    text = *spaced;
  } else {
    SplitOnSpaces(text, words);
    text = OneSpaceApart(text, words, spaced);
  }
  // The pieces, one space apart: each shingle is a slice.
  const auto& ws = *words;
  for (size_t i = 0; i + w <= ws.size(); ++i) {
    f(text.substr(ws[i].first, ws[i + w - 1].second - ws[i].first));
  }
}

// Python's str.lower() into *out (text::LowerInto), as a view.
std::string_view LowerInto(std::string_view s, std::string* out) {
  text::LowerInto(s, out);
  return *out;
}

// Why a non-string text fails in compute_hash; "" when it does not fail (a
// list or dict shorter than the window under character tokenization without
// lower() or an ignore pattern has no shingles at all).
std::string NonStringError(const DedupConfig& c, const TextValue& v) {
  const std::string what =
      "the text field '" + c.text_key + "' is " + TypeName(v.type) + ", not a string";
  const bool sized = v.type == TextValue::Type::kArray || v.type == TextValue::Type::kObject;
  if (c.kind != Kind::kExact && !c.lowercase && !c.ignore_pattern &&
      c.tokenization == Tokenization::kCharacter && sized &&
      v.length < static_cast<size_t>(c.window_size)) {
    return "";
  }
  return what;
}

// Up to 16 shingles waiting to be hashed together. A shingle that is a slice
// of the text is kept as a view; one built in the caller's scratch buffer is
// copied.
class ShingleBatch {
 public:
  static constexpr size_t kSize = 16;
  // Adds a shingle (`stable`: the view outlives the batch); returns whether
  // the batch is full.
  bool Add(std::string_view shingle, bool stable) {
    if (!stable) {
      if (shingle.size() <= sizeof slots_[0]) {
        std::memcpy(slots_[n_], shingle.data(), shingle.size());
        shingle = std::string_view(slots_[n_], shingle.size());
      } else {
        overflow_.emplace_back(shingle);
        shingle = overflow_.back();
      }
    }
    views_[n_++] = shingle;
    return n_ == kSize;
  }
  const std::string_view* views() const { return views_; }
  size_t size() const { return n_; }
  void Clear() {
    n_ = 0;
    overflow_.clear();
  }

 private:
  std::string_view views_[kSize];
  char slots_[kSize][248];
  std::deque<std::string> overflow_;  // copies of the rare longer ones
  size_t n_ = 0;
};

// Shingles waiting to be hashed, in batches by their MD5 / SHA-1 block count
// (1, 2, 3, 4, 5-8, more), so that the lanes of a batch take about as many
// passes. The hashes of a record are summed (simhash) or reduced by min
// (minhash): their order does not matter.
class ShingleBatches {
 public:
  // Adds a shingle; calls flush(batch) when its batch is full.
  template <typename Flush>
  void Add(std::string_view shingle, bool stable, Flush&& flush) {
    const size_t blocks = (shingle.size() + 9 + 63) / 64;
    ShingleBatch& batch = batches_[blocks <= 4 ? blocks - 1 : blocks <= 8 ? 4 : 5];
    if (batch.Add(shingle, stable)) FlushBatch(batch, flush);
  }
  // Calls flush for what is left.
  template <typename Flush>
  void Finish(Flush&& flush) {
    for (ShingleBatch& batch : batches_) {
      if (batch.size() > 0) FlushBatch(batch, flush);
    }
  }

 private:
  template <typename F>
  static void FlushBatch(ShingleBatch& batch, F& flush) {
    flush(batch);
    batch.Clear();
  }
  ShingleBatch batches_[6];
};

// simhash-cpp's compute over unsigned_hash of each shingle: per bit, +1 for
// a shingle whose hash has it set, -1 otherwise; the bit is set when the sum
// is positive. Reused across records (Start).
class SimhashCounts {
 public:
  void Start() {
    std::fill(std::begin(ones_), std::end(ones_), 0);
    total_ = 0;
  }
  void Add(std::string_view shingle, bool stable) {
    batches_.Add(shingle, stable, [this](const ShingleBatch& b) { Count(b); });
  }
  uint64_t Finish() {
    batches_.Finish([this](const ShingleBatch& b) { Count(b); });
    uint64_t result = 0;
    for (int b = 0; b < 64; ++b) {
      if (2 * ones_[b] > total_) result |= uint64_t{1} << b;
    }
    return result;
  }

 private:
  void Count(const ShingleBatch& batch) {
    uint64_t hashes[ShingleBatch::kSize];
    Md5High64Batch(batch.views(), batch.size(), hashes);
    CountBits(hashes, batch.size(), ones_);
    total_ += static_cast<int64_t>(batch.size());
  }
  ShingleBatches batches_;
  int64_t ones_[64] = {};
  int64_t total_ = 0;
};

// RayBasicDeduplicator's EMPTY_HASH_VALUE: an exact key for a falsy or empty text.
bool IsRayEmpty(const DedupConfig& c, const TextValue& value) {
  return c.kind == Kind::kExact && c.ray &&
         (value.type == TextValue::Type::kMissing || value.type == TextValue::Type::kNull ||
          value.falsy || (value.type == TextValue::Type::kString && value.text.empty()) ||
          ((value.type == TextValue::Type::kArray || value.type == TextValue::Type::kObject) &&
           value.length == 0));
}

// Signer::Sign for a value without a text to sign: a missing text field,
// Ray's empty key, or a text field that is not a string.
bool SignWithoutText(const DedupConfig& c, const TextValue& value, Signature* out,
                     std::string* error) {
  if (value.type == TextValue::Type::kMissing && !(c.ray && c.kind == Kind::kExact)) {
    *error = "the record has no text field '" + c.text_key + "'";
    return false;
  }
  if (IsRayEmpty(c, value)) {
    out->empty_marker = true;  // RayBasicDeduplicator.EMPTY_HASH_VALUE
    return true;
  }
  *error = NonStringError(c, value);
  if (!error->empty()) return false;
  // no shingles: simhash 0, or ray_bts's key for a text without shingles
  if (c.kind == Kind::kSimhash) {
    out->simhash = 0;
    return true;
  }
  if (c.ray) {
    out->empty_marker = true;
    return true;
  }
  *error = "the text has no shingles of window_size " + std::to_string(c.window_size);
  return false;
}

// `text` without the characters that ignore_non_character removes, in *kept:
// ASCII bytes stored and kept by a table (without a branch), other code
// points copied unless the bitmap says otherwise.
std::string_view DropNonCharacters(std::string_view text, std::string* kept) {
  static const std::array<uint8_t, 128> kKeep = [] {
    std::array<uint8_t, 128> t{};
    for (unsigned c = 0; c < 128; ++c)
      t[c] = IsAsciiNonCharacter(static_cast<unsigned char>(c)) ? 0 : 1;
    return t;
  }();
  kept->resize(text.size());
  char* out = kept->data();
  size_t o = 0;
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      out[o] = static_cast<char>(c);
      o += kKeep[c];
      ++i;
      continue;
    }
    const size_t at = i;
    if (!IsNonCharacter(text::NextCodePoint(text, &i))) {
      std::memcpy(out + o, text.data() + at, i - at);
      o += i - at;
    }
  }
  kept->resize(o);
  return *kept;
}

// What document_deduplicator hashes: the text after lower() (into *lowered)
// and ignore_non_character (into *kept) when asked, then strip().
std::string_view ExactText(const DedupConfig& c, std::string_view text, std::string* lowered,
                           std::string* kept) {
  if (c.lowercase) text = LowerInto(text, lowered);
  if (c.ignore_non_character) text = DropNonCharacters(text, kept);
  return text::Strip(text);
}

// Removes the ignore pattern's matches from *text (into *dst when there are
// any). Returns false, with *error set, when the pattern fails.
bool DropIgnored(const Regex& pattern, std::string_view* text, std::string* dst,
                 std::string* error) {
  try {
    if (pattern.Replace(*text, "", dst)) *text = *dst;
  } catch (const OpError& e) {
    *error = e.what();
    return false;
  }
  return true;
}

}  // namespace

struct Signer::State {
  std::string lowered;                               // the text after lower()
  std::string replaced;                              // the text after the ignore pattern
  std::string shingle;                               // a shingle that is not a slice of the text
  std::string spaced;                                // the text, its words one space apart
  std::vector<std::string> many_lowered, many_kept;  // SignMany's texts after lower(), ...
  std::vector<std::string_view> many_texts;          // ... and stripped, to hash
  std::vector<size_t> many_index;                    // their values' indexes
  std::vector<std::array<uint8_t, 16>> many_md5;
  std::vector<uint32_t> offsets;                     // code point starts (character)
  std::vector<std::pair<uint32_t, uint32_t>> words;  // [begin, end) of tokens
  model::SentencePieceScratch pieces;                // sentencepiece pieces
  MinhashKernel kernel;
  ShingleBatches batches;
  SimhashCounts counts;

  // The scratch string that `text` is not in, to write its next form to.
  std::string& Scratch(std::string_view text) {
    return lowered.data() == text.data() ? replaced : lowered;
  }

  uint64_t Simhash(const DedupConfig& c, std::string_view text) {
    counts.Start();
    ForEachShingle(c, text, &shingle, &spaced, &offsets, &words, &pieces,
                   [&](std::string_view sh) { counts.Add(sh, sh.data() != shingle.data()); });
    return counts.Finish();
  }

  // Fills *out with the minhash of `text`'s shingles; returns how many there
  // were (none: *out is left as it is).
  size_t Minhash(const DedupConfig& c, std::string_view text, std::vector<uint32_t>* out) {
    size_t shingles = 0;
    kernel.Start();
    const auto flush = [this](const ShingleBatch& batch) {
      uint32_t hashes[ShingleBatch::kSize];
      Sha1Low32Batch(batch.views(), batch.size(), hashes);
      for (size_t i = 0; i < batch.size(); ++i) kernel.Add(hashes[i]);
    };
    ForEachShingle(c, text, &shingle, &spaced, &offsets, &words, &pieces, [&](std::string_view sh) {
      batches.Add(sh, sh.data() != shingle.data(), flush);
      ++shingles;
    });
    batches.Finish(flush);
    if (shingles > 0) kernel.Finish(out);
    return shingles;
  }
};

void Signer::SignMany(const TextValue* values, size_t n, Signature* out, bool* ok,
                      std::string* errors) {
  const DedupConfig& c = config_;
  if (c.kind != Kind::kExact) {
    for (size_t i = 0; i < n; ++i) ok[i] = Sign(values[i], &out[i], &errors[i]);
    return;
  }
  State& st = *state_;
  st.many_lowered.resize(std::max(st.many_lowered.size(), n));
  st.many_kept.resize(std::max(st.many_kept.size(), n));
  st.many_texts.clear();
  st.many_index.clear();
  constexpr size_t kAhead = 8;  // strip() reads both ends of a text: ask for them early
  for (size_t i = 0; i < n; ++i) {
    if (i + kAhead < n && !values[i + kAhead].text.empty()) {
      const std::string_view ahead = values[i + kAhead].text;
      __builtin_prefetch(ahead.data());
      __builtin_prefetch(ahead.data() + ahead.size() - 1);
    }
    const TextValue& value = values[i];
    if (value.type != TextValue::Type::kString || IsRayEmpty(c, value)) {
      ok[i] = Sign(value, &out[i], &errors[i]);
      continue;
    }
    st.many_texts.push_back(ExactText(c, value.text, &st.many_lowered[i], &st.many_kept[i]));
    st.many_index.push_back(i);
  }
  st.many_md5.resize(st.many_texts.size());
  Md5Many(st.many_texts.data(), st.many_texts.size(), st.many_md5.data());
  for (size_t k = 0; k < st.many_index.size(); ++k) {
    Signature& sig = out[st.many_index[k]];
    sig.empty_marker = false;
    sig.minhash.clear();
    sig.md5 = st.many_md5[k];
    ok[st.many_index[k]] = true;
  }
}

Signer::Signer(const DedupConfig& config) : config_(config), state_(std::make_unique<State>()) {
  if (config.kind == Kind::kMinhash) state_->kernel.Reset(config.perm_a, config.perm_b);
}
Signer::~Signer() = default;

bool Signer::Sign(const TextValue& value, Signature* out, std::string* error) {
  const DedupConfig& c = config_;
  State& st = *state_;
  out->empty_marker = false;
  out->minhash.clear();
  if (value.type != TextValue::Type::kString || IsRayEmpty(c, value)) {
    return SignWithoutText(c, value, out, error);
  }
  if (c.kind == Kind::kExact) {
    out->md5 = Md5(ExactText(c, value.text, &st.lowered, &st.replaced));
    return true;
  }
  std::string_view text = value.text;
  if (c.lowercase) text = LowerInto(text, &st.lowered);
  if (c.ignore_pattern && !DropIgnored(*c.ignore_pattern, &text, &st.Scratch(text), error)) {
    return false;
  }
  if (c.kind == Kind::kSimhash) {
    out->simhash = st.Simhash(c, text);
    return true;
  }
  if (st.Minhash(c, text, &out->minhash) > 0) return true;
  if (c.ray) {
    out->empty_marker = true;
    return true;
  }
  // np.min over zero shingles: "zero-size array to reduction operation minimum"
  *error = "the text has no shingles of window_size " + std::to_string(c.window_size);
  return false;
}

std::string Md5Hex(const std::array<uint8_t, 16>& md5) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s;
  for (uint8_t b : md5) {
    s.push_back(kHex[b >> 4]);
    s.push_back(kHex[b & 15]);
  }
  return s;
}

std::string MinhashBandBytes(const DedupConfig& c, const Signature& sig, int64_t band) {
  const int64_t r = c.num_rows_per_band;
  std::string bytes;
  if (c.ray) {
    for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((band >> s) & 0xFF));
    if (sig.empty_marker) {
      bytes.assign(4, '\0');  // band 0, then num_rows_per_band times MAX_HASH
      bytes.append(static_cast<size_t>(r) * 4, '\xFF');
      return bytes;
    }
  }
  const int64_t n = static_cast<int64_t>(sig.minhash.size());
  for (int64_t i = std::min(band * r, n); i < std::min((band + 1) * r, n); ++i) {
    const uint32_t v = sig.minhash[static_cast<size_t>(i)];
    if (c.ray) {  // uint32 tobytes(): little-endian
      for (int s = 0; s < 32; s += 8) bytes.push_back(static_cast<char>((v >> s) & 0xFF));
    } else {  // uint64 byteswap(): big-endian
      bytes.append(4, '\0');
      for (int s = 24; s >= 0; s -= 8) bytes.push_back(static_cast<char>((v >> s) & 0xFF));
    }
  }
  return bytes;
}

TextValue TextValue::OfJson(std::string_view raw_json) {
  const nlohmann::json t = nlohmann::json::parse(raw_json);
  TextValue v;
  if (t.is_null()) v.type = Type::kNull;
  if (t.is_boolean()) v.type = Type::kBool, v.falsy = !t.get<bool>();
  if (t.is_number()) v.type = Type::kNumber, v.falsy = t.get<double>() == 0;
  if (t.is_array()) v.type = Type::kArray, v.length = t.size();
  if (t.is_object()) v.type = Type::kObject, v.length = t.size();
  return v;
}

}  // namespace djshard::ops::dedup
