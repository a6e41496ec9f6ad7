// whitespace_normalization_mapper and punctuation_normalization_mapper.
#include <cstring>

#include "djshard/ops/text.h"
#include "src/ops/builtin.h"
#include "src/ops/whitespace.h"

namespace djshard::ops {

namespace {

class WhitespaceNormalizationMapper : public Mapper {
 public:
  WhitespaceNormalizationMapper(const recipe::OperatorSpec& spec, const std::string& key)
      : Mapper(spec, key) {}

  void Map(Sample& sample) const override {
    const std::string& text = sample.Text(text_key());
    const std::string_view stripped = text::Strip(text);
    const size_t first = whitespace::FindOdd(stripped);
    if (first == stripped.size()) {
      if (stripped.size() != text.size()) sample.SetText(text_key(), std::string(stripped));
      return;
    }
    // The result is never longer than the input; the part before the first
    // odd space is copied as it is.
    std::string out(stripped.size() + whitespace::kSlack, '\0');
    std::memcpy(out.data(), stripped.data(), first);
    out.resize(first + whitespace::Replace(stripped.substr(first), out.data() + first, kernel_));
    sample.SetText(text_key(), std::move(out));
  }

 private:
  const whitespace::Kernel kernel_ = whitespace::BestKernel();
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
      : Mapper(spec, key) {}

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
