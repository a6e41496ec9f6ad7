// What an operator sees of a record: decoded text, nested fields by dotted
// path, and changes that reach the record only through Commit().
#include "djshard/ops/sample.h"

#include <gtest/gtest.h>

namespace djshard::ops {
namespace {

std::string Out(const io::Record& r) {
  std::string out;
  r.Serialize(&out);
  return out;
}

TEST(Sample, NestedPathsReturnTheRawValueOfTheInnermostField) {
  io::Record r;
  r.Assign(
      "{\"meta\":{\"src\":{ \"name\" : \"web\", \"n\":[1, 2] },\"l\\u0061ng\":\"en\"},"
      "\"text\":\"t\"}");
  const Sample s(&r);
  EXPECT_EQ(s.Field("meta.src.name"), "\"web\"");
  EXPECT_EQ(s.Field("meta.src.n"), "[1, 2]");
  EXPECT_EQ(s.Field("meta.lang"), "\"en\"");  // an escaped key matches its decoded name
  EXPECT_EQ(s.Field("meta"),
            "{\"src\":{ \"name\" : \"web\", \"n\":[1, 2] },\"l\\u0061ng\":\"en\"}");
  EXPECT_EQ(s.Field("text"), "\"t\"");
}

TEST(Sample, NestedPathsThroughMissingOrNonObjectPartsAreAbsent) {
  io::Record r;
  r.Assign("{\"meta\":{\"src\":\"web\",\"list\":[{\"a\":1}]},\"text\":\"t\"}");
  const Sample s(&r);
  EXPECT_EQ(s.Field("nope"), std::nullopt);
  EXPECT_EQ(s.Field("meta.nope"), std::nullopt);
  EXPECT_EQ(s.Field("meta.src.deeper"), std::nullopt);
  EXPECT_EQ(s.Field("meta.list.a"), std::nullopt);
  EXPECT_EQ(s.Field("text.x"), std::nullopt);
}

TEST(Sample, TextIsDecodedAndChangesReachTheRecordOnlyOnCommit) {
  io::Record r;
  r.Assign("{\"text\":\"caf\\u00e9\",\"other\":1}");
  Sample s(&r);
  EXPECT_EQ(s.Text("text"), "caf\xC3\xA9");
  s.SetText("text", "tea \"hot\"");
  EXPECT_EQ(Out(r), "{\"text\":\"caf\\u00e9\",\"other\":1}");
  s.Commit(false);
  EXPECT_EQ(Out(r), "{\"text\":\"tea \\\"hot\\\"\",\"other\":1}");
}

TEST(Sample, AMissingOrNonStringTextIsAnOperatorError) {
  io::Record r;
  r.Assign("{\"text\":3}");
  Sample s(&r);
  try {
    s.Text("text");
    ADD_FAILURE() << "a number was accepted as text";
  } catch (const OpError& e) {
    EXPECT_STREQ(e.what(), "field 'text' is not a string");
  }
  try {
    s.Text("body");
    ADD_FAILURE() << "a missing field was accepted as text";
  } catch (const OpError& e) {
    EXPECT_STREQ(e.what(), "field 'body' not found");
  }
}

TEST(Sample, StatsAreWrittenOnlyWhenAsked) {
  io::Record r;
  r.Assign("{\"text\":\"t\"}");
  Sample s(&r);
  s.SetStat("text_len", "1");
  s.Commit(false);
  EXPECT_EQ(Out(r), "{\"text\":\"t\"}");
  io::Record r2;
  r2.Assign("{\"text\":\"t\"}");
  Sample s2(&r2);
  s2.SetStat("text_len", "1");
  s2.Commit(true);
  EXPECT_EQ(Out(r2), "{\"text\":\"t\",\"__dj__stats__\":{\"text_len\":1}}");
}

// The same bytes whether the stats came from this run's filter or were
// already in the record (a run resumed from a checkpoint after the filter).
TEST(Sample, NewMetaGoesBeforeStatsWhereverTheStatsCameFrom) {
  io::Record fresh;
  fresh.Assign("{\"text\":\"t\"}");
  Sample a(&fresh);
  a.SetStat("text_len", "1");
  a.SetMeta("label", "\"x\"");
  a.Commit(true);
  io::Record resumed;
  resumed.Assign("{\"text\":\"t\",\"__dj__stats__\":{\"text_len\":1}}");
  Sample b(&resumed);
  b.SetMeta("label", "\"x\"");
  b.Commit(true);
  const std::string want =
      "{\"text\":\"t\",\"__dj__meta__\":{\"label\":\"x\"},\"__dj__stats__\":{\"text_len\":1}}";
  EXPECT_EQ(Out(fresh), want);
  EXPECT_EQ(Out(resumed), want);
}

// A tap's copy (CommitTo) has the bytes Commit gives, field order included,
// and leaves the sample able to commit the same again.
TEST(Sample, CommitToWritesWhatCommitWritesAndLeavesTheSample) {
  io::Record record;
  record.Assign("{\"text\":\"a  b\",\"__dj__stats__\":{\"n\":1}}");
  Sample s(&record);
  s.SetText("text", "a \"b\"");
  s.SetMeta("label", "\"x\"");
  io::Record copy = record;
  s.CommitTo(&copy, true);
  const std::string want =
      "{\"text\":\"a \\\"b\\\"\",\"__dj__meta__\":{\"label\":\"x\"},\"__dj__stats__\":{\"n\":1}}";
  EXPECT_EQ(Out(copy), want);
  EXPECT_EQ(Out(record), "{\"text\":\"a  b\",\"__dj__stats__\":{\"n\":1}}");
  // A later change is seen by the next commit, not the cached encoding.
  s.SetText("text", "c");
  io::Record second = record;
  s.CommitTo(&second, true);
  s.Commit(true);
  const std::string want_c =
      "{\"text\":\"c\",\"__dj__meta__\":{\"label\":\"x\"},\"__dj__stats__\":{\"n\":1}}";
  EXPECT_EQ(Out(second), want_c);
  EXPECT_EQ(Out(record), want_c);
}

}  // namespace
}  // namespace djshard::ops
