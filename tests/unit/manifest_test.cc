#include "djshard/store/manifest.h"

#include <gtest/gtest.h>

#include <functional>
#include <nlohmann/json.hpp>

#include "djshard/common/error.h"

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

// A manifest with every field set to a value unlike its default.
Manifest Full() {
  Manifest m;
  m.job_id = "j-1";
  m.created_at = "2026-01-01T00:00:00.000Z";
  m.dataset_path = "/d";
  m.media_root = "/d/media";
  m.media_keys = {"images", "audios", "videos"};
  m.index_keys = {"idx", "row"};
  m.input_files.push_back({"/d/a.jsonl", "a.jsonl", 10, 123, 2, std::string(64, 'a'), "", "", 0});
  m.input_files.push_back({"/d/sub/b.jsonl.zst", "sub/b.jsonl.zst", 7, -5, 1, "bb", "", "", 0});
  m.total_rows = 3;
  m.total_size_bytes = 17;
  m.normalized_sha256 = "cc";
  m.num_shards = 2;
  m.shards.push_back({"part-00000-of-00002",
                      0,
                      "shards/part-00000-of-00002.jsonl",
                      2,
                      9,
                      io::Checksum::Xxh3("ff"),
                      {}});
  m.shards.push_back({"part-00001-of-00002",
                      1,
                      "shards/part-00001-of-00002.jsonl",
                      1,
                      8,
                      io::Checksum::Xxh3("ee"),
                      {}});
  m.recipe_source_path = "/r/recipe.yaml";
  m.recipe_snapshot_path = "recipe.yaml";
  m.recipe_sha256 = "dd";
  m.engine_name = "djshard";
  m.engine_version = "9.9.9";
  m.engine_git_commit = "abc123";
  m.policy = {42, 7, 5, 11};
  m.warnings = {"w1", "w2"};
  return m;
}

TEST(Manifest, WritesEveryFieldUnderItsSchemaKey) {
  const std::string text = Full().ToJson();
  const nlohmann::json j = nlohmann::json::parse(text);
  EXPECT_EQ(j["schema_version"], 3);
  EXPECT_EQ(j["job_id"], "j-1");
  EXPECT_EQ(j["created_at"], "2026-01-01T00:00:00.000Z");
  EXPECT_EQ(j["dataset_path"], "/d");
  EXPECT_EQ(j["media_root"], "/d/media");
  EXPECT_EQ(j["media_keys"], nlohmann::json({"images", "audios", "videos"}));
  EXPECT_EQ(j["index_keys"], nlohmann::json({"idx", "row"}));
  ASSERT_EQ(j["input_files"].size(), 2u);
  EXPECT_EQ(j["input_files"][0], nlohmann::json({{"path", "/d/a.jsonl"},
                                                 {"relative_path", "a.jsonl"},
                                                 {"size_bytes", 10},
                                                 {"mtime_ns", 123},
                                                 {"rows", 2},
                                                 {"sha256", std::string(64, 'a')}}));
  EXPECT_EQ(j["input_files"][1]["mtime_ns"], -5);
  EXPECT_EQ(j["total_rows"], 3);
  EXPECT_EQ(j["total_size_bytes"], 17);
  EXPECT_EQ(j["normalized_sha256"], "cc");
  EXPECT_EQ(j["num_shards"], 2);
  ASSERT_EQ(j["shards"].size(), 2u);
  EXPECT_EQ(j["shards"][1], nlohmann::json({{"id", "part-00001-of-00002"},
                                            {"index", 1},
                                            {"path", "shards/part-00001-of-00002.jsonl"},
                                            {"rows", 1},
                                            {"size_bytes", 8},
                                            {"xxh3_128", "ee"}}));
  EXPECT_EQ(j["recipe"], nlohmann::json({{"source_path", "/r/recipe.yaml"},
                                         {"snapshot_path", "recipe.yaml"},
                                         {"sha256", "dd"}}));
  EXPECT_EQ(j["engine"],
            nlohmann::json({{"name", "djshard"}, {"version", "9.9.9"}, {"git_commit", "abc123"}}));
  EXPECT_EQ(j["policy"], nlohmann::json({{"lease_secs", 42},
                                         {"heartbeat_secs", 7},
                                         {"max_retries", 5},
                                         {"poll_interval_secs", 11},
                                         {"retry_backoff_secs", 10}}));
  EXPECT_EQ(j["warnings"], nlohmann::json({"w1", "w2"}));
  EXPECT_EQ(j["shards_mode"], "copy");
  EXPECT_EQ(j["output_layout"], "file");
  EXPECT_EQ(j.size(), 19u);  // nothing else
  // Sorted keys, two-space indent, a final newline: the same manifest gives the same bytes.
  EXPECT_EQ(text, j.dump(2) + "\n");
  EXPECT_EQ(text.rfind("{\n  \"created_at\": ", 0), 0u) << text.substr(0, 40);
}

