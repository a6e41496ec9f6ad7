#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "djshard/io/disk.h"
#include "djshard/store/job.h"
#include "djshard/store/lease.h"
#include "djshard/store/manifest.h"
#include "djshard/store/records.h"

namespace djshard::store {

// A claim this process holds: state/locks/<shard>.lock, a LeasedLock (created
// with O_EXCL and kept open, so that ownership can be re-verified under
// flock(2) at any time). Movable, not copyable; destruction does not release
// the claim.
class Claim {
 public:
  Claim(const Claim&) = delete;
  Claim& operator=(const Claim&) = delete;
  Claim(Claim&& other) noexcept = default;
  Claim& operator=(Claim&& other) noexcept = default;
  ~Claim() = default;

  const LockRecord& record() const { return record_; }
  const std::string& shard_id() const { return record_.shard_id; }
  const std::string& token() const { return record_.token; }
  int64_t attempt_number() const { return record_.attempt_number; }
  // attempts/<shard>/<NNNN>-<token>, relative to the job dir and absolute.
  const std::string& attempt_rel() const { return record_.attempt_dir; }
  const std::string& attempt_dir() const { return attempt_dir_; }

 private:
  friend class ClaimStore;
  Claim() = default;

  LockRecord record_;
  std::string attempt_dir_;
  LeasedLock lock_;
};

// Claims, heartbeats, takeovers and fenced publishing on a job's shared
// directory (SPEC "Claims, leases, attempts"). Every check of ownership runs
// under flock on the lock and compares inode and token, so a worker whose
// lease was taken over can never publish. Every filesystem step goes through
// the Disk, so tests can fail any one of them.
//
// Threads: a worker calls TryClaim, TakeOverStale, ClearFinishedLock and
// LockAge from its main thread, Heartbeat from the claim's heartbeat thread,
// and PublishDone and Release from the main thread or the background
// publisher. Calls on different claims may run at once; calls on one claim
// may too, because each one takes the lock file's flock for its whole check
// and change (flock is per open file description, and each claim has one).
// A fenced section holds no write of data and no fsync, only the checks and
// a link, rename or unlink: a process frozen there would keep every other
// worker from taking its shard over.
// The store itself keeps no mutable state.
class ClaimStore {
 public:
  // Uses the job's Disk. `job` must outlive the store.
  explicit ClaimStore(const JobDir& job) : ClaimStore(job, job.disk()) {}
  ClaimStore(const JobDir& job, io::Disk& disk) : job_(job), disk_(disk) {}

  // Creates the lock of `shard_id` with O_EXCL. nullopt when it exists, or when
  // the shard already has a done or failed record (the new lock is removed).
  std::optional<Claim> TryClaim(const std::string& shard_id);

  // Age in seconds of the shard's lock by the shared filesystem's clock
  // (`fs_now_ns` from JobDir::FilesystemNowNanos); nullopt when there is none.
  std::optional<double> LockAge(const std::string& shard_id, int64_t fs_now_ns) const;

  // Takes over a lock older than the lease: stages the old attempt's record
  // marked "stale" (written and fsynced), then under flock (busy: not
  // stale), with the inode, the age and the attempt record re-checked,
  // renames it into place and moves the lock into state/stale_locks/. True
  // when the lock was moved.
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
  // ownership under the flock; the write and its fsync run after the flock is
  // released. False when lost; throws when the lock cannot be written.
  bool Heartbeat(const Claim& claim);

  // Writes `done` to a fsynced staged file, then verifies ownership and,
  // under the flock, publishes it as state/done/<shard>.json by link() (first
  // writer wins) and removes the lock.
  enum class PublishResult { kPublished, kLost, kAlreadyDone };
  PublishResult PublishDone(const Claim& claim, const DoneRecord& done);

  // Runs `fn` under the flock on the claim's lock while the claim is still
  // ours (inode and token verified): a checkpoint commit is linked this way,
  // so an attempt that lost its lease never commits. False (fn not run) when lost.
  bool AsOwner(const Claim& claim, const std::function<void()>& fn);

  // Verifies ownership and, under the flock, publishes `failed` (when given;
  // written and fsynced before) as state/failed/<shard>.json by link() and
  // removes the lock. False when lost.
  bool Release(const Claim& claim, const std::optional<FailedRecord>& failed = std::nullopt);

  // Writes a new attempt record (status running) for a claim just made, with
  // the worker's replica plan (`plan`, null when it has none).
  void StartAttempt(const Claim& claim, const std::string& input_path,
                    const nlohmann::json& plan = nullptr);

  // Sets the status (and error, when not empty) of the attempt in
  // `attempt_dir`, keeping its other fields. A "stale" status set by a
  // takeover is never replaced. Failures and takeovers are written durably.
  void SetAttemptStatus(const std::string& attempt_dir, AttemptStatus status,
                        const std::string& error = "");

  // Records what a checkpointed attempt resumes (attempt.json `partitions`
  // and `resumed_from`), keeping its other fields.
  void RecordPartitions(const std::string& attempt_dir, const nlohmann::json& partitions,
                        const nlohmann::json& resumed_from);

  // Number of attempts of a shard that count as failures (failed or stale).
  int64_t CountFailures(const std::string& shard_id) const;

  // Seconds until a shard with failed attempts may be claimed again: after
  // n failed attempts the wait is backoff_secs * 2^(n-1), at most
  // kMaxRetryBackoffSecs, from the last failure by the shared filesystem's
  // clock (`fs_now_ns`). 0 when it may be claimed now.
  double RetryBackoffLeft(const std::string& shard_id, double backoff_secs,
                          int64_t fs_now_ns) const;

 private:
  // Publishes `content` as `record` first-writer-wins: written and fsynced
  // first, then linked under the claim's fence, where `then` runs too. nullopt
  // when the claim was lost (nothing linked), else whether the link made the
  // record (false: it existed). No write or fsync runs under the flock.
  template <typename Fn>
  std::optional<bool> PublishFenced(const Claim& claim, const std::string& record,
                                    const std::string& content, Fn&& then);

  // An attempt's record with a new status, written beside attempt.json
  // (`path`), to be renamed onto it (`record`) under a fence when the record
  // it was made from (`read`, nullopt: none) is still there.
  struct StagedAttempt {
    std::string path, record;
    std::optional<io::FileStat> read;
    bool Unchanged(io::Disk& disk) const;
  };
  // The attempt's record with `status` (and `error`) as SetAttemptStatus
  // would write it; nullopt when it would write nothing. `read`: the stat of
  // the record it was made from.
  std::optional<std::string> AttemptWithStatus(const std::string& attempt_dir, AttemptStatus status,
                                               const std::string& error,
                                               std::optional<io::FileStat>* read);
  std::optional<StagedAttempt> StageAttemptStatus(const std::string& attempt_dir,
                                                  AttemptStatus status, const std::string& error);

  const JobDir& job_;
  io::Disk& disk_;
};

}  // namespace djshard::store
