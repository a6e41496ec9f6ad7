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
  void Start() { pending_.clear(), mins_.assign(a_.size(), UINT32_MAX); }
  // Adds one shingle hash (sha1_hash32).
  void Add(uint32_t hv) {
    pending_.push_back(hv);
    if (pending_.size() == kBatch) Flush();
  }
  // The document's minhash values, one per permutation.
  void Finish(std::vector<uint32_t>* out);

  // Whether the AVX-512 kernel runs (for the benchmark's report).
  static bool UsesAvx512();

 private:
  static constexpr size_t kBatch = 256;
  void Flush();
  std::vector<uint64_t> a_, b_;
  std::vector<uint64_t> mins_;
  std::vector<uint64_t> pending_;
};

}  // namespace djshard::ops::dedup
