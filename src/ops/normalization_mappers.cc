// whitespace_normalization_mapper and punctuation_normalization_mapper.
#include <cstring>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

// The 23 code points Data-Juicer turns into U+0020 (not \n, \r, \v, \f, U+0085).
bool IsOddWhitespace(uint32_t cp) {
  switch (cp) {
    case 0x09:
    case 0x20:
    case 0x84:
    case 0xA0:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0x2060:
    case 0xFFFC:
      return true;
    default:
      return (cp >= 0x2000 && cp <= 0x200D);
  }
}

// Index of the first byte at or after `i` that is a tab or 0xC2, 0xE2, 0xE3 or
// 0xEF (the lead bytes of the odd whitespace characters), or `size`.
inline size_t NextCandidate(const char* data, size_t i, size_t size) {
#ifdef __SSE2__
  const __m128i tab = _mm_set1_epi8('\t');
  const __m128i c2 = _mm_set1_epi8(static_cast<char>(0xC2));
  const __m128i e2 = _mm_set1_epi8(static_cast<char>(0xE2));
  const __m128i e3 = _mm_set1_epi8(static_cast<char>(0xE3));
  const __m128i ef = _mm_set1_epi8(static_cast<char>(0xEF));
  while (i + 16 <= size) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(data + i));
    const __m128i hit =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, c2)),
                     _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, e2), _mm_cmpeq_epi8(v, e3)),
                                  _mm_cmpeq_epi8(v, ef)));
    const int mask = _mm_movemask_epi8(hit);
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
    i += 16;
  }
#endif
  while (i < size) {
    const unsigned char c = static_cast<unsigned char>(data[i]);
    if (c == '\t' || c == 0xC2 || c == 0xE2 || c == 0xE3 || c == 0xEF) return i;
    ++i;
  }
  return size;
}

class WhitespaceNormalizationMapper : public Mapper {
 public:
  WhitespaceNormalizationMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key, {}) {}

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    const std::string_view stripped = text::Strip(text);
    std::string out;
    out.reserve(stripped.size());
    // Only a tab or a sequence led by 0xC2, 0xE2, 0xE3 or 0xEF can be an odd
    // whitespace character; other characters are skipped without decoding and
    // copied in runs.
    size_t i = 0, run = 0;
    bool changed = stripped.size() != text.size();
    const char* data = stripped.data();
    const size_t size = stripped.size();
    while (i < size) {
      i = NextCandidate(data, i, size);
      if (i >= size) break;
      size_t next = i;
      if (data[i] == '\t') {
        next = i + 1;
      } else if (!IsOddWhitespace(text::NextCodePoint(stripped, &next))) {
        i = next;
        continue;
      }
      out.append(data + run, i - run);
      out.push_back(' ');
      run = i = next;
      changed = true;
    }
    if (!changed) return;
    out.append(stripped.data() + run, stripped.size() - run);
    sample.SetText(text_key(), std::move(out));
  }
};

// Each listed character is replaced once; results are not re-mapped.
const char* PunctuationReplacement(uint32_t cp) {
  switch (cp) {
    case 0xFF0C:
    case 0x3001:
      return ",";
    case 0x3002:
      return ".";
    case 0x201E:
    case 0x201D:
    case 0x201C:
    case 0x00AB:
    case 0x00BB:
    case 0xFF11:  // FULLWIDTH DIGIT ONE becomes '"', as in Data-Juicer
    case 0x300D:
    case 0x300C:
    case 0x300A:
    case 0x300B:
      return "\"";
    case 0x00B4:
    case 0x2019:
      return "'";
    case 0x2236:
    case 0xFF1A:
      return ":";
    case 0xFF1F:
      return "?";
    case 0xFF01:
      return "!";
    case 0xFF08:
      return "(";
    case 0xFF09:
      return ")";
    case 0xFF1B:
      return ";";
    case 0x2013:
    case 0x2501:
    case 0x25BA:
      return "-";
    case 0x2014:
      return " - ";
    case 0xFF0E:
      return ". ";
    case 0xFF5E:
      return "~";
    case 0x2026:
      return "...";
    case 0x3008:
      return "<";
    case 0x3009:
      return ">";
    case 0x3010:
      return "[";
    case 0x3011:
      return "]";
    case 0xFF05:
      return "%";
    default:
      return nullptr;
  }
}

class PunctuationNormalizationMapper : public Mapper {
 public:
  PunctuationNormalizationMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key, {}) {}

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    std::string out;
    size_t copied = 0, i = 0;
    bool changed = false;
    while (i < text.size()) {
      if (static_cast<unsigned char>(text[i]) < 0x80) {
        ++i;
        continue;
      }
      const size_t start = i;
      const char* repl = PunctuationReplacement(text::NextCodePoint(text, &i));
      if (repl == nullptr) continue;
      if (!changed) out.reserve(text.size());
      changed = true;
      out.append(text, copied, start - copied);
      out.append(repl);
      copied = i;
    }
    if (!changed) return;
    out.append(text, copied, std::string::npos);
    sample.SetText(text_key(), std::move(out));
  }
};

}  // namespace

std::unique_ptr<Operator> MakeWhitespaceNormalizationMapper(const recipe::OperatorSpec& spec,
                                                            const std::string& text_key) {
  return std::make_unique<WhitespaceNormalizationMapper>(spec, text_key);
}

std::unique_ptr<Operator> MakePunctuationNormalizationMapper(const recipe::OperatorSpec& spec,
                                                             const std::string& text_key) {
  return std::make_unique<PunctuationNormalizationMapper>(spec, text_key);
}

}  // namespace djshard::ops
