// Partition math and checkpoint settings (SPEC-checkpoints §2, §3, §5).
#include "djshard/job/checkpoint.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "djshard/common/error.h"
#include "djshard/io/checksum.h"
#include "djshard/io/sha256.h"
#include "djshard/job/partition.h"
#include "tests/unit/temp_dir.h"

namespace djshard::job {
namespace {

std::vector<uint64_t> Sizes(uint64_t rows, uint64_t parts) {
  std::vector<uint64_t> out;
  uint64_t next = 0;
  for (const PartitionBounds& b : ExactBounds(rows, parts)) {
    EXPECT_EQ(b.start, next);
    next = b.end;
    out.push_back(b.rows());
  }
  EXPECT_EQ(next, rows);
  return out;
}

TEST(Partition, ExactBoundsSpreadTheRemainderOverTheFirstPartitions) {
  EXPECT_EQ(Sizes(10, 4), (std::vector<uint64_t>{3, 3, 2, 2}));
  EXPECT_EQ(Sizes(10, 3), (std::vector<uint64_t>{4, 3, 3}));
  EXPECT_EQ(Sizes(5, 5), (std::vector<uint64_t>{1, 1, 1, 1, 1}));
  EXPECT_EQ(Sizes(7, 1), (std::vector<uint64_t>{7}));
  EXPECT_TRUE(ExactBounds(0, 0).empty());
}

TEST(Partition, ExactBoundsDifferByAtMostOneAndNoneIsEmpty) {
  for (uint64_t rows = 1; rows < 60; ++rows) {
    for (uint64_t parts = 1; parts <= rows; ++parts) {
      const std::vector<uint64_t> s = Sizes(rows, parts);
      ASSERT_EQ(s.size(), parts);
      const auto [lo, hi] = std::minmax_element(s.begin(), s.end());
      EXPECT_GE(*lo, 1u);
      EXPECT_LE(*hi - *lo, 1u);
    }
  }
}

TEST(Partition, AutoSizingFollowsTheSeedTable) {
  // 200,000 text rows of 2,000 bytes, target 256 MiB: 50,000 rows (the cap), P = 4.
  const uint64_t rows_pp = AutoRowsPerPartition(Modality::kText, 2000, 256, 256, std::nullopt);
  EXPECT_EQ(rows_pp, 50000u);
  EXPECT_EQ(AutoPartitionCount(200000, rows_pp), 4u);
  // Images weigh 5x: 256 MiB / 10,000 bytes = 26,843, capped at 10,000.
  EXPECT_EQ(AutoRowsPerPartition(Modality::kImage, 2000, 256, 256, std::nullopt), 10000u);
  // max_size_mb caps the target.
  EXPECT_EQ(AutoRowsPerPartition(Modality::kText, 2000, 256, 1, std::nullopt), 524u);
  // A row bigger than the budget still makes a partition of one row.
  EXPECT_EQ(AutoRowsPerPartition(Modality::kVideo, 1e9, 128, 256, std::nullopt), 1u);
  // No size estimate: partition.size, else the default rows.
  EXPECT_EQ(AutoRowsPerPartition(Modality::kAudio, 0, 256, 256, 77), 77u);
  EXPECT_EQ(AutoRowsPerPartition(Modality::kMultimodal, 0, 256, 256, std::nullopt), 1600u);
  EXPECT_EQ(AutoPartitionCount(200001, 50000), 5u);
  EXPECT_EQ(AutoPartitionCount(0, 50000), 0u);
}

std::string Sha(const std::string& s) {
  io::Sha256 h;
  h.Update(s);
  return h.HexDigest();
}

std::string Xxh3(const std::string& bytes) {
  io::Xxh3 h;
  h.Update(bytes);
  return h.HexDigest();
}

TEST(Partition, HashesAreOfEachRowWithoutItsTerminatorThenNewline) {
  testing::TempDir tmp;
  // CRLF rows, a missing last newline, and two files: one stream of rows.
  const std::string a = tmp.Write("a.jsonl", "{\"x\":1}\r\n{\"x\":2}\n{\"x\":3}");
  const std::string b = tmp.Write("b.jsonl", "{\"x\":4}\n{\"x\":5}\r\n");
  const std::vector<io::InputCandidate> inputs = {{a, a, "a.jsonl"}, {b, b, "b.jsonl"}};
  uint64_t rows = 0;
  io::Checksum whole;
  // Partitions with XXH3-128, the whole input with SHA-256 (a run job's).
  const std::vector<PartitionDigest> d =
      HashPartitions(inputs, ExactBounds(5, 2), &rows,
                     {io::ChecksumKind::kXxh3_128, io::ChecksumKind::kSha256}, &whole);
  EXPECT_EQ(rows, 5u);
  EXPECT_EQ(whole.kind, io::ChecksumKind::kSha256);
  EXPECT_EQ(whole.hex, Sha("{\"x\":1}\n{\"x\":2}\n{\"x\":3}\n{\"x\":4}\n{\"x\":5}\n"));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].checksum, io::Checksum::Xxh3(Xxh3("{\"x\":1}\n{\"x\":2}\n{\"x\":3}\n")));
  EXPECT_EQ(d[1].checksum, io::Checksum::Xxh3(Xxh3("{\"x\":4}\n{\"x\":5}\n")));
  // Older jobs' partitions: SHA-256 of the same bytes.
  const std::vector<PartitionDigest> old =
      HashPartitions(inputs, ExactBounds(5, 2), &rows, {io::ChecksumKind::kSha256, {}});
  EXPECT_EQ(old[1].checksum.hex, Sha("{\"x\":4}\n{\"x\":5}\n"));
  EXPECT_EQ(old[1].checksum.kind, io::ChecksumKind::kSha256);
  recipe::Recipe recipe;
  const InputScan scan = ScanInput(inputs, recipe);
  EXPECT_EQ(scan.rows, 5u);
  EXPECT_EQ(scan.modality, Modality::kText);
}

