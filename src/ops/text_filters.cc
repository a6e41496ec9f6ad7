// Filters on one statistic of the text: text_length_filter,
// average_line_length_filter, maximum_line_length_filter, words_num_filter,
// word_repetition_filter, alphanumeric_filter, character_repetition_filter,
// special_characters_filter.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

// A filter with one stat, computed only when the record does not have it yet.
class StatFilter : public Filter {
 public:
  struct Range {
    const char* lo_key;
    double lo_default;
    const char* hi_key;
    double hi_default;
  };

  StatFilter(const recipe::OperatorSpec& spec, const std::string& key,
             const std::vector<std::string>& own_args, const char* stat_key, Range range)
      : Filter(spec, key, own_args), stat_key_(stat_key) {
    lo_ = args().GetDouble(range.lo_key, range.lo_default);
    hi_ = args().GetDouble(range.hi_key, range.hi_default);
  }

  bool Process(Sample& sample) const override {
    if (!sample.Stat(stat_key_)) sample.SetStat(stat_key_, Compute(sample.Text(text_key())));
    return InRange(sample.StatNumber(stat_key_), lo_, hi_);
  }

 protected:
  // The stat's raw JSON (IntStat or FloatStat).
  virtual std::string Compute(const std::string& text) const = 0;

 private:
  const char* stat_key_;
  double lo_, hi_;
};

constexpr StatFilter::Range kLenRange{"min_len", 10, "max_len", kMaxSize};

class TextLengthFilter : public StatFilter {
 public:
  TextLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"min_len", "max_len"}, "text_len", kLenRange) {}
  std::string Compute(const std::string& text) const override {
    return IntStat(static_cast<int64_t>(text::CodePointCount(text)));
  }
};

class AverageLineLengthFilter : public StatFilter {
 public:
  AverageLineLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"min_len", "max_len"}, "avg_line_length", kLenRange) {}
  std::string Compute(const std::string& text) const override {
    const size_t lines = text::SplitLines(text).size();
    if (lines == 0) return FloatStat(0.0);
    return FloatStat(static_cast<double>(text::CodePointCount(text)) / static_cast<double>(lines));
  }
};

class MaximumLineLengthFilter : public StatFilter {
 public:
  MaximumLineLengthFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"min_len", "max_len"}, "max_line_length", kLenRange) {}
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
      : StatFilter(spec, key, {"lang", "tokenization", "min_num", "max_num"}, "num_words",
                   {"min_num", 10, "max_num", kMaxSize}) {
    RefuseTokenization();
  }
  std::string Compute(const std::string& text) const override {
    // Words that keep something once special characters are stripped.
    int64_t n = 0;
    for (std::string_view w : text::SplitWords(text)) n += !text::StripSpecial(w).empty();
    return IntStat(n);
  }
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
// (one per thread). A key is (begin, length) into a sequence of T; equal
// hashes are confirmed by comparing the elements, so counts are exact.
template <typename T>
class NGramCounter {
 public:
  struct Slot {
    uint64_t hash;
    const T* begin;
    uint32_t length;
    uint32_t count;  // 0: empty
    uint32_t id;     // index among distinct keys, in order of first appearance
  };

  void Reset(size_t keys) {
    size_t cap = 16;
    while (cap < keys * 2) cap *= 2;
    if (slots_.size() < cap || slots_.size() > cap * 8)
      slots_.assign(cap, Slot{});
    else
      std::fill(slots_.begin(), slots_.begin() + cap, Slot{});
    mask_ = cap - 1;
    used_ = 0;
  }

  // Adds one occurrence; returns the key's index among distinct keys.
  uint32_t Add(uint64_t hash, const T* begin, uint32_t length) {
    size_t i = hash & mask_;
    for (;;) {
      Slot& slot = slots_[i];
      if (slot.count == 0) {
        slot = Slot{hash, begin, length, 1, static_cast<uint32_t>(used_)};
        order_[used_] = static_cast<uint32_t>(i);
        return static_cast<uint32_t>(used_++);
      }
      if (slot.hash == hash && slot.length == length &&
          std::equal(begin, begin + length, slot.begin)) {
        ++slot.count;
        return slot.id;
      }
      i = (i + 1) & mask_;
    }
  }

  void ReserveOrder(size_t keys) {
    if (order_.size() < keys) order_.resize(keys);
  }
  size_t distinct() const { return used_; }
  uint32_t CountAt(size_t k) const { return slots_[order_[k]].count; }

 private:
  std::vector<Slot> slots_;
  std::vector<uint32_t> order_;
  size_t mask_ = 0;
  size_t used_ = 0;
};

