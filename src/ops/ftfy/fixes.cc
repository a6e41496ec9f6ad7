// ftfy's character-level fixers (ftfy.fixes), on text held as code points.
#include "src/ops/ftfy/fixes.h"

#include <algorithm>
#include <cctype>
#include <string_view>

#include "src/ops/ftfy/ftfy_tables.h"

namespace djshard::ops::ftfy {

namespace {

bool IsAsciiAlnum(char32_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

void AppendUtf8String(const char* utf8, std::u32string* out) {
  const auto* p = reinterpret_cast<const unsigned char*>(utf8);
  while (*p != 0) {
    uint32_t cp;
    if (*p < 0x80) {
      cp = *p++;
    } else if (*p < 0xE0) {
      cp = ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
      p += 2;
    } else if (*p < 0xF0) {
      cp = ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
      p += 3;
    } else {
      cp = ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
      p += 4;
    }
    out->push_back(cp);
  }
}

// The value of Python's html.unescape(ref) for a numeric reference "&#...;"
// whose body is 1 to 24 ASCII letters and digits, when the result has no ';'.
// Returns false when ftfy keeps the reference as it is.
bool NumericCharRef(std::string_view body, std::u32string* out) {
  int base = 10;
  if (body[0] == 'x' || body[0] == 'X') {
    base = 16;
    body.remove_prefix(1);
  }
  if (body.empty()) return false;
  uint64_t num = 0;
  for (const char c : body) {
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (base == 16 && ((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'))) {
      digit = (c | 0x20) - 'a' + 10;
    } else {
      return false;  // html.unescape stops early and leaves the ';'
    }
    num = std::min<uint64_t>(num * base + digit, 0x110000);  // saturates past U+10FFFF
  }
  const CharRef* refs_end = kInvalidCharRefs + kInvalidCharRefsSize;
  const CharRef* ref = std::lower_bound(kInvalidCharRefs, refs_end, num,
                                        [](const CharRef& r, uint64_t n) { return r.number < n; });
  if (ref != refs_end && ref->number == num) {
    out->push_back(ref->cp);
  } else if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) {
    out->push_back(0xFFFD);
  } else if (!std::binary_search(kInvalidCodePoints, kInvalidCodePoints + kInvalidCodePointsSize,
                                 static_cast<uint32_t>(num))) {
    if (num == ';') return false;
    out->push_back(static_cast<char32_t>(num));
  }
  return true;
}

// The replacement of one match of chardata.HTML_ENTITY_RE, "&" "#"? alnum{1,24} ";".
void UnescapeEntity(std::string_view entity, std::u32string* out) {
  const HtmlEntity* end = kHtmlEntities + kHtmlEntitiesSize;
  const HtmlEntity* it =
      std::lower_bound(kHtmlEntities, end, entity,
                       [](const HtmlEntity& e, std::string_view n) { return e.name < n; });
  if (it != end && it->name == entity) {
    AppendUtf8String(it->value, out);
    return;
  }
  if (entity[1] == '#' && NumericCharRef(entity.substr(2, entity.size() - 3), out)) return;
  for (const char c : entity) out->push_back(static_cast<unsigned char>(c));
}

// Replaces each code point that `table` (sorted by cp) lists by its value;
// `may_be_listed` says cheaply which code points to look up.
template <typename Filter>
void Translate(const Replacement* table, size_t size, Filter may_be_listed, std::u32string* text) {
  const Replacement* end = table + size;
  std::u32string out;
  out.reserve(text->size());
  for (const char32_t c : *text) {
    const Replacement* it =
        may_be_listed(c)
            ? std::lower_bound(table, end, c,
                               [](const Replacement& r, char32_t v) { return r.cp < v; })
            : end;
    if (it != end && it->cp == c) {
      AppendUtf8String(it->value, &out);
    } else {
      out.push_back(c);
    }
  }
  text->swap(out);
}

bool IsDecimal(char32_t c) {
  if (c >= '0' && c <= '9') return true;
  if (c < 0x80) return false;
  const unicode::CodePointRange* end = kDecimalDigits + kDecimalDigitsSize;
  const auto* it = std::upper_bound(kDecimalDigits, end, static_cast<uint32_t>(c),
                                    [](uint32_t v, const auto& r) { return v < r.lo; });
  return it != kDecimalDigits && c <= (it - 1)->hi;
}

}  // namespace

void UnescapeHtml(std::u32string* text) {
  const std::u32string& t = *text;
  if (t.find(U'&') == std::u32string::npos) return;
  std::u32string out;
  out.reserve(t.size());
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] != U'&') {
      out.push_back(t[i++]);
      continue;
    }
    const size_t start = i + 1 + (i + 1 < t.size() && t[i + 1] == U'#' ? 1 : 0);
    size_t end = start;
    while (end < t.size() && IsAsciiAlnum(t[end])) ++end;
    if (end == start || end - start > 24 || end >= t.size() || t[end] != U';') {
      out.push_back(t[i++]);
      continue;
    }
    std::string entity(t.begin() + i, t.begin() + end + 1);  // ASCII
    UnescapeEntity(entity, &out);
    i = end + 1;
  }
  text->swap(out);
}

