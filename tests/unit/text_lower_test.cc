// text::Lower against Python's str.lower(), written out per code point here:
// random texts that mix ASCII runs of every length (the 16-byte blocks and
// their edges), characters that lower() leaves, changes, lengthens (U+0130)
// or shortens (the Kelvin sign), in 2-, 3- and 4-byte UTF-8.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "djshard/ops/text.h"

namespace djshard::ops {
namespace {

// (text, what Python 3.11's str.lower() makes of it)
const std::vector<std::pair<std::string, std::string>>& Pieces() {
  static const std::vector<std::pair<std::string, std::string>> pieces = {
      {"a", "a"},
      {"Z", "z"},
      {" ", " "},
      {"@[`{", "@[`{"},
      {"\xC3\x80", "\xC3\xA0"},                  // U+00C0 -> U+00E0
      {"\xC2\xB5", "\xC2\xB5"},                  // U+00B5 (micro sign) stays
      {"\xC4\xB0", "i\xCC\x87"},                 // U+0130 -> i U+0307 (longer)
      {"\xE2\x84\xAA", "k"},                     // U+212A Kelvin sign -> k (shorter)
      {"\xD0\x94", "\xD0\xB4"},                  // U+0414 -> U+0434
      {"\xE1\x82\xA0", "\xE2\xB4\x80"},          // U+10A0 -> U+2D00
      {"\xEF\xBC\xA1", "\xEF\xBD\x81"},          // U+FF21 -> U+FF41
      {"\xEF\xBF\xBD", "\xEF\xBF\xBD"},          // U+FFFD stays
      {"\xE4\xB8\xAD", "\xE4\xB8\xAD"},          // U+4E2D stays
      {"\xF0\x90\x90\x80", "\xF0\x90\x90\xA8"},  // U+10400 -> U+10428
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},  // U+1F600 stays
  };
  return pieces;
}

TEST(TextLower, EqualsPythonsLowerOnMixedTexts) {
  std::mt19937 rng(7);
  const auto& pieces = Pieces();
  std::string scratch;
  for (int round = 0; round < 3000; ++round) {
    std::string text, expected;
    const int parts = static_cast<int>(rng() % 12);
    for (int p = 0; p < parts; ++p) {
      if (rng() % 2 == 0) {  // an ASCII run of 0 to 70 bytes
        const int len = static_cast<int>(rng() % 71);
        for (int k = 0; k < len; ++k) {
          const auto c = static_cast<char>(' ' + rng() % 95);
          text.push_back(c);
          expected.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c);
        }
      } else {
        const auto& piece = pieces[rng() % pieces.size()];
        text += piece.first;
        expected += piece.second;
      }
    }
    ASSERT_EQ(text::Lower(text), expected) << "text: " << text;
    text::LowerInto(text, &scratch);  // a reused buffer, longer or shorter before
    ASSERT_EQ(scratch, expected) << "text: " << text;
  }
}

TEST(TextLower, CapitalSigmaIsFinalOnlyAtTheEndOfAWord) {
  // "ΟΔΟΣ ΑΣ." and "ΣΑ": final sigma after a cased letter with none after it
  EXPECT_EQ(text::Lower("\xCE\x9F\xCE\x94\xCE\x9F\xCE\xA3 \xCE\x91\xCE\xA3."),
            "\xCE\xBF\xCE\xB4\xCE\xBF\xCF\x82 \xCE\xB1\xCF\x82.");
  EXPECT_EQ(text::Lower("\xCE\xA3\xCE\x91"), "\xCF\x83\xCE\xB1");
}

}  // namespace
}  // namespace djshard::ops
