#include "djshard/ops/text.h"

#include <algorithm>
#include <bitset>
#include <charconv>
#include <cmath>
#include <cstring>
#include <vector>

#include "djshard/common/text.h"
#include "src/ops/code_point_set.h"
#include "src/ops/unicode_tables.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace djshard::ops::text {

namespace {

const CodePointSet& AlnumSet() {
  static const CodePointSet set(unicode::kAlnum, unicode::kAlnumSize);
  return set;
}
const CodePointSet& SpaceSet() {
  static const CodePointSet set(unicode::kSpace, unicode::kSpaceSize);
  return set;
}
const CodePointSet& CasedSet() {
  static const CodePointSet set(unicode::kCased, unicode::kCasedSize);
  return set;
}
const CodePointSet& CaseIgnorableSet() {
  static const CodePointSet set(unicode::kCaseIgnorable, unicode::kCaseIgnorableSize);
  return set;
}
const CodePointSet& SpecialSet() {
  static const CodePointSet set(unicode::kSpecial, unicode::kSpecialSize);
  return set;
}

bool IsLineBreak(uint32_t cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || cp == 0x1C || cp == 0x1D ||
         cp == 0x1E || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

size_t CodePointCount(std::string_view s) {
  // Continuation bytes (10xxxxxx) are not code points; count them 8 at a time.
  constexpr uint64_t kHigh = 0x8080808080808080ull;
  size_t continuation = 0, i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    // One bit per continuation byte, summed by a multiply (no popcount instruction needed).
    const uint64_t bits = (w & ~(w << 1) & kHigh) >> 7;
    continuation += static_cast<size_t>((bits * 0x0101010101010101ull) >> 56);
  }
  for (; i < s.size(); ++i) continuation += (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  return s.size() - continuation;
}

namespace {
struct AsciiTables {
  bool alnum[128];
  bool special[128];
  AsciiTables() {
    for (uint32_t c = 0; c < 128; ++c) {
      alnum[c] = AlnumSet().Contains(c);
      special[c] = SpecialSet().Contains(c);
    }
  }
};
const AsciiTables kAsciiTables;
const AsciiTables& Ascii() { return kAsciiTables; }
}  // namespace

bool IsAlnum(uint32_t cp) { return cp < 128 ? Ascii().alnum[cp] : AlnumSet().Contains(cp); }
bool IsSpace(uint32_t cp) { return SpaceSet().Contains(cp); }
bool IsSpecial(uint32_t cp) { return cp < 128 ? Ascii().special[cp] : SpecialSet().Contains(cp); }

namespace {
// Code points of `s` in a class: ASCII by `ascii_table`, the rest by `set`.
size_t CountInClass(std::string_view s, const bool* ascii_table, const CodePointSet& set) {
  size_t n = 0, i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      n += ascii_table[c];
      ++i;
    } else {
      n += set.Contains(NextCodePoint(s, &i));
    }
  }
  return n;
}
}  // namespace

size_t CountAlnum(std::string_view s) { return CountInClass(s, Ascii().alnum, AlnumSet()); }

size_t CountSpecial(std::string_view s) { return CountInClass(s, Ascii().special, SpecialSet()); }

namespace {
// The code point that ends just before byte `end` of `s`; *begin gets where it starts.
uint32_t PreviousCodePoint(std::string_view s, size_t end, size_t* begin) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  *begin = start;
  size_t next = start;
  return NextCodePoint(s, &next);
}

// Python's Final_Sigma for the capital sigma at bytes [at, after) of `s`: a
// cased letter before it and none after it, case-ignorable characters skipped.
bool IsFinalSigma(std::string_view s, size_t at, size_t after) {
  bool cased_before = false;
  for (size_t end = at; end > 0;) {
    const uint32_t cp = PreviousCodePoint(s, end, &end);
    if (CaseIgnorableSet().Contains(cp)) continue;
    cased_before = CasedSet().Contains(cp);
    break;
  }
  if (!cased_before) return false;
  for (size_t i = after; i < s.size();) {
    const uint32_t cp = NextCodePoint(s, &i);
    if (CaseIgnorableSet().Contains(cp)) continue;
    return !CasedSet().Contains(cp);
  }
  return true;
}
}  // namespace

std::string Lower(std::string_view s) {
  std::string out;
  LowerInto(s, &out);
  return out;
}

