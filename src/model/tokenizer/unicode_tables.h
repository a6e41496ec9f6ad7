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
// Code points assigned in the Unicode version of Hugging Face's normalizer.
extern const CodeRange kNormalizationAssigned[];
extern const size_t kNormalizationAssignedSize;

}  // namespace djshard::model::tokenizer