TEST(Manifest, ReferenceShardsRoundTripTheirRangesAndNormalization) {
  Manifest m = Full();
  m.schema_version = kReferenceManifestSchemaVersion;
  m.shards_mode = ShardsMode::kReference;
  m.output_layout = OutputLayout::kParts;
  m.input_files[0].normalization = "copy";
  m.input_files[1].normalization = "normalize";
  for (ShardEntry& s : m.shards) s.path.clear();
  m.shards[0].ranges = {{0, 0, 10, 2, 0, 1, io::Checksum::Xxh3("01")}};
  m.shards[1].ranges = {{1, 0, 7, 1, 2, 1, io::Checksum::Xxh3("02")}};
  const Manifest back = Manifest::FromJson(m.ToJson(), "manifest.json");
  EXPECT_EQ(back.schema_version, 4);
  EXPECT_EQ(back.shards_mode, ShardsMode::kReference);
  EXPECT_EQ(back.output_layout, OutputLayout::kParts);
  EXPECT_EQ(back.input_files[1].normalization, "normalize");
  ASSERT_EQ(back.shards[1].ranges.size(), 1u);
  const ShardRange& r = back.shards[1].ranges[0];
  EXPECT_EQ(r.file, 1u);
  EXPECT_EQ(r.length, 7u);
  EXPECT_EQ(r.first_row, 2u);
  EXPECT_EQ(r.checksum, io::Checksum::Xxh3("02"));
  EXPECT_EQ(back.shards[1].Describe(back), "lines 1-1 of /d/sub/b.jsonl.zst");
  // A range naming an input file the manifest does not list is refused.
  // Ranges are refused when they name an input file the manifest lacks, run
  // past a file's end, or do not add up to the shard's rows.
  for (const auto& edit : std::vector<std::function<void(ShardRange&)>>{
           [](ShardRange& r) { r.file = 5; }, [](ShardRange& r) { r.length = 8; },
           [](ShardRange& r) { r.rows = 2; }}) {
    Manifest bad = m;
    edit(bad.shards[1].ranges[0]);
    EXPECT_THROW(Manifest::FromJson(bad.ToJson(), "manifest.json"), Error);
  }
  Manifest old = m;
  old.schema_version = 3;
  EXPECT_THROW(Manifest::FromJson(old.ToJson(), "manifest.json"), Error);
}

