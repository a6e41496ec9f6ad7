#pragma once

#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"

namespace djshard::store {

struct RetryRequest {
  bool all_failed = false;
  std::vector<std::string> shard_ids;  // used when !all_failed
};

struct RetryOutcome {
  std::vector<std::string> retried;  // shard ids whose failure history was moved
};

// Gives shards a fresh retry budget (SPEC "retry"): validates every selected
// shard first (known id, no lock, not done), then moves state/failed/<id>.json
// and attempts/<id>/ into state/history/ under a unique suffix. Nothing is
// moved when any selected shard is refused.
RetryOutcome Retry(const JobDir& job, const RetryRequest& request, io::Disk& disk = io::RealDisk());

}  // namespace djshard::store
