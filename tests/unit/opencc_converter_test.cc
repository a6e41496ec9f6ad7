// djshard's OpenCC conversion against libopencc's own (the library the
// vectors of tests/data/ops-chinese-convert.jsonl were made with): the same
// output for every configuration, on texts made of the configuration's own
// dictionary keys, whole and cut, mixed with other characters.
#include "src/ops/opencc_converter.h"

#include <gtest/gtest.h>

#include <Config.hpp>
#include <Conversion.hpp>
#include <ConversionChain.hpp>
#include <Converter.hpp>
#include <DictEntry.hpp>
#include <DictGroup.hpp>
#include <Lexicon.hpp>
#include <MaxMatchSegmentation.hpp>
#include <random>
#include <string>
#include <vector>

#include "djshard/ops/sample.h"
#include "djshard/ops/text.h"

namespace djshard::ops {
namespace {

const char* const kModes[] = {"s2t",   "t2s",  "s2tw", "tw2s", "s2hk", "hk2s", "s2twp",
                              "tw2sp", "t2tw", "tw2t", "hk2t", "t2hk", "t2jp", "jp2t"};

// Every key of every dictionary the configuration uses, read through the
// library.
std::vector<std::string> DictionaryKeys(const std::string& mode) {
  std::vector<std::string> keys;
  const opencc::ConverterPtr converter = opencc::Config().NewFromFile(mode + ".json");
  const auto add = [&](const opencc::DictPtr& dict) {
    const opencc::LexiconPtr lexicon = dict->GetLexicon();  // a group's is made here
    for (const auto& entry : *lexicon) keys.push_back(entry->Key());
  };
  add(dynamic_cast<const opencc::MaxMatchSegmentation&>(*converter->GetSegmentation()).GetDict());
  for (const auto& conversion : converter->GetConversionChain()->GetConversions()) {
    add(conversion->GetDict());
  }
  return keys;
}

// The first `chars` characters of `s`, or the rest after them.
std::string CutAt(const std::string& s, size_t chars, bool head) {
  size_t at = 0;
  for (size_t n = 0; n < chars && at < s.size(); ++n) at += text::SequenceLength(s[at]);
  return head ? s.substr(0, at) : s.substr(at);
}

std::string RandomText(const std::vector<std::string>& keys, std::mt19937* rng) {
  static const std::vector<std::string> others = {
      " ",      "abc", "Hello, world. ", "123", "\n", "\t", "，", "。", "😀", "ひらがな", "カタカナ",
      "한국어", "é",   "\xef\xbf\xbd",   "「",  "」", "……", "Ａ", "〇"};
  std::uniform_int_distribution<size_t> count(0, 14), key(0, keys.size() - 1),
      other(0, others.size() - 1);
  std::uniform_int_distribution<int> kind(0, 5), cut(1, 3);
  std::string text;
  for (size_t n = count(*rng); n > 0; --n) {
    const std::string& k = keys[key(*rng)];
    switch (kind(*rng)) {
      case 0:
        text += others[other(*rng)];
        break;
      case 1:
        text += CutAt(k, cut(*rng), true);
        break;
      case 2:
        text += CutAt(k, cut(*rng), false);
        break;
      default:
        text += k;
    }
  }
  return text;
}

TEST(OpenCcConverter, EveryConfigurationConvertsAsTheLibraryDoes) {
  for (const char* mode : kModes) {
    SCOPED_TRACE(mode);
    const OpenCcConverter& converter = OpenCcConverter::ForMode(mode);
    const std::vector<std::string> keys = DictionaryKeys(mode);
    ASSERT_FALSE(keys.empty());
    std::mt19937 rng(11);
    std::string ours;
    for (int i = 0; i < 5000; ++i) {
      const std::string text = RandomText(keys, &rng);
      converter.Convert(text, &ours);
      ASSERT_EQ(ours, converter.LibraryConvert(text)) << "text: " << text;
    }
  }
}

TEST(OpenCcConverter, ATextEndsAtItsFirstNulAsTheLibraryReadsIt) {
  const OpenCcConverter& converter = OpenCcConverter::ForMode("s2t");
  std::string ours;
  for (const std::string& text : {std::string(""), std::string("汉字\0后面", 13),
                                  std::string("\0汉字", 7), std::string("简体字")}) {
    converter.Convert(text, &ours);
    EXPECT_EQ(ours, converter.LibraryConvert(text));
  }
  converter.Convert(std::string("汉字\0后面", 13), &ours);
  EXPECT_EQ(ours, "漢字");
}

TEST(OpenCcConverter, AByteThatStartsNoCharacterIsTheLibrarysError) {
  const OpenCcConverter& converter = OpenCcConverter::ForMode("s2t");
  std::string ours;
  std::string library_message;
  try {
    converter.LibraryConvert("汉\x80字");
  } catch (const OpError& e) {
    library_message = e.what();
  }
  ASSERT_FALSE(library_message.empty());
  try {
    converter.Convert("汉\x80字", &ours);
    FAIL() << "converted a text that is not UTF-8: " << ours;
  } catch (const OpError& e) {
    EXPECT_EQ(std::string(e.what()), library_message);
  }
}

// libopencc reads past the end of a text whose last character is cut short;
// djshard says what is wrong with it, whatever lies past the end.
TEST(OpenCcConverter, ATextEndingInsideACharacterIsAnError) {
  const OpenCcConverter& converter = OpenCcConverter::ForMode("s2t");
  for (const std::string& text :
       {std::string("头发\xf0"), std::string("头\xe5\xa4"), std::string("\xf8\x80")}) {
    std::string ours;
    try {
      converter.Convert(text, &ours);
      FAIL() << "converted " << text << " to " << ours;
    } catch (const OpError& e) {
      EXPECT_STREQ(e.what(), "OpenCC failed: the text ends inside a UTF-8 character");
    }
  }
}

}  // namespace
}  // namespace djshard::ops
