#include "src/ops/unicode_normalization.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "src/ops/normalization_tables.h"

namespace djshard::ops::unicode {

namespace {

constexpr uint32_t kHangulFirst = 0xAC00;
constexpr uint32_t kHangulCount = 11172;
constexpr uint32_t kJamoLFirst = 0x1100, kJamoLCount = 19;
constexpr uint32_t kJamoVFirst = 0x1161, kJamoVCount = 21;
constexpr uint32_t kJamoTBase = 0x11A7, kJamoTCount = 28;  // T index 0 means "no T"

// One 16-bit property per code point: the combining class in the low byte,
// one "quick check is not Yes" bit per form above it. Held as a two-stage
// table of 256-code-point blocks, identical blocks shared; built on first use
// and read by every thread.
class PropertyTable {
 public:
  static const PropertyTable& Get() {
    static const PropertyTable table;
    return table;
  }
  uint16_t Lookup(uint32_t cp) const {
    if (cp >= 0x110000) return 0;
    return blocks_[static_cast<size_t>(index_[cp >> 8]) * 256 + (cp & 0xFF)];
  }

 private:
  PropertyTable() {
    std::vector<uint16_t> all(0x110000, 0);
    for (size_t i = 0; i < kCombiningClassSize; ++i) {
      for (uint32_t cp = kCombiningClass[i].lo; cp <= kCombiningClass[i].hi; ++cp) {
        all[cp] = kCombiningClass[i].ccc;
      }
    }
    MarkRanges(&all, kNfcUnstable, kNfcUnstableSize, UnstableBit(NormalForm::kNfc));
    MarkRanges(&all, kNfdUnstable, kNfdUnstableSize, UnstableBit(NormalForm::kNfd));
    MarkRanges(&all, kNfkcUnstable, kNfkcUnstableSize, UnstableBit(NormalForm::kNfkc));
    MarkRanges(&all, kNfkdUnstable, kNfkdUnstableSize, UnstableBit(NormalForm::kNfkd));
    index_.resize(0x1100);
    for (uint32_t block = 0; block < 0x1100; ++block) {
      const uint16_t* start = all.data() + block * 256;
      size_t found = blocks_.size() / 256;
      for (size_t b = 0; b < blocks_.size() / 256; ++b) {
        if (std::equal(start, start + 256, blocks_.data() + b * 256)) {
          found = b;
          break;
        }
      }
      if (found == blocks_.size() / 256) blocks_.insert(blocks_.end(), start, start + 256);
      index_[block] = static_cast<uint16_t>(found);
    }
  }
  static void MarkRanges(std::vector<uint16_t>* all, const CodePointRange* ranges, size_t size,
                         uint16_t bit) {
    for (size_t i = 0; i < size; ++i) {
      for (uint32_t cp = ranges[i].lo; cp <= ranges[i].hi; ++cp) (*all)[cp] |= bit;
    }
  }

 public:
  static uint16_t UnstableBit(NormalForm form) {
    return static_cast<uint16_t>(0x100u << static_cast<int>(form));
  }

