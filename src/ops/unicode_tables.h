#pragma once

#include <cstddef>
#include <cstdint>

namespace djshard::ops::unicode {

struct CodePointRange {
  uint32_t lo, hi;  // inclusive
};

// A code point whose lower-case form differs: one or two code points (second 0 if one).
struct LowerMapping {
  uint32_t cp;
  uint32_t lower[2];
};

// Sorted, non-overlapping ranges (Python 3.11, Unicode 14.0).
extern const CodePointRange kAlnum[];  // str.isalnum()
extern const size_t kAlnumSize;
extern const CodePointRange kSpace[];  // str.isspace(), what str.strip() removes
extern const size_t kSpaceSize;
extern const CodePointRange kSpecial[];  // Data-Juicer's special characters
extern const size_t kSpecialSize;
extern const CodePointRange kCased[];  // cased and not case-ignorable (Final_Sigma's context)
extern const size_t kCasedSize;
extern const CodePointRange kCaseIgnorable[];  // skipped when Final_Sigma looks for a cased letter
extern const size_t kCaseIgnorableSize;
extern const LowerMapping kLower[];  // str.lower(), sorted by cp
extern const size_t kLowerSize;

}  // namespace djshard::ops::unicode
