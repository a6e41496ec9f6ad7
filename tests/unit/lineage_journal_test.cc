// The gather journal (SPEC-lineage §6): segments sealed by count, committed
// through the caller's publish, loaded back with every byte of the records
// and errors lines, and rejected when they do not verify.
#include "src/exec/lineage_journal.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "djshard/io/disk.h"
#include "tests/unit/temp_dir.h"

namespace djshard::exec {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

JournalScope ScopeIn(const std::string& dir) {
  JournalScope s;
  s.checkpoints = dir;
  s.stem = "lineage_p_partition_00001";
  s.region = "p";
  s.partition = 1;
  s.gather_idx = 3;
  s.job_id = "job";
  s.token = "tok";
  s.region_ops_sha256 = "ops";
  s.input_tap_sha256 = "input";
  s.engine_version = "1.0";
  return s;
}

std::vector<JournaledParent> Parents(uint64_t from, uint64_t n) {
  std::vector<JournaledParent> out;
  for (uint64_t r = from; r < from + n; ++r) {
    JournaledParent p;
    p.row = r;
    p.state = r % 3 == 0 ? JournalState::kPresent
                         : (r % 3 == 1 ? JournalState::kDropped : JournalState::kFailed);
    if (p.state == JournalState::kPresent) {
      p.record = "{\"id\":" + std::to_string(r) + ", \"text\":\"caf\\u00e9 1.50\"}";
    }
    if (p.state != JournalState::kPresent) p.errors = "{\"level\":\"child\",\"n\":1.0}\n";
    if (p.state == JournalState::kFailed) p.errors += "{\"level\":\"parent\"}\n";
    out.push_back(p);
  }
  return out;
}

struct Published {
  std::map<std::string, std::string> records;
};

GatherJournal MakeJournal(const JournalScope& scope, Published* published, uint64_t first = 0) {
  return GatherJournal(
      scope, io::RealDisk(), first, 4, 3600,
      [published](const std::string& path, const std::string& record) {
        published->records[path] = record;
        return io::RealDisk().PublishLink(path, record, fs::path(path).parent_path().string());
      },
      [](const json&) {});
}

TEST(GatherJournal, SealsASegmentPerFlushParentsAndLoadsEveryByteBack) {
  testing::TempDir tmp;
  const JournalScope scope = ScopeIn(tmp.dir());
  Published published;
  GatherJournal journal = MakeJournal(scope, &published);
  std::vector<JournaledParent> first = Parents(0, 6), second = Parents(6, 3);
  journal.Add(first);   // one segment of 4, 2 pending
  journal.Add(second);  // 5 pending: one more segment, 1 pending
  journal.Flush();
  ASSERT_EQ(published.records.size(), 2u);
  const json seg0 = json::parse(published.records.begin()->second);
  EXPECT_EQ(seg0["rows"], json({0, 1, 2, 3}));
  EXPECT_EQ(seg0["count"], 4);
  EXPECT_EQ(seg0["input_tap_sha256"], "input");

  std::vector<std::string> rejected;
  const LoadedJournal loaded = LoadJournal(
      scope,
      [&](const std::string& path, const json&, const std::string&) { rejected.push_back(path); },
      [](const json&) {});
  EXPECT_TRUE(rejected.empty());
  EXPECT_EQ(loaded.next_segment, 2u);
  ASSERT_EQ(loaded.parents.size(), 8u);
  const std::vector<JournaledParent> want = Parents(0, 8);
  for (const JournaledParent& p : want) {
    const JournaledParent& got = loaded.parents.at(p.row);
    EXPECT_EQ(got.state, p.state) << p.row;
    EXPECT_EQ(got.record, p.record) << p.row;
    EXPECT_EQ(got.errors, p.errors) << p.row;
  }
}

TEST(GatherJournal, ASegmentOfAnotherRegionInputOrWithChangedBytesIsRejected) {
  testing::TempDir tmp;
  JournalScope scope = ScopeIn(tmp.dir());
  Published published;
  {
    GatherJournal journal = MakeJournal(scope, &published);
    std::vector<JournaledParent> parents = Parents(0, 8);
    journal.Add(parents);
    journal.Flush();
  }
  // Segment 1's data changes.
  const json seg1 = json::parse(published.records.rbegin()->second);
  io::RealDisk().WriteAtomic(tmp.dir() + "/" + seg1["data_path"].get<std::string>(), "garbage");
  std::map<std::string, std::string> why;
  LoadedJournal loaded = LoadJournal(
      scope,
      [&](const std::string& path, const json&, const std::string& reason) {
        why[fs::path(path).filename().string()] = reason;
      },
      [](const json&) {});
  ASSERT_EQ(why.size(), 1u);
  EXPECT_EQ(why.begin()->first, "lineage_p_partition_00001.seg00001.commit.json");
  EXPECT_EQ(loaded.parents.size(), 4u);
  // Rows numbered in another stream: every segment is rejected.
  scope.input_tap_sha256 = "other";
  why.clear();
  loaded = LoadJournal(
      scope,
      [&](const std::string& path, const json&, const std::string& reason) {
        why[fs::path(path).filename().string()] = reason;
      },
      [](const json&) {});
  EXPECT_EQ(why.size(), 2u);
  EXPECT_TRUE(loaded.parents.empty());
  DeleteJournal(tmp.dir(), scope.stem, io::RealDisk());
  EXPECT_TRUE(fs::is_empty(tmp.dir()));
}

TEST(GatherJournal, ALostClaimCommitsNothingAndLeavesNoSegmentData) {
  testing::TempDir tmp;
  GatherJournal journal(
      ScopeIn(tmp.dir()), io::RealDisk(), 0, 4, 3600,
      [](const std::string&, const std::string&) -> bool {
        throw std::runtime_error("lost the claim");
      },
      [](const json&) { ADD_FAILURE() << "committed"; });
  std::vector<JournaledParent> parents = Parents(0, 4);
  journal.Add(parents);
  EXPECT_THROW(journal.Flush(), std::runtime_error);
  EXPECT_THROW(journal.Add(parents), std::runtime_error);
  EXPECT_TRUE(fs::is_empty(tmp.dir()));
}

TEST(GatherJournal, PendingParentsAreSealedOnceFlushSecsPassed) {
  testing::TempDir tmp;
  std::vector<std::string> committed;
  GatherJournal journal(
      ScopeIn(tmp.dir()), io::RealDisk(), 7, 256, 1e-9,
      [&](const std::string& path, const std::string& record) {
        committed.push_back(fs::path(path).filename().string());
        return io::RealDisk().PublishLink(path, record, tmp.dir());
      },
      [](const json&) {});
  std::vector<JournaledParent> parents = Parents(0, 2);
  journal.Add(parents);
  journal.Flush();
  EXPECT_EQ(committed,
            std::vector<std::string>({"lineage_p_partition_00001.seg00007.commit.json"}));
}

}  // namespace
}  // namespace djshard::exec
