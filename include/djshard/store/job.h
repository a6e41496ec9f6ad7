#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "djshard/store/manifest.h"

namespace djshard::store {

// A shard's state as every node sees it (SPEC "status").
enum class ShardState { kPending, kRunning, kStale, kDone, kFailed };
const char* ShardStateName(ShardState state);

// state/done/<shard>.json, published once by the attempt that finished the shard.
struct DoneRecord {
  std::string shard_id;
  std::string hostname;
  int64_t pid = 0;
  std::string token;
  int64_t attempt_number = 0;
  std::string output_path;  // relative to the job dir
  uint64_t rows = 0;
  uint64_t size_bytes = 0;
  std::string sha256;
  std::string completed_at;

  static DoneRecord FromJson(const std::string& text, const std::string& path);
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
  std::string error;  // last_error of a failed record
};

// A published job directory: its manifest and the paths of its state files.
class JobDir {
 public:
  // Opens `dir` and reads its manifest. Throws Error when it is not a job dir.
  static JobDir Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const Manifest& manifest() const { return manifest_; }

  std::string LockPath(const std::string& shard_id) const;
  std::string DonePath(const std::string& shard_id) const;
  std::string FailedPath(const std::string& shard_id) const;
  std::string AttemptsDir(const std::string& shard_id) const;
  std::string StateDir() const { return dir_ + "/state"; }

  // nullptr when the manifest has no such shard.
  const ShardEntry* FindShard(const std::string& shard_id) const;

  // Now, in nanoseconds, by the clock of the filesystem that holds the job:
  // the mtime of a probe file created in state/. Falls back to the local clock
  // when the directory is read-only.
  int64_t FilesystemNowNanos() const;

  // The state of every shard, in manifest order. Lock ages use one probe.
  std::vector<ShardStatus> Statuses() const;

 private:
  std::string dir_;
  Manifest manifest_;
};

// Rejects shard ids that could name a path ('/', "..", empty).
void CheckShardIdIsName(const std::string& shard_id);

}  // namespace djshard::store
