#include "djshard/store/manifest.h"

#include <gtest/gtest.h>

namespace djshard::store {
namespace {

std::vector<uint64_t> Equal(size_t rows) { return std::vector<uint64_t>(rows, 10); }

TEST(ShardCut, EqualRowsTenIntoThree) {
  EXPECT_EQ(CutShards(Equal(10), 3), (std::vector<uint64_t>{4, 3, 3}));
}
TEST(ShardCut, EqualRowsTenIntoFour) {
  EXPECT_EQ(CutShards(Equal(10), 4), (std::vector<uint64_t>{3, 2, 3, 2}));
}
TEST(ShardCut, EqualRowsFiveIntoFive) {
  EXPECT_EQ(CutShards(Equal(5), 5), (std::vector<uint64_t>{1, 1, 1, 1, 1}));
}
TEST(ShardCut, LargeFirstRowClosesTheFirstShardAlone) {
  EXPECT_EQ(CutShards({100, 1, 1, 1}, 2), (std::vector<uint64_t>{1, 3}));
}
TEST(ShardCut, LargeLastRowLeavesEveryShardNonEmpty) {
  EXPECT_EQ(CutShards({1, 1, 1, 100}, 2), (std::vector<uint64_t>{3, 1}));
}
TEST(ShardCut, OneShardTakesEverything) {
  EXPECT_EQ(CutShards(Equal(7), 1), (std::vector<uint64_t>{7}));
}
TEST(ShardCut, NeverEmptyWhenBytesAreSkewed) {
  std::vector<uint64_t> rows(50, 1);
  rows[0] = 1000000;
  const std::vector<uint64_t> cut = CutShards(rows, 10);
  for (uint64_t n : cut) EXPECT_GE(n, 1u);
  uint64_t total = 0;
  for (uint64_t n : cut) total += n;
  EXPECT_EQ(total, 50u);
}

TEST(ShardId, PadsToFiveDigits) { EXPECT_EQ(ShardId(3, 16), "part-00003-of-00016"); }
TEST(ShardId, WidensForLargeCounts) {
  EXPECT_EQ(ShardId(7, 123456), "part-000007-of-123456");
  EXPECT_EQ(ShardId(99999, 100000), "part-099999-of-100000");
}

TEST(Manifest, RoundTripsThroughJson) {
  Manifest m;
  m.job_id = "j";
  m.created_at = "2026-01-01T00:00:00.000Z";
  m.dataset_path = "/d";
  m.media_root = "/d";
  m.media_keys = {"images", "audios", "videos"};
  m.input_files.push_back({"/d/a.jsonl", "a.jsonl", 10, 123, 2, std::string(64, 'a')});
  m.shards.push_back({"part-00000-of-00001", 0, "shards/part-00000-of-00001.jsonl", 2, 9, "ff"});
  m.num_shards = 1;
  m.policy.lease_secs = 42;
  m.warnings = {"w"};
  const std::string text = m.ToJson();
  const Manifest back = Manifest::FromJson(text, "manifest.json");
  EXPECT_EQ(back.ToJson(), text);
  EXPECT_EQ(back.policy.lease_secs, 42);
  // Keys are sorted.
  EXPECT_LT(text.find("\"created_at\""), text.find("\"dataset_path\""));
  EXPECT_LT(text.find("\"warnings\""), std::string::npos);
}

}  // namespace
}  // namespace djshard::store
