#pragma once

#include <cstdint>
#include <string>

// Unicode normalization with the results of Python 3.11's
// unicodedata.normalize() (Unicode 14.0), on text held as code points.
namespace djshard::ops::unicode {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

// The canonical combining class of `cp` (0 for starters).
uint8_t CombiningClass(uint32_t cp);

// The quick-check data of one code point. A string whose code points all
// have quick-check value Yes for a form, and whose non-zero combining classes
// never decrease along a run of non-starters, is already in that form.
struct QuickCheckValue {
  uint8_t combining_class;
  bool yes;  // quick-check value Yes for the form asked
};
QuickCheckValue QuickCheck(NormalForm form, uint32_t cp);

// Replaces *text by unicodedata.normalize(form, *text).
void Normalize(NormalForm form, std::u32string* text);

}  // namespace djshard::ops::unicode
