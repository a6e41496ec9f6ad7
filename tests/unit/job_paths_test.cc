// JobPaths: one normaliser, and every path of a job directory from one place.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "djshard/common/error.h"
#include "djshard/store/job.h"

namespace djshard::store {
namespace {

TEST(JobPaths, OneRuleNormalisesEverySpellingOfAJobDir) {
  for (const char* spelling : {"/data/jobs/x", "/data/jobs/x/", "/data/jobs/x//", "/data/jobs/x/.",
                               "/data/jobs/y/../x", "/data/./jobs/x"}) {
    EXPECT_EQ(NormalizeJobDir(spelling), "/data/jobs/x") << spelling;
  }
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(NormalizeJobDir("jobs/x/"), cwd + "/jobs/x");
  EXPECT_THROW(NormalizeJobDir(""), Error);
}

TEST(JobPaths, FilesBesideTheJobAreNamedFromItsDirectoryName) {
  const JobPaths job("/data/jobs/x/");
  EXPECT_EQ(job.CoordinationDir("abc"), "/data/jobs/.x.dlc-coordination/abc");
  EXPECT_EQ(job.StagingPath("r"), "/data/jobs/.x.preparing.r");
}

TEST(JobPaths, StateFilesOfAShard) {
  const JobPaths job("/j");
  EXPECT_EQ(job.LockPath("p"), "/j/state/locks/p.lock");
  EXPECT_EQ(job.DonePath("p"), "/j/state/done/p.json");
  EXPECT_EQ(job.FailedPath("p"), "/j/state/failed/p.json");
  EXPECT_EQ(job.StaleLockPath("p", "1.ab"), "/j/state/stale_locks/p.1.ab.lock");
  EXPECT_EQ(job.HistoryAttemptsPath("p", "s"), "/j/state/history/attempts/p.s");
  EXPECT_EQ(job.HistoryFailedPath("p", "s"), "/j/state/history/failed/p.s.json");
  EXPECT_EQ(JobPaths::AttemptRelDir("p", 3, "tok"), "attempts/p/0003-tok");
  EXPECT_EQ(JobPaths::ShardRelPath("p"), "shards/p.jsonl");
  EXPECT_EQ(job.InJob(JobPaths::ShardRelPath("p")), "/j/shards/p.jsonl");
}

TEST(JobPaths, TheJobsOwnFilesAreKnown) {
  const JobPaths job("/j");
  for (const char* own :
       {"/j/manifest.json", "/j/recipe.yaml", "/j/merge.json", "/j/shards/p.jsonl",
        "/j/attempts/p/0001-t/processed.jsonl", "/j/state/done/p.json", "/j/state"}) {
    EXPECT_TRUE(job.IsJobFile(own)) << own;
  }
  for (const char* other : {"/j/merged.jsonl", "/j/out/merged.jsonl.zst", "/j2/manifest.json",
                            "/j/shardsX", "/other/state/x"}) {
    EXPECT_FALSE(job.IsJobFile(other)) << other;
  }
}

}  // namespace
}  // namespace djshard::store
