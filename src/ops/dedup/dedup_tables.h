#pragma once

#include <cstddef>
#include <cstdint>

#include "src/ops/unicode_tables.h"

// Character classes of the `regex` module (its own Unicode tables, which are newer than
// Python's unicodedata), as Data-Juicer's deduplicators use them. Sorted, non-overlapping.
namespace djshard::ops::dedup {

using unicode::CodePointRange;

extern const CodePointRange kRegexPunctuation[];  // \p{P}
extern const size_t kRegexPunctuationSize;
extern const CodePointRange kRegexSpace[];  // \s
extern const size_t kRegexSpaceSize;
extern const CodePointRange kRegexDigit[];  // \d
extern const size_t kRegexDigitSize;

}  // namespace djshard::ops::dedup
