#pragma once

#include <cstddef>
#include <cstdint>

#include "src/ops/unicode_tables.h"

// Data for Unicode normalization, generated from Python 3.11's unicodedata
// (Unicode 14.0) by scripts/gen_normalization_tables.py.
namespace djshard::ops::unicode {

struct CombiningClassRange {
  uint32_t lo, hi;  // inclusive
  uint8_t ccc;      // canonical combining class, never 0 here
};

// The full (recursive, canonically ordered) decomposition of `cp`:
// kDecompositionPool[offset .. offset + length).
struct Decomposition {
  uint32_t cp;
  uint32_t offset;
  uint32_t length;
};

// A primary composite that canonical composition produces from (first, second).
struct Composition {
  uint32_t first, second, composite;
};

extern const CombiningClassRange kCombiningClass[];  // sorted, non-overlapping
extern const size_t kCombiningClassSize;
// Code points that NFD / NFKD change, Hangul syllables excepted; sorted by cp.
extern const Decomposition kCanonicalDecomposition[];
extern const size_t kCanonicalDecompositionSize;
extern const Decomposition kCompatibilityDecomposition[];
extern const size_t kCompatibilityDecompositionSize;
extern const uint32_t kDecompositionPool[];
extern const Composition kComposition[];  // sorted by (first, second); Hangul excepted
extern const size_t kCompositionSize;
// Code points whose quick-check property is not Yes (No or Maybe) for a form.
extern const CodePointRange kNfcUnstable[];
extern const size_t kNfcUnstableSize;
extern const CodePointRange kNfdUnstable[];
extern const size_t kNfdUnstableSize;
extern const CodePointRange kNfkcUnstable[];
extern const size_t kNfkcUnstableSize;
extern const CodePointRange kNfkdUnstable[];
extern const size_t kNfkdUnstableSize;

}  // namespace djshard::ops::unicode
