// whitespace_normalization_mapper against a code-point-by-code-point model, on
// strings that put every odd whitespace character at every offset of the
// mapper's 16-byte blocks, next to look-alike characters.
#include <gtest/gtest.h>

#include <random>

#include "djshard/io/json_text.h"
#include "djshard/io/record.h"
#include "djshard/ops/operator.h"
#include "djshard/ops/registry.h"
#include "djshard/ops/text.h"
#include "src/ops/whitespace.h"

namespace djshard::ops {
namespace {

bool IsOdd(uint32_t cp) {
  return cp == 0x09 || cp == 0x20 || cp == 0x84 || cp == 0xA0 || (cp >= 0x2000 && cp <= 0x200D) ||
         cp == 0x202F || cp == 0x205F || cp == 0x2060 || cp == 0x3000 || cp == 0xFFFC;
}

// Each of Data-Juicer's 23 characters replaced, one code point at a time.
std::string ReplaceModel(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const uint32_t cp = text::NextCodePoint(s, &i);
    if (IsOdd(cp)) {
      out.push_back(' ');
    } else {
      text::AppendUtf8(&out, cp);
    }
  }
  return out;
}

// The mapper's model: strip, then replace.
std::string Model(const std::string& text) { return ReplaceModel(text::Strip(text)); }

class WhitespaceMapper : public ::testing::Test {
 protected:
  void SetUp() override {
    recipe::OperatorSpec spec;
    spec.name = "whitespace_normalization_mapper";
    spec.line = 1;
    op_ = Registry::Global().Find(spec.name)->factory(spec, "text");
  }
  std::string Apply(const std::string& text) const {
    std::string line = "{\"text\":";
    io::AppendJsonString(&line, text);
    line += "}";
    io::Record record;
    record.Assign(line);
    Sample sample(&record);
    static_cast<const Mapper&>(*op_).Map(sample);
    return sample.Text("text");
  }
  std::unique_ptr<Operator> op_;
};

TEST_F(WhitespaceMapper, EveryCharacterAtEveryBlockOffset) {
  std::vector<uint32_t> odd;
  for (uint32_t cp = 0; cp <= 0xFFFC; ++cp) {
    if (IsOdd(cp) && cp != 0x20) odd.push_back(cp);
  }
  ASSERT_EQ(odd.size(), 22u);
  // Characters that share a lead byte (or two) with an odd one but are not.
  const std::vector<uint32_t> near = {0x85, 0xA1, 0x200E, 0x202E, 0x2061, 0x3001, 0x3002, 0xFFFD};
  for (uint32_t cp : odd) {
    for (size_t offset = 0; offset < 40; ++offset) {
      std::string text = "x";
      text.append(offset, 'a');
      text::AppendUtf8(&text, cp);
      text += "b";
      for (uint32_t n : near) text::AppendUtf8(&text, n);
      text += "c";
      text::AppendUtf8(&text, cp);
      text.append(offset % 19, 'd');
      text += "y";
      EXPECT_EQ(Apply(text), Model(text)) << "U+" << std::hex << cp << " at " << std::dec << offset;
    }
  }
}

TEST_F(WhitespaceMapper, RandomMixturesMatchTheModel) {
  std::mt19937 rng(7);
  const std::vector<uint32_t> alphabet = {'a',    ' ',    '\t',   '\n',   0x84,   0x85,   0xA0,
                                          0xE9,   0x2000, 0x200B, 0x200D, 0x200E, 0x202F, 0x205F,
                                          0x2060, 0x2061, 0x3000, 0x3002, 0xFFFC, 0xFFFD, 0x1F600};
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t length = rng() % 80;
    for (size_t i = 0; i < length; ++i) text::AppendUtf8(&text, alphabet[rng() % alphabet.size()]);
    ASSERT_EQ(Apply(text), Model(text)) << text;
  }
}

// Every kernel this CPU runs gives the model's bytes, also on long texts
// whose multi-byte spaces straddle the 16-byte blocks.
TEST(WhitespaceKernels, EveryKernelMatchesTheModel) {
  using whitespace::Kernel;
  std::mt19937 rng(11);
  const std::vector<uint32_t> alphabet = {'a',    'b',    '\t',   ' ',    0x84,   0xA0,   0xE9,
                                          0x2000, 0x2005, 0x200B, 0x200D, 0x200E, 0x202F, 0x205F,
                                          0x2060, 0x3000, 0x3002, 0xFFFC, 0xFFFD, 0x1F600};
  std::vector<Kernel> kernels;
  for (Kernel k : {Kernel::kScalar, Kernel::kSse2, Kernel::kSsse3}) {
    if (whitespace::Supported(k)) kernels.push_back(k);
  }
  ASSERT_TRUE(whitespace::Supported(whitespace::BestKernel()));
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const size_t length = rng() % 300;
    // Mostly letters, with runs of spaces of every kind.
    for (size_t i = 0; i < length; ++i) {
      text::AppendUtf8(&text, rng() % 3 == 0 ? alphabet[rng() % alphabet.size()] : 'x');
    }
    // Replace does not strip.
    const std::string want = ReplaceModel(text);
    for (Kernel k : kernels) {
      std::string out(text.size() + whitespace::kSlack, '\0');
      out.resize(whitespace::Replace(text, out.data(), k));
      ASSERT_EQ(out, want) << "kernel " << static_cast<int>(k) << " on " << text;
    }
    size_t first = text.size();
    for (size_t i = 0; i < text.size();) {
      const size_t at = i;
      const uint32_t cp = text::NextCodePoint(text, &i);
      if (IsOdd(cp) && cp != ' ') {
        first = at;
        break;
      }
    }
    EXPECT_EQ(whitespace::FindOdd(text), first) << text;
  }
}

TEST_F(WhitespaceMapper, TextWithNothingToChangeIsLeftAlone) {
  EXPECT_EQ(Apply("plain text, caf\xC3\xA9 \xE3\x80\x82"), "plain text, caf\xC3\xA9 \xE3\x80\x82");
  EXPECT_EQ(Apply("  padded\n"), "padded");
  EXPECT_EQ(Apply(""), "");
}

}  // namespace
}  // namespace djshard::ops
