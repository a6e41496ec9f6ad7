#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/common/text.h"

// Text helpers shared by every operator. Text is valid UTF-8 and every length
// or ratio counts code points, as Python's len() does. Character classes
// follow Python 3.11 (Unicode 14.0) so that results match Data-Juicer.
namespace djshard::ops::text {

// Decodes the code point at s[*i] and advances *i past it. `s` is valid UTF-8.
inline uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const unsigned char c = static_cast<unsigned char>(s[*i]);
  if (c < 0x80) {
    *i += 1;
    return c;
  }
  if (c < 0xE0) {
    const uint32_t cp = ((c & 0x1F) << 6) | (s[*i + 1] & 0x3F);
    *i += 2;
    return cp;
  }
  if (c < 0xF0) {
    const uint32_t cp = ((c & 0x0F) << 12) | ((s[*i + 1] & 0x3F) << 6) | (s[*i + 2] & 0x3F);
    *i += 3;
    return cp;
  }
  const uint32_t cp = ((c & 0x07) << 18) | ((s[*i + 1] & 0x3F) << 12) | ((s[*i + 2] & 0x3F) << 6) |
                      (s[*i + 3] & 0x3F);
  *i += 4;
  return cp;
}

// Bytes of the UTF-8 sequence that starts with byte `c`.
inline size_t SequenceLength(unsigned char c) {
  return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
}

using djshard::AppendUtf8;

// Number of code points (Python's len()).
size_t CodePointCount(std::string_view s);

bool IsAlnum(uint32_t cp);    // str.isalnum()
bool IsSpace(uint32_t cp);    // str.isspace(): what str.strip() removes
bool IsSpecial(uint32_t cp);  // Data-Juicer's special characters (1618 code points)
// Code points of `s` for which IsAlnum / IsSpecial holds.
size_t CountAlnum(std::string_view s);
size_t CountSpecial(std::string_view s);

// str.lower().
std::string Lower(std::string_view s);
// str.lower() into *out (its buffer reused).
void LowerInto(std::string_view s, std::string* out);
// str.strip() without arguments.
std::string_view Strip(std::string_view s);
// str.splitlines(): breaks at \n \r \r\n \v \f \x1c \x1d \x1e \x85 U+2028 U+2029.
std::vector<std::string_view> SplitLines(std::string_view s);
// Words split on ' ', '\n' and '\t', empty pieces dropped.
std::vector<std::string_view> SplitWords(std::string_view s);
// Calls f(word) for each word of SplitWords(s), without building a vector.
template <typename F>
void ForEachWord(std::string_view s, F&& f) {
  const char* p = s.data();
  const char* end = p + s.size();
  while (p < end) {
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\t')) ++p;
    const char* start = p;
    while (p < end && *p != ' ' && *p != '\n' && *p != '\t') ++p;
    if (p > start) f(std::string_view(start, static_cast<size_t>(p - start)));
  }
}
// Removes leading and trailing special characters.
std::string_view StripSpecial(std::string_view word);

// Appends a double as Python's repr() writes it ("0.5", "1e-05", "1.0", "nan").
void AppendPythonFloat(std::string* out, double value);

}  // namespace djshard::ops::text
