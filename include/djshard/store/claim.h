#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"

namespace djshard::store {

// A claim this process holds: state/locks/<shard>.lock, created with O_EXCL
// and kept open, so that ownership can be re-verified under flock(2) at any
// time (same inode at the lock path, same token inside).
class Claim {
 public:
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  Claim(Claim&& other) noexcept;
  Claim& operator=(Claim&& other) noexcept;
  ~Claim();

  const std::string& shard_id() const { return shard_id_; }
  const std::string& token() const { return token_; }
  int64_t attempt_number() const { return attempt_number_; }
  // attempts/<shard>/<NNNN>-<token>, relative to the job dir and absolute.
  const std::string& attempt_rel() const { return attempt_rel_; }
  const std::string& attempt_dir() const { return attempt_dir_; }
  const std::string& claimed_at() const { return claimed_at_; }
  // The lock's JSON line (claim fields).
  const std::string& lock_json() const { return lock_json_; }

 private:
  friend class ClaimStore;
  Claim() = default;

  std::string shard_id_, token_, attempt_rel_, attempt_dir_, claimed_at_, lock_path_, lock_json_;
  int64_t attempt_number_ = 0;
  int fd_ = -1;  // our lock file, open for the claim's lifetime
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

// Claims, heartbeats, takeovers and fenced publishing on a job's shared
// directory (SPEC "Claims, leases, attempts"). Every check of ownership runs
// under flock on the lock and compares inode and token, so a worker whose
// lease was taken over can never publish.
class ClaimStore {
 public:
  ClaimStore(const JobDir& job, io::Disk& disk = io::RealDisk());

  // Creates the lock of `shard_id` with O_EXCL. nullopt when it exists, or when
  // the shard already has a done or failed record (the new lock is removed).
  std::optional<Claim> TryClaim(const std::string& shard_id);

  // Age in seconds of the shard's lock by the shared filesystem's clock
  // (`fs_now_ns` from JobDir::FilesystemNowNanos); nullopt when there is none.
  std::optional<double> LockAge(const std::string& shard_id, int64_t fs_now_ns) const;

  // Takes over a lock older than the lease: under flock (busy: not stale),
  // with the inode and the age re-checked, marks the old attempt "stale" and
  // moves the lock into state/stale_locks/. True when the lock was moved.
  bool TakeOverStale(const std::string& shard_id, double lease_secs);

  // Removes a lock left beside the shard's done or failed record by an owner
  // that died between publishing the record and removing its lock (or a
  // claimant that died before handing back a claim made too late). Works
  // under flock, which a live owner holds from its ownership check to its
  // unlink, so only a dead owner's lock goes. A "running" attempt of that lock
  // becomes "done" when the done record carries its token, "lost" otherwise.
  // True when a lock was removed.
  bool ClearFinishedLock(const std::string& shard_id);

  // Refreshes the lock's mtime (by the filesystem's clock) after verifying
  // ownership. False when lost.
  bool Heartbeat(const Claim& claim);

  // Verifies ownership and, still under the flock, publishes `done_json` as
  // state/done/<shard>.json by link() (first writer wins) and removes the lock.
  enum class PublishResult { kPublished, kLost, kAlreadyDone };
  PublishResult PublishDone(const Claim& claim, const std::string& done_json);

  // Verifies ownership and, under the flock, publishes `failed_json` as
  // state/failed/<shard>.json (when not empty) and removes the lock. False when lost.
  bool Release(const Claim& claim, const std::string& failed_json = "");

 private:
  // Runs `fn` while holding flock on the claim's lock and owning it; false when lost.
  template <typename Fn>
  bool WithOwnership(const Claim& claim, Fn&& fn);

  const JobDir& job_;
  io::Disk& disk_;
};

// Updates the "status" (and optional "error") of an attempt.json, keeping the
// other fields. A status "stale" set by a takeover is never replaced.
void SetAttemptStatus(const std::string& attempt_dir, const std::string& status,
                      const std::string& error = "", io::Disk& disk = io::RealDisk());

// Number of attempts of a shard whose status is "failed" or "stale".
int64_t CountFailures(const JobDir& job, const std::string& shard_id);

}  // namespace djshard::store