 private:
  std::vector<uint16_t> index_;
  std::vector<uint16_t> blocks_;
};

bool Composes(NormalForm form) { return form == NormalForm::kNfc || form == NormalForm::kNfkc; }

// The full decomposition of `cp` for `form`, appended to *out.
void AppendDecomposition(NormalForm form, uint32_t cp, std::u32string* out) {
  if (cp >= kHangulFirst && cp < kHangulFirst + kHangulCount) {
    const uint32_t s = cp - kHangulFirst;
    out->push_back(kJamoLFirst + s / (kJamoVCount * kJamoTCount));
    out->push_back(kJamoVFirst + (s % (kJamoVCount * kJamoTCount)) / kJamoTCount);
    if (s % kJamoTCount != 0) out->push_back(kJamoTBase + s % kJamoTCount);
    return;
  }
  const bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  const Decomposition* table = compat ? kCompatibilityDecomposition : kCanonicalDecomposition;
  const size_t size = compat ? kCompatibilityDecompositionSize : kCanonicalDecompositionSize;
  const Decomposition* end = table + size;
  const Decomposition* it =
      std::lower_bound(table, end, cp, [](const Decomposition& d, uint32_t c) { return d.cp < c; });
  if (it == end || it->cp != cp) {
    out->push_back(cp);
    return;
  }
  out->append(reinterpret_cast<const char32_t*>(kDecompositionPool + it->offset), it->length);
}

// The primary composite of (first, second), or 0.
uint32_t Compose(uint32_t first, uint32_t second) {
  if (first >= kJamoLFirst && first < kJamoLFirst + kJamoLCount && second >= kJamoVFirst &&
      second < kJamoVFirst + kJamoVCount) {
    return kHangulFirst +
           ((first - kJamoLFirst) * kJamoVCount + (second - kJamoVFirst)) * kJamoTCount;
  }
  if (first >= kHangulFirst && first < kHangulFirst + kHangulCount &&
      (first - kHangulFirst) % kJamoTCount == 0 && second > kJamoTBase &&
      second < kJamoTBase + kJamoTCount) {
    return first + (second - kJamoTBase);
  }
  const Composition* end = kComposition + kCompositionSize;
  const Composition* it = std::lower_bound(
      kComposition, end, std::make_pair(first, second), [](const Composition& c, const auto& key) {
        return c.first < key.first || (c.first == key.first && c.second < key.second);
      });
  if (it == end || it->first != first || it->second != second) return 0;
  return it->composite;
}

// Stable-sorts every run of non-starters by combining class.
void ReorderMarks(std::u32string* text) {
  std::u32string& t = *text;
  for (size_t i = 1; i < t.size(); ++i) {
    const uint8_t c = CombiningClass(t[i]);
    if (c == 0) continue;
    size_t j = i;
    while (j > 0 && CombiningClass(t[j - 1]) > c) {
      std::swap(t[j - 1], t[j]);
      --j;
    }
  }
}

// Canonical composition of a decomposed, reordered text.
void ComposeInPlace(std::u32string* text) {
  std::u32string& t = *text;
  if (t.empty()) return;
  size_t starter = 0;
  int last_class = CombiningClass(t[0]) == 0 ? 0 : 256;
  size_t out = 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const uint32_t ch = t[i];
    const int ch_class = CombiningClass(ch);
    const uint32_t composite =
        (last_class < ch_class || last_class == 0) ? Compose(t[starter], ch) : 0;
    if (composite != 0) {
      t[starter] = composite;
      continue;
    }
    if (ch_class == 0) starter = out;
    last_class = ch_class;
    t[out++] = ch;
  }
  t.resize(out);
}

}  // namespace

uint8_t CombiningClass(uint32_t cp) {
  return static_cast<uint8_t>(PropertyTable::Get().Lookup(cp) & 0xFF);
}

QuickCheckValue QuickCheck(NormalForm form, uint32_t cp) {
  const uint16_t p = PropertyTable::Get().Lookup(cp);
  return {static_cast<uint8_t>(p & 0xFF), (p & PropertyTable::UnstableBit(form)) == 0};
}

void Normalize(NormalForm form, std::u32string* text) {
  const PropertyTable& table = PropertyTable::Get();
  const uint16_t unstable = PropertyTable::UnstableBit(form);
  uint8_t last_class = 0;
  bool normalized = true;
  for (const char32_t cp : *text) {
    const uint16_t p = table.Lookup(cp);
    const uint8_t c = static_cast<uint8_t>(p & 0xFF);
    if ((p & unstable) != 0 || (c != 0 && last_class > c)) {
      normalized = false;
      break;
    }
    last_class = c;
  }
  if (normalized) return;
  // A code point with a decomposition is exactly one that NFD (NFKD) changes.
  const bool compat = form == NormalForm::kNfkc || form == NormalForm::kNfkd;
  const uint16_t decomposable =
      PropertyTable::UnstableBit(compat ? NormalForm::kNfkd : NormalForm::kNfd);
  std::u32string decomposed;
  decomposed.reserve(text->size() + text->size() / 4);
  for (const char32_t cp : *text) {
    if (table.Lookup(cp) & decomposable) {
      AppendDecomposition(form, cp, &decomposed);
    } else {
      decomposed.push_back(cp);
    }
  }
  ReorderMarks(&decomposed);
  if (Composes(form)) ComposeInPlace(&decomposed);
  text->swap(decomposed);
}

}  // namespace djshard::ops::unicode
