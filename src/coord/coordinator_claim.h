#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/lease.h"

namespace djshard::coord {

// Who holds (or held) a coordinator claim, as its lock file says.
struct CoordinatorHolder {
  std::string hostname = "?";
  int64_t pid = 0;
  std::string token;
  double lease_secs = 0;  // the holder's lease; 0 when the lock does not say
};

// The lock of one dlc phase ("prepare", "finalize") in the coordination
// directory: <dir>/<phase>.lock, a leased claim like a shard's (SPEC "dlc" 7).
struct CoordinatorLockPaths {
  std::string dir, phase;
  std::string Lock() const { return dir + "/" + phase + ".lock"; }
  std::string StaleLocksDir() const { return dir + "/stale_locks"; }
};

// The coordinator claim this instance holds for one phase: while it lives a
// heartbeat thread refreshes the lock every `heartbeat_secs`. Not movable
// (the heartbeat thread refers to it); destruction stops the heartbeat and
// leaves the lock where it is, to go stale.
class CoordinatorClaim {
 public:
  CoordinatorClaim(const CoordinatorClaim&) = delete;
  CoordinatorClaim& operator=(const CoordinatorClaim&) = delete;
  ~CoordinatorClaim();

  // Creates the phase's lock with O_EXCL (fsynced: a waiter must never see a
  // coordinator vanish) and starts its heartbeat. nullptr when another
  // instance holds it.
  static std::unique_ptr<CoordinatorClaim> TryClaim(io::Disk& disk,
                                                    const CoordinatorLockPaths& paths,
                                                    double lease_secs, double heartbeat_secs);

  // Whether the claim is still ours (checked under the flock now).
  bool Owned() const;

  // Publishes `content` at `path` (written and fsynced first) by link() under
  // the fence, first writer wins, and removes the lock in the same fenced
  // section. False when the claim was lost: nothing is published.
  bool PublishAndRelease(const std::string& path, std::string_view content);

  // Removes the lock under the fence (a phase undone by `djshard stop
  // --force`). False when it was no longer ours.
  bool Release();

  // A Disk that forwards to the claim's Disk but renames only while the
  // claim is owned (WriteAtomic too, through a staged file and a fenced
  // rename): what a phase publishes through it is fenced like a shard's done
  // record. A rename after the claim was lost throws Error, renaming nothing.
  io::Disk& fenced_disk();

  const std::string& token() const { return lock_.token(); }

 private:
  class FencedDisk;
  CoordinatorClaim(io::Disk& disk, store::LeasedLock lock);

  io::Disk& disk_;
  store::LeasedLock lock_;
  std::atomic<bool> lost_{false};  // set by the heartbeat thread
  std::unique_ptr<FencedDisk> fenced_;
  std::unique_ptr<store::HeartbeatThread> heartbeat_;  // last: stops first
};

// What a waiter sees of a phase's coordinator.
struct CoordinatorLook {
  enum State { kNone, kLive, kStale } state = kNone;
  double age_secs = 0;  // of the lock, by the filesystem's clock
  CoordinatorHolder holder;
};

// Looks at the phase's lock: none, live (younger than the holder's lease, or
// `default_lease_secs` when the lock does not say) or stale. Throws Error
// when the filesystem fails.
CoordinatorLook LookAtCoordinator(io::Disk& disk, const CoordinatorLockPaths& paths,
                                  double default_lease_secs);

// Moves a stale lock of the phase into <dir>/stale_locks/ under the shard
// takeover protocol (flock, inode and age re-checked). The holder it took
// over from, or nullopt when the lock was fresh, busy or gone.
std::optional<CoordinatorHolder> TakeOverCoordinator(io::Disk& disk,
                                                     const CoordinatorLockPaths& paths,
                                                     double lease_secs);

// The holders of every lock of the phase taken over so far (their tokens name
// what they left behind).
std::vector<CoordinatorHolder> StaleCoordinators(const CoordinatorLockPaths& paths);

}  // namespace djshard::coord
