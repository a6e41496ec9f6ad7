#include "djshard/io/json_text.h"

#include <simdjson.h>

#include <cstdio>
#include <cstring>
#include <limits>

#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/input.h"

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace djshard::io {

static_assert(LineReader::kPadding >= simdjson::SIMDJSON_PADDING,
              "LineReader must pad lines for simdjson");

namespace {
// Bytes that JSON strings must escape: '"', '\\' and control characters.
struct EscapeTable {
  bool needs[256] = {};
  EscapeTable() {
    for (int c = 0; c < 0x20; ++c) needs[c] = true;
    needs[static_cast<unsigned char>('"')] = true;
    needs[static_cast<unsigned char>('\\')] = true;
  }
};
const EscapeTable kEscape;
}  // namespace

namespace {
// The first byte of `s` at or after `from` that JSON must escape, or s.size():
// 16 bytes at a time where SSE2 is there.
size_t NextEscape(std::string_view s, size_t from) {
#ifdef __SSE2__
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  const __m128i last_control = _mm_set1_epi8(0x1F);
  for (; from + 16 <= s.size(); from += 16) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + from));
    const __m128i control = _mm_cmpeq_epi8(_mm_min_epu8(v, last_control), v);  // v <= 0x1F
    const int mask = _mm_movemask_epi8(_mm_or_si128(
        _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)), control));
    if (mask != 0) return from + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#endif
  for (; from < s.size(); ++from) {
    if (kEscape.needs[static_cast<unsigned char>(s[from])]) return from;
  }
  return s.size();
}
}  // namespace

void AppendJsonString(std::string* out, std::string_view s) {
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  size_t run = 0;
  for (size_t i = NextEscape(s, 0); i < s.size(); i = NextEscape(s, i + 1)) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out->append(s.data() + run, i - run);
    run = i + 1;
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      default: {
        char buf[8];
        std::snprintf(buf, sizeof buf, "\\u%04x", c);
        out->append(buf);
      }
    }
  }
  out->append(s.data() + run, s.size() - run);
  out->push_back('"');
}

namespace {

unsigned HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Index one past the closing quote of the string literal starting at `pos`.
size_t SkipString(std::string_view s, size_t pos) {
  size_t i = pos + 1;
  while (i < s.size()) {
    const void* q = std::memchr(s.data() + i, '"', s.size() - i);
    if (q == nullptr) return s.size();
    const size_t at = static_cast<const char*>(q) - s.data();
    // The quote ends the string unless an odd number of backslashes precede it.
    size_t backslashes = 0;
    while (at - backslashes > pos + 1 && s[at - backslashes - 1] == '\\') ++backslashes;
    if (backslashes % 2 == 0) return at + 1;
    i = at + 1;
  }
  return s.size();
}

// Index one past the compact JSON value starting at `pos`.
size_t SkipValue(std::string_view s, size_t pos) {
  if (s[pos] == '"') return SkipString(s, pos);
  if (s[pos] == '{' || s[pos] == '[') {
    int depth = 0;
    for (size_t i = pos; i < s.size(); ++i) {
      const char c = s[i];
      if (c == '"') {
        i = SkipString(s, i) - 1;
      } else if (c == '{' || c == '[') {
        ++depth;
      } else if (c == '}' || c == ']') {
        if (--depth == 0) return i + 1;
      }
    }
    return s.size();
  }
  size_t i = pos;
  while (i < s.size() && s[i] != ',' && s[i] != '}' && s[i] != ']' && s[i] != ' ' && s[i] != '\t' &&
         s[i] != '\n' && s[i] != '\r') {
    ++i;
  }
  return i;
}

}  // namespace

