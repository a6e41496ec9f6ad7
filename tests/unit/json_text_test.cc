#include "djshard/io/json_text.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "djshard/common/error.h"

namespace djshard::io {
namespace {

TEST(JsonText, UnescapesEscapesAndSurrogatePairs) {
  EXPECT_EQ(UnescapeJsonString("\"a\\n\\t\\\"\\\\\\/\""), "a\n\t\"\\/");
  EXPECT_EQ(UnescapeJsonString("\"\\u00e9\""), "\xC3\xA9");
  EXPECT_EQ(UnescapeJsonString("\"\\ud83d\\ude00\""), "\xF0\x9F\x98\x80");
}

TEST(JsonText, EscapesOnlyWhatJsonRequires) {
  std::string out;
  AppendJsonString(&out, "a\"b\\c\nd\x01\xC3\xA9");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\u0001\xC3\xA9\"");
}

TEST(JsonText, SplitsCompactObjectsAndArrays) {
  const auto members = SplitObject("{\"a\":[1,{\"x\":\"]}\"}],\"b\\\"\":\"s,}\",\"c\":-1.5e3}");
  ASSERT_EQ(members.size(), 3u);
  EXPECT_EQ(members[0].key_literal, "\"a\"");
  EXPECT_EQ(members[0].value, "[1,{\"x\":\"]}\"}]");
  EXPECT_EQ(members[1].key_literal, "\"b\\\"\"");
  EXPECT_EQ(members[1].value, "\"s,}\"");
  EXPECT_EQ(members[2].value, "-1.5e3");
  const auto items = SplitArray("[\"a\",null,[1,2],{}]");
  ASSERT_EQ(items.size(), 4u);
  EXPECT_EQ(items[2], "[1,2]");
  EXPECT_TRUE(SplitObject("{}").empty());
  EXPECT_TRUE(SplitArray("[]").empty());
}

TEST(JsonText, SplitArrayStopsAtTheItemLimit) {
  const auto two = SplitArray("[ \"a,]\" , [1,2], 3, 4 ]", 2);
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], "\"a,]\"");
  EXPECT_EQ(two[1], "[1,2]");
  EXPECT_EQ(SplitArray("[1,2,3]", 5).size(), 3u);
  EXPECT_TRUE(SplitArray("[1]", 0).empty());
}

TEST(JsonText, MinifyKeepsStringsIntact) {
  std::string out;
  MinifyJson("{ \"a b\" : \" x  y \" ,\n \"c\" : [ 1 , 2 ] }", &out);
  EXPECT_EQ(out, "{\"a b\":\" x  y \",\"c\":[1,2]}");
}

// Whitespace outside strings removed, one byte at a time: what any of
// simdjson's kernels must write.
std::string ScalarMinify(const std::string& json) {
  std::string out;
  bool in_string = false, escaped = false;
  for (char c : json) {
    if (in_string) {
      out.push_back(c);
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
      out.push_back(c);
    } else if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
      out.push_back(c);
    }
  }
  return out;
}

// Documents of every length across the kernels' 64-byte blocks, with
// whitespace, escaped quotes and backslashes and multibyte text inside
// strings and whitespace between values.
TEST(JsonText, MinifyWritesWhatAScalarMinifyWritesAcrossBlockEdges) {
  std::mt19937 rng(7);
  const std::vector<std::string> pieces = {" ",       "\t",       "\n",       "\r\n",
                                           "\"a b\"", "\"\\\"\"", "\"\\\\\"", "\"é 中\"",
                                           "1",       "[ ]",      "{ }",      "true"};
  for (int n = 0; n < 2000; ++n) {
    std::string json = "[";
    const size_t items = rng() % 40;
    for (size_t i = 0; i < items; ++i) {
      if (i > 0) json += rng() % 2 ? " ," : ",";
      for (size_t k = rng() % 4; k > 0; --k) json += pieces[rng() % 4];
      json += pieces[4 + rng() % (pieces.size() - 4)];
    }
    json += "]";
    std::string out;
    MinifyJson(json, &out);
    ASSERT_EQ(out, ScalarMinify(json)) << json;
  }
}

std::string Padded(const std::string& s) { return s + std::string(64, '\0'); }

TEST(JsonLineParser, ReportsEachProblemWithFileAndLine) {
  JsonLineParser p;
  const struct {
    std::string line;
    std::string message;
  } cases[] = {{" \t\r", "blank line"},
               {"{\"a\":\"\xC3\"}", "invalid UTF-8"},
               {"{\"a\":}", "invalid JSON"},
               {"[1]", "record is not a JSON object (got array)"},
               {"\"s\"", "record is not a JSON object (got string)"},
               {"3", "record is not a JSON object (got number)"},
               {"{\"a\":1} {\"b\":2}", "invalid JSON"}};
  for (const auto& c : cases) {
    const std::string buf = Padded(c.line);
    try {
      p.ParseObject(std::string_view(buf.data(), c.line.size()), "f.jsonl", 9);
      ADD_FAILURE() << "accepted: " << c.line;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("f.jsonl:9: " + c.message, 0), 0u) << e.what();
    }
  }
  const std::string ok = Padded("{\"a\":null,\"b\":1}");
  p.ParseObject(std::string_view(ok.data(), 16), "f.jsonl", 1);
  EXPECT_TRUE(p.Has("a"));
  EXPECT_FALSE(p.HasNonNull("a"));
  EXPECT_TRUE(p.HasNonNull("b"));
  EXPECT_FALSE(p.Has("c"));
}

}  // namespace
}  // namespace djshard::io

namespace djshard::io {
namespace {

TEST(JsonText, EscapingSeparatorsWritesPythonsEscapesForC1AndLineSeparators) {
  std::string out;
  AppendJsonStringEscapingSeparators(&out, "a\x7f\xc2\x85\xe2\x80\xa8\xe2\x80\xa9\x01\"\xc3\xa9");
  EXPECT_EQ(out, "\"a\\u007f\\u0085\\u2028\\u2029\\u0001\\\"\xc3\xa9\"");
  EXPECT_EQ(UnescapeJsonString(out), "a\x7f\xc2\x85\xe2\x80\xa8\xe2\x80\xa9\x01\"\xc3\xa9");
}

}  // namespace
}  // namespace djshard::io