void RemoveTerminalEscapes(std::u32string* text) {
  std::u32string& t = *text;
  if (t.find(U'\x1b') == std::u32string::npos) return;
  std::u32string out;
  out.reserve(t.size());
  size_t i = 0;
  while (i < t.size()) {
    if (t[i] == U'\x1b' && i + 1 < t.size() && t[i + 1] == U'[') {
      size_t j = i + 2;
      while (j < t.size() && (t[j] == U';' || IsDecimal(t[j]))) ++j;
      if (j < t.size() && t[j] < 0x80 && std::isalpha(static_cast<int>(t[j]))) {
        i = j + 1;
        continue;
      }
    }
    out.push_back(t[i++]);
  }
  t.swap(out);
}

void FixC1Controls(std::u32string* text) {
  const Charmap& windows_1252 = kCharmaps[1];  // sloppy-windows-1252
  for (char32_t& c : *text) {
    if (c >= 0x80 && c <= 0x9F) c = windows_1252.decode[c];
  }
}

void FixLatinLigatures(std::u32string* text) {
  Translate(
      kLigatures, kLigaturesSize,
      [](char32_t c) { return (c >= 0x132 && c <= 0x1F3) || (c >= 0xFB00 && c <= 0xFB06); }, text);
}

void FixCharacterWidth(std::u32string* text) {
  Translate(
      kWidthMap, kWidthMapSize,
      [](char32_t c) { return c == 0x3000 || (c >= 0xFF01 && c <= 0xFFEF); }, text);
}

void UncurlQuotes(std::u32string* text) {
  for (char32_t& c : *text) {
    if (c == 0x2BC || (c >= 0x2018 && c <= 0x201B)) {
      c = U'\'';
    } else if (c >= 0x201C && c <= 0x201F) {
      c = U'"';
    }
  }
}

void FixLineBreaks(std::u32string* text) {
  std::u32string& t = *text;
  size_t out = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char32_t c = t[i];
    if (c == U'\r') {
      if (i + 1 < t.size() && t[i + 1] == U'\n') ++i;
      t[out++] = U'\n';
    } else if (c == 0x2028 || c == 0x2029 || c == 0x85) {
      t[out++] = U'\n';
    } else {
      t[out++] = c;
    }
  }
  t.resize(out);
}

void FixSurrogates(std::u32string* text) {
  std::u32string& t = *text;
  size_t out = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    const char32_t c = t[i];
    if (c >= 0xD800 && c <= 0xDBFF && i + 1 < t.size() && t[i + 1] >= 0xDC00 &&
        t[i + 1] <= 0xDFFF) {
      t[out++] = 0x10000 + ((c - 0xD800) << 10) + (t[i + 1] - 0xDC00);
      ++i;
    } else if (c >= 0xD800 && c <= 0xDFFF) {
      t[out++] = 0xFFFD;
    } else {
      t[out++] = c;
    }
  }
  t.resize(out);
}

void RemoveControlChars(std::u32string* text) {
  std::u32string& t = *text;
  const auto removed = [](char32_t c) {
    return c <= 0x08 || c == 0x0B || (c >= 0x0E && c <= 0x1F) || c == 0x7F ||
           (c >= 0x206A && c <= 0x206F) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFC);
  };
  t.erase(std::remove_if(t.begin(), t.end(), removed), t.end());
}

}  // namespace djshard::ops::ftfy
