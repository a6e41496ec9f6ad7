#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "djshard/job/job_status.h"
#include "djshard/store/job.h"
#include "djshard/store/records.h"
#include "djshard/store/status.h"

namespace djshard::store {

// Partitions of an elastic job (SPEC-checkpoints §8), for its summary and
// `monitor`. Without checkpointing each shard is processed as one partition;
// with it each shard is a partition set of its own, whose count its first
// attempt fixes in checkpoints/<shard>/partitioning_info.json (and its done
// record keeps once the shard's checkpoints are gone).
struct PartitionCounts {
  bool per_shard = false;  // shards have partitions of their own (checkpointing)
  uint64_t total = 0;      // over the shards whose count is known
  uint64_t completed = 0;  // of done shards, and others' with a committed final tap
  uint64_t failed = 0;     // not completed, of failed shards
  uint64_t resumed = 0;    // taken from an earlier attempt's final tap by the attempt that finished
  // Auto-sized shards that no worker has started: their count is not known
  // yet and not in `total`.
  uint64_t unsized_shards = 0;
};

// Counts the partitions of `job` in the state `status` describes. Reads done
// records, attempt records and checkpoint directories; never writes.
PartitionCounts CountPartitions(const JobDir& job, const JobStatus& status);

// One attempt that holds a live claim, as `monitor` shows it.
struct RunningAttempt {
  std::string shard_id, hostname, token, current_op;
  int64_t pid = 0;
  double lock_age_secs = 0;
  // Partitions of its shard, where the shard checkpoints them (0: unknown).
  uint64_t partitions_total = 0, partitions_committed = 0;
};

// What `djshard jobs` and `djshard monitor` show of an elastic job directory,
// read from its summary, state files, checkpoints and events only.
struct ElasticJobView {
  std::string job_id, job_dir;
  // completed (every shard done) | failed (a failed record) | stopped (a stop
  // request and no live claim) | stopping (a stop request, claims still live)
  // | running (a live claim) | incomplete (some shards done or tried) | prepared
  job::JobState state = job::JobState::kPrepared;
  std::string start_time, last_checkpoint_time;
  double duration_secs = 0;
  uint64_t shards_total = 0, shards_done = 0, shards_failed = 0, shards_running = 0,
           shards_stale = 0;
  PartitionCounts partitions;
  uint64_t rows_total = 0, rows_done = 0;  // input rows of done shards
  double rows_per_sec = 0;                 // done rows over the time since the first claim
  std::optional<double> eta_secs;
  bool merged = false;
  std::vector<RunningAttempt> running;
  std::vector<std::string> hosts;                          // hosts that hold or finished shards
  nlohmann::json stop;                                     // the stop request, or null
  nlohmann::json shard_details = nlohmann::json::array();  // per shard: id, status, owner, rows
  nlohmann::json op_totals = nlohmann::json::array();      // per op over done shards
  // Per node that ran or runs attempts with model stages: {hostname, pid,
  // threads, stages, probe} from its latest attempt's `plan` (ReplicaPlanOf).
  nlohmann::json replica_plans = nlohmann::json::array();
  // Done shards by the model devices that computed them, and the warning
  // when there is more than one kind (MixedModelDevicesWarning).
  ShardsByModelDevices shards_by_model_devices;
  std::string model_devices_warning;
  // A recipe with deduplicators: per stage {stage, op, tasks, counts}; its
  // running tasks are in `running` beside the shards.
  nlohmann::json dedup_stages = nlohmann::json::array();
  bool stage_failed = false;   // a stage task failed for good
  bool input_changed = false;  // a reference job's input changed after prepare

  nlohmann::json ToJson(bool detailed) const;
};

ElasticJobView ReadElasticJob(const JobDir& job);

// True when `dir` holds an elastic job (manifest.json).
bool IsElasticJobDir(const std::string& dir);

// One row of `djshard jobs`: a run job or an elastic job.
struct JobRow {
  std::string job_id, kind, status, start_time, hostname;
  double duration_secs = 0;
  uint64_t done = 0, total = 0;  // partitions (run) or shards (elastic)
  nlohmann::json json;           // the job's view, for --json
};

// Every job directory under `work_dir` (a job_summary.json or a manifest.json),
// newest first. With `running_only`, only those with a fresh heartbeat or a
// live claim (`djshard jobs --running`, `djshard stop --list`).
std::vector<JobRow> ListJobs(const std::string& work_dir, bool running_only);

}  // namespace djshard::store
