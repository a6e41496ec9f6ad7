#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace djshard::job {

// A heartbeat older than this says its `run` is gone (it beats every 5 s).
inline constexpr double kHeartbeatStaleSecs = 30;

// A job's state, run or elastic. A run job's comes from its job_summary.json,
// interrupted when the summary says running and the heartbeat is stale; an
// elastic job's from its shards (ElasticJobView). kUnknown: a summary status
// no other state spells.
enum class JobState {
  kPrepared,
  kRunning,
  kStopping,
  kStopped,
  kCompleted,
  kFailed,
  kIncomplete,
  kInterrupted,
  kInterruptedResumable,
  kUnknown,
};

// "prepared", "running", "stopping", "stopped", "completed", "failed",
// "incomplete", "interrupted", "interrupted (resumable)"; "unknown" for kUnknown.
const char* JobStateName(JobState state);

// The state JobStateName spells as `name`; kUnknown for any other text.
JobState ParseJobState(std::string_view name);

// A run job partition's state as its events and commit records tell it.
enum class PartitionState { kPending, kRunning, kCompleted };

// "pending", "running", "completed".
const char* PartitionStateName(PartitionState state);

// One partition of a run job as its commit records and events tell it.
struct PartitionView {
  uint64_t partition_id = 0;
  PartitionState state = PartitionState::kPending;
  std::vector<uint64_t> taps;  // op_idx of each committed tap
  uint64_t rows_in = 0, rows_out = 0;
};

// What `djshard jobs` and `djshard monitor` show of a `run` job directory,
// read from job_summary.json, heartbeat, commit records and events only.
struct RunJobView {
  std::string job_id, job_dir;
  // running (fresh heartbeat) | completed | failed | stopped | prepared |
  // interrupted (resumable) (stale, commits exist) | interrupted | unknown
  JobState state = JobState::kUnknown;
  std::string unknown_status;  // the summary's status text when `state` is kUnknown
  std::string start_time, hostname, last_checkpoint_time;
  double duration_secs = 0;
  double heartbeat_age_secs = -1;  // -1: no heartbeat
  uint64_t partitions_total = 0, partitions_done = 0;
  uint64_t rows_total = 0, rows_done = 0;  // input rows of finished partitions
  double rows_per_sec = 0;                 // over the last completed partitions' window
  std::optional<double> eta_secs;
  std::vector<PartitionView> partitions;
  nlohmann::json op_totals = nlohmann::json::array();  // per op: name, rows_in, rows_out, secs
  // The model stages' replicas from dag_execution_plan.json (ReplicaPlanOf); null: none.
  nlohmann::json replica_plan;
  int64_t start_ns = 0;

  // The state as JobStateName spells it; an unknown one as the summary does.
  std::string StatusName() const;
  nlohmann::json ToJson(bool detailed) const;
};

// The replica plan in a plan document (dag_execution_plan.json, or the `plan`
// of an elastic attempt.json), as `monitor` shows it: {stages: [{stage_id,
// op_name, replicas, devices, batch_size, bound}] of the model stages, probe}.
// Null when the document has no model stage.
nlohmann::json ReplicaPlanOf(const nlohmann::json& plan);

// One line per model stage of a ReplicaPlanOf value, for people.
std::vector<std::string> ReplicaPlanLines(const nlohmann::json& replica_plan);

// Reads one job directory. Throws Error when it has no job_summary.json.
RunJobView ReadRunJob(const std::string& job_dir);

// The lines of an events file that parse; a torn last line is skipped.
std::vector<nlohmann::json> ReadEventLines(const std::string& path);

}  // namespace djshard::job
