// ARPA text built into KenLM's probing layout, the way KenLM's ProbingModel
// loads it: the same hash tables, the same flags in sign bits, and "blank"
// entries for n-grams that a pruned file left out between an n-gram and its
// shorter suffix, so that queries give KenLM's scores bit for bit.
#include <charconv>
#include <cmath>

#include "src/model/kenlm/format.h"

namespace djshard::model::kenlm {

namespace {

constexpr float kProbingMultiplier = 1.5f;  // lm::ngram::Config's default
constexpr float kUnknownMissingLogProb = -100.0f;

// A problem at a line of the file; BuildProbingFromArpa turns it into text.
struct ArpaProblem {
  uint64_t line;
  std::string what;
};

[[noreturn]] void Fail(uint64_t line, std::string what) {
  throw ArpaProblem{line, std::move(what)};
}

// The file's lines, numbered from 1.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool Next(std::string_view* line) {
    if (at_ >= text_.size()) return false;
    size_t end = text_.find('\n', at_);
    if (end == std::string_view::npos) end = text_.size();
    *line = text_.substr(at_, end - at_);
    if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
    at_ = end + 1;
    ++number_;
    return true;
  }
  // The next line that is not only whitespace; at the end, a problem saying `expected`.
  std::string_view NextContent(const std::string& expected) {
    std::string_view line;
    while (Next(&line)) {
      if (line.find_first_not_of(" \t\r\v\f") != std::string_view::npos) return line;
    }
    Fail(number_, "the file ends where " + expected + " should be");
  }
  uint64_t number() const { return number_; }

 private:
  std::string_view text_;
  size_t at_ = 0;
  uint64_t number_ = 0;
};

bool IsArpaSpace(char c) { return c == ' ' || c == '\t' || c == '\r'; }

// Fields of an n-gram line: separated by tabs, spaces or carriage returns.
void SplitFields(std::string_view line, std::vector<std::string_view>* fields) {
  fields->clear();
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && IsArpaSpace(line[i])) ++i;
    const size_t start = i;
    while (i < line.size() && !IsArpaSpace(line[i])) ++i;
    if (i > start) fields->push_back(line.substr(start, i - start));
  }
}

float ParseFloat(std::string_view s, uint64_t line, const char* what) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  float v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    Fail(line, std::string(what) + " '" + std::string(s) + "' is not a number");
  }
  return v;
}

uint64_t ParseCount(std::string_view s, uint64_t line) {
  uint64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) Fail(line, "bad n-gram count");
  return v;
}

bool IsUnknownWord(std::string_view w) { return w == "<unk>" || w == "<UNK>"; }

// One probing table of the layout: its position in ProbingBuilder::filled_,
// its offset, its slots and their size.
struct Table {
  size_t index;
  uint64_t base, buckets, stride;
};

// The probing tables being filled, in `memory` laid out as `layout` says.
class ProbingBuilder {
 public:
  ProbingBuilder(const std::vector<uint64_t>& counts, const ProbingLayout& layout,
                 std::vector<uint8_t>* memory)
      : counts_(counts), l_(layout), m_(*memory), filled_(counts.size(), 0) {
    m_.assign(l_.total, 0);
  }

  void ReadUnigrams(Lines& lines);
  void ReadNGrams(Lines& lines, int n);
  // <unk>'s weights when the file has none.
  void Finish() {
    if (saw_unk_) return;
    StoreFloat(UnigramWeights(0), kUnknownMissingLogProb);
    StoreFloat(UnigramWeights(0) + 4, 0.0f);
  }