void AppendJsonStringEscapingSeparators(std::string* out, std::string_view s) {
  std::string literal;
  AppendJsonString(&literal, s);
  // Escapes only produce ASCII, so these bytes are the characters themselves.
  char buf[8];
  for (size_t i = 0; i < literal.size(); ++i) {
    const auto c = static_cast<unsigned char>(literal[i]);
    const auto next = [&](size_t k) {
      return i + k < literal.size() ? static_cast<unsigned char>(literal[i + k]) : 0;
    };
    unsigned cp = 0;
    size_t len = 0;
    if (c == 0x7F) {
      cp = c, len = 1;
    } else if (c == 0xC2 && next(1) >= 0x80 && next(1) <= 0x9F) {
      cp = next(1), len = 2;
    } else if (c == 0xE2 && next(1) == 0x80 && (next(2) == 0xA8 || next(2) == 0xA9)) {
      cp = next(2) == 0xA8 ? 0x2028 : 0x2029, len = 3;
    }
    if (len == 0) {
      out->push_back(literal[i]);
      continue;
    }
    std::snprintf(buf, sizeof buf, "\\u%04x", cp);
    out->append(buf);
    i += len - 1;
  }
}

std::string UnescapeJsonString(std::string_view literal) {
  std::string out;
  out.reserve(literal.size());
  for (size_t i = 1; i + 1 < literal.size(); ++i) {
    const size_t end = literal.size() - 1;
    const void* bs = std::memchr(literal.data() + i, '\\', end - i);
    const size_t run_end = bs ? static_cast<const char*>(bs) - literal.data() : end;
    out.append(literal.data() + i, run_end - i);
    i = run_end;
    if (i >= end) break;
    const char e = literal[++i];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      case 'b':
        out.push_back('\b');
        break;
      case 'f':
        out.push_back('\f');
        break;
      case 'u': {
        uint32_t cp = 0;
        for (int k = 1; k <= 4; ++k) cp = cp * 16 + HexValue(literal[i + k]);
        i += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < literal.size() && literal[i + 1] == '\\' &&
            literal[i + 2] == 'u') {
          uint32_t low = 0;
          for (int k = 3; k <= 6; ++k) low = low * 16 + HexValue(literal[i + k]);
          if (low >= 0xDC00 && low < 0xE000) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            i += 6;
          }
        }
        AppendUtf8(&out, cp);
        break;
      }
      default:  // '"', '\\', '/'
        out.push_back(e);
    }
  }
  return out;
}

namespace {

// simdjson's AVX2 kernel (haswell) minifies where the CPU has AVX2, even when
// the AVX-512 one (icelake) is active: that one writes with vpcompressb to
// memory, which AMD Zen 4 runs slowly (1.0 GB/s against the AVX2 kernel's
// 4.3 GB/s on the reference machine, prepare's largest cost). Every kernel
// writes the same bytes.
const simdjson::implementation& MinifyKernel() {
  static const simdjson::implementation* const kernel = [] {
    const simdjson::implementation* avx2 = simdjson::get_available_implementations()["haswell"];
    if (avx2 != nullptr && avx2->supported_by_runtime_system()) return avx2;
    return static_cast<const simdjson::implementation*>(simdjson::get_active_implementation());
  }();
  return *kernel;
}

}  // namespace

void MinifyJson(std::string_view json, std::string* out) {
  out->resize(json.size());
  size_t len = 0;
  if (MinifyKernel().minify(reinterpret_cast<const uint8_t*>(json.data()), json.size(),
                            reinterpret_cast<uint8_t*>(out->data()), len) != simdjson::SUCCESS) {
    throw Error("cannot minify a JSON value (unterminated string)");
  }
  out->resize(len);
}

namespace {
size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) ++i;
  return i;
}
}  // namespace

std::vector<JsonMember> SplitObject(std::string_view object) {
  std::vector<JsonMember> members;
  size_t i = SkipSpace(object, SkipSpace(object, 0) + 1);  // after '{'
  while (i < object.size() && object[i] != '}') {
    const size_t key_end = SkipString(object, i);
    const std::string_view key = object.substr(i, key_end - i);
    const size_t value_begin = SkipSpace(object, SkipSpace(object, key_end) + 1);  // after ':'
    const size_t value_end = SkipValue(object, value_begin);
    size_t trimmed = value_end;
    while (trimmed > value_begin && (object[trimmed - 1] == ' ' || object[trimmed - 1] == '\t' ||
                                     object[trimmed - 1] == '\n' || object[trimmed - 1] == '\r')) {
      --trimmed;
    }
    members.push_back({key, object.substr(value_begin, trimmed - value_begin)});
    i = SkipSpace(object, value_end);
    if (i < object.size() && object[i] == ',') i = SkipSpace(object, i + 1);
  }
  return members;
}

