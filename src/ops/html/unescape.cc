// Python's html.unescape: the references that _charref matches,
//   &(#[0-9]+;? | #[xX][0-9a-fA-F]+;? | [^\t\n\f <&#;]{1,32};?)
// replaced as _replace_charref does.
#include <algorithm>
#include <cstring>

#include "djshard/ops/text.h"
#include "src/ops/html/entities.h"

namespace djshard::ops::html {

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHexDigit(char c) { return IsDigit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f'); }

// chr(num) as _replace_charref gives it; `num` saturates at 0x110000.
void AppendNumericReference(uint32_t num, std::string* out) {
  const NumericReference* end = kReplacedNumbers + kReplacedNumbersSize;
  const NumericReference* ref =
      std::lower_bound(kReplacedNumbers, end, num,
                       [](const NumericReference& r, uint32_t n) { return r.number < n; });
  if (ref != end && ref->number == num) {
    text::AppendUtf8(out, ref->cp);
  } else if ((num >= 0xD800 && num <= 0xDFFF) || num > 0x10FFFF) {
    text::AppendUtf8(out, 0xFFFD);
  } else if (!std::binary_search(kDroppedCodePoints, kDroppedCodePoints + kDroppedCodePointsSize,
                                 num)) {
    text::AppendUtf8(out, num);
  }
}

// Matches a numeric reference at s[at] ('&' '#'); returns its end, or `at`
// when none matches there.
size_t NumericReferenceAt(std::string_view s, size_t at, std::string* out) {
  size_t i = at + 2;
  int base = 10;
  if (i < s.size() && (s[i] == 'x' || s[i] == 'X')) {
    base = 16;
    ++i;
  }
  const size_t first = i;
  uint32_t num = 0;
  for (; i < s.size() && (base == 16 ? IsHexDigit(s[i]) : IsDigit(s[i])); ++i) {
    const uint32_t digit = IsDigit(s[i]) ? s[i] - '0' : (s[i] | 0x20) - 'a' + 10;
    num = std::min<uint32_t>(num * base + digit, 0x110000);
  }
  if (i == first) return at;
  if (i < s.size() && s[i] == ';') ++i;
  AppendNumericReference(num, out);
  return i;
}

// Matches a named reference at s[at] ('&' then 1 to 32 code points outside
// "\t\n\f <&#;", then an optional ';'); returns its end, or `at` when none.
size_t NamedReferenceAt(std::string_view s, size_t at, std::string* out) {
  size_t bounds[34];  // code point boundaries of the name, after the '&'
  size_t count = 0;
  size_t i = at + 1;
  bounds[count++] = i;
  while (i < s.size() && count <= 32 && (s[i] == '\0' || !std::strchr("\t\n\f <&#;", s[i]))) {
    i += text::SequenceLength(static_cast<unsigned char>(s[i]));
    bounds[count++] = i;
  }
  if (count == 1) return at;
  if (i < s.size() && s[i] == ';') {
    ++i;
    bounds[count++] = i;
  }
  const std::string_view name = s.substr(at + 1, i - at - 1);
  if (auto value = FindNamedReference(name)) {
    out->append(*value);
    return i;
  }
  // The longest prefix of at least two code points that is a name.
  for (size_t x = count - 2; x >= 2; --x) {
    const std::string_view prefix = s.substr(at + 1, bounds[x] - at - 1);
    if (auto value = FindNamedReference(prefix)) {
      out->append(*value);
      out->append(s.substr(bounds[x], i - bounds[x]));
      return i;
    }
  }
  out->append(s.substr(at, i - at));
  return i;
}

}  // namespace

std::optional<std::string_view> FindNamedReference(std::string_view name) {
  const NamedReference* end = kNamedReferences + kNamedReferencesSize;
  const NamedReference* it =
      std::lower_bound(kNamedReferences, end, name,
                       [](const NamedReference& r, std::string_view n) { return r.name < n; });
  if (it == end || it->name != name) return std::nullopt;
  return std::string_view(it->value);
}

void AppendUnescaped(std::string_view s, std::string* out) {
  size_t done = 0;
  for (size_t at = s.find('&'); at != std::string_view::npos; at = s.find('&', at)) {
    out->append(s.substr(done, at - done));
    const bool numeric = at + 1 < s.size() && s[at + 1] == '#';
    const size_t end = numeric ? NumericReferenceAt(s, at, out) : NamedReferenceAt(s, at, out);
    if (end == at) {
      out->push_back('&');
      done = at + 1;
      ++at;
    } else {
      done = at = end;
    }
  }
  out->append(s.substr(done));
}

}  // namespace djshard::ops::html
