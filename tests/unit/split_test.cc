// The expand splitters (SPEC-lineage §1): each mode's rule, the spec's
// examples, and the re-join property.
#include "djshard/ops/split.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace djshard::ops {
namespace {

struct Piece {
  std::string text, sep;
  bool operator==(const Piece&) const = default;
};

std::vector<Piece> Split(std::string_view text, const std::string& by,
                         std::string* prefix = nullptr, size_t max = 100000) {
  SplitBy mode;
  std::string why;
  EXPECT_TRUE(ParseSplitBy(by, &mode, &why)) << why;
  TextSplit split;
  SplitText(text, mode, max, &split);
  std::vector<Piece> out;
  for (const TextPiece& p : split.pieces) out.push_back({std::string(p.text), std::string(p.sep)});
  if (prefix != nullptr) *prefix = std::string(split.prefix);
  return out;
}

std::string Rejoin(std::string_view text, const std::string& by) {
  std::string prefix;
  const std::vector<Piece> pieces = Split(text, by, &prefix);
  std::string out = prefix;
  for (const Piece& p : pieces) out += p.text + p.sep;
  return out;
}

TEST(SplitParagraph, CarriageReturnBeforeABreakBelongsToTheSeparator) {
  EXPECT_EQ(Split("A\r\n\r\nB", "paragraph"), (std::vector<Piece>{{"A", "\r\n\r\n"}, {"B", ""}}));
}

TEST(SplitParagraph, BlankLinesWithSpacesSeparateAndTrailingWhitespaceIsTheLastSep) {
  std::string prefix;
  EXPECT_EQ(Split(" \n lead\n \t\n\ntwo\nlines\n\n ", "paragraph", &prefix),
            (std::vector<Piece>{{"lead", "\n \t\n\n"}, {"two\nlines", "\n\n "}}));
  EXPECT_EQ(prefix, " \n ");
}

TEST(SplitParagraph, WhitespaceOnlyTextHasNoChildrenAndIsAllPrefix) {
  std::string prefix;
  EXPECT_TRUE(Split("\u3000 \n\u00a0", "paragraph", &prefix).empty());
  EXPECT_EQ(prefix, "\u3000 \n\u00a0");
  EXPECT_TRUE(Split("", "paragraph", &prefix).empty());
}

TEST(SplitSentence, TerminatorRunsWithClosersEndASentenceBeforeWhitespace) {
  EXPECT_EQ(Split("He said \"Stop!\" Then left... ok", "sentence"),
            (std::vector<Piece>{{"He said \"Stop!\"", " "}, {"Then left...", " "}, {"ok", ""}}));
}

TEST(SplitSentence, NoBoundaryInsideNumbersOrAbbreviationsWithoutSpace) {
  EXPECT_EQ(Split("Pi is 3.14 e.g.here. Yes", "sentence"),
            (std::vector<Piece>{{"Pi is 3.14 e.g.here.", " "}, {"Yes", ""}}));
}

TEST(SplitSentence, CjkTerminatorsEndASentenceWhateverFollows) {
  EXPECT_EQ(Split("一。二！」三？四", "sentence"),
            (std::vector<Piece>{{"一。", ""}, {"二！」", ""}, {"三？", ""}, {"四", ""}}));
}

TEST(SplitSentence, ALineBreakEndsASentenceAndTrailingSpaceIsTheLastSep) {
  std::string prefix;
  EXPECT_EQ(Split("  title\n\nbody text  ", "sentence", &prefix),
            (std::vector<Piece>{{"title", "\n\n"}, {"body text", "  "}}));
  EXPECT_EQ(prefix, "  ");
}

TEST(SplitLines, EachLineIsAChildWithItsTerminator) {
  EXPECT_EQ(Split("a\r\n\nb", "lines"), (std::vector<Piece>{{"a", "\r\n"}, {"", "\n"}, {"b", ""}}));
  EXPECT_EQ(Split("a\n", "lines"), (std::vector<Piece>{{"a", "\n"}}));
  EXPECT_TRUE(Split("", "lines").empty());
}

TEST(SplitChars, RunsOfNCodePointsTheLastShorter) {
  EXPECT_EQ(Split("héllo😀", "chars:2"), (std::vector<Piece>{{"hé", ""}, {"ll", ""}, {"o😀", ""}}));
}

TEST(SplitChars, StopsAtMaxPiecesPlusOne) {
  SplitBy by;
  std::string why;
  ASSERT_TRUE(ParseSplitBy("chars:1", &by, &why));
  TextSplit split;
  SplitText(std::string(1000, 'x'), by, 10, &split);
  EXPECT_TRUE(split.over_limit);
  EXPECT_EQ(split.pieces.size(), 11u);
}

TEST(SplitBy, RejectsUnknownModesAndCharsBelowOne) {
  SplitBy by;
  std::string why;
  EXPECT_FALSE(ParseSplitBy("chars:0", &by, &why));
  EXPECT_FALSE(ParseSplitBy("chars:x", &by, &why));
  EXPECT_FALSE(ParseSplitBy("words", &by, &why));
  EXPECT_FALSE(ParseSplitBy("field:", &by, &why));
  ASSERT_TRUE(ParseSplitBy("field:images", &by, &why));
  EXPECT_EQ(by.field, "images");
}

TEST(Split, UnchangedChildrenRejoinToTheOriginalBytes) {
  const std::vector<std::string> texts = {
      "",
      "\r\n\r\n  A para.\r\n\r\nB! C?\n\n\n",
      "一段。\n\n二段！三段？  \u3000",
      "emoji 😀. next\u00a0one \n x",
      "no terminator   ",
      "a\n\n\nb\r\n \r\nc\r",
  };
  for (const std::string& t : texts) {
    for (const char* by : {"paragraph", "sentence", "lines", "chars:7", "chars:1"}) {
      EXPECT_EQ(Rejoin(t, by), t) << by;
    }
  }
}

}  // namespace
}  // namespace djshard::ops
