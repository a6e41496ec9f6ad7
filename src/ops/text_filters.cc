// Filters on one statistic of the text: text_length_filter,
// average_line_length_filter, maximum_line_length_filter, words_num_filter,
// word_repetition_filter, alphanumeric_filter, token_num_filter, character_repetition_filter,
// special_characters_filter.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/stat_filter.h"
#include "src/ops/tokenization.h"

namespace djshard::ops {

namespace {

constexpr StatFilter::Range kLenRange{"min_len", 10, "max_len", kMaxSize};

class TextLengthFilter : public StatFilter {
 public:
  TextLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "text_len", kLenRange) {}
  std::string Compute(const std::string& text) const override {
    return IntStat(static_cast<int64_t>(text::CodePointCount(text)));
  }
};

class AverageLineLengthFilter : public StatFilter {
 public:
  AverageLineLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "avg_line_length", kLenRange) {}
  std::string Compute(const std::string& text) const override {
    const size_t lines = text::SplitLines(text).size();
    if (lines == 0) return FloatStat(0.0);
    return FloatStat(static_cast<double>(text::CodePointCount(text)) / static_cast<double>(lines));
  }
};

class MaximumLineLengthFilter : public StatFilter {
 public:
  MaximumLineLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "max_line_length", kLenRange) {}
  std::string Compute(const std::string& text) const override {
    size_t longest = 0;
    for (std::string_view line : text::SplitLines(text)) {
      longest = std::max(longest, text::CodePointCount(line));
    }
    return IntStat(static_cast<int64_t>(longest));
  }
};

class WordsNumFilter : public StatFilter {
 public:
  WordsNumFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "num_words", {"min_num", 10, "max_num", kMaxSize}) {
    if (args().GetBool("tokenization", false)) {
      sp_ = SentencePieceForLang(args(), args().GetString("lang", "en"));
    }
  }
  std::string Compute(const std::string& text) const override {
    // Words (or SentencePiece pieces) that keep something once special
    // characters are stripped.
    int64_t n = 0;
    if (sp_) {
      thread_local model::SentencePieceScratch scratch;
      for (const std::string_view p : sp_->Encode(text, &scratch)) {
        n += !text::StripSpecial(p).empty();
      }
      return IntStat(n);
    }
    text::ForEachWord(text, [&](std::string_view w) { n += !text::StripSpecial(w).empty(); });
    return IntStat(n);
  }

 private:
  std::shared_ptr<const model::SentencePiece> sp_;  // with tokenization: true
};

// Hash of a byte range, 8 bytes at a time.
uint64_t HashBytes(const char* p, size_t n) {
  uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
  while (n >= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    h = (h ^ (w * 0xFF51AFD7ED558CCDull)) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    p += 8;
    n -= 8;
  }
  uint64_t w = 0;
  std::memcpy(&w, p, n);
  h = (h ^ (w * 0xFF51AFD7ED558CCDull)) * 0xC4CEB9FE1A85EC53ull;
  return h ^ (h >> 32);
}

// Counts keys of one text in an open-addressing table reused across texts
// (one per thread). A key is a run of T in one array (`base`): its offset
// and length. Equal hashes are confirmed by comparing the elements, so counts
// are exact. Slots are 16 bytes to keep the table in cache.
template <typename T>
class NGramCounter {
 public:
  // Prepares for up to `keys` keys that point into `base`.
  void Reset(const T* base, size_t keys) {
    size_t cap = 16;
    while (cap < keys * 2) cap *= 2;
    if (cap > slots_.size()) {
      slots_.assign(cap, Slot{});
    } else {
      // Clear only the slots the previous text used; a smaller text uses a
      // prefix of the table.
      for (size_t k = 0; k < used_; ++k) slots_[order_[k]].count = 0;
    }
    if (order_.size() < keys) {
      order_.resize(keys);
      lengths_.resize(keys);
    }
    base_ = base;
    mask_ = cap - 1;
    used_ = 0;
  }

