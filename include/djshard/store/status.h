#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "djshard/store/job.h"

namespace djshard::store {

struct StatusCounts {
  uint64_t pending = 0, running = 0, stale = 0, done = 0, failed = 0;
};

// A snapshot of a job's progress (SPEC "status").
struct JobStatus {
  std::string job_id;
  std::string job_dir;
  uint64_t total = 0;
  StatusCounts counts;
  std::vector<ShardStatus> shards;

  bool complete() const { return counts.done == total; }
  // No shard can change any more without a retry: all done or failed.
  bool terminal() const { return counts.done + counts.failed == total; }
  // "Job <id>: total=N pending=a running=b stale=c done=d failed=e"
  std::string SummaryLine() const;
  // The summary, plus one line per shard when `all`.
  std::string Text(bool all) const;
  std::string Json() const;
};

JobStatus ReadStatus(const JobDir& job);

// Throws Error (exit 2) with the counts unless every shard is done.
void RequireComplete(const JobDir& job, const std::string& action);

}  // namespace djshard::store
