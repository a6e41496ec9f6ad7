// ftfy's mojibake heuristic (badness.is_bad) and the per-character data that
// the other steps share.
#include <algorithm>
#include <vector>

#include "djshard/ops/text.h"
#include "src/ops/ftfy/fixes.h"
#include "src/ops/ftfy/ftfy_tables.h"

namespace djshard::ops::ftfy {

namespace {

// Per BMP code point: its badness kind, its detector flags, and whether it
// is special and whether the badness regex names it; per badness kind, the
// branches whose first code point may have that kind. Built once, read by
// every thread.
class CharData {
 public:
  static const CharData& Get() {
    static const CharData data;
    return data;
  }
  bool IsSpecial(uint32_t cp) const { return cp < 0x10000 && (bmp_[cp] & kSpecialBit); }
  // A code point that some branch of the regex names (every match has one).
  bool IsBadnessChar(uint32_t cp) const { return cp < 0x10000 && (bmp_[cp] & kNamedBit); }
  uint8_t Detector(uint32_t cp) const { return cp < 0x10000 ? (bmp_[cp] >> 8) & 0x1F : 0; }
  uint8_t Kind(uint32_t cp) const {
    if (cp < 0x10000) return static_cast<uint8_t>(bmp_[cp] & 0xFF);
    return OtherKind(cp);
  }
  // The branches whose anchor (see Anchor) may have this kind.
  uint64_t AnchoredBranches(uint8_t kind) const { return anchored_branches_[kind]; }
  // Where a match of branch b can start relative to its anchor: between
  // anchor - max_offset and anchor - min_offset.
  size_t MinOffset(size_t b) const { return min_offset_[b]; }
  size_t MaxOffset(size_t b) const { return max_offset_[b]; }

 private:
  static constexpr uint16_t kSpecialBit = 0x2000;
  static constexpr uint16_t kNamedBit = 0x4000;

  static uint8_t OtherKind(uint32_t cp) {
    const int space = text::IsSpace(cp) ? 1 : 0;
    const int word = text::IsAlnum(cp) ? 1 : 0;  // '_' is ASCII
    return kOtherBadnessKind[space * 2 + word];
  }

  CharData()
      : bmp_(0x10000),
        anchored_branches_(kNumBadnessKinds, 0),
        min_offset_(kBadnessBranchesSize, 0),
        max_offset_(kBadnessBranchesSize, 0) {
    for (uint32_t cp = 0; cp < 0x10000; ++cp) {
      bmp_[cp] = cp < 0x80 ? kAsciiBadnessKind[cp] : OtherKind(cp);
    }
    for (size_t i = 0; i < kSpecialCharsSize; ++i) {
      const SpecialChar& c = kSpecialChars[i];
      const bool named = std::find(kOtherBadnessKind, kOtherBadnessKind + 4, c.badness_kind) ==
                         kOtherBadnessKind + 4;
      bmp_[c.cp] = static_cast<uint16_t>(c.badness_kind | (c.detector << 8) | kSpecialBit |
                                         (named ? kNamedBit : 0));
    }
    for (size_t b = 0; b < kBadnessBranchesSize; ++b) Anchor(b);
  }

  // A class that holds only code points >= 0x80 that the regex names.
  static bool NamesOnlyNonAscii(const KindSet& cls) {
    for (uint32_t cp = 0; cp < 0x80; ++cp) {
      if (cls.Has(kAsciiBadnessKind[cp])) return false;
    }
    return std::none_of(kOtherBadnessKind, kOtherBadnessKind + 4,
                        [&](uint8_t kind) { return cls.Has(kind); });
  }

  // A branch's anchor is its first item whose class NamesOnlyNonAscii (the
  // generator checks that every branch has one): every match of the branch
  // has such a code point there.
  void Anchor(size_t b) {
    const BadnessBranch& branch = kBadnessBranches[b];
    for (size_t i = branch.first; i < size_t{branch.first} + branch.count; ++i) {
      const BadnessItem& item = kBadnessItems[i];
      if (item.type == BadnessItem::kClass && NamesOnlyNonAscii(kBadnessClasses[item.cls])) {
        for (size_t kind = 0; kind < kNumBadnessKinds; ++kind) {
          if (kBadnessClasses[item.cls].Has(static_cast<uint8_t>(kind))) {
            anchored_branches_[kind] |= uint64_t{1} << b;
          }
        }
        return;
      }
      if (item.type == BadnessItem::kClass) ++min_offset_[b];
      if (item.type != BadnessItem::kBeginning) ++max_offset_[b];
    }
  }

  std::vector<uint16_t> bmp_;
  std::vector<uint64_t> anchored_branches_;
  std::vector<size_t> min_offset_, max_offset_;
};

// Whether kBadnessItems[item .. end) matches text[pos ..), backtracking over
// optional items as Python's regex engine does.
bool MatchItems(const char32_t* text, size_t size, size_t pos, size_t item, size_t end) {
  if (item == end) return true;
  const BadnessItem& it = kBadnessItems[item];
  const bool here = pos < size && it.type != BadnessItem::kBeginning &&
                    kBadnessClasses[it.cls].Has(CharData::Get().Kind(text[pos]));
  switch (it.type) {
    case BadnessItem::kBeginning:
      return pos == 0 && MatchItems(text, size, pos, item + 1, end);
    case BadnessItem::kClass:
      return here && MatchItems(text, size, pos + 1, item + 1, end);
    case BadnessItem::kOptional:
      return (here && MatchItems(text, size, pos + 1, item + 1, end)) ||
             MatchItems(text, size, pos, item + 1, end);
  }
  return false;
}

}  // namespace

bool IsSpecial(uint32_t cp) { return CharData::Get().IsSpecial(cp); }

uint8_t DetectorFlags(uint32_t cp) { return CharData::Get().Detector(cp); }

bool IsBad(const char32_t* text, size_t size) {
  // Each match is found from its branch's anchor.
  const CharData& data = CharData::Get();
  for (size_t anchor = 0; anchor < size; ++anchor) {
    if (!data.IsBadnessChar(text[anchor])) continue;
    for (uint64_t branches = data.AnchoredBranches(data.Kind(text[anchor])); branches != 0;
         branches &= branches - 1) {
      const size_t b = __builtin_ctzll(branches);
      const BadnessBranch& branch = kBadnessBranches[b];
      for (size_t offset = data.MinOffset(b); offset <= data.MaxOffset(b) && offset <= anchor;
           ++offset) {
        if (MatchItems(text, size, anchor - offset, branch.first,
                       size_t{branch.first} + branch.count)) {
          return true;
        }
      }
    }
  }
  return false;
}

}  // namespace djshard::ops::ftfy