namespace {

// Whether str.lower() changes code point `cp` (it has an entry in
// unicode::kLower): one bit per code point up to the table's last.
bool HasLowerMapping(uint32_t cp) {
  static const std::vector<uint64_t> bits = [] {
    const uint32_t last = unicode::kLower[unicode::kLowerSize - 1].cp;
    std::vector<uint64_t> b(last / 64 + 1, 0);
    for (size_t i = 0; i < unicode::kLowerSize; ++i) {
      b[unicode::kLower[i].cp / 64] |= uint64_t{1} << (unicode::kLower[i].cp % 64);
    }
    return b;
  }();
  const size_t word = cp / 64;
  return word < bits.size() && ((bits[word] >> (cp % 64)) & 1) != 0;
}

// The code points that LowerInto does not copy as they are (a mapping in
// unicode::kLower, or the capital sigma), by blocks: bit cp >> 6 for the
// Basic Multilingual Plane, (cp >> 12) - 16 beyond it. Each is a block of
// code points that share their UTF-8 sequence's first two bytes, so a
// sequence in a clean block is copied without being decoded.
struct LowerBlocks {
  std::bitset<1024> bmp;
  std::bitset<256> beyond;
};
const LowerBlocks& BlocksThatMayLower() {
  static const LowerBlocks blocks = [] {
    LowerBlocks b;
    const auto mark = [&b](uint32_t cp) {
      if (cp < 0x10000) {
        b.bmp.set(cp >> 6);
      } else {
        b.beyond.set((cp >> 12) - 16);
      }
    };
    for (size_t i = 0; i < unicode::kLowerSize; ++i) mark(unicode::kLower[i].cp);
    mark(0x3A3);
    return b;
  }();
  return blocks;
}

// Whether the sequence that starts at p (lead byte c >= 0x80) may change.
bool MayLower(const LowerBlocks& blocks, unsigned char c, const char* p) {
  const auto second = static_cast<uint32_t>(static_cast<unsigned char>(p[1]) & 0x3F);
  if (c < 0xE0) return blocks.bmp.test(c & 0x1F);
  if (c < 0xF0) return blocks.bmp.test(((c & 0x0F) << 6) | second);
  const uint32_t block = ((c & 0x07) << 6) | second;  // cp >> 12: at least 16 in valid UTF-8
  return block < 16 || block - 16 >= blocks.beyond.size() || blocks.beyond[block - 16];
}

// Writes the UTF-8 of `cp` at dst; returns its length.
size_t EncodeUtf8(uint32_t cp, char* dst) {
  std::string utf8;
  AppendUtf8(&utf8, cp);
  std::memcpy(dst, utf8.data(), utf8.size());
  return utf8.size();
}

// Writes the lower() form of the code point that starts at s[*i] at dst, and
// advances *i past it; returns the bytes written (at most 6).
size_t LowerCodePoint(std::string_view s, size_t* i, char* dst) {
  const size_t at = *i;
  const uint32_t cp = NextCodePoint(s, i);
  if (cp == 0x3A3) return EncodeUtf8(IsFinalSigma(s, at, *i) ? 0x3C2 : 0x3C3, dst);
  if (!HasLowerMapping(cp)) {
    std::memcpy(dst, s.data() + at, *i - at);
    return *i - at;
  }
  const unicode::LowerMapping* end = unicode::kLower + unicode::kLowerSize;
  const auto* it =
      std::lower_bound(unicode::kLower, end, cp,
                       [](const unicode::LowerMapping& m, uint32_t c) { return m.cp < c; });
  const size_t first = EncodeUtf8(it->lower[0], dst);
  return it->lower[1] != 0 ? first + EncodeUtf8(it->lower[1], dst + first) : first;
}

// Copies s[*i..n) to dst + *o, ASCII letters lowered, up to the end or to
// the first code point that may change otherwise (left at *i).
void LowerWhileClean(const LowerBlocks& blocks, const char* s, size_t n, size_t* i, char* dst,
                     size_t* o) {
#ifdef __SSE2__
  // 16 bytes at a time: the block lowered and stored, then its lead bytes checked.
  const __m128i before_a = _mm_set1_epi8('A' - 1), after_z = _mm_set1_epi8('Z' + 1);
  const __m128i case_bit = _mm_set1_epi8(0x20), lead = _mm_set1_epi8(static_cast<char>(0xC0));
  while (*i + 16 <= n) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + *i));
    const __m128i upper = _mm_and_si128(_mm_cmpgt_epi8(v, before_a), _mm_cmplt_epi8(v, after_z));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + *o),
                     _mm_add_epi8(v, _mm_and_si128(upper, case_bit)));
    auto leads = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_max_epu8(v, lead), v)));
    size_t step = 16;
    while (leads != 0) {
      const auto k = static_cast<size_t>(__builtin_ctz(leads));
      leads &= leads - 1;
      if (MayLower(blocks, static_cast<unsigned char>(s[*i + k]), s + *i + k)) {
        step = k;
        break;
      }
    }
    *i += step;
    *o += step;
    if (step < 16) return;
  }
