#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

// How an `expand` entry cuts a parent's text into children (SPEC-lineage §1).
// Splitting is a pure function of the text and the mode, and every child keeps
// the separator that followed it, so prefix + each child's text followed by
// its separator is the original text, byte for byte.
namespace djshard::ops {

enum class SplitMode { kParagraph, kSentence, kLines, kChars, kField };

// A parsed `by:` value: paragraph | sentence | lines | chars:N | field:KEY.
struct SplitBy {
  SplitMode mode = SplitMode::kParagraph;
  size_t chars = 0;   // N of chars:N (>= 1)
  std::string field;  // KEY of field:KEY
};

// Parses `by`; false (and *why set) when it is not a known mode or chars:N has
// N < 1 or field: has no key.
bool ParseSplitBy(std::string_view by, SplitBy* out, std::string* why);
// The mode as the recipe writes it ("chars:7").
std::string SplitByName(const SplitBy& by);

// One child of a text split: its text and the separator after it (views into
// the split text).
struct TextPiece {
  std::string_view text;
  std::string_view sep;
};

struct TextSplit {
  std::string_view prefix;  // leading whitespace kept with the parent (paragraph, sentence)
  std::vector<TextPiece> pieces;
  bool over_limit = false;  // splitting stopped after max_pieces + 1 pieces
};

// Splits `text` (valid UTF-8) by `mode` (not kField). Stops as soon as
// max_pieces + 1 pieces are found, setting over_limit, so a huge text never
// materializes more than that many views.
void SplitText(std::string_view text, const SplitBy& by, size_t max_pieces, TextSplit* out);

// Python's str.isspace() for one code point.
bool IsPythonSpace(uint32_t cp);

}  // namespace djshard::ops
