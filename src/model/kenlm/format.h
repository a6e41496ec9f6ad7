// KenLM's data structures read in place: the probing hash tables and the trie
// of its binary format, each a view over bytes that the loader checked to be
// as long as the header's counts say. ARPA text is built into the probing
// layout in memory (arpa.cc), so that one query path serves both.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::model::kenlm {

static_assert(std::endian::native == std::endian::little,
              "KenLM binary files are read in the byte order they were written on (x86)");

using WordIndex = uint32_t;

// The highest order the kenlm Python module is built for (KENLM_MAX_ORDER).
constexpr int kMaxOrder = 6;

// util::MurmurHash64A with seed 0: how KenLM hashes a word to its vocabulary key.
uint64_t HashWord(std::string_view word);

// The key of an n-gram, from the key of the n-gram without its first word
// (its last word's index for a unigram) and that first word.
inline uint64_t CombineWordHash(uint64_t current, WordIndex next) {
  return (current * 8978948897894561157ULL) ^
         ((static_cast<uint64_t>(next) + 1) * 17894857484156487943ULL);
}

// A float's sign bit marks, in the probing tables, an n-gram that no longer
// n-gram extends to the left; -0.0 as a backoff marks one that no longer
// n-gram extends to the right (so it can leave the state).
inline bool HasExtension(float backoff) { return std::bit_cast<uint32_t>(backoff) != 0x80000000u; }
inline float WithSign(float f) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(f) | 0x80000000u);
}
inline bool SignSet(float f) { return (std::bit_cast<uint32_t>(f) & 0x80000000u) != 0; }

template <typename T>
T Load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An n-gram's weights found by a search.
struct Weights {
  float prob = 0;
  float backoff = 0;
  bool independent_left = false;  // no longer n-gram ends with this one
};

// Number of slots of a KenLM probing hash table for `entries` entries.
uint64_t ProbingBuckets(uint64_t entries, float multiplier);

// Byte offsets, from the start of the vocabulary, of the probing structures.
struct ProbingLayout {
  uint64_t vocab_buckets = 0;   // entries of 12 bytes: key u64, index u32
  uint64_t unigram_offset = 0;  // counts[0] + 1 entries of 8 bytes: prob, backoff
  std::vector<uint64_t> middle_offset, middle_buckets;  // orders 2..N-1: key, prob, backoff
  uint64_t longest_offset = 0, longest_buckets = 0;     // order N: key, prob (12 bytes)
  uint64_t total = 0;
};
constexpr uint64_t kVocabHeaderBytes = 8;  // version u32, bound u32
constexpr uint64_t kVocabEntryBytes = 12, kUnigramBytes = 8, kMiddleEntryBytes = 16,
                   kLongestEntryBytes = 12;

// The layout for the header's counts, or "" in *problem when a size overflows.
ProbingLayout ComputeProbingLayout(const std::vector<uint64_t>& counts, float multiplier,
                                   std::string* problem);

// Finds `key` in a probing table at `base` of `buckets` entries of `stride`
// bytes (key first): the entry, or nullptr. Probes at most `buckets` slots.
const uint8_t* ProbingFind(const uint8_t* base, uint64_t buckets, size_t stride, uint64_t key);

// Queries over the probing layout. The bytes must hold layout.total bytes.
class ProbingSearch {
 public:
  using Node = uint64_t;
  ProbingSearch(const uint8_t* base, const std::vector<uint64_t>& counts, ProbingLayout layout);

  // The vocabulary checked: every index below the unigram count. "" or the problem.
  std::string Check() const;
  WordIndex Index(std::string_view word) const;
  int order() const { return order_; }

  Weights Unigram(WordIndex w, Node* node) const {
    const uint8_t* p = base_ + layout_.unigram_offset + uint64_t{w} * kUnigramBytes;
    *node = w;
    const float prob = Load<float>(p);
    return {WithSign(prob), Load<float>(p + 4), SignSet(prob)};
  }
  bool Middle(int order_minus_2, WordIndex w, Node* node, Weights* out) const {
    *node = CombineWordHash(*node, w);
    const uint8_t* p = ProbingFind(base_ + layout_.middle_offset[order_minus_2],
                                   layout_.middle_buckets[order_minus_2], kMiddleEntryBytes, *node);
    if (p == nullptr) return false;
    const float prob = Load<float>(p + 8);
    *out = {WithSign(prob), Load<float>(p + 12), SignSet(prob)};
    return true;
  }
  bool Longest(WordIndex w, Node node, float* prob) const {
    const uint8_t* p = ProbingFind(base_ + layout_.longest_offset, layout_.longest_buckets,
                                   kLongestEntryBytes, CombineWordHash(node, w));
    if (p == nullptr) return false;
    *prob = Load<float>(p + 8);
    return true;
  }

 private:
  const uint8_t* base_;
  ProbingLayout layout_;
  uint64_t unigrams_;
  int order_;
};

// Queries over the trie (no quantization, no array compression). Node ranges
// read from the file are checked as they are used: a range outside its table
// throws an Error naming `name`.
class TrieSearch {
 public:
  struct Node {
    uint64_t begin = 0, end = 0;
  };
  // Views `bytes` (vocabulary then trie); "" in *problem, or what is wrong.
  TrieSearch(std::string_view bytes, const std::vector<uint64_t>& counts, std::string name,
             std::string* problem);

  WordIndex Index(std::string_view word) const;
  int order() const { return static_cast<int>(counts_.size()); }

  Weights Unigram(WordIndex w, Node* node) const;
  bool Middle(int order_minus_2, WordIndex w, Node* node, Weights* out) const;
  bool Longest(WordIndex w, Node node, float* prob) const;

 private:
  struct Level {
    const uint8_t* base = nullptr;
    uint64_t entries = 0, next_limit = 0;
    uint8_t total_bits = 0, next_bits = 0;
  };
  // The index of `w` among entries [begin, end) of `level`, or -1.
  int64_t FindWord(const Level& level, Node range, WordIndex w) const;
  Node CheckedRange(uint64_t begin, uint64_t end, uint64_t limit) const;

  std::vector<uint64_t> counts_;
  std::string name_;
  const uint8_t* vocab_ = nullptr;  // sorted word hashes, <unk> not among them
  uint64_t vocab_words_ = 0;
  const uint8_t* unigrams_ = nullptr;  // counts[0] + 2 entries: prob, backoff, next u64
  uint8_t word_bits_ = 0;
  std::vector<Level> middles_;
  Level longest_;
};

// The ARPA text `text` built into the probing layout (KenLM's default
// probing multiplier 1.5) in *memory; the counts into *counts. "" or the
// problem (with its line) in the return.
std::string BuildProbingFromArpa(std::string_view text, std::vector<uint64_t>* counts,
                                 ProbingLayout* layout, std::vector<uint8_t>* memory);

}  // namespace djshard::model::kenlm
