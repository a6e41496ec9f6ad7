// The typed records of the job directory: what is written is read back, and
// a record from a newer djshard or with an unknown status is refused by name.
#include "djshard/store/records.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "djshard/common/error.h"

namespace djshard::store {
namespace {

using nlohmann::json;

LockRecord SomeLock() {
  LockRecord r;
  r.shard_id = "part-00001-of-00004";
  r.token = "0123456789abcdef0123456789abcdef";
  r.hostname = "node-a";
  r.pid = 4242;
  r.claimed_at = "2026-12-01T00:00:00.000Z";
  r.attempt_number = 2;
  r.attempt_dir = "attempts/part-00001-of-00004/0002-0123456789abcdef0123456789abcdef";
  return r;
}

TEST(Records, ALockRoundTripsAndIsOneLine) {
  const LockRecord r = SomeLock();
  const std::string text = r.ToJson();
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const LockRecord back = LockRecord::FromJson(text, "x.lock");
  EXPECT_EQ(back.shard_id, r.shard_id);
  EXPECT_EQ(back.token, r.token);
  EXPECT_EQ(back.hostname, r.hostname);
  EXPECT_EQ(back.pid, r.pid);
  EXPECT_EQ(back.claimed_at, r.claimed_at);
  EXPECT_EQ(back.attempt_number, r.attempt_number);
  EXPECT_EQ(back.attempt_dir, r.attempt_dir);
  EXPECT_EQ(json::parse(text)["schema_version"], kRecordSchemaVersion);
}

TEST(Records, EveryAttemptStatusRoundTripsByName) {
  for (AttemptStatus s : {AttemptStatus::kRunning, AttemptStatus::kDone, AttemptStatus::kFailed,
                          AttemptStatus::kStale, AttemptStatus::kLost, AttemptStatus::kInterrupted,
                          AttemptStatus::kSuperseded}) {
    AttemptRecord r;
    r.claim = SomeLock();
    r.status = s;
    r.error = "why";
    const std::string text = r.ToJson();
    EXPECT_EQ(json::parse(text)["status"], AttemptStatusName(s));
    const AttemptRecord back = AttemptRecord::FromJson(text, "attempt.json");
    EXPECT_EQ(back.status, s);
    EXPECT_EQ(back.error, "why");
    EXPECT_EQ(back.claim.token, r.claim.token);
  }
  EXPECT_TRUE(CountsAsFailure(AttemptStatus::kFailed));
  EXPECT_TRUE(CountsAsFailure(AttemptStatus::kStale));
  EXPECT_FALSE(CountsAsFailure(AttemptStatus::kInterrupted));
  EXPECT_FALSE(CountsAsFailure(AttemptStatus::kLost));
}

TEST(Records, AnAttemptWithAnUnknownStatusIsRefusedNamingIt) {
  try {
    AttemptRecord::FromJson(R"({"status": "sleeping"})", "a/attempt.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "a/attempt.json");
    EXPECT_NE(e.message().find("'sleeping'"), std::string::npos) << e.message();
  }
}

TEST(Records, ARecordFromANewerDjshardIsRefused) {
  try {
    DoneRecord::FromJson(R"({"schema_version": 99, "shard_id": "s"})", "done.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("schema_version 99"), std::string::npos) << e.message();
  }
}

// Records written before they carried a schema version are read as version 1.
TEST(Records, ARecordWithoutSchemaVersionIsRead) {
  const DoneRecord d = DoneRecord::FromJson(
      R"({"shard_id":"s","output_path":"attempts/s/0001-t/processed.jsonl","rows":3,)"
      R"("size_bytes":30,"sha256":"ab","token":"t"})",
      "done.json");
  EXPECT_EQ(d.rows, 3u);
  EXPECT_EQ(d.token, "t");
}

TEST(Records, ADoneRecordKeepsEveryFieldMergeAndStatusUse) {
  DoneRecord d;
  d.shard_id = "s";
  d.hostname = "node-b";
  d.pid = 7;
  d.token = "t";
  d.attempt_number = 3;
  d.output_path = "attempts/s/0003-t/processed.jsonl";
  d.rows = 10;
  d.size_bytes = 123;
  d.checksum = io::Checksum::Xxh3(std::string(32, 'a'));
  d.op_stats = {{"text_length_filter", 10, 8, 0, 0.5}};
  d.seconds = 1.5;
  const DoneRecord back = DoneRecord::FromJson(d.ToJson(), "done.json");
  EXPECT_EQ(back.hostname, "node-b");
  EXPECT_EQ(back.output_path, d.output_path);
  EXPECT_EQ(back.rows, 10u);
  EXPECT_EQ(back.size_bytes, 123u);
  EXPECT_EQ(back.checksum, d.checksum);
  ASSERT_EQ(back.op_stats.size(), 1u);
  EXPECT_EQ(back.op_stats[0].name, "text_length_filter");
  EXPECT_EQ(back.op_stats[0].rows_out, 8u);
}

// A dedup shard task's output as ranges of its sign task's rows.jsonl.
TEST(Records, ADoneRecordKeepsItsOutputSourceRanges) {
  DoneRecord d;
  d.shard_id = "s";
  d.output_path = "attempts/s/0001-t/processed.jsonl";
  d.output_source.path = "attempts/dedup1-sign-s/0001-u/rows.jsonl";
  d.output_source.ranges = {{0, 40}, {52, 7}, {uint64_t{1} << 40, 3}};
  d.rows = 4;
  d.size_bytes = 50;
  d.checksum = io::Checksum::Xxh3(std::string(32, 'b'));
  const std::string text = d.ToJson();
  EXPECT_EQ(json::parse(text)["output_source"]["ranges"],
            json::array({0, 40, 52, 7, uint64_t{1} << 40, 3}));
  EXPECT_EQ(json::parse(text)["schema_version"], kSourcedDoneRecordSchemaVersion);
  const DoneRecord back = DoneRecord::FromJson(text, "done.json");
  EXPECT_EQ(back.output_source.path, d.output_source.path);
  EXPECT_EQ(back.output_source.ranges, d.output_source.ranges);
  // Without one, the output is the output file.
  d.output_source = {};
  EXPECT_FALSE(json::parse(d.ToJson()).contains("output_source"));
  EXPECT_EQ(json::parse(d.ToJson())["schema_version"], kRecordSchemaVersion);
  EXPECT_TRUE(DoneRecord::FromJson(d.ToJson(), "done.json").output_source.empty());
}

TEST(Records, AnOutputSourceWithAnOddNumberOfRangeBoundsIsRefused) {
  try {
    DoneRecord::FromJson(
        R"({"shard_id":"s","output_path":"a/processed.jsonl","rows":1,"size_bytes":3,)"
        R"("xxh3_128":"00000000000000000000000000000000",)"
        R"("output_source":{"path":"a/rows.jsonl","ranges":[0,3,9]}})",
        "state/done/s.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "state/done/s.json");
    EXPECT_NE(e.message().find("output_source is not valid"), std::string::npos) << e.message();
  }
}

TEST(Records, ADoneRecordWithoutItsOutputIsRefusedWithAHint) {
  try {
    DoneRecord::FromJson(R"({"shard_id":"s","rows":1})", "state/done/s.json");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "state/done/s.json");
    EXPECT_NE(e.hint().find("retry the shard"), std::string::npos);
  }
}

TEST(Records, AFailedRecordRoundTrips) {
  FailedRecord f{"s",
                 4,
                 "boom",
                 "attempts/s/0004-t",
                 "attempts/s/0004-t/process.log",
                 "2026-12-01T00:00:00.000Z",
                 "node-c"};
  const FailedRecord back = FailedRecord::FromJson(f.ToJson(), "failed.json");
  EXPECT_EQ(back.failures, 4);
  EXPECT_EQ(back.last_error, "boom");
  EXPECT_EQ(back.last_log, f.last_log);
  EXPECT_EQ(json::parse(f.ToJson())["status"], "failed");
}

}  // namespace
}  // namespace djshard::store
