#include "src/ops/dedup/minhash_kernel.h"

#include <algorithm>

#include "src/ops/dedup/hashes.h"
#include "src/ops/dedup/simd.h"

namespace djshard::ops::dedup {
namespace {

constexpr uint64_t kMersenne = (uint64_t{1} << 61) - 1;

// x mod (2^61 - 1) for any 64-bit x: 2^61 is 1 modulo the prime.
inline uint64_t ModMersenne(uint64_t x) {
  const uint64_t r = (x & kMersenne) + (x >> 61);
  return r >= kMersenne ? r - kMersenne : r;
}

void UpdateScalar(const uint64_t* a, const uint64_t* b, uint64_t* mins, size_t from, size_t n,
                  const uint64_t* hv, size_t count) {
  for (size_t j = from; j < n; ++j) {
    uint64_t m = mins[j];
    for (size_t t = 0; t < count; ++t) {
      m = std::min(m, ModMersenne(hv[t] * a[j] + b[j]) & 0xFFFFFFFFu);  // wraps as numpy does
    }
    mins[j] = m;
  }
}

// Eight permutations at a time; returns how many permutations it covered.
__attribute__((target("avx512f,avx512dq"))) size_t UpdateAvx512(const uint64_t* a,
                                                                const uint64_t* b, uint64_t* mins,
                                                                size_t n, const uint64_t* hv,
                                                                size_t count) {
  const __m512i prime = _mm512_set1_epi64(static_cast<long long>(kMersenne));
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFFLL);
  size_t j = 0;
  for (; j + 8 <= n; j += 8) {
    // hv < 2^32, so hv * a mod 2^64 = hv * a_lo + (hv * a_hi << 32): two
    // 32x32 multiplies, cheaper than a 64-bit vpmullq
    const __m512i va = _mm512_loadu_si512(a + j);
    const __m512i va_hi = _mm512_srli_epi64(va, 32);
    const __m512i vb = _mm512_loadu_si512(b + j);
    __m512i m = _mm512_loadu_si512(mins + j);
    for (size_t t = 0; t < count; ++t) {
      const __m512i h = _mm512_set1_epi64(static_cast<long long>(hv[t]));
      const __m512i product = _mm512_add_epi64(_mm512_mul_epu32(h, va),
                                               _mm512_slli_epi64(_mm512_mul_epu32(h, va_hi), 32));
      const __m512i x = _mm512_add_epi64(product, vb);
      __m512i r = _mm512_add_epi64(_mm512_and_si512(x, prime), _mm512_srli_epi64(x, 61));
      r = _mm512_min_epu64(r, _mm512_sub_epi64(r, prime));  // r - P wraps when r < P
      // the minimum of the low 32 bits, in the low 32-bit half of each
      // 64-bit element (what the high halves get is dropped below)
      m = _mm512_min_epu32(m, r);
    }
    _mm512_storeu_si512(mins + j, _mm512_and_si512(m, low32));
  }
  return j;
}

bool CpuHasAvx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has && !PortableKernelsOnly();
}

}  // namespace

void MinhashKernel::Reset(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  a_ = a;
  b_ = b;
  pending_.reserve(kBatch);
}

bool MinhashKernel::FirstTime(uint32_t hv) {
  if (2 * (seen_count_ + 1) > seen_.size()) {  // at most half full
    if (seen_.size() >= kMaxSeen) return true;
    std::vector<uint64_t> old;
    old.swap(seen_);
    seen_.assign(std::max<size_t>(1024, 2 * old.size()), 0);
    seen_count_ = 0;
    for (uint64_t slot : old) {
      if (slot >> 32 == generation_) FirstTime(static_cast<uint32_t>(slot));
    }
  }
  const size_t mask = seen_.size() - 1;
  const uint64_t entry = generation_ << 32 | hv;
  for (size_t i = hv & mask;; i = (i + 1) & mask) {  // hv is a SHA-1 prefix: spread well
    if (seen_[i] == entry) return false;
    if (seen_[i] >> 32 != generation_) {
      seen_[i] = entry;
      ++seen_count_;
      return true;
    }
  }
}

void MinhashKernel::Flush() {
  const size_t n = a_.size();
  size_t done = 0;
  if (CpuHasAvx512()) {
    done = UpdateAvx512(a_.data(), b_.data(), mins_.data(), n, pending_.data(), pending_.size());
  }
  UpdateScalar(a_.data(), b_.data(), mins_.data(), done, n, pending_.data(), pending_.size());
  pending_.clear();
}

void MinhashKernel::Finish(std::vector<uint32_t>* out) {
  Flush();
  out->resize(mins_.size());
  for (size_t j = 0; j < mins_.size(); ++j) (*out)[j] = static_cast<uint32_t>(mins_[j]);
}

bool MinhashKernel::UsesAvx512() { return CpuHasAvx512(); }

}  // namespace djshard::ops::dedup
