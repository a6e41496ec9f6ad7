#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "djshard/store/job.h"
#include "djshard/store/shard_source.h"

namespace djshard::store {

struct StatusCounts {
  uint64_t pending = 0, running = 0, stale = 0, done = 0, failed = 0;
};

// The tasks of one dedup stage (store/dedup_stage.h) and their counts.
struct StageStatus {
  size_t stage = 0;                                        // 1-based
  std::string op;                                          // the deduplicator
  std::shared_ptr<const std::vector<ShardEntry>> entries;  // one per task; `tasks` point here
  std::vector<ShardStatus> tasks;
  StatusCounts counts;
};

// A snapshot of a job's progress (SPEC "status").
struct JobStatus {
  std::string job_id;
  std::string job_dir;
  uint64_t total = 0;
  StatusCounts counts;
  std::vector<ShardStatus> shards;
  std::vector<StageStatus> stages;  // a recipe with deduplicators: their stages
  // A reference job whose input changed after prepare: the record's error,
  // which fails the job (store/shard_source.h).
  std::optional<InputChangedRecord> input_changed;

  bool complete() const { return counts.done == total; }
  // A shard or a dedup stage's task failed for good, or the input changed.
  bool failed() const;
  // No shard can change any more without a retry: all done or failed, or a
  // dedup stage's task failed (the shards after it wait for it).
  bool terminal() const;
  // "Job <id>: total=N pending=a running=b stale=c done=d failed=e", and how
  // many dedup stage tasks failed when any did.
  std::string SummaryLine() const;
  // The summary and a line per dedup stage, plus one line per shard and
  // stage task when `all`.
  std::string Text(bool all) const;
  std::string Json() const;
};

JobStatus ReadStatus(const JobDir& job);

// Throws Error (exit 2) with the counts unless every shard is done.
void RequireComplete(const JobDir& job, const std::string& action);

}  // namespace djshard::store