 private:
  uint8_t* At(uint64_t off) { return m_.data() + off; }
  float LoadFloat(uint64_t off) { return Load<float>(At(off)); }
  void StoreFloat(uint64_t off, float v) { std::memcpy(At(off), &v, sizeof v); }
  void SetExtension(uint64_t backoff_off) {
    if (!HasExtension(LoadFloat(backoff_off))) StoreFloat(backoff_off, 0.0f);
  }
  void UnsetSign(uint64_t prob_off) {
    const uint32_t bits = std::bit_cast<uint32_t>(LoadFloat(prob_off)) & 0x7fffffffu;
    StoreFloat(prob_off, std::bit_cast<float>(bits));
  }
  uint64_t UnigramWeights(WordIndex w) const { return l_.unigram_offset + uint64_t{w} * 8; }
  Table Vocab() const { return {0, kVocabHeaderBytes, l_.vocab_buckets, kVocabEntryBytes}; }
  Table Middle(int order) const {
    return {static_cast<size_t>(order - 1), l_.middle_offset[order - 2],
            l_.middle_buckets[order - 2], kMiddleEntryBytes};
  }
  Table Longest() const {
    return {counts_.size() - 1, l_.longest_offset, l_.longest_buckets, kLongestEntryBytes};
  }

  // The entry offset of `key` in `t`, or ~0 when absent.
  uint64_t Find(const Table& t, uint64_t key) {
    const uint8_t* p = ProbingFind(At(t.base), t.buckets, t.stride, key);
    return p == nullptr ? ~0ULL : static_cast<uint64_t>(p - m_.data());
  }
  // The entry offset of `key` in `t`: found (when `find`) or a new slot.
  uint64_t Insert(const Table& t, uint64_t key, bool find, bool* found, uint64_t line);
  WordIndex Index(std::string_view word) {
    const uint64_t off = Find(Vocab(), HashWord(word));
    return off == ~0ULL ? 0 : Load<uint32_t>(At(off + 8));
  }
  float ReadBackoff(const std::vector<std::string_view>& f, size_t at, uint64_t line);
  void FindLower(const std::vector<WordIndex>& ids, const std::vector<uint64_t>& keys,
                 uint64_t line);
  void AdjustLower(const std::vector<WordIndex>& ids);
  void ActivateContext(const std::vector<WordIndex>& ids, uint64_t line);

  const std::vector<uint64_t>& counts_;
  const ProbingLayout& l_;
  std::vector<uint8_t>& m_;
  std::vector<uint64_t> filled_;   // entries per table: vocabulary, then orders 2..N
  std::vector<uint64_t> between_;  // weights offsets of an n-gram's suffixes, longest first
  bool saw_unk_ = false;
};

uint64_t ProbingBuilder::Insert(const Table& t, uint64_t key, bool find, bool* found,
                                uint64_t line) {
  uint64_t i = key % t.buckets;
  for (uint64_t probes = 0; probes < t.buckets; ++probes) {
    const uint64_t off = t.base + i * t.stride;
    const uint64_t got = Load<uint64_t>(At(off));
    if (find && got == key) {
      *found = true;
      return off;
    }
    if (got == 0) {
      if (++filled_[t.index] >= t.buckets) break;
      std::memcpy(At(off), &key, sizeof key);
      if (find) *found = false;
      return off;
    }
    if (++i == t.buckets) i = 0;
  }
  Fail(line, "more n-grams than the header's counts make room for");
}

float ProbingBuilder::ReadBackoff(const std::vector<std::string_view>& f, size_t at,
                                  uint64_t line) {
  if (f.size() == at) return -0.0f;  // no longer n-gram extends this one
  if (f.size() != at + 1) Fail(line, "expected a probability, the words and a backoff");
  const float b = ParseFloat(f[at], line, "backoff");
  if (!std::isfinite(b)) Fail(line, "the backoff is not finite");
  return b == 0.0f ? -0.0f : b;
}