TEST(Manifest, RoundTripsEveryFieldThroughJson) {
  const Manifest m = Full();
  const std::string text = m.ToJson();
  const Manifest back = Manifest::FromJson(text, "manifest.json");
  EXPECT_EQ(back.schema_version, kManifestSchemaVersion);
  EXPECT_EQ(back.job_id, m.job_id);
  EXPECT_EQ(back.created_at, m.created_at);
  EXPECT_EQ(back.dataset_path, m.dataset_path);
  EXPECT_EQ(back.media_root, m.media_root);
  EXPECT_EQ(back.media_keys, m.media_keys);
  EXPECT_EQ(back.index_keys, m.index_keys);
  ASSERT_EQ(back.input_files.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.input_files[i].path, m.input_files[i].path);
    EXPECT_EQ(back.input_files[i].relative_path, m.input_files[i].relative_path);
    EXPECT_EQ(back.input_files[i].size_bytes, m.input_files[i].size_bytes);
    EXPECT_EQ(back.input_files[i].mtime_ns, m.input_files[i].mtime_ns);
    EXPECT_EQ(back.input_files[i].rows, m.input_files[i].rows);
    EXPECT_EQ(back.input_files[i].sha256, m.input_files[i].sha256);
  }
  EXPECT_EQ(back.total_rows, 3u);
  EXPECT_EQ(back.total_size_bytes, 17u);
  EXPECT_EQ(back.normalized_sha256, "cc");
  EXPECT_EQ(back.num_shards, 2u);
  ASSERT_EQ(back.shards.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(back.shards[i].id, m.shards[i].id);
    EXPECT_EQ(back.shards[i].index, m.shards[i].index);
    EXPECT_EQ(back.shards[i].path, m.shards[i].path);
    EXPECT_EQ(back.shards[i].rows, m.shards[i].rows);
    EXPECT_EQ(back.shards[i].size_bytes, m.shards[i].size_bytes);
    EXPECT_EQ(back.shards[i].checksum, m.shards[i].checksum);
  }
  EXPECT_EQ(back.recipe_source_path, "/r/recipe.yaml");
  EXPECT_EQ(back.recipe_snapshot_path, "recipe.yaml");
  EXPECT_EQ(back.recipe_sha256, "dd");
  EXPECT_EQ(back.engine_name, "djshard");
  EXPECT_EQ(back.engine_version, "9.9.9");
  EXPECT_EQ(back.engine_git_commit, "abc123");
  EXPECT_EQ(back.policy.lease_secs, 42);
  EXPECT_EQ(back.policy.heartbeat_secs, 7);
  EXPECT_EQ(back.policy.max_retries, 5);
  EXPECT_EQ(back.policy.poll_interval_secs, 11);
  EXPECT_EQ(back.warnings, m.warnings);
  EXPECT_EQ(back.ToJson(), text);
}

TEST(Manifest, AnotherSchemaVersionIsRefusedNamingBoth) {
  nlohmann::json j = nlohmann::json::parse(Full().ToJson());
  j["schema_version"] = 1;
  try {
    Manifest::FromJson(j.dump(), "job/manifest.json");
    ADD_FAILURE() << "schema_version 1 was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.file(), "job/manifest.json");
    EXPECT_EQ(e.message(),
              "manifest schema_version 1 is not supported (this djshard reads 2 to 4)");
  }
}

TEST(Manifest, AMissingOrMistypedKeyIsRefusedNamingTheFile) {
  for (const char* key : {"shards", "policy", "recipe", "job_id"}) {
    nlohmann::json j = nlohmann::json::parse(Full().ToJson());
    j.erase(key);
    try {
      Manifest::FromJson(j.dump(), "job/manifest.json");
      ADD_FAILURE() << "a manifest without " << key << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.file(), "job/manifest.json");
      EXPECT_EQ(e.message().rfind("manifest is not valid: ", 0), 0u) << e.message();
      EXPECT_NE(e.message().find(key), std::string::npos) << e.message();
    }
  }
  nlohmann::json j = nlohmann::json::parse(Full().ToJson());
  j["total_rows"] = "three";
  EXPECT_THROW(Manifest::FromJson(j.dump(), "m.json"), Error);
  EXPECT_THROW(Manifest::FromJson("{", "m.json"), Error);
}

// Found by the records fuzzer: a size that does not fit its integer type was
// converted with undefined behaviour instead of being refused.
TEST(Manifest, ANumberOutsideItsFieldsRangeIsRefusedNamingTheField) {
  for (const nlohmann::json& bad :
       {nlohmann::json(1.24522e108), nlohmann::json(-1), nlohmann::json(2.5)}) {
    nlohmann::json j = nlohmann::json::parse(Full().ToJson());
    j["input_files"][0]["size_bytes"] = bad;
    try {
      Manifest::FromJson(j.dump(), "job/manifest.json");
      ADD_FAILURE() << "size_bytes " << bad.dump() << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.file(), "job/manifest.json");
      EXPECT_NE(e.message().find("'size_bytes' must be an integer in range"), std::string::npos)
          << e.message();
    }
  }
}

}  // namespace
}  // namespace djshard::store
