// The record model: untouched members keep their bytes, the overlay replaces,
// appends and removes members, and nothing else of the line changes.
#include "djshard/io/record.h"

#include <gtest/gtest.h>

#include <string>

namespace djshard::io {
namespace {

std::string Out(const Record& r) {
  std::string out;
  r.Serialize(&out);
  return out;
}

// Unusual but valid JSON: spacing, escapes, number spellings, nesting.
constexpr const char* kLine =
    "{ \"id\" : 1.50e1 , \"te\\u0078t\":\"caf\\u00e9 \\\"q\\\"\",\"n\":null,"
    "\"meta\":{ \"src\" : [1, -0.0] },\"flag\":true }";

TEST(Record, AnUnchangedRecordIsWrittenByteForByte) {
  Record r;
  r.Assign(kLine);
  EXPECT_EQ(Out(r), kLine);
}

TEST(Record, FindReturnsTheRawValueAsWrittenAndMatchesEscapedKeys) {
  Record r;
  r.Assign(kLine);
  EXPECT_EQ(r.Find("id"), "1.50e1");
  EXPECT_EQ(r.Find("text"), "\"caf\\u00e9 \\\"q\\\"\"");
  EXPECT_EQ(r.Find("n"), "null");
  EXPECT_EQ(r.Find("meta"), "{ \"src\" : [1, -0.0] }");
  EXPECT_EQ(r.Find("missing"), std::nullopt);
  EXPECT_EQ(r.Find("src"), std::nullopt);  // nested members are not top-level keys
}

TEST(Record, SetReplacesAValueInPlaceAndKeepsEveryOtherValueAndKey) {
  Record r;
  r.Assign(kLine);
  r.Set("text", "\"new\"");
  EXPECT_EQ(r.Find("text"), "\"new\"");
  // The replaced member keeps its key as written and its position.
  EXPECT_EQ(Out(r),
            "{\"id\":1.50e1,\"te\\u0078t\":\"new\",\"n\":null,"
            "\"meta\":{ \"src\" : [1, -0.0] },\"flag\":true}");
  r.Set("text", "\"newer\"");
  EXPECT_EQ(Out(r),
            "{\"id\":1.50e1,\"te\\u0078t\":\"newer\",\"n\":null,"
            "\"meta\":{ \"src\" : [1, -0.0] },\"flag\":true}");
}

TEST(Record, NewFieldsAreAppendedInTheOrderSetAndReplacedWithoutDuplicates) {
  Record r;
  r.Assign("{\"a\":1}");
  r.Set("__dj__stats__", "{\"x\":1}");
  r.Set("b\"q", "[]");
  r.Set("__dj__stats__", "{\"x\":2}");
  EXPECT_EQ(r.Find("__dj__stats__"), "{\"x\":2}");
  EXPECT_EQ(Out(r), "{\"a\":1,\"__dj__stats__\":{\"x\":2},\"b\\\"q\":[]}");
}

TEST(Record, RemoveLeavesAMemberOutAndSetBringsItBackInItsPlace) {
  Record r;
  r.Assign("{\"a\":1,\"b\":2,\"c\":3}");
  r.Remove("b");
  EXPECT_EQ(r.Find("b"), std::nullopt);
  EXPECT_EQ(Out(r), "{\"a\":1,\"c\":3}");
  r.Set("b", "20");
  EXPECT_EQ(Out(r), "{\"a\":1,\"b\":20,\"c\":3}");
  r.Set("d", "4");
  r.Remove("d");
  r.Remove("absent");
  EXPECT_EQ(Out(r), "{\"a\":1,\"b\":20,\"c\":3}");
  r.Remove("a");
  r.Remove("b");
  r.Remove("c");
  EXPECT_EQ(Out(r), "{}");
}

TEST(Record, TheFirstOfDuplicateKeysIsTheOneFoundAndReplaced) {
  Record r;
  r.Assign("{\"k\":1,\"k\":2}");
  EXPECT_EQ(r.Find("k"), "1");
  r.Set("k", "9");
  EXPECT_EQ(Out(r), "{\"k\":9,\"k\":2}");
}

TEST(Record, AssignCopiesTheLineAndStartsAFreshOverlay) {
  Record r;
  {
    std::string line = "{\"text\":\"first\"}";
    r.Assign(line);
    r.Set("text", "\"changed\"");
    line.assign(line.size(), 'x');  // the record holds its own copy
    EXPECT_EQ(Out(r), "{\"text\":\"changed\"}");
  }
  r.Set("extra", "1");
  const std::string second = "{\"text\":\"second\",\"other\":[ ]}";
  r.AssignView(second);
  EXPECT_EQ(r.Find("extra"), std::nullopt);
  EXPECT_EQ(Out(r), second);
  EXPECT_EQ(r.line(), second);
}

TEST(Record, AnEmptyObjectGainsAppendedFields) {
  Record r;
  r.Assign("{ }");
  EXPECT_EQ(Out(r), "{ }");
  r.Set("a", "\"x\"");
  EXPECT_EQ(Out(r), "{\"a\":\"x\"}");
}

}  // namespace
}  // namespace djshard::io
