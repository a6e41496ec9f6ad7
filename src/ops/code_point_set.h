#pragma once

#include <algorithm>
#include <bitset>
#include <cstddef>
#include <cstdint>

#include "src/ops/unicode_tables.h"

namespace djshard::ops {

// A set of code points given as sorted ranges: a bitmap for the Basic
// Multilingual Plane, a binary search of the ranges above it.
class CodePointSet {
 public:
  CodePointSet(const unicode::CodePointRange* ranges, size_t size) : ranges_(ranges), size_(size) {
    for (size_t i = 0; i < size; ++i) {
      for (uint32_t cp = ranges[i].lo; cp <= ranges[i].hi && cp < 0x10000; ++cp) bmp_.set(cp);
    }
  }
  bool Contains(uint32_t cp) const {
    if (cp < 0x10000) return bmp_.test(cp);
    const unicode::CodePointRange* end = ranges_ + size_;
    const auto* it =
        std::upper_bound(ranges_, end, cp, [](uint32_t c, const auto& r) { return c < r.lo; });
    return it != ranges_ && cp <= (it - 1)->hi;
  }

 private:
  std::bitset<0x10000> bmp_;
  const unicode::CodePointRange* ranges_;
  size_t size_;
};

}  // namespace djshard::ops
