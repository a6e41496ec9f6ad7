// Fuzzes JSON string escaping: any byte string escapes to a literal that
// unescapes back to the same bytes.
#include <cstdint>
#include <string>

#include "djshard/io/json_text.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string s(reinterpret_cast<const char*>(data), size);
  std::string literal;
  djshard::io::AppendJsonString(&literal, s);
  if (literal.size() < 2 || literal.front() != '"' || literal.back() != '"') __builtin_trap();
  if (djshard::io::UnescapeJsonString(literal) != s) __builtin_trap();
  return 0;
}
