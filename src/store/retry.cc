#include "djshard/store/retry.h"

#include <sys/stat.h>

#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::store {

namespace fs = std::filesystem;

RetryOutcome Retry(const JobDir& job, const RetryRequest& request, io::Disk& disk) {
  std::vector<std::string> selected;
  std::error_code ec;
  if (request.all_failed) {
    for (const ShardEntry& s : job.manifest().shards) {
      if (fs::exists(job.FailedPath(s.id), ec)) selected.push_back(s.id);
    }
  } else {
    for (const std::string& id : request.shard_ids) {
      CheckShardIdIsName(id);
      if (job.FindShard(id) == nullptr) {
        throw Error(job.dir(), 0, "unknown shard id '" + id + "'",
                    "'djshard status --all' lists the shard ids of this job");
      }
      selected.push_back(id);
    }
  }
  // Validate everything before moving anything.
  for (const std::string& id : selected) {
    if (fs::exists(fs::symlink_status(job.LockPath(id), ec))) {
      throw Error("Cannot retry " + id + ": a lock still exists",
                  "a worker may still be running it; wait for it or for the lease to expire");
    }
    if (fs::exists(job.DonePath(id), ec)) {
      throw Error("Cannot retry " + id + ": already complete", "only failed shards can be retried");
    }
  }

  RetryOutcome outcome;
  const std::string history = job.StateDir() + "/history";
  for (const std::string& id : selected) {
    const bool failed = fs::exists(job.FailedPath(id), ec);
    const bool attempts = fs::exists(job.AttemptsDir(id), ec);
    if (!failed && !attempts) continue;
    const std::string suffix = FormatUtcCompact(NowNanos()) + "." + RandomHex(8);
    // Attempts move first: a crash in between leaves the failed record, so the
    // shard stays failed and the retry can simply be repeated.
    if (attempts) {
      fs::create_directories(history + "/attempts", ec);
      disk.Rename(job.AttemptsDir(id), history + "/attempts/" + id + "." + suffix);
    }
    if (failed) {
      fs::create_directories(history + "/failed", ec);
      disk.Rename(job.FailedPath(id), history + "/failed/" + id + "." + suffix + ".json");
    }
    disk.SyncDir(job.StateDir() + "/failed");
    outcome.retried.push_back(id);
  }
  return outcome;
}

}  // namespace djshard::store
