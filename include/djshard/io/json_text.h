#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::io {

// Appends `s` (UTF-8) as a JSON string literal: quotes, escapes for '"', '\\'
// and control characters; every other character is written as is.
void AppendJsonString(std::string* out, std::string_view s);

// Like AppendJsonString, and also writes U+007F..U+009F, U+2028 and U+2029 as
// \uXXXX, as Python's json module (and the tokenizer vectors) do.
void AppendJsonStringEscapingSeparators(std::string* out, std::string_view s);

// Decodes a JSON string literal, quotes included, into UTF-8.
// Precondition: `literal` is valid JSON (surrogate pairs are combined).
std::string UnescapeJsonString(std::string_view literal);

// Removes insignificant whitespace from valid JSON; strings and scalars keep
// their exact text; the result replaces *out.
void MinifyJson(std::string_view json, std::string* out);

// One top-level member of a JSON object: its key literal (with quotes, as
// written) and the raw text of its value (without surrounding whitespace).
struct JsonMember {
  std::string_view key_literal;
  std::string_view value;
};

// Splits a valid JSON object into its members, in order.
std::vector<JsonMember> SplitObject(std::string_view object);
// Splits a valid JSON array into the raw text of its items.
std::vector<std::string_view> SplitArray(std::string_view array);
// The same, stopping once it holds `max_items` items (the rest is not read), so
// a caller bounding a count never materializes a huge array.
std::vector<std::string_view> SplitArray(std::string_view array, size_t max_items);

// Validates lines of JSONL. One parser is reused across lines (not thread-safe).
class JsonLineParser {
 public:
  JsonLineParser();
  ~JsonLineParser();
  JsonLineParser(const JsonLineParser&) = delete;
  JsonLineParser& operator=(const JsonLineParser&) = delete;

  // Checks that `line` is one JSON object in valid UTF-8, and throws an Error
  // naming `file`:`line_no` otherwise (blank line, invalid UTF-8, invalid JSON,
  // not an object). At least 64 readable bytes must follow `line` in memory
  // (LineReader guarantees it).
  void ParseObject(std::string_view line, const std::string& file, uint64_t line_no);

  // After ParseObject: whether the object has top-level `key` with a value
  // other than null.
  bool HasNonNull(std::string_view key) const;
  // After ParseObject: whether the object has top-level `key` at all.
  bool Has(std::string_view key) const;
  // After ParseObject: the decoded string at top-level `key`, or false when it
  // is missing or not a string.
  bool GetString(std::string_view key, std::string* out) const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace djshard::io
