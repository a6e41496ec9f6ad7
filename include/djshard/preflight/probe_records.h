#pragma once

// The probe records an elastic job's workers share (SPEC-checkpoints §10.5):
// <job_dir>/probe/<cache_key>.json, published by one prober per key. A worker
// that needs a key either finds its record, or creates probe/<key>.lock with
// O_EXCL and probes, or waits while another worker holds that lock.
//
// - The holder rewrites its lock every heartbeat_secs (the filesystem stamps
//   the mtime), as a worker refreshes its claim; a lock older than lease_secs
//   by the filesystem's clock is stale and is removed by the first worker that
//   looks (under flock, inode re-checked), which then probes itself.
// - A probe that fails publishes probe/<key>.failed.json (replacing an older
//   one). A worker that finds one younger than lease_secs stops with it, so
//   the workers started with the prober learn its failure without probing
//   again; an older one is history, and the next worker probes again (an
//   out-of-memory or a loaded node does not stop the job for ever).
// - Results are published by link(): first writer wins, a record is never
//   replaced. A prober whose stale lock was removed may still publish; the
//   second prober then keeps the first record (a duplicate probe, no conflict).
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "djshard/io/disk.h"

namespace djshard::preflight {

class ProbeRecords {
 public:
  // `dir` is the job's probe/ directory (created when missing).
  ProbeRecords(std::string dir, double lease_secs, double heartbeat_secs, io::Disk& disk);
  ProbeRecords(const ProbeRecords&) = delete;
  ProbeRecords& operator=(const ProbeRecords&) = delete;
  // Removes the locks still held (a probe that did not finish).
  ~ProbeRecords();

  enum class State {
    kRecord,  // `record` holds the published result
    kFailed,  // `record` holds a failure younger than the lease
    kMine,    // this process now holds the key's lock: probe it
    kBusy,    // another process holds the lock: look again later
  };
  struct Look {
    State state = State::kBusy;
    nlohmann::json record;
    std::string holder;  // kBusy: "host:pid" of the lock's holder, when readable
  };
  // One look at `key`, taking its lock when nobody has a record, a fresh
  // failure or a live lock. A stale lock is removed and taken.
  Look TryKey(const std::string& key);

  // Rewrites the held locks when heartbeat_secs have passed since the last time.
  void Refresh();

  // Publishes the result of a held key and removes its lock. Returns the
  // record that stands: `entry`, or the one another prober published first.
  nlohmann::json Publish(const std::string& key, const nlohmann::json& entry);

  // Publishes a failure of a held key (error_type, error_message, op_name...)
  // and removes its lock.
  void PublishFailure(const std::string& key, const nlohmann::json& failure);

  // probe/<key>.json, probe/<key>.failed.json, probe/<key>.lock.
  std::string RecordPath(const std::string& key) const { return dir_ + "/" + key + ".json"; }
  std::string FailurePath(const std::string& key) const {
    return dir_ + "/" + key + ".failed.json";
  }
  std::string LockPath(const std::string& key) const { return dir_ + "/" + key + ".lock"; }

  // Whether the key's lock exists and is older than the lease by the
  // filesystem's clock: its holder stopped refreshing it (`djshard gc`).
  bool LockIsStale(const std::string& key);
  // Removes the key's lock when it is stale (under flock, inode re-checked,
  // as a worker that looks at the key does); true when this call unlinked it.
  // Its holder's work directory is left to the caller (`djshard gc` keeps
  // the logs that records name).
  bool RemoveStaleLock(const std::string& key);

 private:
  struct Held {
    int fd = -1;
    io::FileStat file;
    std::string content;
  };
  // The shared filesystem's clock: the mtime of a file created now.
  int64_t FilesystemNowNanos();
  // Age of `path` by that clock; nullopt when absent.
  std::optional<double> AgeSecs(const std::string& path);
  // The parsed record at `path` when it is a JSON object, else null.
  nlohmann::json ReadJson(const std::string& path);
  // Whether `key` has a record or a fresh failure; fills `look`.
  bool Settled(const std::string& key, Look* look);
  // Removes the key's lock when it is still ours, and closes it.
  void Unlock(const std::string& key);
  // Removes a lock older than the lease; true when it was removed (or is
  // gone); `unlinked` tells whether this call removed it. With
  // `dead_work_dir`, then removes its holder's work directory
  // (RemoveDeadWorkDir).
  bool RemoveStale(const std::string& key, bool* unlinked = nullptr, bool dead_work_dir = true);
  // Removes the work directory of a stale lock's holder when it ran on this
  // host and is gone.
  void RemoveDeadWorkDir(const nlohmann::json& holder);

  std::string dir_;
  double lease_secs_, heartbeat_secs_;
  io::Disk& disk_;
  std::map<std::string, Held> held_;
  double last_refresh_ = 0;  // monotonic seconds
};

}  // namespace djshard::preflight
