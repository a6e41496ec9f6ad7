// The byte-level side of ftfy's encoding repair: its single-byte charmaps,
// UTF-8 and "utf-8-variants" decoding, and the two byte transcoders.
#include <algorithm>
#include <array>
#include <vector>

#include "djshard/common/text.h"
#include "src/ops/ftfy/fixes.h"
#include "src/ops/ftfy/ftfy_tables.h"

namespace djshard::ops::ftfy {

namespace {

// For every code point that some charmap encodes: its byte in each charmap
// (-1 when none). Built once from the decoding tables, read by every thread.
class EncodeTable {
 public:
  static const EncodeTable& Get() {
    static const EncodeTable table;
    return table;
  }
  // The byte of `cp` in charmap `c`, or -1.
  int Byte(uint32_t cp, int c) const {
    if (cp < 0x80) return ascii_[c][cp];
    if (cp < kIndexed) {
      const uint16_t e = index_[cp];
      return e == kNone ? -1 : entries_[e].bytes[c];
    }
    const auto it = std::lower_bound(entries_.begin(), entries_.end(), cp,
                                     [](const Entry& e, uint32_t v) { return e.cp < v; });
    if (it == entries_.end() || it->cp != cp) return -1;
    return it->bytes[c];
  }

 private:
  struct Entry {
    uint32_t cp;
    std::array<int16_t, kNumCharmaps> bytes;
  };
  // Code points below kIndexed find their entry through index_.
  static constexpr uint32_t kIndexed = 0x2600;
  static constexpr uint16_t kNone = 0xFFFF;
  EncodeTable() {
    for (auto& row : ascii_) row.fill(-1);
    for (int c = 0; c < kNumCharmaps; ++c) {
      for (int b = 0; b < 256; ++b) {
        const uint32_t cp = kCharmaps[c].decode[b];
        if (cp < 0x80) {
          ascii_[c][cp] = static_cast<int16_t>(b);
          continue;
        }
        auto it = std::lower_bound(entries_.begin(), entries_.end(), cp,
                                   [](const Entry& e, uint32_t v) { return e.cp < v; });
        if (it == entries_.end() || it->cp != cp) {
          Entry e{cp, {}};
          e.bytes.fill(-1);
          it = entries_.insert(it, e);
        }
        it->bytes[c] = static_cast<int16_t>(b);
      }
    }
    index_.assign(kIndexed, kNone);
    for (size_t e = 0; e < entries_.size(); ++e) {
      if (entries_[e].cp < kIndexed) index_[entries_[e].cp] = static_cast<uint16_t>(e);
    }
  }
  std::array<std::array<int16_t, 128>, kNumCharmaps> ascii_;
  std::vector<Entry> entries_;
  std::vector<uint16_t> index_;
};

bool IsContinuation(unsigned char b) { return b >= 0x80 && b <= 0xBF; }
bool InRange(unsigned char b, unsigned char lo, unsigned char hi) { return b >= lo && b <= hi; }

// Decodes one well-formed UTF-8 sequence at bytes[*i] (Python's strict
// decoder: no overlong forms, no surrogates, nothing above U+10FFFF).
bool DecodeStrict(const std::string& bytes, size_t* i, uint32_t* cp) {
  const size_t n = bytes.size();
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  const unsigned char b0 = at(*i);
  size_t len;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (b0 < 0x80) {
    *cp = b0;
    *i += 1;
    return true;
  } else if (InRange(b0, 0xC2, 0xDF)) {
    len = 2;
    *cp = b0 & 0x1F;
  } else if (InRange(b0, 0xE0, 0xEF)) {
    len = 3;
    *cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (InRange(b0, 0xF0, 0xF4)) {
    len = 4;
    *cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (*i + len > n || !InRange(at(*i + 1), lo, hi)) return false;
  for (size_t k = 1; k < len; ++k) {
    if (!IsContinuation(at(*i + k))) return false;
    *cp = (*cp << 6) | (at(*i + k) & 0x3F);
  }
  *i += len;
  return true;
}

}  // namespace

bool EncodeCharmap(const std::u32string& text, int charmap, std::string* out) {
  const EncodeTable& table = EncodeTable::Get();
  out->clear();
  out->reserve(text.size());
  for (const char32_t cp : text) {
    const int b = table.Byte(cp, charmap);
    if (b < 0) return false;
    out->push_back(static_cast<char>(b));
  }
  return true;
}

// utf-8-variants decodes C0 80 as U+0000 and a CESU-8 surrogate pair
// (ED A0-AF 80-BF ED B0-BF 80-BF) as one code point. Its regular expressions
// let "$" stand for a final byte 0A, so "C0 0A" and a pair whose last byte is
// a final 0A also decode, as ftfy's codec does.
bool DecodeUtf8(const std::string& bytes, bool variants, std::u32string* out) {
  const size_t n = bytes.size();
  const auto at = [&](size_t k) { return static_cast<unsigned char>(bytes[k]); };
  out->clear();
  out->reserve(n);
  size_t i = 0;
  while (i < n) {
    const unsigned char b = at(i);
    if (b < 0x80) {
      out->push_back(b);
      ++i;
    } else if (variants && b == 0xC0) {
      if (i + 1 < n && (at(i + 1) == 0x80 || (i + 2 == n && at(i + 1) == '\n'))) {
        out->push_back(0);
        i += 2;
      } else {
        return false;
      }
    } else if (variants && b == 0xED && i + 1 < n && at(i + 1) >= 0xA0) {
      if (n - i < 6 || !InRange(at(i + 1), 0xA0, 0xAF) || !IsContinuation(at(i + 2)) ||
          at(i + 3) != 0xED || !InRange(at(i + 4), 0xB0, 0xBF) ||
          !(IsContinuation(at(i + 5)) || (n - i == 6 && at(i + 5) == '\n'))) {
        return false;
      }
      out->push_back(0x10000 + ((at(i + 1) & 0x0F) << 16) + ((at(i + 2) & 0x3F) << 10) +
                     ((at(i + 4) & 0x0F) << 6) + (at(i + 5) & 0x3F));
      i += 6;
    } else {
      uint32_t cp;
      if (!DecodeStrict(bytes, &i, &cp)) return false;
      out->push_back(cp);
    }
  }
  return true;
}

namespace {

// One alternative of a byte regex: a fixed sequence of byte classes.
using ByteClass = bool (*)(unsigned char);

bool IsAlteredLead2(unsigned char b) {
  return b == 0xC2 || b == 0xC3 || b == 0xC5 || b == 0xCE || b == 0xD0 || b == 0xD9;
}

bool IsC2DF(unsigned char b) { return InRange(b, 0xC2, 0xDF); }
bool IsC2C3(unsigned char b) { return b == 0xC2 || b == 0xC3; }
bool IsED(unsigned char b) { return b == 0xED; }
bool IsE0EF(unsigned char b) { return InRange(b, 0xE0, 0xEF); }
bool IsF0F4(unsigned char b) { return InRange(b, 0xF0, 0xF4); }
bool IsA0AF(unsigned char b) { return InRange(b, 0xA0, 0xAF); }
bool IsB0BF(unsigned char b) { return InRange(b, 0xB0, 0xBF); }
bool IsSub(unsigned char b) { return b == 0x1A; }
bool IsQuestion(unsigned char b) { return b == '?'; }
bool IsSubOrQuestion(unsigned char b) { return b == 0x1A || b == '?'; }
bool IsSubOrCont(unsigned char b) { return b == 0x1A || IsContinuation(b); }
bool IsSubQuestionOrCont(unsigned char b) { return IsSubOrQuestion(b) || IsContinuation(b); }

struct ByteAlternative {
  size_t length;
  ByteClass classes[6];
};

// chardata.LOSSY_UTF8_RE.
const ByteAlternative kLossyUtf8[] = {
    {2, {IsC2DF, IsSub}},
    {2, {IsC2C3, IsQuestion}},
    {6, {IsED, IsA0AF, IsSubOrQuestion, IsED, IsB0BF, IsSubQuestionOrCont}},
    {6, {IsED, IsA0AF, IsSubQuestionOrCont, IsED, IsB0BF, IsSubOrQuestion}},
    {3, {IsE0EF, IsSubOrQuestion, IsSubOrCont}},
    {3, {IsE0EF, IsSubOrCont, IsSubOrQuestion}},
    {4, {IsF0F4, IsSubOrQuestion, IsSubOrCont, IsSubOrCont}},
    {4, {IsF0F4, IsSubOrCont, IsSubOrQuestion, IsSubOrCont}},
    {4, {IsF0F4, IsSubOrCont, IsSubOrCont, IsSubOrQuestion}},
    {1, {IsSub}},
};

// The length of the first alternative (in order) that matches at bytes[i], or 0.
template <size_t N>
size_t MatchAt(const ByteAlternative (&alternatives)[N], const std::string& bytes, size_t i) {
  for (const ByteAlternative& alt : alternatives) {
    if (i + alt.length > bytes.size()) continue;
    bool ok = true;
    for (size_t k = 0; k < alt.length && ok; ++k) {
      ok = alt.classes[k](static_cast<unsigned char>(bytes[i + k]));
    }
    if (ok) return alt.length;
  }
  return 0;
}

// fixes.A_GRAVE_WORD_RE: "\xc3 " not followed by " ", "quele", "quela",
// "quilo" or "s ".
bool IsAGraveWord(const std::string& bytes, size_t i) {
  if (static_cast<unsigned char>(bytes[i]) != 0xC3 || i + 1 >= bytes.size() ||
      bytes[i + 1] != ' ') {
    return false;
  }
  const std::string_view rest = std::string_view(bytes).substr(i + 2);
  for (const std::string_view word : {" ", "quele", "quela", "quilo", "s "}) {
    if (rest.substr(0, word.size()) == word) return false;
  }
  return true;
}

}  // namespace

namespace {

// The length of the chardata.ALTERED_UTF8_RE match at bytes[i], or 0: its
// alternatives, in order, are [C2 C3 C5 CE D0 D9] ' ', [E2 E3] ' ' X,
// [E0-E3] X ' ', and F0 followed by two continuation bytes and a space in
// any of the three places (X: a continuation byte other than 85 and A0).
size_t AlteredUtf8At(const std::string& bytes, size_t i) {
  const auto at = [&](size_t k) -> unsigned {
    return k < bytes.size() ? static_cast<unsigned char>(bytes[k]) : 0x100;
  };
  const unsigned b0 = at(i);
  if (b0 < 0xC2) return 0;
  const auto x = [](unsigned b) { return b >= 0x80 && b <= 0xBF && b != 0x85 && b != 0xA0; };
  const auto cont = [](unsigned b) { return b >= 0x80 && b <= 0xBF; };
  const unsigned b1 = at(i + 1), b2 = at(i + 2);
  if (IsAlteredLead2(static_cast<unsigned char>(b0))) return b1 == ' ' ? 2 : 0;
  if ((b0 == 0xE2 || b0 == 0xE3) && b1 == ' ' && x(b2)) return 3;
  if (b0 >= 0xE0 && b0 <= 0xE3) return x(b1) && b2 == ' ' ? 3 : 0;
  if (b0 != 0xF0) return 0;
  const unsigned b3 = at(i + 3);
  const int spaces = (b1 == ' ') + (b2 == ' ') + (b3 == ' ');
  const int conts = cont(b1) + cont(b2) + cont(b3);
  return spaces == 1 && conts == 2 ? 4 : 0;
}

}  // namespace

bool HasAlteredUtf8(const std::string& bytes) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (static_cast<unsigned char>(bytes[i]) >= 0xC2 && AlteredUtf8At(bytes, i) != 0) return true;
  }
  return false;
}

std::string RestoreByteA0(const std::string& bytes) {
  std::string graves;
  graves.reserve(bytes.size() + 8);
  for (size_t i = 0; i < bytes.size();) {
    if (IsAGraveWord(bytes, i)) {
      graves += "\xC3\xA0 ";
      i += 2;
    } else {
      graves.push_back(bytes[i++]);
    }
  }
  std::string out;
  out.reserve(graves.size());
  for (size_t i = 0; i < graves.size();) {
    const size_t len = AlteredUtf8At(graves, i);
    if (len == 0) {
      out.push_back(graves[i++]);
      continue;
    }
    for (size_t k = 0; k < len; ++k, ++i) out.push_back(graves[i] == ' ' ? '\xA0' : graves[i]);
  }
  return out;
}

std::string ReplaceLossySequences(const std::string& bytes) {
  // Every alternative of LOSSY_UTF8_RE has a byte 1A or '?'.
  if (std::none_of(bytes.begin(), bytes.end(), [](char b) { return b == '\x1A' || b == '?'; })) {
    return bytes;
  }
  std::string out;
  out.reserve(bytes.size());
  for (size_t i = 0; i < bytes.size();) {
    // Every alternative starts with a byte >= C2 or with 1A.
    const unsigned char b = static_cast<unsigned char>(bytes[i]);
    const size_t len = b < 0xC2 && b != 0x1A ? 0 : MatchAt(kLossyUtf8, bytes, i);
    if (len == 0) {
      out.push_back(bytes[i++]);
    } else {
      out += "\xEF\xBF\xBD";
      i += len;
    }
  }
  return out;
}

}  // namespace djshard::ops::ftfy
