#pragma once

#include <cstddef>
#include <cstdint>

#include "src/ops/unicode_tables.h"

// Character data of ftfy 6.3.1, generated from ftfy and Python 3.11 (Unicode
// 14.0) by scripts/gen_ftfy_tables.py.
namespace djshard::ops::ftfy {

// A single-byte encoding that ftfy tries when it undoes mojibake.
struct Charmap {
  const char* name;  // ftfy's name: "latin-1", "sloppy-windows-1252", ...
  bool sloppy;       // a "sloppy" codec: byte 1A decodes to U+FFFD
  uint16_t decode[256];
};
// In the order ftfy tries them (chardata.CHARMAP_ENCODINGS).
constexpr int kNumCharmaps = 10;
extern const Charmap kCharmaps[kNumCharmaps];

// Bits of SpecialChar::detector: membership in the classes of ftfy's
// UTF8_DETECTOR_RE.
enum DetectorBit : uint8_t {
  kFirstOf2 = 1,
  kFirstOf3 = 2,
  kFirstOf4 = 4,
  kContinuation = 8,
  kContinuationStrict = 16,
};

// A non-ASCII code point that some fixer or heuristic of ftfy looks at.
// Every such code point is in the BMP.
struct SpecialChar {
  uint32_t cp;
  uint8_t badness_kind;
  uint8_t detector;  // DetectorBit flags
};
extern const SpecialChar kSpecialChars[];  // sorted by cp
extern const size_t kSpecialCharsSize;

// The badness heuristic (ftfy.badness.BADNESS_RE). Code points fall into
// kinds that no class of the regex tells apart: ASCII ones by table, special
// ones by SpecialChar, any other by kOtherBadnessKind[isspace * 2 + isword].
extern const uint8_t kAsciiBadnessKind[128];
extern const uint8_t kOtherBadnessKind[4];
extern const size_t kNumBadnessKinds;
struct KindSet {
  uint64_t bits[4];
  bool Has(uint8_t kind) const { return (bits[kind >> 6] >> (kind & 63)) & 1; }
};
extern const KindSet kBadnessClasses[];
// One step of a branch: a code point in class `cls`, optionally one, or the
// beginning of the text.
struct BadnessItem {
  enum Type : uint8_t { kClass, kOptional, kBeginning };
  Type type;
  uint8_t cls;
};
extern const BadnessItem kBadnessItems[];
// The regex's alternatives: kBadnessItems[first .. first + count).
struct BadnessBranch {
  uint8_t first, count;
};
extern const BadnessBranch kBadnessBranches[];
extern const size_t kBadnessBranchesSize;

// ftfy's HTML entities ("&eacute;", "&EACUTE;", ...), sorted by name (bytes).
struct HtmlEntity {
  const char* name;
  const char* value;  // UTF-8
};
extern const HtmlEntity kHtmlEntities[];
extern const size_t kHtmlEntitiesSize;
// Python's html module: numeric references it replaces, and code points it drops.
struct CharRef {
  uint32_t number, cp;
};
extern const CharRef kInvalidCharRefs[];  // sorted by number
extern const size_t kInvalidCharRefsSize;
extern const uint32_t kInvalidCodePoints[];  // sorted
extern const size_t kInvalidCodePointsSize;

// A code point that a translation table replaces by a UTF-8 string.
struct Replacement {
  uint32_t cp;
  const char* value;
};
extern const Replacement kLigatures[];  // sorted by cp
extern const size_t kLigaturesSize;
extern const Replacement kWidthMap[];  // sorted by cp
extern const size_t kWidthMapSize;

// What \d matches in a Python str regex.
extern const unicode::CodePointRange kDecimalDigits[];
extern const size_t kDecimalDigitsSize;

}  // namespace djshard::ops::ftfy
