// whitespace_normalization_mapper and punctuation_normalization_mapper.
#include <cstring>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"

namespace djshard::ops {

namespace {

// Data-Juicer turns 23 code points into U+0020 (not \n, \r, \v, \f, U+0085):
// \t, U+0020, U+0084, U+00A0, U+2000..U+200D, U+202F, U+205F, U+2060, U+3000
// and U+FFFC. Text is valid UTF-8 (the JSON parser checks it), so they are
// matched as bytes. Returns the length of the one at `p` (its first byte is a
// candidate below), or 0 when `p` starts another character.
inline size_t OddWhitespaceLength(const unsigned char* p, size_t left) {
  switch (p[0]) {
    case '\t':
      return 1;
    case 0xC2:
      return left >= 2 && (p[1] == 0x84 || p[1] == 0xA0) ? 2 : 0;
    case 0xE2:
      if (left < 3) return 0;
      if (p[1] == 0x80) return (p[2] >= 0x80 && p[2] <= 0x8D) || p[2] == 0xAF ? 3 : 0;
      if (p[1] == 0x81) return p[2] == 0x9F || p[2] == 0xA0 ? 3 : 0;
      return 0;
    case 0xE3:
      return left >= 3 && p[1] == 0x80 && p[2] == 0x80 ? 3 : 0;
    case 0xEF:
      return left >= 3 && p[1] == 0xBF && p[2] == 0xBC ? 3 : 0;
    default:
      return 0;
  }
}

#ifdef __SSE2__
inline __m128i Load16(const unsigned char* p) {
  return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
}
inline __m128i EqByte(__m128i v, unsigned char c) {
  return _mm_cmpeq_epi8(v, _mm_set1_epi8(static_cast<char>(c)));
}
// Bit i set when a two- or three-byte odd whitespace character starts at
// p[i], for i < 16. Reads p[0..18).
inline unsigned MultiByteMask(const unsigned char* p) {
  const __m128i b0 = Load16(p), b1 = Load16(p + 1), b2 = Load16(p + 2);
  // C2 84, C2 A0
  __m128i m = _mm_and_si128(EqByte(b0, 0xC2), _mm_or_si128(EqByte(b1, 0x84), EqByte(b1, 0xA0)));
  // E2 80 80..8D, E2 80 AF, E2 81 9F, E2 81 A0
  const __m128i off = _mm_sub_epi8(b2, _mm_set1_epi8(static_cast<char>(0x80)));
  const __m128i low = _mm_cmpeq_epi8(_mm_min_epu8(off, _mm_set1_epi8(0x0D)), off);
  const __m128i e2 = _mm_or_si128(
      _mm_and_si128(EqByte(b1, 0x80), _mm_or_si128(low, EqByte(b2, 0xAF))),
      _mm_and_si128(EqByte(b1, 0x81), _mm_or_si128(EqByte(b2, 0x9F), EqByte(b2, 0xA0))));
  m = _mm_or_si128(m, _mm_and_si128(EqByte(b0, 0xE2), e2));
  // E3 80 80, EF BF BC
  m = _mm_or_si128(
      m, _mm_and_si128(_mm_and_si128(EqByte(b0, 0xE3), EqByte(b1, 0x80)), EqByte(b2, 0x80)));
  m = _mm_or_si128(
      m, _mm_and_si128(_mm_and_si128(EqByte(b0, 0xEF), EqByte(b1, 0xBF)), EqByte(b2, 0xBC)));
  return static_cast<unsigned>(_mm_movemask_epi8(m));
}
#endif

// Index of the first odd whitespace character at or after `i`, or `size`.
size_t FindOddWhitespace(const unsigned char* data, size_t i, size_t size) {
#ifdef __SSE2__
  for (; i + 18 <= size; i += 16) {
    const unsigned mask = MultiByteMask(data + i) |
                          static_cast<unsigned>(_mm_movemask_epi8(EqByte(Load16(data + i), '\t')));
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(mask));
  }
#endif
  for (; i < size; ++i) {
    if (OddWhitespaceLength(data + i, size - i) != 0) return i;
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
    const auto* in = reinterpret_cast<const unsigned char*>(stripped.data());
    const size_t size = stripped.size();
    size_t i = FindOddWhitespace(in, 0, size);
    if (i == size) {
      if (size != text.size()) sample.SetText(text_key(), std::string(stripped));
      return;
    }
    // The result is never longer than the input, so it is written into a
    // buffer of the input's size; 16-byte stores at dst stay inside it
    // because dst never runs ahead of i.
    std::string out(size, '\0');
    auto* dst = reinterpret_cast<unsigned char*>(out.data());
    std::memcpy(dst, in, i);
    dst += i;
#ifdef __SSE2__
    // Tabs become spaces inside the vector; the loop stops only at the
    // multi-byte characters, which shrink to one byte.
    const __m128i space = _mm_set1_epi8(' ');
    while (i + 18 <= size) {
      const __m128i v = Load16(in + i);
      const __m128i tabs = EqByte(v, '\t');
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst),
                       _mm_or_si128(_mm_andnot_si128(tabs, v), _mm_and_si128(tabs, space)));
      const unsigned mask = MultiByteMask(in + i);
      if (mask == 0) {
        i += 16;
        dst += 16;
        continue;
      }
      const size_t k = static_cast<size_t>(__builtin_ctz(mask));
      dst += k;
      i += k;
      *dst++ = ' ';
      i += in[i] == 0xC2 ? 2 : 3;
    }
#endif
    while (i < size) {
      const size_t len = OddWhitespaceLength(in + i, size - i);
      if (len != 0) {
        *dst++ = ' ';
        i += len;
      } else {
        *dst++ = in[i++];
      }
    }
    out.resize(static_cast<size_t>(dst - reinterpret_cast<unsigned char*>(out.data())));
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
