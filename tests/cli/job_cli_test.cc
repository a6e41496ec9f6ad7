// Black-box tests of status, retry, merge and verify on prepared jobs.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_harness.h"

namespace djshard::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

class JobCli : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    std::string rows;
    for (int i = 0; i < 12; ++i) {
      rows +=
          "{\"id\":" + std::to_string(i) + ",\"text\":\"row number " + std::to_string(i) + "\"}\n";
    }
    Write("data.jsonl", rows);
    DemoRecipe();
    const CliResult r =
        Run({"prepare", "--config", "recipe.yaml", "--job-dir", "job", "--num-shards", "4"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    job_ = Path("job");
  }

  std::string ShardsConcatenated() const {
    std::string all;
    for (int i = 0; i < 4; ++i)
      all += Read("job/shards/part-0000" + std::to_string(i) + "-of-00004.jsonl");
    return all;
  }

  void WriteFailed(const std::string& id) const {
    Write("job/state/failed/" + id + ".json",
          json({{"shard_id", id}, {"failures", 4}, {"last_error", "boom"}}).dump());
    Write("job/attempts/" + id + "/0001-aa/attempt.json", "{\"status\":\"failed\"}");
  }

  void WriteLock(const std::string& id) const {
    Write("job/state/locks/" + id + ".lock",
          json({{"shard_id", id}, {"token", "t"}, {"hostname", "node-b"}, {"pid", 77}}).dump());
  }

  std::string job_;
};

