// KenLM's probing hash tables: the vocabulary (word hash -> index), the
// unigram array, one table per middle order and one for the highest order,
// each keyed by the n-gram's hash and probed linearly from key % buckets.
#include <algorithm>

#include "src/model/kenlm/format.h"

namespace djshard::model::kenlm {

uint64_t HashWord(std::string_view word) {
  constexpr uint64_t m = 0xc6a4a7935bd1e995ULL;
  constexpr int r = 47;
  const auto* p = reinterpret_cast<const uint8_t*>(word.data());
  const size_t len = word.size();
  uint64_t h = len * m;
  const uint8_t* end = p + (len / 8) * 8;
  for (; p != end; p += 8) {
    uint64_t k = Load<uint64_t>(p);
    k *= m;
    k ^= k >> r;
    k *= m;
    h ^= k;
    h *= m;
  }
  const size_t tail = len & 7;
  if (tail != 0) {
    for (size_t i = tail; i-- > 0;) h ^= uint64_t{p[i]} << (8 * i);
    h *= m;
  }
  h ^= h >> r;
  h *= m;
  h ^= h >> r;
  return h;
}

uint64_t ProbingBuckets(uint64_t entries, float multiplier) {
  // KenLM multiplies in single precision.
  const float scaled = multiplier * static_cast<float>(entries);
  return std::max(entries + 1, static_cast<uint64_t>(scaled));
}

namespace {

// a * b + c into *out, false on overflow.
bool MulAdd(uint64_t a, uint64_t b, uint64_t c, uint64_t* out) {
  uint64_t product;
  return !__builtin_mul_overflow(a, b, &product) && !__builtin_add_overflow(product, c, out);
}

}  // namespace

ProbingLayout ComputeProbingLayout(const std::vector<uint64_t>& counts, float multiplier,
                                   std::string* problem) {
  ProbingLayout l;
  // Counts and tables far beyond any file: refused before any arithmetic can wrap.
  constexpr uint64_t kMaxEntries = uint64_t{1} << 48;
  for (uint64_t c : counts) {
    if (c >= kMaxEntries || static_cast<double>(multiplier) * static_cast<double>(c) >= 0x1p60) {
      *problem = "the header's n-gram count " + std::to_string(c) + " is impossibly large";
      return l;
    }
  }
  uint64_t at = 0;
  bool ok = true;
  l.vocab_buckets = ProbingBuckets(counts[0], multiplier);
  ok &= MulAdd(l.vocab_buckets, kVocabEntryBytes, kVocabHeaderBytes, &at);
  l.unigram_offset = at;
  ok &= MulAdd(counts[0] + 1, kUnigramBytes, at, &at);
  for (size_t n = 1; n + 1 < counts.size(); ++n) {
    l.middle_offset.push_back(at);
    l.middle_buckets.push_back(ProbingBuckets(counts[n], multiplier));
    ok &= MulAdd(l.middle_buckets.back(), kMiddleEntryBytes, at, &at);
  }
  l.longest_offset = at;
  l.longest_buckets = ProbingBuckets(counts.back(), multiplier);
  ok &= MulAdd(l.longest_buckets, kLongestEntryBytes, at, &at);
  l.total = at;
  if (!ok) *problem = "the header's n-gram counts give a size beyond 64 bits";
  return l;
}

const uint8_t* ProbingFind(const uint8_t* base, uint64_t buckets, size_t stride, uint64_t key) {
  uint64_t i = key % buckets;
  for (uint64_t probes = 0; probes < buckets; ++probes) {
    const uint8_t* entry = base + i * stride;
    const uint64_t got = Load<uint64_t>(entry);
    if (got == key) return entry;
    if (got == 0) return nullptr;  // an empty slot ends the run
    if (++i == buckets) i = 0;
  }
  return nullptr;  // a table with no empty slot (only in a damaged file)
}

ProbingSearch::ProbingSearch(const uint8_t* base, const std::vector<uint64_t>& counts,
                             ProbingLayout layout)
    : base_(base),
      layout_(std::move(layout)),
      unigrams_(counts[0] + 1),
      order_(static_cast<int>(counts.size())) {}

std::string ProbingSearch::Check() const {
  const uint32_t version = Load<uint32_t>(base_);
  if (version != 0) return "the probing vocabulary has version " + std::to_string(version);
  const uint8_t* table = base_ + kVocabHeaderBytes;
  for (uint64_t i = 0; i < layout_.vocab_buckets; ++i) {
    const uint8_t* entry = table + i * kVocabEntryBytes;
    if (Load<uint64_t>(entry) != 0 && Load<uint32_t>(entry + 8) >= unigrams_) {
      return "a vocabulary entry points past the " + std::to_string(unigrams_) + " unigrams";
    }
  }
  return "";
}

WordIndex ProbingSearch::Index(std::string_view word) const {
  const uint8_t* p = ProbingFind(base_ + kVocabHeaderBytes, layout_.vocab_buckets, kVocabEntryBytes,
                                 HashWord(word));
  return p == nullptr ? 0 : Load<uint32_t>(p + 8);
}

}  // namespace djshard::model::kenlm
