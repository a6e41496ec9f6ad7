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
#include "tests/unit/temp_dir.h"

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

// Where the first conversion's group begins with the segmentation
// dictionary, segmenting and that conversion are one walk per character:
// s2t and t2s, the modes Data-Juicer's recipes name, among them.
TEST(OpenCcConverter, TheCommonConfigurationsSegmentWhileConverting) {
  for (const char* mode :
       {"s2t", "t2s", "s2tw", "s2hk", "s2twp", "t2tw", "tw2t", "hk2t", "t2hk", "t2jp", "jp2t"}) {
    EXPECT_TRUE(OpenCcConverter::ForMode(mode).SegmentsWhileConverting()) << mode;
  }
  // hk2s converts by HKVariantsRevPhrases first and segments by TSPhrases.
  EXPECT_FALSE(OpenCcConverter::ForMode("hk2s").SegmentsWhileConverting());
}

// 2,000 texts of up to 8 of `pieces` (random, from `seed`), each converted
// as libopencc converts it.
void ExpectPiecesConvertAsTheLibraryDoes(const OpenCcConverter& converter,
                                         const std::vector<std::string>& pieces, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, pieces.size() - 1), count(0, 8);
  std::string ours;
  for (int i = 0; i < 2000; ++i) {
    std::string text;
    for (size_t n = count(rng); n > 0; --n) text += pieces[pick(rng)];
    converter.Convert(text, &ours);
    ASSERT_EQ(ours, converter.LibraryConvert(text)) << "text: " << text;
  }
}

// A configuration of one's own (text dictionaries) whose group's later
// dictionary has a key of two characters: where that key would run into a
// segment that the segmentation dictionary starts, the run's end cuts it,
// as in the library. The one-walk conversion must not take it.
TEST(OpenCcConverter, ALaterKeyAcrossASegmentsStartIsCutAsTheLibraryCutsIt) {
  const testing::TempDir dir;
  const std::string phrases = dir.Write("phrases.txt", "丁戊\tDE\n甲乙\tAB\n");
  const std::string chars = dir.Write("chars.txt", "丁\td\n丙\tc\n丙丁\tCD\n戊\te\n");
  dir.Write("custom.json", R"({"name": "custom",
    "segmentation": {"type": "mmseg", "dict": {"type": "text", "file": ")" +
                               phrases + R"("}},
    "conversion_chain": [{"dict": {"type": "group", "dicts": [
      {"type": "text", "file": ")" +
                               phrases + R"("},
      {"type": "text", "file": ")" +
                               chars + R"("}]}}]})");
  const OpenCcConverter& converter = OpenCcConverter::ForMode(dir.Path("custom"));
  ASSERT_TRUE(converter.SegmentsWhileConverting());
  std::string ours;
  converter.Convert("丙丁戊", &ours);
  EXPECT_EQ(ours, "cDE");  // not "CDe": 丁戊 is a segment of its own
  EXPECT_EQ(ours, converter.LibraryConvert("丙丁戊"));
  ExpectPiecesConvertAsTheLibraryDoes(
      converter, {"丁戊", "甲乙", "丁", "丙", "丙丁", "戊", "甲", "乙", "x"}, 5);
}

// A segmentation of several dictionaries (a group: the first that matches)
// and a first conversion group with no dictionary at all, in configurations
// of one's own: converted as the library converts them.
TEST(OpenCcConverter, ConfigurationsOfOnesOwnSegmentAndConvertAsTheLibraryDoes) {
  const testing::TempDir dir;
  const std::string first = dir.Write("first.txt", "甲\tA\n");
  const std::string second = dir.Write("second.txt", "乙丙\tBC\n");
  const std::string later = dir.Write("later.txt", "丙丁\tY\n");
  const auto text_dict = [](const std::string& path) {
    return R"({"type": "text", "file": ")" + path + R"("})";
  };
  dir.Write("grouped.json", R"({"name": "grouped",
    "segmentation": {"type": "mmseg", "dict": {"type": "group", "dicts": [)" +
                                text_dict(first) + ", " + text_dict(second) + R"(]}},
    "conversion_chain": [{"dict": )" +
                                text_dict(later) + "}]}");
  dir.Write("empty.json", R"({"name": "empty",
    "segmentation": {"type": "mmseg", "dict": )" +
                              text_dict(first) + R"(},
    "conversion_chain": [{"dict": {"type": "group", "dicts": []}},
                         {"dict": )" +
                              text_dict(later) + "}]}");
  const std::vector<std::string> pieces = {"甲", "乙", "丙", "丁", "乙丙", "丙丁", "x", "甲乙"};
  for (const char* name : {"grouped", "empty"}) {
    SCOPED_TRACE(name);
    const OpenCcConverter& converter = OpenCcConverter::ForMode(dir.Path(name));
    EXPECT_FALSE(converter.SegmentsWhileConverting());
    std::string ours;
    converter.Convert("乙丙丁", &ours);
    EXPECT_EQ(ours, converter.LibraryConvert("乙丙丁"));
    ExpectPiecesConvertAsTheLibraryDoes(converter, pieces, 3);
  }
}

}  // namespace
}  // namespace djshard::ops