  // Adds one occurrence of base[offset, offset + length); returns the key's
  // id: its index among distinct keys, in order of first appearance.
  uint32_t Add(uint64_t hash, uint32_t offset, uint32_t length) {
    const uint32_t h32 = static_cast<uint32_t>(hash >> 32);
    size_t i = hash & mask_;
    for (;;) {
      Slot& slot = slots_[i];
      if (slot.count == 0) {
        slot = Slot{h32, 1, offset, static_cast<uint32_t>(used_)};
        order_[used_] = static_cast<uint32_t>(i);
        lengths_[used_] = length;
        return static_cast<uint32_t>(used_++);
      }
      if (slot.hash == h32 && lengths_[slot.id] == length &&
          std::equal(base_ + offset, base_ + offset + length, base_ + slot.offset)) {
        ++slot.count;
        return slot.id;
      }
      i = (i + 1) & mask_;
    }
  }

  size_t distinct() const { return used_; }
  uint32_t CountAt(size_t id) const { return slots_[order_[id]].count; }

 private:
  struct Slot {
    uint32_t hash;   // high half of the 64-bit hash (the low half picks the slot)
    uint32_t count;  // 0: empty
    uint32_t offset;
    uint32_t id;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> order_;    // id -> slot
  std::vector<uint32_t> lengths_;  // id -> key length
  const T* base_ = nullptr;
  size_t mask_ = 0;
  size_t used_ = 0;
};

// Hashes of every window of `n` consecutive values (a polynomial rolling
// hash, then mixed for table use): hashes[i] names values[i, i + n).
void WindowHashes(const std::vector<uint64_t>& values, int64_t n, std::vector<uint64_t>* hashes) {
  constexpr uint64_t kBase = 0x100000001B3ull;
  const int64_t total = static_cast<int64_t>(values.size()) - n + 1;
  uint64_t top_power = 1;  // kBase^(n-1)
  for (int64_t k = 1; k < n; ++k) top_power *= kBase;
  uint64_t h = 0;
  for (int64_t k = 0; k < n; ++k) h = h * kBase + values[k];
  hashes->resize(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    uint64_t mixed = h ^ (h >> 29);
    mixed *= 0xBF58476D1CE4E5B9ull;
    (*hashes)[i] = mixed ^ (mixed >> 32);
    if (i + 1 < total) h = (h - values[i] * top_power) * kBase + values[i + n];
  }
}

// Counts the windows of `base` named by `hashes` (each `n` long). Most
// windows occur once: a bit per hash value finds those whose hash was seen
// before, and only they go through the exact counter (compared element by
// element). Returns the number of windows that are certainly unique.
template <typename T>
int64_t CountWindows(const std::vector<uint64_t>& hashes, const T* base, int64_t n,
                     NGramCounter<T>* counter) {
  const size_t total = hashes.size();
  size_t bits = 1 << 12;
  while (bits < total * 16 && bits < (size_t{1} << 22)) bits <<= 1;
  thread_local std::vector<uint64_t> seen, twice;
  seen.assign(bits / 64, 0);
  twice.assign(bits / 64, 0);
  const size_t mask = bits - 1;
  for (size_t i = 0; i < total; ++i) {
    const size_t b = (hashes[i] >> 20) & mask;
    const uint64_t bit = uint64_t{1} << (b & 63);
    twice[b >> 6] |= seen[b >> 6] & bit;
    seen[b >> 6] |= bit;
  }
  counter->Reset(base, total);
  int64_t unique = 0;
  for (size_t i = 0; i < total; ++i) {
    const size_t b = (hashes[i] >> 20) & mask;
    if ((twice[b >> 6] >> (b & 63) & 1) == 0) {
      ++unique;
      continue;
    }
    counter->Add(hashes[i], static_cast<uint32_t>(i), static_cast<uint32_t>(n));
  }
  return unique;
}

class WordRepetitionFilter : public StatFilter {
 public:
  WordRepetitionFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "word_rep_ratio", {"min_ratio", 0.0, "max_ratio", 0.5}) {
    n_ = args().GetInt("rep_len", 10);
    if (n_ < 1) args().Fail("rep_len", "must be at least 1", "");
    if (args().GetBool("tokenization", false)) {
      sp_ = SentencePieceForLang(args(), args().GetString("lang", "en"));
    }
  }
  std::string Compute(const std::string& text) const override {
    // Words (or SentencePiece pieces) lower-cased, then stripped of special
    // characters; the ratio of word n-grams whose n-gram occurs more than once.
    thread_local std::vector<std::string_view> words;
    thread_local std::vector<std::string> pieces;
    std::string lowered;
    words.clear();
    if (sp_) {
      pieces = sp_->Pieces(text);
      for (std::string& p : pieces) {
        p = text::Lower(p);
        const std::string_view s = text::StripSpecial(p);
        if (!s.empty()) words.push_back(s);
      }
    } else {
      lowered = text::Lower(text);
      text::ForEachWord(lowered, [&](std::string_view w) {
        const std::string_view s = text::StripSpecial(w);
        if (!s.empty()) words.push_back(s);
      });
    }
    const int64_t total = static_cast<int64_t>(words.size()) - n_ + 1;
    if (total <= 0) return FloatStat(0.0);
    // Each n-gram is named by a rolling hash over its words' hashes, and
    // counted exactly word by word when its hash is seen twice.
    thread_local std::vector<uint64_t> word_hash, hashes;
    word_hash.resize(words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      word_hash[i] = HashBytes(words[i].data(), words[i].size());
    }
    WindowHashes(word_hash, n_, &hashes);
    thread_local NGramCounter<std::string_view> grams;
    CountWindows(hashes, words.data(), n_, &grams);
    int64_t repeated = 0;
    for (size_t k = 0; k < grams.distinct(); ++k) {
      const uint32_t c = grams.CountAt(k);
      if (c > 1) repeated += c;
    }
    return FloatStat(static_cast<double>(repeated) / static_cast<double>(total));
  }