std::vector<std::string_view> SplitArray(std::string_view array) {
  return SplitArray(array, std::numeric_limits<size_t>::max());
}

std::vector<std::string_view> SplitArray(std::string_view array, size_t max_items) {
  std::vector<std::string_view> items;
  size_t i = SkipSpace(array, SkipSpace(array, 0) + 1);  // after '['
  while (i < array.size() && array[i] != ']' && items.size() < max_items) {
    const size_t end = SkipValue(array, i);
    size_t trimmed = end;
    while (trimmed > i && (array[trimmed - 1] == ' ' || array[trimmed - 1] == '\t' ||
                           array[trimmed - 1] == '\n' || array[trimmed - 1] == '\r')) {
      --trimmed;
    }
    items.push_back(array.substr(i, trimmed - i));
    i = SkipSpace(array, end);
    if (i < array.size() && array[i] == ',') i = SkipSpace(array, i + 1);
  }
  return items;
}

struct JsonLineParser::State {
  simdjson::dom::parser parser;
  simdjson::dom::object object;
};

JsonLineParser::JsonLineParser() : state_(std::make_unique<State>()) {}
JsonLineParser::~JsonLineParser() = default;

namespace {

const char* TypeName(simdjson::dom::element_type t) {
  switch (t) {
    case simdjson::dom::element_type::ARRAY:
      return "array";
    case simdjson::dom::element_type::STRING:
      return "string";
    case simdjson::dom::element_type::INT64:
    case simdjson::dom::element_type::UINT64:
    case simdjson::dom::element_type::DOUBLE:
      return "number";
    case simdjson::dom::element_type::BOOL:
      return "boolean";
    case simdjson::dom::element_type::NULL_VALUE:
      return "null";
    default:
      return "object";
  }
}

}  // namespace

void JsonLineParser::ParseObject(std::string_view line, const std::string& file, uint64_t line_no) {
  if (IsBlank(line)) {
    throw Error(file, line_no, "blank line", "JSONL holds exactly one JSON object per line");
  }
  simdjson::dom::element element;
  const auto error =
      state_->parser.parse(reinterpret_cast<const uint8_t*>(line.data()), line.size(), false)
          .get(element);
  if (error == simdjson::UTF8_ERROR ||
      (error && !simdjson::validate_utf8(line.data(), line.size()))) {
    throw Error(file, line_no, "invalid UTF-8", "re-encode the file as UTF-8");
  }
  if (error) {
    throw Error(file, line_no, std::string("invalid JSON: ") + simdjson::error_message(error),
                "each line must be one complete JSON object");
  }
  if (element.type() != simdjson::dom::element_type::OBJECT) {
    throw Error(file, line_no,
                std::string("record is not a JSON object (got ") + TypeName(element.type()) + ")",
                "each line must be one JSON object");
  }
  state_->object = element.get_object().value_unsafe();
}

bool JsonLineParser::Has(std::string_view key) const {
  simdjson::dom::element value;
  return state_->object.at_key(key).get(value) == simdjson::SUCCESS;
}

bool JsonLineParser::GetString(std::string_view key, std::string* out) const {
  std::string_view value;
  if (state_->object.at_key(key).get_string().get(value) != simdjson::SUCCESS) return false;
  out->assign(value);
  return true;
}

bool JsonLineParser::HasNonNull(std::string_view key) const {
  simdjson::dom::element value;
  if (state_->object.at_key(key).get(value) != simdjson::SUCCESS) return false;
  return !value.is_null();
}

}  // namespace djshard::io
