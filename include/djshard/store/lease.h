#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "djshard/io/disk.h"

namespace djshard::store {

// A lock file held under a lease (SPEC "Claims, leases, attempts"): created
// with O_EXCL holding a random token, and kept open, so that ownership can be
// re-verified under flock(2) at any time (the same inode at the path, the
// token inside). Shard claims and dlc's coordinator claims are both one.
// Movable, not copyable; closing the descriptor (destruction) does not
// release the lock. The Disk must outlive it.
class LeasedLock {
 public:
  LeasedLock() = default;  // holds nothing: every check of ownership fails
  LeasedLock(const LeasedLock&) = delete;
  LeasedLock& operator=(const LeasedLock&) = delete;
  LeasedLock(LeasedLock&& other) noexcept;
  LeasedLock& operator=(LeasedLock&& other) noexcept;
  ~LeasedLock();

  // Creates `path` with O_EXCL holding `content`, which must contain `token`
  // (with `durable`, fsynced with its directory). nullopt when the path
  // exists, or when between the create and the open the lock was removed or
  // replaced by another process (it never was ours, then).
  static std::optional<LeasedLock> Create(io::Disk& disk, const std::string& path,
                                          const std::string& content, const std::string& token,
                                          bool durable);

  // Runs `fn` under the flock while the path still names our file and the
  // file still holds our token. False (fn not run) when the lock was lost.
  // `fn` should hold no write of data and no fsync: a process frozen inside
  // keeps every other one from taking the lock over.
  bool AsOwner(const std::function<void()>& fn) const;

  // Refreshes the lock's mtime by the filesystem's clock (rewrites its
  // content and fsyncs it) after verifying ownership; the write runs after
  // the flock is released. False when lost; throws when it cannot write.
  bool Heartbeat() const;

  const std::string& path() const { return path_; }
  const std::string& token() const { return token_; }

 private:
  io::Disk* disk_ = nullptr;
  std::string path_, token_, content_;
  int fd_ = -1;  // our lock file, open for the lock's lifetime
  io::FileStat file_;
  // Serializes this process's ownership checks: flock is held per open file
  // description, so two threads would share it and the first to unlock
  // would end the other's fenced section.
  std::shared_ptr<std::mutex> fence_ = std::make_shared<std::mutex>();
};

// Opens the lock at `path` and runs look(fd, stat) without the flock (reads
// and staged writes); then, when look returned true, no other process holds
// the flock and the path still names the opened file, fenced(fd, stat) under
// the flock (checks, renames, unlinks only). False when either returns false
// or the lock is busy or gone.
bool WithIdleLock(io::Disk& disk, const std::string& path,
                  const std::function<bool(int fd, const io::FileStat& lock)>& look,
                  const std::function<bool(int fd, const io::FileStat& lock)>& fenced);

// A stale lock that a takeover moved away.
struct StaleLock {
  std::string content;  // as read before the flock ("" when cut short by a crash)
  double age_secs = 0;  // by the filesystem's clock
};

// How a takeover of the lock at `path` goes (TakeOverStaleLock).
struct StaleTakeover {
  double lease_secs = 0;
  std::function<int64_t()> fs_now_ns;  // the shared filesystem's clock
  std::string stale_path;              // where the lock goes once taken over
  // Optional: runs before the flock once the lock is found stale (reads and
  // staged writes); false gives up.
  std::function<bool(const StaleLock&)> prepare;
  // Optional: runs under the flock, once the lock is re-checked, before it
  // moves (checks and renames only); false gives up.
  std::function<bool()> fenced;
};

// Takes over the lock at `path` when it is older than the lease: under a
// non-blocking flock (busy: not stale), with the inode and the age
// re-checked, renames it to `stale_path` and fsyncs its directory. What it
// moved, or nullopt when the lock is fresh, busy, gone or given up.
std::optional<StaleLock> TakeOverStaleLock(io::Disk& disk, const std::string& path,
                                           const StaleTakeover& how);

// Calls `beat` every `interval` seconds until stopped; sets *lost when it
// returns false or throws, and stops then. It waits with poll(2) on a pipe
// and a relative timeout: Stop() wakes it at once, and a node whose wall
// clock jumps or is off by hours still heartbeats on time.
class HeartbeatThread {
 public:
  HeartbeatThread(std::function<bool()> beat, double interval, std::atomic<bool>* lost);
  ~HeartbeatThread();
  HeartbeatThread(const HeartbeatThread&) = delete;
  HeartbeatThread& operator=(const HeartbeatThread&) = delete;
  // Joins the thread; no beat runs after it returns.
  void Stop();

 private:
  int wake_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace djshard::store