 private:
  int64_t n_;
  std::shared_ptr<const model::SentencePiece> sp_;  // with tokenization: true
};

class AlphanumericFilter : public StatFilter {
 public:
  AlphanumericFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key,
                   spec.args.GetBool("tokenization", false) ? "alpha_token_ratio" : "alnum_ratio",
                   {"min_ratio", 0.25, "max_ratio", kMaxSize}) {
    if (args().GetBool("tokenization", false)) {
      tokenizer_ = LoadHfTokenizer(args(), "hf_tokenizer", "EleutherAI/pythia-6.9b-deduped");
    }
  }
  std::string Compute(const std::string& text) const override {
    if (tokenizer_) {
      // Letters over Hugging Face tokens (without special tokens).
      const size_t tokens = tokenizer_->Encode(text, false).ids.size();
      const size_t alpha = CountAlpha(text);
      return FloatStat(tokens ? static_cast<double>(alpha) / static_cast<double>(tokens) : 0.0);
    }
    const size_t total = text::CodePointCount(text);
    const size_t alnum = text::CountAlnum(text);
    return FloatStat(total ? static_cast<double>(alnum) / static_cast<double>(total) : 0.0);
  }

 private:
  std::shared_ptr<const model::Tokenizer> tokenizer_;  // with tokenization: true
};

// Tokens of a local Hugging Face tokenizer, special tokens left out
// (Data-Juicer's tokenizer.tokenize).
class TokenNumFilter : public StatFilter {
 public:
  TokenNumFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "num_token", {"min_num", 10, "max_num", kMaxSize}),
        tokenizer_(LoadHfTokenizer(args(), "hf_tokenizer", "EleutherAI/pythia-6.9b-deduped")) {}
  std::string Compute(const std::string& text) const override {
    return IntStat(static_cast<int64_t>(tokenizer_->Encode(text, false).ids.size()));
  }

 private:
  std::shared_ptr<const model::Tokenizer> tokenizer_;
};

