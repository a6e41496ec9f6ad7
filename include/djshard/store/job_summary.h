#pragma once

#include <optional>
#include <string>

#include "djshard/job/stop_request.h"
#include "djshard/store/job.h"

namespace djshard::store {

// An elastic job's status in its summary.
enum class SummaryStatus { kPrepared, kRunning, kCompleted, kFailed, kStopped };

// "prepared", "running", "completed", "failed", "stopped".
const char* SummaryStatusName(SummaryStatus status);

// What a writer of an elastic job's summary says about the job.
struct SummaryUpdate {
  SummaryStatus status = SummaryStatus::kPrepared;
  std::optional<job::StopRequest> stop;  // stop: the request; kept from the old summary if unset
  bool clear_stop = false;               // stop --clear: the stop block becomes null
  std::string error_message;
};

// Rewrites <job>/job_summary.json (temp + fsync + rename) from the job's
// state: shard and row counts, who wrote it, and `update`. In an elastic job
// directory only prepare, stop, merge and dlc finalize call it, never
// workers, so it has one writer at a time (SPEC-checkpoints §8).
void WriteJobSummary(const JobDir& job, const SummaryUpdate& update);

}  // namespace djshard::store
