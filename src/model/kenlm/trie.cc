// KenLM's trie: a sorted vocabulary of word hashes, a unigram array whose
// `next` fields delimit each word's bigrams, and per order a bit-packed array
// of (word, prob, backoff, next) sorted by word within each parent's range.
#include "djshard/common/error.h"
#include "src/model/kenlm/format.h"

namespace djshard::model::kenlm {

namespace {

constexpr uint64_t kUnigramEntryBytes = 16;  // prob f32, backoff f32, next u64

uint8_t RequiredBits(uint64_t max_value) {
  uint8_t bits = 0;
  while (max_value != 0) {
    ++bits;
    max_value >>= 1;
  }
  return bits;
}

// `length` (at most 57) bits at bit offset `bit`; the tables end with 8
// bytes of padding, so the 8-byte read stays inside them.
uint64_t ReadBits(const uint8_t* base, uint64_t bit, uint8_t length) {
  return (Load<uint64_t>(base + (bit >> 3)) >> (bit & 7)) & ((uint64_t{1} << length) - 1);
}

float ReadFloat32(const uint8_t* base, uint64_t bit) {
  return std::bit_cast<float>(
      static_cast<uint32_t>(Load<uint64_t>(base + (bit >> 3)) >> (bit & 7)));
}

// Probabilities are stored without their sign bit.
float ReadProb31(const uint8_t* base, uint64_t bit) {
  return std::bit_cast<float>(static_cast<uint32_t>(ReadBits(base, bit, 31)) | 0x80000000u);
}

// Bytes of a bit-packed array of `entries` (plus one) of `total_bits`.
bool PackedSize(uint64_t entries, uint8_t total_bits, uint64_t* bytes) {
  uint64_t bits;
  if (__builtin_mul_overflow(entries + 1, uint64_t{total_bits}, &bits) || bits > (~0ULL - 7)) {
    return false;
  }
  *bytes = (bits + 7) / 8 + 8;
  return true;
}

}  // namespace

TrieSearch::TrieSearch(std::string_view bytes, const std::vector<uint64_t>& counts,
                       std::string name, std::string* problem)
    : counts_(counts), name_(std::move(name)) {
  const auto* base = reinterpret_cast<const uint8_t*>(bytes.data());
  const uint64_t size = bytes.size();
  constexpr uint64_t kMaxEntries = uint64_t{1} << 56;
  for (uint64_t c : counts) {
    if (c >= kMaxEntries) {
      *problem = "the header's n-gram count " + std::to_string(c) + " is impossibly large";
      return;
    }
  }
  // Vocabulary: the number of words without <unk>, then their sorted hashes.
  uint64_t at = 8 + 8 * counts[0];
  if (size < at) {
    *problem = "it ends inside the vocabulary";
    return;
  }
  vocab_words_ = Load<uint64_t>(base);
  if (vocab_words_ > counts[0]) {
    *problem = "the vocabulary claims " + std::to_string(vocab_words_) + " words of " +
               std::to_string(counts[0]);
    return;
  }
  vocab_ = base + 8;
  unigrams_ = base + at;
  at += (counts[0] + 2) * kUnigramEntryBytes;
  word_bits_ = RequiredBits(counts[0]);
  const size_t order = counts.size();
  for (size_t n = 2; n <= order; ++n) {
    Level level;
    level.entries = counts[n - 1];
    const bool longest = n == order;
    level.next_limit = longest ? 0 : counts[n];
    level.next_bits = longest ? 0 : RequiredBits(counts[n]);
    level.total_bits = static_cast<uint8_t>(word_bits_ + (longest ? 31 : 63) + level.next_bits);
    uint64_t level_bytes;
    if (at > size || !PackedSize(level.entries, level.total_bits, &level_bytes) ||
        level_bytes > size - at) {
      *problem = "it ends inside the " + std::to_string(n) + "-gram table";
      return;
    }
    level.base = base + at;
    at += level_bytes;
    (longest ? longest_ : middles_.emplace_back()) = level;
  }
  if (size < at) *problem = "it ends inside the trie";
}

WordIndex TrieSearch::Index(std::string_view word) const {
  const uint64_t key = HashWord(word);
  uint64_t lo = 0, hi = vocab_words_;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const uint64_t got = Load<uint64_t>(vocab_ + 8 * mid);
    if (got == key) return static_cast<WordIndex>(mid + 1);  // <unk> is 0
    if (got < key) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return 0;
}

TrieSearch::Node TrieSearch::CheckedRange(uint64_t begin, uint64_t end, uint64_t limit) const {
  if (begin > end || end > limit) {
    throw Error(name_, 0,
                "damaged KenLM trie: an n-gram's range [" + std::to_string(begin) + ", " +
                    std::to_string(end) + ") lies outside its table of " + std::to_string(limit),
                "copy the model again, or rebuild it with KenLM's build_binary");
  }
  return {begin, end};
}

int64_t TrieSearch::FindWord(const Level& level, Node range, WordIndex w) const {
  uint64_t lo = range.begin, hi = range.end;
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    const uint64_t got = ReadBits(level.base, mid * level.total_bits, word_bits_);
    if (got == w) return static_cast<int64_t>(mid);
    if (got < w) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

Weights TrieSearch::Unigram(WordIndex w, Node* node) const {
  const uint8_t* p = unigrams_ + uint64_t{w} * kUnigramEntryBytes;
  const uint64_t limit = counts_.size() == 2 ? longest_.entries : middles_[0].entries;
  *node = CheckedRange(Load<uint64_t>(p + 8), Load<uint64_t>(p + 8 + kUnigramEntryBytes), limit);
  return {Load<float>(p), Load<float>(p + 4), node->begin == node->end};
}

bool TrieSearch::Middle(int order_minus_2, WordIndex w, Node* node, Weights* out) const {
  const Level& level = middles_[order_minus_2];
  const int64_t at = FindWord(level, *node, w);
  if (at < 0) return false;
  const uint64_t bit = static_cast<uint64_t>(at) * level.total_bits + word_bits_;
  const uint64_t next = bit + 63;
  *node = CheckedRange(ReadBits(level.base, next, level.next_bits),
                       ReadBits(level.base, next + level.total_bits, level.next_bits),
                       level.next_limit);
  *out = {ReadProb31(level.base, bit), ReadFloat32(level.base, bit + 31), node->begin == node->end};
  return true;
}

bool TrieSearch::Longest(WordIndex w, Node node, float* prob) const {
  const int64_t at = FindWord(longest_, node, w);
  if (at < 0) return false;
  *prob = ReadProb31(longest_.base, static_cast<uint64_t>(at) * longest_.total_bits + word_bits_);
  return true;
}

}  // namespace djshard::model::kenlm
