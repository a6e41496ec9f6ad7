#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/manifest.h"

namespace djshard::store {

// The one rule for a job-directory path a user gives: absolute, lexically
// normal, without a trailing slash ("jobs/x/" and "./jobs/x" name the same job).
std::string NormalizeJobDir(const std::string& dir);

// Every path inside (and beside) a job directory. Nothing else in djshard
// builds one: a new kind of file gets its accessor here.
class JobPaths {
 public:
  // `dir` is normalized with NormalizeJobDir.
  explicit JobPaths(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // `relative` (a path recorded in the manifest or a record) inside the job.
  std::string InJob(const std::string& relative) const { return dir_ + "/" + relative; }

  std::string ManifestPath() const { return dir_ + "/manifest.json"; }
  std::string MergeRecordPath() const { return dir_ + "/merge.json"; }
  // merged.jsonl, or for the parts layout the directory merged.
  std::string DefaultMergedOutput(OutputLayout layout) const {
    return dir_ + (layout == OutputLayout::kParts ? "/merged" : "/merged.jsonl");
  }
  std::string ShardsDir() const { return dir_ + "/shards"; }
  // shards/<id>.jsonl, relative to the job dir (as the manifest records it).
  static std::string ShardRelPath(const std::string& shard_id);

  std::string StateDir() const { return dir_ + "/state"; }
  std::string LocksDir() const { return dir_ + "/state/locks"; }
  std::string DoneDir() const { return dir_ + "/state/done"; }
  std::string FailedDir() const { return dir_ + "/state/failed"; }
  std::string StaleLocksDir() const { return dir_ + "/state/stale_locks"; }
  std::string HistoryDir() const { return dir_ + "/state/history"; }
  // True when `path` (absolute, normalized) names one of the job's own files:
  // the manifest, the recipe snapshot, merge.json, job_summary.json, an
  // events_* file, a stop request, or anything under shards/, attempts/ or
  // state/. Such a path is never an output.
  bool IsJobFile(const std::string& path) const;

  // Every directory a new job has, the job dir itself first.
  std::vector<std::string> SkeletonDirs() const;

  std::string LockPath(const std::string& shard_id) const;
  std::string DonePath(const std::string& shard_id) const;
  std::string FailedPath(const std::string& shard_id) const;
  // state/stale_locks/<shard>.<suffix>.lock: where a takeover moves a lock.
  std::string StaleLockPath(const std::string& shard_id, const std::string& suffix) const;
  // state/history/attempts/<shard>.<suffix> and state/history/failed/<shard>.<suffix>.json:
  // where retry moves a shard's attempts and failed record.
  std::string HistoryAttemptsPath(const std::string& shard_id, const std::string& suffix) const;
  std::string HistoryFailedPath(const std::string& shard_id, const std::string& suffix) const;
  // A file whose mtime tells the filesystem's clock (created and removed at once).
  std::string ClockProbePath(const std::string& unique) const;

  // attempts/<shard>: every attempt of a shard.
  std::string AttemptsDir(const std::string& shard_id) const;
  // attempts/<shard>/<NNNN>-<token>, relative to the job dir.
  static std::string AttemptRelDir(const std::string& shard_id, int64_t number,
                                   const std::string& token);
  // Files of one attempt, given its directory (absolute, or relative to the
  // job dir as records hold it).
  static std::string AttemptRecordPath(const std::string& attempt_dir);
  static std::string AttemptLogPath(const std::string& attempt_dir);
  static std::string AttemptOutputPath(const std::string& attempt_dir);
  static std::string AttemptErrorsPath(const std::string& attempt_dir);

  // Where the shards' checkpoint directories (<root>/<shard_id>) live:
  // <job_dir>/checkpoints, else the recipe's checkpoint.dir with {job_id}
  // substituted (else the job id appended), relative to the job dir.
  static std::string CheckpointsRoot(const std::string& job_dir, const std::string& job_id,
                                     const std::optional<std::string>& checkpoint_dir);

  // Beside the job dir: .<job>.preparing.<unique> (prepare's staging) and
  // .<job>.dlc-coordination/<key> (one dlc run's elections and results).
  std::string StagingPath(const std::string& unique) const;
  std::string CoordinationDir(const std::string& key) const;

 private:
  // .<job name><suffix> in the job dir's parent.
  std::string BesideJob(const std::string& suffix) const;

  std::string dir_;
};

// A shard's state as every node sees it (SPEC "status").
enum class ShardState { kPending, kRunning, kStale, kDone, kFailed };
const char* ShardStateName(ShardState state);

// One look at a job's state directories: three listings, no record read.
struct ShardScan {
  std::set<std::string> done, failed, locked;  // shard ids
  std::set<std::string> attempted;             // shards with an attempts/<shard> directory

  bool finished(const std::string& id) const { return done.count(id) || failed.count(id); }
};

// The claim fields of state/locks/<shard>.lock that status reports.
struct LockInfo {
  std::string hostname;
  int64_t pid = 0;
  std::string token;
  double age_secs = 0;  // against the shared filesystem's clock
};

struct ShardStatus {
  const ShardEntry* shard = nullptr;
  ShardState state = ShardState::kPending;
  std::optional<LockInfo> lock;
  std::string owner;  // host of the lock or of the done record
  int64_t pid = 0;
  std::string error;         // last_error of a failed record
  double retry_in_secs = 0;  // pending after failures: seconds until it may be retried
};

// A published job directory: its paths and its manifest.
class JobDir : public JobPaths {
 public:
  // Opens `dir` and reads its manifest. Throws Error when it is not a job dir.
  static JobDir Open(const std::string& dir, io::Disk& disk = io::RealDisk());

  const Manifest& manifest() const { return manifest_; }
  io::Disk& disk() const { return *disk_; }

  // nullptr when the manifest has no such shard.
  const ShardEntry* FindShard(const std::string& shard_id) const;

  // Now, in nanoseconds, by the clock of the filesystem that holds the job:
  // the mtime of a probe file created in state/. Falls back to the local clock
  // when the directory is read-only.
  int64_t FilesystemNowNanos() const;

  // Lists done, failed, locked and attempted shards (the worker's and
  // status's one look: four directory listings).
  ShardScan Scan() const;

  // The state of every shard, in manifest order, from one Scan: done and
  // failed records and locks are read for their owners. Lock ages use one probe.
  std::vector<ShardStatus> Statuses() const;
  // The same for other claimable units (a dedup stage's tasks), named by the
  // `id` of each entry; the statuses point into `entries`.
  std::vector<ShardStatus> StatusesOf(const std::vector<ShardEntry>& entries) const;

 private:
  JobDir(const std::string& dir, io::Disk& disk) : JobPaths(dir), disk_(&disk) {}

  Manifest manifest_;
  io::Disk* disk_;
};

// Where the shards' checkpoint directories (<root>/<shard_id>) of `job` are:
// the recipe snapshot's checkpoint.dir, else <job_dir>/checkpoints.
std::string ShardCheckpointsRoot(const JobDir& job);

// Rejects shard ids that could name a path ('/', "..", empty).
void CheckShardIdIsName(const std::string& shard_id);

}  // namespace djshard::store
