// The gather journal (SPEC-lineage §6): segments sealed by count, committed
// through the caller's publish, loaded back with every byte of the records
// and errors lines, and rejected when they do not verify.
#include "src/job/lineage_journal.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "djshard/io/disk.h"
#include "tests/unit/temp_dir.h"

namespace djshard::job {
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
  s.token = "0a1b2c3d";
  s.region_ops_sha256 = "ops";
  s.input_tap = io::Checksum::Xxh3("input");
  s.engine_version = "1.0";
  return s;
}

std::vector<exec::JournaledParent> Parents(uint64_t from, uint64_t n) {
  std::vector<exec::JournaledParent> out;
  for (uint64_t r = from; r < from + n; ++r) {
    exec::JournaledParent p;
    p.row = r;
    p.state = r % 3 == 0
                  ? exec::JournalState::kPresent
                  : (r % 3 == 1 ? exec::JournalState::kDropped : exec::JournalState::kFailed);
    if (p.state == exec::JournalState::kPresent) {
      p.record = "{\"id\":" + std::to_string(r) + ", \"text\":\"caf\\u00e9 1.50\"}";
    }
    if (p.state != exec::JournalState::kPresent) p.errors = "{\"level\":\"child\",\"n\":1.0}\n";
    if (p.state == exec::JournalState::kFailed) p.errors += "{\"level\":\"parent\"}\n";
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

TEST(GatherJournal, SealsWholeAddsOnceFlushParentsArePendingAndLoadsEveryByteBack) {
  testing::TempDir tmp;
  const JournalScope scope = ScopeIn(tmp.dir());
  Published published;
  GatherJournal journal = MakeJournal(scope, &published);
  std::vector<exec::JournaledParent> first = Parents(0, 2), second = Parents(2, 4),
                                     third = Parents(6, 3);
  journal.Add(first);   // 2 pending
  journal.Add(second);  // 6 pending: one segment of all 6 (a group is never split)
  journal.Add(third);   // 3 pending
  journal.Flush();
  ASSERT_EQ(published.records.size(), 1u);
  const json seg0 = json::parse(published.records.begin()->second);
  EXPECT_EQ(seg0["rows"], json({0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(seg0["count"], 6);
  EXPECT_EQ(seg0["input_tap_xxh3_128"], "input");

  std::vector<std::string> rejected;
  const LoadedJournal loaded = LoadJournal(
      scope,
      [&](const std::string& path, const json&, const std::string&) { rejected.push_back(path); },
      [](const json&) {});
  EXPECT_TRUE(rejected.empty());
  EXPECT_EQ(loaded.next_segment, 1u);
  ASSERT_EQ(loaded.parents.size(), 6u);
  const std::vector<exec::JournaledParent> want = Parents(0, 6);
  for (const exec::JournaledParent& p : want) {
    const exec::JournaledParent& got = loaded.parents.at(p.row);
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
    std::vector<exec::JournaledParent> first = Parents(0, 4), second = Parents(4, 4);
    journal.Add(first);
    journal.Add(second);
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
  scope.input_tap = io::Checksum::Xxh3("other");
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
  std::vector<exec::JournaledParent> parents = Parents(0, 4);
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
  std::vector<exec::JournaledParent> parents = Parents(0, 2);
  journal.Add(parents);
  journal.Flush();
  EXPECT_EQ(committed,
            std::vector<std::string>({"lineage_p_partition_00001.seg00007.commit.json"}));
}

TEST(GatherJournal, TheCommitThreadSealsParentsThatWaitedFlushSecs) {
  testing::TempDir tmp;
  std::vector<std::string> committed;  // written by the commit thread, read after Flush
  GatherJournal journal(
      ScopeIn(tmp.dir()), io::RealDisk(), 0, 256, 0.3,
      [&](const std::string& path, const std::string& record) {
        committed.push_back(fs::path(path).filename().string());
        return io::RealDisk().PublishLink(path, record, tmp.dir());
      },
      [](const json&) {});
  std::vector<exec::JournaledParent> parents = Parents(0, 2);
  journal.Add(parents);  // under flush_parents, before flush_secs: pending
  // No more parents come (a long group elsewhere): the journal seals on its own.
  std::this_thread::sleep_for(std::chrono::milliseconds(900));
  journal.Flush();
  EXPECT_EQ(committed,
            std::vector<std::string>({"lineage_p_partition_00001.seg00000.commit.json"}));
}

TEST(GatherJournal, DeletingAJournalLeavesAnotherRegionsFilesWhoseNameItPrefixes) {
  testing::TempDir tmp;
  const std::string stem = "lineage_p_partition_00001";
  const std::vector<std::string> mine = {stem + ".0a1b.seg00000.jsonl.zst",
                                         stem + ".0a1b.seg00001.jsonl.zst.tmp.ffee",
                                         stem + ".seg00000.commit.json"};
  // Region "p_partition_00001.x" (names may hold dots) of partition 1.
  const std::vector<std::string> other = {stem + ".x_partition_00001.0a1b.seg00000.jsonl.zst",
                                          stem + ".x_partition_00001.seg00000.commit.json"};
  for (const std::string& n : mine) io::RealDisk().WriteAtomic(tmp.dir() + "/" + n, "x");
  for (const std::string& n : other) io::RealDisk().WriteAtomic(tmp.dir() + "/" + n, "x");
  DeleteJournal(tmp.dir(), stem, io::RealDisk());
  for (const std::string& n : mine) EXPECT_FALSE(fs::exists(tmp.dir() + "/" + n)) << n;
  for (const std::string& n : other) EXPECT_TRUE(fs::exists(tmp.dir() + "/" + n)) << n;
}

}  // namespace
}  // namespace djshard::job