void ProbingBuilder::ReadUnigrams(Lines& lines) {
  if (lines.NextContent("\\1-grams:") != "\\1-grams:") {
    Fail(lines.number(), "expected \\1-grams:");
  }
  const uint64_t unk = HashWord("<unk>"), unk_caps = HashWord("<UNK>");
  WordIndex bound = 1;
  std::vector<std::string_view> f;
  for (uint64_t i = 0; i < counts_[0]; ++i) {
    SplitFields(lines.NextContent("a 1-gram"), &f);
    const uint64_t line = lines.number();
    if (f.size() < 2) Fail(line, "expected a probability and a word");
    const float prob = ParseFloat(f[0], line, "probability");
    if (prob > 0) Fail(line, "positive log probability");
    const float backoff = ReadBackoff(f, 2, line);
    const uint64_t key = HashWord(f[1]);
    WordIndex w = 0;
    if (key == unk || key == unk_caps) {
      saw_unk_ = true;
    } else {
      const uint64_t off = Insert(Vocab(), key, false, nullptr, line);
      w = bound++;
      std::memcpy(At(off + 8), &w, sizeof w);
    }
    StoreFloat(UnigramWeights(w), prob);
    StoreFloat(UnigramWeights(w) + 4, backoff);
  }
  const uint32_t version = 0;
  std::memcpy(At(0), &version, 4);
  std::memcpy(At(4), &bound, 4);
  for (const char* special : {"<s>", "</s>"}) {
    if (Index(special) == 0) Fail(lines.number(), std::string("the 1-grams lack ") + special);
  }
}

void ProbingBuilder::ReadNGrams(Lines& lines, int n) {
  std::string header = std::to_string(n);
  header.insert(header.begin(), '\\');
  header += "-grams:";
  if (lines.NextContent(header) != header) Fail(lines.number(), "expected " + header);
  std::string what = std::to_string(n);
  what.insert(0, "a ");
  what += "-gram";
  const bool longest = n == static_cast<int>(counts_.size());
  const Table table = longest ? Longest() : Middle(n);
  std::vector<std::string_view> f;
  std::vector<WordIndex> ids(n);  // reversed: ids[0] is the last word
  std::vector<uint64_t> keys(n - 1);
  for (uint64_t i = 0; i < counts_[n - 1]; ++i) {
    SplitFields(lines.NextContent(what), &f);
    const uint64_t line = lines.number();
    if (f.size() < static_cast<size_t>(n) + 1) Fail(line, "expected a probability and the words");
    float prob = ParseFloat(f[0], line, "probability");
    if (prob > 0) Fail(line, "positive log probability");
    for (int k = 0; k < n; ++k) {
      const std::string_view word = f[1 + k];
      ids[n - 1 - k] = Index(word);
      if (ids[n - 1 - k] == 0 && !IsUnknownWord(word)) {
        Fail(line, "the word '" + std::string(word) + "' is not among the 1-grams");
      }
    }
    float backoff = ReadBackoff(f, n + 1, line);
    if (longest && HasExtension(backoff)) Fail(line, "a highest-order n-gram has a backoff");
    keys[0] = CombineWordHash(ids[0], ids[1]);
    for (int h = 1; h < n - 1; ++h) keys[h] = CombineWordHash(keys[h - 1], ids[h + 1]);
    prob = WithSign(prob);  // does not extend left, until a longer n-gram says so
    const uint64_t off = Insert(table, keys[n - 2], false, nullptr, line);
    StoreFloat(off + 8, prob);
    if (!longest) StoreFloat(off + 12, backoff);
    FindLower(ids, keys, line);
    AdjustLower(ids);
    ActivateContext(ids, line);
  }
}

// The suffixes of the n-gram, longest first, down to the first that exists:
// the missing ones are inserted as blanks.
void ProbingBuilder::FindLower(const std::vector<WordIndex>& ids, const std::vector<uint64_t>& keys,
                               uint64_t line) {
  between_.clear();
  for (int lower = static_cast<int>(ids.size()) - 3;; --lower) {
    if (lower < 0) {
      between_.push_back(UnigramWeights(ids[0]));
      return;
    }
    bool found = false;
    const uint64_t off = Insert(Middle(lower + 2), keys[lower], true, &found, line);
    between_.push_back(off + 8);
    if (found) return;
    StoreFloat(off + 12, -0.0f);
  }
}

