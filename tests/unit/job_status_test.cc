// What `djshard jobs` and `monitor` read of a run job directory.
#include "djshard/job/job_status.h"

#include <gtest/gtest.h>

#include <string>

#include "djshard/common/error.h"
#include "tests/unit/temp_dir.h"

namespace djshard::job {
namespace {

using testing::TempDir;

TEST(JobState, EveryNameParsesBackAndOtherTextIsUnknown) {
  for (const JobState s :
       {JobState::kPrepared, JobState::kRunning, JobState::kStopping, JobState::kStopped,
        JobState::kCompleted, JobState::kFailed, JobState::kIncomplete, JobState::kInterrupted,
        JobState::kInterruptedResumable}) {
    EXPECT_EQ(ParseJobState(JobStateName(s)), s) << JobStateName(s);
  }
  EXPECT_EQ(std::string(JobStateName(JobState::kInterruptedResumable)), "interrupted (resumable)");
  EXPECT_EQ(ParseJobState("paused"), JobState::kUnknown);
  EXPECT_EQ(ParseJobState(""), JobState::kUnknown);
  EXPECT_EQ(ParseJobState("Running"), JobState::kUnknown);
}

TEST(ReadRunJob, ASummaryStatusOfNoKnownStateIsShownAsWritten) {
  TempDir dir;
  dir.Write("job_summary.json", R"({"job_id": "j", "status": "paused"})");
  const RunJobView v = ReadRunJob(dir.dir());
  EXPECT_EQ(v.state, JobState::kUnknown);
  EXPECT_EQ(v.StatusName(), "paused");
  EXPECT_EQ(v.ToJson(false)["status"], "paused");
}

TEST(ReadRunJob, ARunningJobWithoutHeartbeatIsInterruptedResumableWithCommits) {
  TempDir dir;
  const std::string summary =
      R"({"job_id": "j", "status": "running", "partitions": {"total": 2},
          "checkpointing": {"resumable": true}})";
  dir.Write("job_summary.json", summary);
  EXPECT_EQ(ReadRunJob(dir.dir()).StatusName(), "interrupted");
  dir.Write("checkpoints/checkpoint_op_0_partition_1.commit.json",
            R"({"partition_id": 1, "op_idx": 0, "created_at": "2024-01-01T00:00:00Z"})");
  const RunJobView v = ReadRunJob(dir.dir());
  EXPECT_EQ(v.state, JobState::kInterruptedResumable);
  EXPECT_EQ(v.ToJson(false)["status"], "interrupted (resumable)");
  EXPECT_EQ(v.last_checkpoint_time, "2024-01-01T00:00:00Z");
}

TEST(ReadRunJob, PartitionStatesFollowTheEventsAndANewRunResetsRunningOnes) {
  TempDir dir;
  dir.Write("job_summary.json",
            R"({"job_id": "j", "status": "failed", "partitions": {"total": 3}})");
  dir.Write("events_1.jsonl",
            R"({"event_type": "partition_start", "partition_id": 0})"
            "\n"
            R"({"event_type": "partition_start", "partition_id": 1})"
            "\n"
            R"({"event_type": "partition_complete", "partition_id": 1, "input_rows": 5,)"
            R"( "output_rows": 4})"
            "\n"
            R"({"event_type": "job_start", "metadata": {}})"
            "\n"
            R"({"event_type": "partition_resume", "partition_id": 2})"
            "\n");
  const RunJobView v = ReadRunJob(dir.dir());
  EXPECT_EQ(v.state, JobState::kFailed);
  ASSERT_EQ(v.partitions.size(), 3u);
  EXPECT_EQ(v.partitions[0].state, PartitionState::kPending);
  EXPECT_EQ(v.partitions[1].state, PartitionState::kCompleted);
  EXPECT_EQ(v.partitions[2].state, PartitionState::kRunning);
  EXPECT_EQ(v.partitions_done, 1u);
  const nlohmann::json j = v.ToJson(true);
  EXPECT_EQ(j["running_partitions"], nlohmann::json::array({2}));
  EXPECT_EQ(j["partition_details"][0]["status"], "pending");
  EXPECT_EQ(j["partition_details"][1]["status"], "completed");
  EXPECT_EQ(j["partition_details"][1]["rows_out"], 4);
}

TEST(ReadRunJob, ADirectoryWithoutSummaryIsNotARunJob) {
  TempDir dir;
  EXPECT_THROW(ReadRunJob(dir.dir()), djshard::Error);
}

}  // namespace
}  // namespace djshard::job
