#pragma once
// Unicode category sets as Hugging Face tokenizers sees them (the old Unicode
// version of the `unicode_categories` crate). Generated: see unicode_tables.cc.

#include <cstddef>
#include <cstdint>

namespace djshard::model::tokenizer {

// [first, last) code points.
struct CodeRange {
  uint32_t first;
  uint32_t last;
};

extern const CodeRange kPunctuation[];  // P*
extern const size_t kPunctuationSize;
extern const CodeRange kOther[];  // Cc, Cf, Co
extern const size_t kOtherSize;
extern const CodeRange kMarkNonspacing[];  // Mn
extern const size_t kMarkNonspacingSize;
// Marks (M*) of Unicode 9.0: StripAccents' is_combining_mark.
extern const CodeRange kCombiningMark[];
extern const size_t kCombiningMarkSize;
// Code points assigned in the Unicode version of Hugging Face's normalizer.
extern const CodeRange kNormalizationAssigned[];
extern const size_t kNormalizationAssignedSize;

// Code points libutf8proc (Unicode 15.0) does not know and Hugging Face does:
// letters and numbers of Unicode 16.0 (Oniguruma), simple lower-case mappings
// of Unicode 17.0 (Rust's std).
struct LowerPair {
  uint32_t upper;
  uint32_t lower;
};
extern const CodeRange kLettersSince15[];
extern const size_t kLettersSince15Size;
extern const CodeRange kNumbersSince15[];
extern const size_t kNumbersSince15Size;
extern const CodeRange kMarksSince15[];
extern const size_t kMarksSince15Size;
extern const CodeRange kDecimalsSince15[];
extern const size_t kDecimalsSince15Size;
extern const LowerPair kLowercaseSince15[];  // sorted by upper
extern const size_t kLowercaseSince15Size;

}  // namespace djshard::model::tokenizer
