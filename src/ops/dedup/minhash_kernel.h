#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace djshard::ops::dedup {

// The minimum over a document's shingle hashes hv of Data-Juicer's
// permutations ((hv * a + b) mod 2^64 mod (2^61 - 1)) & 0xFFFFFFFF, for every
// (a, b) pair. Uses AVX-512 when the CPU has it. Not thread-safe.
class MinhashKernel {
 public:
  void Reset(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b);
  // Starts a document.
  void Start() {
    pending_.clear(), mins_.assign(a_.size(), UINT32_MAX);
    seen_count_ = 0;
    if (++generation_ == uint64_t{1} << 32) {  // stamps would wrap: empty the table
      seen_.assign(seen_.size(), 0);
      generation_ = 1;
    }
  }
  // Adds one shingle hash (sha1_hash32). A hash the document already had
  // changes no minimum and is skipped: Data-Juicer takes the set of shingles.
  void Add(uint32_t hv) {
    if (!FirstTime(hv)) return;
    pending_.push_back(hv);
    if (pending_.size() == kBatch) Flush();
  }
  // The document's minhash values, one per permutation.
  void Finish(std::vector<uint32_t>* out);

  // Whether the AVX-512 kernel runs (for the benchmark's report).
  static bool UsesAvx512();

 private:
  static constexpr size_t kBatch = 256;
  // The hashes seen in the document, in an open-addressing table whose slots
  // hold (generation << 32 | hash), so that Start empties it at once. It
  // stops growing at kMaxSeen slots; hashes then go to the kernel unchecked.
  static constexpr size_t kMaxSeen = size_t{1} << 18;
  bool FirstTime(uint32_t hv);
  void Flush();
  std::vector<uint64_t> a_, b_;
  std::vector<uint64_t> mins_;
  std::vector<uint64_t> pending_;
  std::vector<uint64_t> seen_;
  size_t seen_count_ = 0;
  uint64_t generation_ = 0;
};

}  // namespace djshard::ops::dedup
