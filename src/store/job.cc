#include "djshard/store/job.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/job/checkpoint.h"
#include "djshard/recipe/recipe.h"
#include "djshard/store/claim.h"
#include "djshard/store/records.h"

namespace djshard::store {

namespace fs = std::filesystem;

std::string NormalizeJobDir(const std::string& dir) {
  if (dir.empty()) throw Error("empty --job-dir", "name the job directory");
  std::string out = fs::absolute(dir).lexically_normal().string();
  // lexically_normal keeps the slash of "x/" and "x/."; a job is named by its directory.
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  return out;
}

JobPaths::JobPaths(const std::string& dir) : dir_(NormalizeJobDir(dir)) {}

std::string JobPaths::ShardRelPath(const std::string& shard_id) {
  return "shards/" + shard_id + ".jsonl";
}

bool JobPaths::IsJobFile(const std::string& path) const {
  const std::string prefix = dir_ + "/";
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  const std::string rel = path.substr(prefix.size());
  for (const char* dir : {"shards", "attempts", "state"}) {
    if (rel == dir || rel.compare(0, std::strlen(dir) + 1, std::string(dir) + "/") == 0) {
      return true;
    }
  }
  // The job's summary, stop request and events files (SPEC-checkpoints §8, §9).
  if (rel.rfind("events_", 0) == 0 && rel.find('/') == std::string::npos) return true;
  return rel == "manifest.json" || rel == "recipe.yaml" || rel == "merge.json" ||
         rel == "job_summary.json" || rel == "stop_request.json" ||
         rel == "stop_request.force.json";
}

std::vector<std::string> JobPaths::SkeletonDirs() const {
  return {dir_,      ShardsDir(), dir_ + "/attempts", StateDir(), LocksDir(), StaleLocksDir(),
          DoneDir(), FailedDir(), HistoryDir()};
}

std::string JobPaths::LockPath(const std::string& id) const {
  return LocksDir() + "/" + id + ".lock";
}
std::string JobPaths::DonePath(const std::string& id) const {
  return DoneDir() + "/" + id + ".json";
}
std::string JobPaths::FailedPath(const std::string& id) const {
  return FailedDir() + "/" + id + ".json";
}
std::string JobPaths::StaleLockPath(const std::string& id, const std::string& suffix) const {
  return StaleLocksDir() + "/" + id + "." + suffix + ".lock";
}
std::string JobPaths::HistoryAttemptsPath(const std::string& id, const std::string& suffix) const {
  return HistoryDir() + "/attempts/" + id + "." + suffix;
}
std::string JobPaths::HistoryFailedPath(const std::string& id, const std::string& suffix) const {
  return HistoryDir() + "/failed/" + id + "." + suffix + ".json";
}
std::string JobPaths::ClockProbePath(const std::string& unique) const {
  return StateDir() + "/.clock-probe." + unique;
}
std::string JobPaths::AttemptsDir(const std::string& id) const { return dir_ + "/attempts/" + id; }
std::string JobPaths::AttemptRelDir(const std::string& id, int64_t number,
                                    const std::string& token) {
  return "attempts/" + id + "/" + ZeroPad(number, 4) + "-" + token;
}
std::string JobPaths::AttemptRecordPath(const std::string& attempt_dir) {
  return attempt_dir + "/attempt.json";
}
std::string JobPaths::AttemptLogPath(const std::string& attempt_dir) {
  return attempt_dir + "/process.log";
}
std::string JobPaths::AttemptOutputPath(const std::string& attempt_dir) {
  return attempt_dir + "/processed.jsonl";
}
std::string JobPaths::AttemptErrorsPath(const std::string& attempt_dir) {
  return attempt_dir + "/errors.jsonl";
}
std::string JobPaths::CheckpointsRoot(const std::string& job_dir, const std::string& job_id,
                                      const std::optional<std::string>& checkpoint_dir) {
  if (!checkpoint_dir) return job_dir + "/checkpoints";
  std::string d = *checkpoint_dir;
  const size_t at = d.find("{job_id}");
  if (at != std::string::npos) {
    d.replace(at, 8, job_id);
  } else {
    d += "/" + job_id;
  }
  const fs::path p(d);
  return (p.is_absolute() ? p : fs::path(job_dir) / p).lexically_normal().string();
}

std::string JobPaths::BesideJob(const std::string& suffix) const {
  const fs::path job(dir_);
  std::string name = ".";
  name += job.filename().string();
  name += suffix;
  return (job.parent_path() / name).string();
}
std::string JobPaths::StagingPath(const std::string& unique) const {
  return BesideJob(".preparing." + unique);
}
std::string JobPaths::CoordinationDir(const std::string& key) const {
  return BesideJob(".dlc-coordination") + "/" + key;
}

const char* ShardStateName(ShardState state) {
  switch (state) {
    case ShardState::kPending:
      return "pending";
    case ShardState::kRunning:
      return "running";
    case ShardState::kStale:
      return "stale";
    case ShardState::kDone:
      return "done";
    case ShardState::kFailed:
      return "failed";
  }
  return "unknown";
}

void CheckShardIdIsName(const std::string& shard_id) {
  if (shard_id.empty() || shard_id.find('/') != std::string::npos ||
      shard_id.find("..") != std::string::npos) {
    throw Error("invalid shard id '" + shard_id + "'",
                "a shard id is a name like part-00003-of-00016, never a path");
  }
}

JobDir JobDir::Open(const std::string& dir, io::Disk& disk) {
  JobDir job(dir, disk);
  const std::string manifest_path = job.ManifestPath();
  const std::optional<io::FileStat> st = disk.Stat(manifest_path);
  if (!st || st->is_directory) {
    throw Error(dir, 0, "not a prepared job directory (no manifest.json)",
                "run 'djshard prepare' first, or check --job-dir");
  }
  job.manifest_ = Manifest::FromJson(disk.Read(manifest_path), manifest_path);
  return job;
}

const ShardEntry* JobDir::FindShard(const std::string& shard_id) const {
  for (const ShardEntry& s : manifest_.shards) {
    if (s.id == shard_id) return &s;
  }
  return nullptr;
}

int64_t JobDir::FilesystemNowNanos() const {
  return io::FilesystemNowNanos(
      ClockProbePath(HostName() + "." + std::to_string(::getpid()) + "." + RandomHex(8)));
}

namespace {

// Names in a directory that end in `suffix`, without it, and without
// stat-ing each entry (one getdents pass).
std::set<std::string> ListNames(const std::string& dir, const std::string& suffix) {
  std::set<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > suffix.size() && name != "." && name != ".." &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      names.insert(name.substr(0, name.size() - suffix.size()));
    }
  }
  ::closedir(d);
  return names;
}

}  // namespace