TEST_F(JobCli, StatusCountsPendingRunningStaleDoneFailed) {
  CliResult r = Run({"status", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "Job job: total=4 pending=4 running=0 stale=0 done=0 failed=0\n");

  WriteLock("part-00000-of-00004");
  WriteLock("part-00001-of-00004");
  const std::string old_lock = Path("job/state/locks/part-00001-of-00004.lock");
  ASSERT_EQ(std::system(("touch -d '1 hour ago' " + old_lock).c_str()), 0);
  WriteFailed("part-00002-of-00004");
  r = Run({"status", "--job-dir", "job", "--all"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("total=4 pending=1 running=1 stale=1 done=0 failed=1"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("part-00000-of-00004  running  rows=4  owner=node-b pid=77"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("error=boom"), std::string::npos);

  r = Run({"status", "--job-dir", "job", "--json"});
  EXPECT_EQ(r.exit_code, 2);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["job_id"], "job");
  EXPECT_EQ(j["total"], 4);
  EXPECT_EQ(j["counts"]["stale"], 1);
  EXPECT_EQ(j["complete"], false);
  EXPECT_EQ(j["terminal"], false);
  EXPECT_EQ(j["shards"][0]["status"], "running");
  EXPECT_EQ(j["shards"][0]["owner"], "node-b");
  EXPECT_EQ(j["shards"][0]["pid"], 77);
  EXPECT_LT(j["shards"][0]["lock_age_secs"].get<double>(), 60.0);
  EXPECT_GT(j["shards"][1]["lock_age_secs"].get<double>(), 3000.0);
  EXPECT_EQ(j["shards"][2]["error"], "boom");
  EXPECT_TRUE(j["shards"][3]["owner"].is_null());
}

TEST_F(JobCli, StatusIsCompleteWhenAllShardsAreDone) {
  FinishAllShards(job_);
  const CliResult r = Run({"status", "--job-dir", "job", "--json"});
  EXPECT_EQ(r.exit_code, 0);
  const json j = json::parse(r.out);
  EXPECT_EQ(j["complete"], true);
  EXPECT_EQ(j["terminal"], true);
  EXPECT_EQ(j["shards"][0]["owner"], "node-a");
}

TEST_F(JobCli, StatusOfANonJobDirectoryIsAnError) {
  const CliResult r = Run({"status", "--job-dir", "."});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a prepared job directory"), std::string::npos);
}

TEST_F(JobCli, RetryMovesFailedRecordAndAttemptsIntoHistory) {
  WriteFailed("part-00001-of-00004");
  WriteFailed("part-00003-of-00004");
  const CliResult r = Run({"retry", "--job-dir", "job", "--all-failed"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("Retrying part-00001-of-00004"), std::string::npos);
  EXPECT_NE(r.out.find("Retrying part-00003-of-00004"), std::string::npos);
  EXPECT_TRUE(List("job/state/failed").empty());
  EXPECT_TRUE(List("job/attempts").empty());
  ASSERT_EQ(List("job/state/history/failed").size(), 2u);
  ASSERT_EQ(List("job/state/history/attempts").size(), 2u);
  EXPECT_EQ(List("job/state/history/failed")[0].rfind("part-00001-of-00004.", 0), 0u);
  EXPECT_EQ(Run({"status", "--job-dir", "job"}).exit_code, 1);

  const CliResult none = Run({"retry", "--job-dir", "job", "--all-failed"});
  EXPECT_EQ(none.exit_code, 0);
  EXPECT_EQ(none.out, "No failed shards selected\n");
}

TEST_F(JobCli, RetryValidatesEverySelectedShardBeforeMovingAny) {
  WriteFailed("part-00000-of-00004");
  WriteFailed("part-00001-of-00004");
  WriteLock("part-00001-of-00004");
  CliResult r = Run({"retry", "--job-dir", "job", "--shard-id", "part-00000-of-00004", "--shard-id",
                     "part-00001-of-00004"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Cannot retry part-00001-of-00004: a lock still exists"), std::string::npos)
      << r.err;
  EXPECT_TRUE(Exists("job/state/failed/part-00000-of-00004.json"));
  EXPECT_FALSE(Exists("job/state/history/failed"));

  FinishAllShards(job_);
  r = Run({"retry", "--job-dir", "job", "--shard-id", "part-00002-of-00004"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Cannot retry part-00002-of-00004: already complete"), std::string::npos);
}

TEST_F(JobCli, RetryRefusesUnknownAndPathLikeIdsAndNeedsOneSelector) {
  for (const char* id : {"part-00009-of-00004", "../job", "a/b", ".."}) {
    const CliResult r = Run({"retry", "--job-dir", "job", "--shard-id", id});
    EXPECT_EQ(r.exit_code, 2) << id;
    EXPECT_EQ(r.err.rfind("ERROR: ", 0), 0u) << r.err;
  }
  EXPECT_NE(Run({"retry", "--job-dir", "job", "--shard-id", "a/b"}).err.find("never a path"),
            std::string::npos);
  EXPECT_EQ(Run({"retry", "--job-dir", "job"}).exit_code, 2);
  EXPECT_EQ(Run({"retry", "--job-dir", "job", "--all-failed", "--shard-id", "x"}).exit_code, 2);
}

TEST_F(JobCli, MergeConcatenatesDoneOutputsInManifestOrderAndVerifyPasses) {
  FinishAllShards(job_);
  const CliResult r = Run({"merge", "--job-dir", "job", "--output", "out/merged.jsonl"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("out/merged.jsonl"), ShardsConcatenated());
  const json m = json::parse(Read("job/merge.json"));
  EXPECT_EQ(m["job_id"], "job");
  EXPECT_EQ(m["rows"], 12);
  EXPECT_EQ(m["num_shards"], 4);
  EXPECT_EQ(m["output_path"], Path("out/merged.jsonl"));
  EXPECT_EQ(m["sha256"].get<std::string>().size(), 64u);

  const CliResult v = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out, "PASS: 4 shards were completed by 1 node(s); merged 12 rows into " +
                       Path("out/merged.jsonl") + "\n");
  const CliResult two = Run({"verify", "--job-dir", "job", "--expect-nodes", "2"});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("1 distinct node(s), expected at least 2"), std::string::npos);
}

TEST_F(JobCli, MergeCompressesByNameAndVerifyReadsIt) {
  FinishAllShards(job_);
  for (const char* name : {"merged.jsonl.zst", "merged.jsonl.gz"}) {
    const CliResult r = Run({"merge", "--job-dir", "job", "--output", name, "--overwrite"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const std::string tool = std::string(name).find(".zst") != std::string::npos ? "zstd" : "gzip";
    ASSERT_EQ(std::system((tool + " -dc " + Path(name) + " > " + Path("plain.jsonl")).c_str()), 0);
    EXPECT_EQ(Read("plain.jsonl"), ShardsConcatenated()) << name;
    const CliResult v = Run({"verify", "--job-dir", "job"});
    EXPECT_EQ(v.exit_code, 0) << v.err;
    EXPECT_NE(v.out.find(std::string("merged 12 rows into ") + Path(name)), std::string::npos);
  }
}

TEST_F(JobCli, MergeRefusesAnIncompleteJob) {
  FinishAllShards(job_);
  fs::remove(Path("job/state/done/part-00002-of-00004.json"));
  const CliResult r = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("job is not complete"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pending=1"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("job/merged.jsonl"));
}

TEST_F(JobCli, MergeRefusesToOverwriteUnlessAsked) {
  FinishAllShards(job_);
  Write("merged.jsonl", "old\n");
  CliResult r = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("output already exists"), std::string::npos);
  EXPECT_EQ(Read("merged.jsonl"), "old\n");
  r = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl", "--overwrite"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Read("merged.jsonl"), ShardsConcatenated());
}

TEST_F(JobCli, MergeDetectsAChangedByteAndLeavesTheOldOutputUntouched) {
  FinishAllShards(job_);
  Write("merged.jsonl", "old\n");
  const std::string out = Path(
      "job/attempts/part-00001-of-00004/0001-00000000000000000000000000000001/processed.jsonl");
  std::string bytes = Read(out.substr(dir_.size() + 1));
  bytes[bytes.find("row")] = 'R';
  std::ofstream(out, std::ios::binary | std::ios::trunc) << bytes;
  const CliResult r = Run({"merge", "--job-dir", "job", "--output", "merged.jsonl", "--overwrite"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("does not match its done record"), std::string::npos) << r.err;
  EXPECT_EQ(Read("merged.jsonl"), "old\n");
  for (const std::string& name : List()) EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
  EXPECT_EQ(Run({"verify", "--job-dir", "job", "--output", "merged.jsonl"}).exit_code, 2);
}

TEST_F(JobCli, MergeDetectsARemovedRow) {
  FinishAllShards(job_);
  const std::string rel =
      "job/attempts/part-00003-of-00004/0001-00000000000000000000000000000001/processed.jsonl";
  std::string bytes = Read(rel);
  bytes.erase(0, bytes.find('\n') + 1);
  std::ofstream(Path(rel), std::ios::binary | std::ios::trunc) << bytes;
  const CliResult r = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("rows 1 vs 2"), std::string::npos) << r.err;
  EXPECT_FALSE(Exists("job/merged.jsonl"));
}

TEST_F(JobCli, MergeRefusesOutputPathsOutsideTheJob) {
  FinishAllShards(job_);
  const std::string record = Read("job/state/done/part-00000-of-00004.json");
  json done = json::parse(record);
  done["output_path"] = "../data.jsonl";
  Write("job/state/done/part-00000-of-00004.json", done.dump());
  const CliResult r = Run({"merge", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("leaves the job directory"), std::string::npos) << r.err;
}

TEST_F(JobCli, VerifyDetectsAnEditedMergedOutput) {
  FinishAllShards(job_);
  ASSERT_EQ(Run({"merge", "--job-dir", "job"}).exit_code, 0);
  std::string merged = Read("job/merged.jsonl");
  merged.erase(merged.size() - 1);
  merged += " \n";
  Write("job/merged.jsonl", merged);
  const CliResult r = Run({"verify", "--job-dir", "job"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("merged output differs"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace djshard::testing
