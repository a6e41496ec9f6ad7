#pragma once

#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"

namespace djshard::store {

struct RetryRequest {
  bool all_failed = false;
  std::vector<std::string> shard_ids;  // used when !all_failed
  // Also delete the shards' checkpoints (checkpoints/<shard>/), so that the
  // next attempt computes every partition again (SPEC-checkpoints §5).
  bool discard_checkpoints = false;
};

struct RetryOutcome {
  std::vector<std::string> retried;    // shard ids whose failure history was moved
  std::vector<std::string> discarded;  // checkpoint directories deleted
};

// Gives shards a fresh retry budget (SPEC "retry"): validates every selected
// shard first (known id, no lock, not done), then moves state/failed/<id>.json
// and attempts/<id>/ into state/history/ under a unique suffix, and with
// discard_checkpoints deletes their checkpoint directories. Nothing is moved
// when any selected shard is refused. Checkpoints are kept otherwise: the
// next attempt resumes from them.
RetryOutcome Retry(const JobDir& job, const RetryRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::store