recipe::Recipe FiveOps() {
  recipe::Recipe r;
  r.path = "recipe.yaml";
  for (const char* name : {"a", "b", "c", "b", "e"}) r.process.push_back({name, 1, {}});
  return r;
}

JobSettings Settings(const std::string& yaml) {
  return ParseJobSettings(YAML::Load(yaml), "recipe.yaml");
}

TEST(CheckpointSettings, DefaultsAreDataJuicers) {
  const JobSettings s = Settings("{}");
  EXPECT_EQ(s.mode, PartitionMode::kAuto);
  EXPECT_EQ(s.num_of_partitions, 4u);
  EXPECT_EQ(s.target_size_mb, 256u);
  EXPECT_EQ(s.strategy, TapStrategy::kEveryNOps);
  EXPECT_EQ(s.n_ops, 5u);
  EXPECT_TRUE(s.compress);
  EXPECT_FALSE(s.keep_all);
  EXPECT_TRUE(s.checkpointing());
}

TEST(CheckpointSettings, TapPositionsPerStrategyAlwaysEndWithTheFinalTap) {
  const recipe::Recipe r = FiveOps();
  EXPECT_EQ(TapPositions(Settings("checkpoint: {n_ops: 2}"), r), (std::vector<size_t>{1, 3, 4}));
  EXPECT_EQ(TapPositions(Settings("checkpoint: {strategy: every_op}"), r),
            (std::vector<size_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(TapPositions(Settings("checkpoint: {strategy: manual, op_names: [b]}"), r),
            (std::vector<size_t>{1, 3, 4}));
  EXPECT_TRUE(TapPositions(Settings("checkpoint: {strategy: disabled}"), r).empty());
  EXPECT_TRUE(TapPositions(Settings("checkpoint: {enabled: false}"), r).empty());
  EXPECT_THROW(TapPositions(Settings("checkpoint: {strategy: manual, op_names: [z]}"), r), Error);
}

TEST(CheckpointSettings, OverridesAreDottedKeysAndUnknownKeysAreRefused) {
  const YAML::Node root = ApplyOverrides(
      YAML::Load("partition: {mode: auto}"),
      {{"partition.mode", "manual"}, {"checkpoint.op_names", "a,b"}, {"checkpoint.n_ops", "3"}});
  const JobSettings s = ParseJobSettings(root, "recipe.yaml");
  EXPECT_EQ(s.mode, PartitionMode::kManual);
  EXPECT_EQ(s.op_names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(s.n_ops, 3u);
  EXPECT_THROW(Settings("checkpoint: {every: 3}"), Error);
  EXPECT_THROW(Settings("checkpoint: {n_ops: 0}"), Error);
  EXPECT_THROW(Settings("partition: {target_size_mb: 300}"), Error);
}

TEST(CheckpointSettings, CheckpointDirHasATopLevelAliasAndTheCommandLineWins) {
  EXPECT_FALSE(Settings("{}").checkpoint_dir.has_value());
  EXPECT_EQ(Settings("checkpoint: {dir: /big}").checkpoint_dir, "/big");
  EXPECT_EQ(Settings("checkpoint_dir: /big").checkpoint_dir, "/big");
  EXPECT_EQ(Settings("checkpoint_dir: /big\ncheckpoint: {dir: /big}").checkpoint_dir, "/big");
  EXPECT_THROW(Settings("checkpoint_dir: /a\ncheckpoint: {dir: /b}"), Error);
  const YAML::Node root =
      ApplyOverrides(YAML::Load("checkpoint_dir: /a"), {{"checkpoint.dir", "/cli"}});
  EXPECT_EQ(ParseJobSettings(root, "recipe.yaml").checkpoint_dir, "/cli");
  // Not a non-semantic flag (SPEC-checkpoints §6 step 2): it counts, under one name.
  const auto alias = EffectiveConfig(YAML::Load("checkpoint_dir: /a"), "d", "e");
  EXPECT_EQ(alias, EffectiveConfig(YAML::Load("checkpoint: {dir: /a}"), "d", "e"));
  EXPECT_EQ(DifferingKeys(alias, EffectiveConfig(YAML::Load("checkpoint: {dir: /b}"), "d", "e")),
            (std::vector<std::string>{"checkpoint.dir"}));
}

TEST(CheckpointSettings, ConfigDiffNamesTheChangedKeysAndIgnoresNonSemanticOnes) {
  const auto a = EffectiveConfig(YAML::Load("np: 2\nprocess: [{f: {min_len: 3}}]"), "d", "e");
  const auto b = EffectiveConfig(YAML::Load("np: 8\nprocess: [{f: {min_len: 4}}]"), "d", "e");
  EXPECT_EQ(DifferingKeys(a, b), (std::vector<std::string>{"process[0].f.min_len"}));
  EXPECT_EQ(OpsPrefixSha256(YAML::Load("process: [{a: }, {b: {x: 1}}]"), 0),
            OpsPrefixSha256(YAML::Load("process: [{a: }, {b: {x: 2}}]"), 0));
  EXPECT_NE(OpsPrefixSha256(YAML::Load("process: [{a: }, {b: {x: 1}}]"), 1),
            OpsPrefixSha256(YAML::Load("process: [{a: }, {b: {x: 2}}]"), 1));
}

}  // namespace
}  // namespace djshard::job
