#include "djshard/store/retry.h"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/store/dedup_stage.h"

namespace djshard::store {

namespace fs = std::filesystem;

RetryOutcome Retry(const JobDir& job, const RetryRequest& request, io::Disk& disk) {
  std::vector<std::string> selected;
  // Shards, and the tasks of the job's dedup stages.
  const std::vector<JobTask> tasks = JobTasks(job.manifest());
  if (request.all_failed) {
    const ShardScan scan = job.Scan();
    for (const JobTask& t : tasks) {
      if (scan.failed.count(t.id)) selected.push_back(t.id);
    }
  } else {
    for (const std::string& id : request.shard_ids) {
      CheckShardIdIsName(id);
      if (std::none_of(tasks.begin(), tasks.end(),
                       [&id](const JobTask& t) { return t.id == id; })) {
        throw Error(job.dir(), 0, "unknown shard id '" + id + "'",
                    "'djshard status --all' lists the shard and dedup task ids of this job");
      }
      selected.push_back(id);
    }
  }
  // Validate everything before moving anything.
  for (const std::string& id : selected) {
    std::error_code ec;
    if (fs::exists(fs::symlink_status(job.LockPath(id), ec))) {
      throw Error("Cannot retry " + id + ": a lock still exists",
                  "a worker may still be running it; wait for it or for the lease to expire");
    }
    if (disk.Stat(job.DonePath(id))) {
      throw Error("Cannot retry " + id + ": already complete", "only failed shards can be retried");
    }
  }

  RetryOutcome outcome;
  for (const std::string& id : selected) {
    const bool failed = disk.Stat(job.FailedPath(id)).has_value();
    const bool attempts = disk.Stat(job.AttemptsDir(id)).has_value();
    if (!failed && !attempts) continue;
    const std::string suffix = FormatUtcCompact(NowNanos()) + "." + RandomHex(8);
    // Attempts move first: a crash in between leaves the failed record, so the
    // shard stays failed and the retry can simply be repeated.
    if (attempts) {
      const std::string to = job.HistoryAttemptsPath(id, suffix);
      disk.MakeDirs(fs::path(to).parent_path().string());
      disk.Rename(job.AttemptsDir(id), to);
    }
    if (failed) {
      const std::string to = job.HistoryFailedPath(id, suffix);
      disk.MakeDirs(fs::path(to).parent_path().string());
      disk.Rename(job.FailedPath(id), to);
    }
    disk.SyncDir(job.FailedDir());
    outcome.retried.push_back(id);
  }
  if (request.discard_checkpoints) {
    const std::string root = ShardCheckpointsRoot(job);
    for (const std::string& id : selected) {
      const std::string dir = root + "/" + id;
      std::error_code ec;
      if (!fs::exists(dir, ec)) continue;
      fs::remove_all(dir, ec);
      if (ec) throw Error(dir, 0, "cannot delete the checkpoints: " + ec.message());
      outcome.discarded.push_back(dir);
    }
  }
  return outcome;
}

}  // namespace djshard::store