class WordRepetitionFilter : public StatFilter {
 public:
  WordRepetitionFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"lang", "tokenization", "rep_len", "min_ratio", "max_ratio"},
                   "word_rep_ratio", {"min_ratio", 0.0, "max_ratio", 0.5}) {
    RefuseTokenization();
    n_ = args().GetInt("rep_len", 10);
    if (n_ < 1) args().Fail("rep_len", "must be at least 1", "");
  }
  std::string Compute(const std::string& text) const override {
    // Words lower-cased, then stripped of special characters; the ratio of
    // word n-grams whose n-gram occurs more than once.
    const std::string lowered = text::Lower(text);
    thread_local std::vector<std::string_view> words;
    words.clear();
    for (std::string_view w : text::SplitWords(lowered)) {
      const std::string_view s = text::StripSpecial(w);
      if (!s.empty()) words.push_back(s);
    }
    const int64_t total = static_cast<int64_t>(words.size()) - n_ + 1;
    if (total <= 0) return FloatStat(0.0);
    // Words become ids (equal words, equal ids); n-grams are runs of ids.
    thread_local NGramCounter<char> word_table;
    thread_local std::vector<uint32_t> ids;
    thread_local std::vector<uint64_t> id_hash;
    word_table.Reset(words.size());
    word_table.ReserveOrder(words.size());
    ids.resize(words.size());
    for (size_t i = 0; i < words.size(); ++i) {
      const std::string_view w = words[i];
      const uint64_t h = HashBytes(w.data(), w.size());
      ids[i] = word_table.Add(h, w.data(), static_cast<uint32_t>(w.size()));
    }
    thread_local NGramCounter<uint32_t> grams;
    grams.Reset(static_cast<size_t>(total));
    grams.ReserveOrder(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
      const uint32_t* begin = ids.data() + i;
      const uint64_t h = HashBytes(reinterpret_cast<const char*>(begin), sizeof(uint32_t) * n_);
      grams.Add(h, begin, static_cast<uint32_t>(n_));
    }
    int64_t repeated = 0;
    for (size_t k = 0; k < grams.distinct(); ++k) {
      const uint32_t c = grams.CountAt(k);
      if (c > 1) repeated += c;
    }
    return FloatStat(static_cast<double>(repeated) / static_cast<double>(total));
  }

 private:
  int64_t n_;
};

class AlphanumericFilter : public StatFilter {
 public:
  AlphanumericFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"tokenization", "min_ratio", "max_ratio"}, "alnum_ratio",
                   {"min_ratio", 0.25, "max_ratio", kMaxSize}) {
    RefuseTokenization();
  }
  std::string Compute(const std::string& text) const override {
    size_t total = 0, alnum = 0, i = 0;
    while (i < text.size()) {
      const unsigned char c = static_cast<unsigned char>(text[i]);
      uint32_t cp;
      if (c < 0x80) {
        cp = c;
        ++i;
      } else {
        cp = text::NextCodePoint(text, &i);
      }
      ++total;
      alnum += text::IsAlnum(cp);
    }
    return FloatStat(total ? static_cast<double>(alnum) / static_cast<double>(total) : 0.0);
  }
};

class CharacterRepetitionFilter : public StatFilter {
 public:
  CharacterRepetitionFilter(const recipe::OperatorSpec& spec, const std::string& key)
      : StatFilter(spec, key, {"rep_len", "min_ratio", "max_ratio"}, "char_rep_ratio",
                   {"min_ratio", 0.0, "max_ratio", 0.5}) {
    n_ = args().GetInt("rep_len", 10);
    if (n_ < 1) args().Fail("rep_len", "must be at least 1", "");
  }
  std::string Compute(const std::string& text) const override {
    // Character n-grams (as UTF-8 byte ranges spanning n code points). With D
    // distinct n-grams and R of them repeated, the k = min(floor(sqrt(D)), R)
    // most frequent ones' total count over the number of n-grams.
    thread_local std::vector<size_t> starts;
    starts.clear();
    for (size_t i = 0; i < text.size(); ++i) {
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts.push_back(i);
    }
    const int64_t len = static_cast<int64_t>(starts.size());
    starts.push_back(text.size());
    const int64_t total = len - n_ + 1;
    if (total <= 0) return FloatStat(0.0);
    thread_local NGramCounter<char> counter;
    counter.Reset(static_cast<size_t>(total));
    counter.ReserveOrder(static_cast<size_t>(total));
    for (int64_t i = 0; i < total; ++i) {
      const char* begin = text.data() + starts[i];
      const uint32_t len = static_cast<uint32_t>(starts[i + n_] - starts[i]);
      counter.Add(HashBytes(begin, len), begin, len);
    }
    thread_local std::vector<int64_t> freqs;
    freqs.clear();
    int64_t singles = 0;
    for (size_t k = 0; k < counter.distinct(); ++k) {
      const int64_t c = counter.CountAt(k);
      freqs.push_back(c);
      singles += (c == 1);
    }
    const int64_t distinct = static_cast<int64_t>(freqs.size());
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
      : StatFilter(spec, key, {"min_ratio", "max_ratio"}, "special_char_ratio",
                   {"min_ratio", 0.0, "max_ratio", 0.25}) {}
  std::string Compute(const std::string& text) const override {
    size_t total = 0, special = 0, i = 0;
    while (i < text.size()) {
      const uint32_t cp = text::NextCodePoint(text, &i);
      ++total;
      special += text::IsSpecial(cp);
    }
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
std::unique_ptr<Operator> MakeCharacterRepetitionFilter(const recipe::OperatorSpec& s,
                                                        const std::string& k) {
  return Make<CharacterRepetitionFilter>(s, k);
}
std::unique_ptr<Operator> MakeSpecialCharactersFilter(const recipe::OperatorSpec& s,
                                                      const std::string& k) {
  return Make<SpecialCharactersFilter>(s, k);
}

}  // namespace djshard::ops