class CharacterRepetitionFilter : public StatFilter {
 public:
  CharacterRepetitionFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "char_rep_ratio", {"min_ratio", 0.0, "max_ratio", 0.5}) {
    n_ = args().GetInt("rep_len", 10);
    if (n_ < 1) args().Fail("rep_len", "must be at least 1", "");
  }
  std::string Compute(const std::string& text) const override {
    // Character n-grams (as UTF-8 byte ranges spanning n code points). With D
    // distinct n-grams and R of them repeated, the k = min(floor(sqrt(D)), R)
    // most frequent ones' total count over the number of n-grams.
    thread_local std::vector<uint64_t> cps, hashes;
    cps.clear();
    size_t pos = 0;
    while (pos < text.size()) {
      const unsigned char c = static_cast<unsigned char>(text[pos]);
      if (c < 0x80) {
        cps.push_back(c);
        ++pos;
      } else {
        cps.push_back(text::NextCodePoint(text, &pos));
      }
    }
    const int64_t total = static_cast<int64_t>(cps.size()) - n_ + 1;
    if (total <= 0) return FloatStat(0.0);
    WindowHashes(cps, n_, &hashes);
    thread_local NGramCounter<uint64_t> counter;
    const int64_t singletons = CountWindows(hashes, cps.data(), n_, &counter);
    thread_local std::vector<int64_t> freqs;
    freqs.clear();
    int64_t singles = singletons;
    for (size_t k = 0; k < counter.distinct(); ++k) {
      const int64_t c = counter.CountAt(k);
      freqs.push_back(c);
      singles += (c == 1);
    }
    const int64_t distinct = static_cast<int64_t>(freqs.size()) + singletons;
    const int64_t k = std::min(static_cast<int64_t>(std::sqrt(static_cast<double>(distinct))),
                               distinct - singles);
    int64_t top = 0;
    if (k > 0) {
      std::nth_element(freqs.begin(), freqs.begin() + (k - 1), freqs.end(), std::greater<>());
      for (int64_t i = 0; i < k; ++i) top += freqs[i];
    }
    return FloatStat(static_cast<double>(top) / static_cast<double>(total));
  }

 private:
  int64_t n_;
};

class SpecialCharactersFilter : public StatFilter {
 public:
  SpecialCharactersFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, "special_char_ratio", {"min_ratio", 0.0, "max_ratio", 0.25}) {}
  std::string Compute(const std::string& text) const override {
    const size_t total = text::CodePointCount(text);
    const size_t special = text::CountSpecial(text);
    return FloatStat(total ? static_cast<double>(special) / static_cast<double>(total) : 0.0);
  }
};

template <typename T>
std::unique_ptr<Operator> Make(const recipe::OperatorSpec& spec, const std::string& key) {
  return std::make_unique<T>(spec, key);
}

}  // namespace

std::unique_ptr<Operator> MakeTextLengthFilter(const recipe::OperatorSpec& s,
                                               const std::string& k) {
  return Make<TextLengthFilter>(s, k);
}
std::unique_ptr<Operator> MakeAverageLineLengthFilter(const recipe::OperatorSpec& s,
                                                      const std::string& k) {
  return Make<AverageLineLengthFilter>(s, k);
}
std::unique_ptr<Operator> MakeMaximumLineLengthFilter(const recipe::OperatorSpec& s,
                                                      const std::string& k) {
  return Make<MaximumLineLengthFilter>(s, k);
}
std::unique_ptr<Operator> MakeWordsNumFilter(const recipe::OperatorSpec& s, const std::string& k) {
  return Make<WordsNumFilter>(s, k);
}
std::unique_ptr<Operator> MakeWordRepetitionFilter(const recipe::OperatorSpec& s,
                                                   const std::string& k) {
  return Make<WordRepetitionFilter>(s, k);
}
std::unique_ptr<Operator> MakeAlphanumericFilter(const recipe::OperatorSpec& s,
                                                 const std::string& k) {
  return Make<AlphanumericFilter>(s, k);
}
std::unique_ptr<Operator> MakeTokenNumFilter(const recipe::OperatorSpec& spec,
                                             const std::string& text_key) {
  return std::make_unique<TokenNumFilter>(spec, text_key);
}

std::unique_ptr<Operator> MakeCharacterRepetitionFilter(const recipe::OperatorSpec& s,
                                                        const std::string& k) {
  return Make<CharacterRepetitionFilter>(s, k);
}
std::unique_ptr<Operator> MakeSpecialCharactersFilter(const recipe::OperatorSpec& s,
                                                      const std::string& k) {
  return Make<SpecialCharactersFilter>(s, k);
}

}  // namespace djshard::ops