ShardScan JobDir::Scan() const {
  ShardScan scan;
  scan.done = ListNames(DoneDir(), ".json");
  scan.failed = ListNames(FailedDir(), ".json");
  scan.locked = ListNames(LocksDir(), ".lock");
  scan.attempted = ListNames(InJob("attempts"), "");
  return scan;
}

std::vector<ShardStatus> JobDir::Statuses() const { return StatusesOf(manifest_.shards); }

std::vector<ShardStatus> JobDir::StatusesOf(const std::vector<ShardEntry>& entries) const {
  const ShardScan scan = Scan();
  std::vector<ShardStatus> out;
  std::optional<int64_t> fs_now;
  const double lease = manifest_.policy.lease_secs;
  for (const ShardEntry& shard : entries) {
    ShardStatus s;
    s.shard = &shard;
    if (scan.done.count(shard.id)) {
      s.state = ShardState::kDone;
      try {
        const DoneRecord done =
            DoneRecord::FromJson(disk_->Read(DonePath(shard.id)), DonePath(shard.id));
        s.owner = done.hostname;
        s.pid = done.pid;
      } catch (const Error& e) {
        s.error = e.message();
      }
    } else if (scan.failed.count(shard.id)) {
      s.state = ShardState::kFailed;
      try {
        s.error = FailedRecord::FromJson(disk_->Read(FailedPath(shard.id)), FailedPath(shard.id))
                      .last_error;
      } catch (const Error& e) {
        s.error = "unreadable failed record: " + e.message();
      }
    }
    if (scan.locked.count(shard.id)) {
      const std::string lock_path = LockPath(shard.id);
      std::optional<io::FileStat> st;
      try {
        st = disk_->Stat(lock_path);
      } catch (const Error&) {
        // Unreadable right now: report the shard by its records alone.
      }
      if (st) {
        if (!fs_now) fs_now = FilesystemNowNanos();
        LockInfo lock;
        lock.age_secs = static_cast<double>(*fs_now - st->mtime_ns) / 1e9;
        try {
          const LockRecord r = LockRecord::FromJson(disk_->Read(lock_path), lock_path);
          lock.hostname = r.hostname;
          lock.pid = r.pid;
          lock.token = r.token;
        } catch (const Error&) {
          // A lock being written right now; its age still tells whether it is live.
        }
        if (s.state == ShardState::kPending) {
          s.state = lock.age_secs > lease ? ShardState::kStale : ShardState::kRunning;
          s.owner = lock.hostname;
          s.pid = lock.pid;
        }
        s.lock = lock;
      }
    }
    if (s.state == ShardState::kPending && scan.attempted.count(shard.id)) {
      if (!fs_now) fs_now = FilesystemNowNanos();
      s.retry_in_secs = ClaimStore(*this).RetryBackoffLeft(
          shard.id, manifest_.policy.retry_backoff_secs, *fs_now);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::string ShardCheckpointsRoot(const JobDir& job) {
  std::optional<std::string> dir;
  try {
    const recipe::Recipe recipe =
        recipe::LoadRecipe(job.InJob(job.manifest().recipe_snapshot_path));
    dir = job::ParseJobSettings(recipe.root, recipe.path).checkpoint_dir;
  } catch (const Error&) {
    // A recipe the workers refuse has no checkpoints elsewhere.
  }
  return JobPaths::CheckpointsRoot(job.dir(), job.manifest().job_id, dir);
}

}  // namespace djshard::store