// Gives the blanks the probability that backing off would give, then marks
// every suffix as extending to the left.
void ProbingBuilder::AdjustLower(const std::vector<WordIndex>& ids) {
  const int n = static_cast<int>(ids.size());
  if (between_.size() > 1) {
    float prob = -std::fabs(LoadFloat(between_.back()));
    int basis = n - static_cast<int>(between_.size());  // order of the suffix that exists
    size_t change = between_.size() - 2;
    if (basis == 1) {
      const uint64_t backoff = UnigramWeights(ids[1]) + 4;
      SetExtension(backoff);
      prob += LoadFloat(backoff);
      StoreFloat(between_[change], prob);
      basis = 2;
      --change;
    }
    uint64_t backoff_key = ids[1];
    for (int i = 2; i <= basis; ++i) backoff_key = CombineWordHash(backoff_key, ids[i]);
    for (; basis < n - 1; ++basis, --change) {
      const uint64_t context = Find(Middle(basis), backoff_key);
      if (context != ~0ULL) {
        SetExtension(context + 12);
        prob += LoadFloat(context + 12);
      }
      StoreFloat(between_[change], prob);
      backoff_key = CombineWordHash(backoff_key, ids[basis + 1]);
    }
  }
  for (uint64_t weights : between_) UnsetSign(weights);
}

// The n-gram's context must be an (n-1)-gram; it now extends to the right.
void ProbingBuilder::ActivateContext(const std::vector<WordIndex>& ids, uint64_t line) {
  const int n = static_cast<int>(ids.size());
  if (n == 2) {
    SetExtension(UnigramWeights(ids[1]) + 4);
    return;
  }
  uint64_t key = ids[1];
  for (int i = 2; i < n; ++i) key = CombineWordHash(key, ids[i]);
  const uint64_t context = Find(Middle(n - 1), key);
  if (context == ~0ULL) {
    Fail(line, "the context of a " + std::to_string(n) + "-gram is not among the " +
                   std::to_string(n - 1) + "-grams");
  }
  SetExtension(context + 12);
}

// "\data\" and the "ngram N=count" lines.
std::vector<uint64_t> ReadCounts(Lines& lines, size_t text_size) {
  std::string_view line;
  do {
    if (!lines.Next(&line)) Fail(lines.number(), "no \\data\\ line: not an ARPA file");
  } while (line.find_first_not_of(" \t\r\v\f") == std::string_view::npos ||
           line.substr(0, 1) == "#");
  if (line != "\\data\\") Fail(lines.number(), "the first line is not \\data\\: not an ARPA file");
  std::vector<uint64_t> counts;
  while (lines.Next(&line) && line.find_first_not_of(" \t\r\v\f") != std::string_view::npos) {
    const size_t eq = line.find('=');
    if (line.substr(0, 6) != "ngram " || eq == std::string_view::npos ||
        ParseCount(line.substr(6, eq - 6), lines.number()) != counts.size() + 1) {
      Fail(lines.number(), "expected 'ngram " + std::to_string(counts.size() + 1) + "=<count>'");
    }
    counts.push_back(ParseCount(line.substr(eq + 1), lines.number()));
    // Each n-gram takes a line of at least 4 bytes: larger counts are damage.
    if (counts.back() > text_size / 4) Fail(lines.number(), "the count exceeds the file's size");
  }
  if (counts.size() < 2 || counts.size() > static_cast<size_t>(kMaxOrder)) {
    Fail(lines.number(), "the model's order is " + std::to_string(counts.size()) +
                             "; KenLM reads orders 2 to " + std::to_string(kMaxOrder));
  }
  return counts;
}

}  // namespace

std::string BuildProbingFromArpa(std::string_view text, std::vector<uint64_t>* counts,
                                 ProbingLayout* layout, std::vector<uint8_t>* memory) {
  Lines lines(text);
  try {
    *counts = ReadCounts(lines, text.size());
    std::string problem;
    *layout = ComputeProbingLayout(*counts, kProbingMultiplier, &problem);
    if (!problem.empty()) return problem;
    ProbingBuilder builder(*counts, *layout, memory);
    builder.ReadUnigrams(lines);
    for (int n = 2; n <= static_cast<int>(counts->size()); ++n) builder.ReadNGrams(lines, n);
    if (lines.NextContent("\\end\\") != "\\end\\") Fail(lines.number(), "expected \\end\\");
    builder.Finish();
  } catch (const ArpaProblem& p) {
    return "line " + std::to_string(p.line) + ": " + p.what;
  }
  return "";
}

}  // namespace djshard::model::kenlm