#endif
  while (*i < n) {
    const auto c = static_cast<unsigned char>(s[*i]);
    if (c < 0x80) {
      dst[(*o)++] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : static_cast<char>(c);
      ++*i;
      continue;
    }
    // a continuation byte (of a sequence whose lead the blocks above checked) or a clean sequence
    const size_t len = (c & 0xC0) == 0x80 ? 1 : SequenceLength(c);
    if (len > 1 && MayLower(blocks, c, s + *i)) return;
    std::memcpy(dst + *o, s + *i, len);
    *i += len;
    *o += len;
  }
}

}  // namespace

void LowerInto(std::string_view s, std::string* out_ptr) {
  std::string& out = *out_ptr;
  const LowerBlocks& blocks = BlocksThatMayLower();
  // Invariant: out holds room for the rest of `s` copied as it is; only a
  // code point whose lower form is longer needs more.
  out.resize(s.size());
  size_t i = 0, o = 0;
  while (true) {
    LowerWhileClean(blocks, s.data(), s.size(), &i, out.data(), &o);
    if (i == s.size()) break;
    if (out.size() < o + 6 + (s.size() - i)) out.resize(o + 6 + (s.size() - i));
    o += LowerCodePoint(s, &i, out.data() + o);
  }
  out.resize(o);
}

// `s` without the leading and trailing code points for which `drop` holds.
template <typename Pred>
std::string_view StripIf(std::string_view s, Pred drop) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t next = begin;
    if (!drop(NextCodePoint(s, &next))) break;
    begin = next;
  }
  size_t end = s.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!drop(NextCodePoint(s, &probe))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

std::string_view Strip(std::string_view s) { return StripIf(s, IsSpace); }

std::vector<std::string_view> SplitLines(std::string_view s) {
  std::vector<std::string_view> lines;
  size_t line_start = 0, i = 0;
  while (i < s.size()) {
    const size_t at = i;
    const uint32_t cp = NextCodePoint(s, &i);
    if (!IsLineBreak(cp)) continue;
    lines.push_back(s.substr(line_start, at - line_start));
    if (cp == '\r' && i < s.size() && s[i] == '\n') ++i;
    line_start = i;
  }
  if (line_start < s.size()) lines.push_back(s.substr(line_start));
  return lines;
}

std::vector<std::string_view> SplitWords(std::string_view s) {
  std::vector<std::string_view> words;
  ForEachWord(s, [&](std::string_view w) { words.push_back(w); });
  return words;
}

std::string_view StripSpecial(std::string_view w) {
  if (w.empty()) return w;
  const unsigned char first = static_cast<unsigned char>(w.front());
  const unsigned char last = static_cast<unsigned char>(w.back());
  if (first < 0x80 && last < 0x80 && !kAsciiTables.special[first] && !kAsciiTables.special[last]) {
    return w;
  }
  return StripIf(w, IsSpecial);
}

void AppendPythonFloat(std::string* out, double v) {
  if (std::isnan(v)) {
    out->append("NaN");
    return;
  }
  if (std::isinf(v)) {
    out->append(v > 0 ? "Infinity" : "-Infinity");
    return;
  }
  // Shortest round-trip digits, then Python's repr layout: fixed notation for
  // exponents in [-4, 16), scientific ("1e-05", "1.5e+16") otherwise.
  char sci[64];
  const auto res = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  std::string_view s(sci, res.ptr - sci);
  bool negative = false;
  if (s[0] == '-') {
    negative = true;
    s.remove_prefix(1);
  }
  const size_t e_pos = s.find('e');
  std::string digits;
  for (char c : s.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exp = std::atoi(std::string(s.substr(e_pos + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) out->push_back('-');
  const int n = static_cast<int>(digits.size());
  if (exp >= -4 && exp < 16) {
    if (exp < 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-exp - 1), '0');
      out->append(digits);
    } else if (exp + 1 >= n) {
      out->append(digits);
      out->append(static_cast<size_t>(exp + 1 - n), '0');
      out->append(".0");
    } else {
      out->append(digits, 0, exp + 1);
      out->push_back('.');
      out->append(digits, exp + 1);
    }
    return;
  }
  out->push_back(digits[0]);
  if (n > 1) {
    out->push_back('.');
    out->append(digits, 1);
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out->append(buf);
}

}  // namespace djshard::ops::text
