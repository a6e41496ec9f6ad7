#include "djshard/store/claim.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"

namespace djshard::store {

namespace fs = std::filesystem;

namespace {

// The attempt directory named by a lock, or "" when it is missing or could
// leave the job directory.
std::string AttemptDirOf(const JobDir& job, const LockRecord& lock) {
  if (lock.attempt_dir.empty() || lock.attempt_dir.find("..") != std::string::npos) return "";
  return job.InJob(lock.attempt_dir);
}

// The lock record in `fd`, or an empty one for a lock cut short by a crash.
LockRecord ReadLock(int fd, const std::string& path) {
  try {
    return LockRecord::FromJson(io::ReadFromStart(fd, path), path);
  } catch (const Error&) {
    return LockRecord{};
  }
}

}  // namespace

std::optional<Claim> ClaimStore::TryClaim(const std::string& shard_id) {
  // The attempt number follows the attempts already there; two claimants that
  // compute the same number cannot both win the O_EXCL create below.
  int64_t attempts = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job_.AttemptsDir(shard_id), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    ++attempts;
  }
  Claim claim;
  LockRecord& r = claim.record_;
  r.shard_id = shard_id;
  r.token = RandomHex(32);
  r.hostname = HostName();
  r.pid = ::getpid();
  r.claimed_at = FormatUtcIso8601(NowNanos());
  r.attempt_number = attempts + 1;
  r.attempt_dir = JobPaths::AttemptRelDir(shard_id, r.attempt_number, r.token);
  claim.attempt_dir_ = job_.InJob(r.attempt_dir);
  // A claim need not survive a crash of this node (fencing re-checks it before
  // anything is published), so its create is not fsynced.
  std::optional<LeasedLock> lock = LeasedLock::Create(
      disk_, job_.LockPath(shard_id), r.ToJson() + "\n", r.token, /*durable=*/false);
  if (!lock) return std::nullopt;
  claim.lock_ = std::move(*lock);
  // The shard may have been finished between the caller's scan and this create:
  // its owner links the done (or failed) record before it unlinks the lock, so a
  // record is visible now if it ever will be for that owner. Hand the lock back.
  if (disk_.Stat(job_.DonePath(shard_id)) || disk_.Stat(job_.FailedPath(shard_id))) {
    claim.lock_.AsOwner([&] { disk_.Unlink(claim.lock_.path()); });
    return std::nullopt;
  }
  return claim;
}

bool ClaimStore::ClearFinishedLock(const std::string& shard_id) {
  const std::string path = job_.LockPath(shard_id);
  // Everything is read, and the attempt's new record staged, before the
  // flock: the fenced section only re-checks (the lock's inode, the shard's
  // record, the attempt record the staged one was made from) and renames the
  // staged record into place and unlinks the lock. A worker frozen before the
  // fence holds no flock; one frozen inside it holds it for a rename.
  std::optional<StagedAttempt> staged;
  std::string attempt_dir;
  bool done = false;
  const bool cleared = WithIdleLock(
      disk_, path,
      [&](int fd, const io::FileStat&) {
        // The lock is opened before the records are looked at: a lock made
        // after a failed record was moved away by `retry` then never counts
        // as leftover.
        done = disk_.Stat(job_.DonePath(shard_id)).has_value();
        if (!done && !disk_.Stat(job_.FailedPath(shard_id))) return false;
        const LockRecord lock = ReadLock(fd, path);
        attempt_dir = AttemptDirOf(job_, lock);
        if (attempt_dir.empty()) return true;
        std::optional<AttemptStatus> status;
        try {
          const std::string record = JobPaths::AttemptRecordPath(attempt_dir);
          status = AttemptRecord::FromJson(disk_.Read(record), record).status;
        } catch (const Error&) {
          // No record: the claimant died before its attempt started.
        }
        if (status != AttemptStatus::kRunning) return true;
        std::string published_by;
        if (done) {
          try {
            published_by =
                DoneRecord::FromJson(disk_.Read(job_.DonePath(shard_id)), job_.DonePath(shard_id))
                    .token;
          } catch (const Error&) {
            // Unreadable record: the attempt is not known to have published.
          }
        }
        if (!lock.token.empty() && published_by == lock.token) {
          staged = StageAttemptStatus(attempt_dir, AttemptStatus::kDone, "");
        } else {
          staged = StageAttemptStatus(attempt_dir, AttemptStatus::kLost,
                                      "the shard was finished by another attempt");
        }
        CrashPoint("clear_lock_staged");
        return true;
      },
      [&](int, const io::FileStat&) {
        if (!disk_.Stat(done ? job_.DonePath(shard_id) : job_.FailedPath(shard_id))) return false;
        if (staged && !staged->Unchanged(disk_)) return false;
        if (staged) {
          disk_.Rename(staged->path, staged->record);
          staged.reset();
        }
        disk_.Unlink(path);
        return true;
      });
  if (staged) disk_.Unlink(staged->path);  // not used: the lock or the record changed
  if (cleared) disk_.SyncDir(job_.LocksDir());
  return cleared;
}

std::optional<double> ClaimStore::LockAge(const std::string& shard_id, int64_t fs_now_ns) const {
  const std::optional<io::FileStat> st = disk_.Stat(job_.LockPath(shard_id));
  if (!st) return std::nullopt;
  return static_cast<double>(fs_now_ns - st->mtime_ns) / 1e9;
}

bool ClaimStore::TakeOverStale(const std::string& shard_id, double lease_secs) {
  const std::string path = job_.LockPath(shard_id);
  // SPEC-elastic-sharding: the old attempt is marked "stale" before the lock
  // disappears, so its owner, if it is still alive, finds "stale" when it
  // looks. The mark is staged before the flock: the attempt's new record is
  // written and fsynced (with its directory) beside attempt.json. Under the
  // flock, once the inode, the age and the attempt record it was made from
  // are re-checked, one rename puts it in place and a second moves the lock
  // into state/stale_locks/; both directories are fsynced after the flock.
  // Crash consistency: a crash before the first rename leaves a staged file
  // in the attempt's directory and the stale lock where it was (the next
  // worker takes it over); between the renames, an attempt marked stale whose
  // lock is still stale (the same). The renames are issued in that order, and
  // a shared filesystem applies metadata operations in order (NFS commits
  // each rename before it answers; a journaling local filesystem commits its
  // journal in order), so no crash leaves the lock moved and the mark lost;
  // a filesystem that broke this would at worst leave the old attempt
  // "running" without a lock, uncounted as a failure, never a wrong output.
  // A taker frozen anywhere holds the flock for at most these renames, so
  // another worker can take the shard over meanwhile; this one then finds
  // another lock (or none) at the path, or an attempt record that changed,
  // and gives up, removing its staged file.
  std::optional<StagedAttempt> staged;
  std::string attempt_dir;
  bool marked = false;  // the stale mark was renamed into place
  StaleTakeover how;
  how.lease_secs = lease_secs;
  how.fs_now_ns = [&] { return job_.FilesystemNowNanos(); };
  how.stale_path =
      job_.StaleLockPath(shard_id, std::to_string(NowNanos() / 1000000000) + "." + RandomHex(8));
  how.prepare = [&](const StaleLock& stale) {
    LockRecord lock;
    try {
      lock = LockRecord::FromJson(stale.content, path);
    } catch (const Error&) {
      // A lock cut short by a crash names no attempt.
    }
    attempt_dir = AttemptDirOf(job_, lock);
    if (!attempt_dir.empty()) {
      staged = StageAttemptStatus(attempt_dir, AttemptStatus::kStale,
                                  "lease expired after " +
                                      std::to_string(static_cast<int64_t>(stale.age_secs)) +
                                      " s without heartbeat");
    }
    CrashPoint("takeover_staged");
    return true;
  };
  how.fenced = [&] {
    if (staged && !staged->Unchanged(disk_)) return false;
    if (staged) {
      disk_.Rename(staged->path, staged->record);
      staged.reset();
      marked = true;
    }
    return true;
  };
  const bool taken = TakeOverStaleLock(disk_, path, how).has_value();
  if (staged) disk_.Unlink(staged->path);  // not used: the lock or the record changed
  if (taken && marked) disk_.SyncDir(attempt_dir);
  return taken;
}

bool ClaimStore::Heartbeat(const Claim& claim) { return claim.lock_.Heartbeat(); }

namespace {
// Where a record's temporary file goes: the attempt's directory when it
// exists, else beside the record.
std::string StagedRecordPath(io::Disk& disk, const Claim& claim, const std::string& record) {
  const std::optional<io::FileStat> st = disk.Stat(claim.attempt_dir());
  const std::string name = fs::path(record).filename().string() + ".staged." + claim.token();
  return (st && st->is_directory ? claim.attempt_dir() : fs::path(record).parent_path().string()) +
         "/" + name;
}
}  // namespace

template <typename Fn>
std::optional<bool> ClaimStore::PublishFenced(const Claim& claim, const std::string& record,
                                              const std::string& content, Fn&& then) {
  // The record is written and fsynced before the fenced section, which then
  // holds only the ownership check, one link() and `then` (the lock's
  // unlink): a process frozen while it writes holds no flock, so the others
  // can take the shard over after the lease. A crash before the link leaves
  // the staged file in the attempt's directory, not among the records.
  const std::string staged = StagedRecordPath(disk_, claim, record);
  disk_.WriteAtomic(staged, content);
  CrashPoint("record_staged");
  bool linked = false;
  bool owned = false;
  try {
    owned = claim.lock_.AsOwner([&] {
      linked = disk_.Link(staged, record);
      then();
    });
  } catch (...) {
    disk_.Unlink(staged);
    throw;
  }
  disk_.Unlink(staged);
  if (!owned) return std::nullopt;
  return linked;
}

ClaimStore::PublishResult ClaimStore::PublishDone(const Claim& claim, const DoneRecord& done) {
  const std::optional<bool> linked =
      PublishFenced(claim, job_.DonePath(claim.shard_id()), done.ToJson(), [&] {
        CrashPoint("after_link");
        // A lock that comes back after a crash is harmless: the done record wins.
        disk_.Unlink(claim.lock_.path());
      });
  if (!linked) return PublishResult::kLost;
  if (!*linked) return PublishResult::kAlreadyDone;
  // Durable after the fence: a crash of the filesystem that keeps the lock's
  // unlink but loses the link leaves the shard pending, to be computed again
  // with the same bytes.
  disk_.SyncDir(job_.DoneDir());
  return PublishResult::kPublished;
}

void ClaimStore::RecordPartitions(const std::string& attempt_dir, const nlohmann::json& partitions,
                                  const nlohmann::json& resumed_from) {
  const std::string path = JobPaths::AttemptRecordPath(attempt_dir);
  AttemptRecord record = AttemptRecord::FromJson(disk_.Read(path), path);
  record.partitions = partitions;
  record.resumed_from = resumed_from;
  disk_.WriteReplace(path, record.ToJson());
}

bool ClaimStore::AsOwner(const Claim& claim, const std::function<void()>& fn) {
  return claim.lock_.AsOwner(fn);
}

bool ClaimStore::Release(const Claim& claim, const std::optional<FailedRecord>& failed) {
  bool owned = false;
  if (failed) {
    // A failed record never replaces one: a shard has at most one.
    owned = PublishFenced(claim, job_.FailedPath(claim.shard_id()), failed->ToJson(), [&] {
              disk_.Unlink(claim.lock_.path());
            }).has_value();
    if (owned) disk_.SyncDir(job_.FailedDir());
  } else {
    owned = claim.lock_.AsOwner([&] { disk_.Unlink(claim.lock_.path()); });
  }
  if (owned) disk_.SyncDir(job_.LocksDir());
  return owned;
}

void ClaimStore::StartAttempt(const Claim& claim, const std::string& input_path,
                              const nlohmann::json& plan) {
  disk_.MakeDirs(claim.attempt_dir());
  AttemptRecord record;
  record.claim = claim.record();
  record.status = AttemptStatus::kRunning;
  record.input_path = input_path;
  record.started_at = FormatUtcIso8601(NowNanos());
  record.plan = plan;
  disk_.WriteReplace(JobPaths::AttemptRecordPath(claim.attempt_dir()), record.ToJson());
}

std::optional<std::string> ClaimStore::AttemptWithStatus(const std::string& attempt_dir,
                                                         AttemptStatus status,
                                                         const std::string& error,
                                                         std::optional<io::FileStat>* read) {
  const std::string path = JobPaths::AttemptRecordPath(attempt_dir);
  AttemptRecord record;
  try {
    const std::optional<io::FileStat> st = disk_.Stat(path);
    record = AttemptRecord::FromJson(disk_.Read(path), path);
    if (read != nullptr) *read = st;
  } catch (const Error&) {
    // No readable record (a crash right after the claim): write a new one, if
    // the attempt's directory exists at all.
    const std::optional<io::FileStat> dir = disk_.Stat(attempt_dir);
    if (!dir || !dir->is_directory) return std::nullopt;
    if (read != nullptr) *read = disk_.Stat(path);
  }
  if (record.status == AttemptStatus::kStale && status != AttemptStatus::kStale) {
    return std::nullopt;
  }
  record.status = status;
  if (!error.empty()) record.error = error;
  record.finished_at = FormatUtcIso8601(NowNanos());
  return record.ToJson();
}

void ClaimStore::SetAttemptStatus(const std::string& attempt_dir, AttemptStatus status,
                                  const std::string& error) {
  const std::optional<std::string> content = AttemptWithStatus(attempt_dir, status, error, nullptr);
  if (!content) return;
  const std::string path = JobPaths::AttemptRecordPath(attempt_dir);
  // Failures and takeovers are durable (they count toward retries); the rest
  // is a record for people.
  if (CountsAsFailure(status)) {
    disk_.WriteAtomic(path, *content);
  } else {
    disk_.WriteReplace(path, *content);
  }
}

std::optional<ClaimStore::StagedAttempt> ClaimStore::StageAttemptStatus(
    const std::string& attempt_dir, AttemptStatus status, const std::string& error) {
  StagedAttempt staged;
  const std::optional<std::string> content =
      AttemptWithStatus(attempt_dir, status, error, &staged.read);
  if (!content) return std::nullopt;
  staged.record = JobPaths::AttemptRecordPath(attempt_dir);
  staged.path = staged.record + ".staged." + RandomHex(8);
  // Written whole (and, for a status that counts as a failure, fsynced with
  // its directory) before any rename makes it the attempt's record.
  if (CountsAsFailure(status)) {
    disk_.WriteAtomic(staged.path, *content);
  } else {
    disk_.WriteReplace(staged.path, *content);
  }
  return staged;
}

bool ClaimStore::StagedAttempt::Unchanged(io::Disk& disk) const {
  const std::optional<io::FileStat> now = disk.Stat(record);
  if (!now || !read) return !now && !read;
  return now->SameFile(*read) && now->mtime_ns == read->mtime_ns && now->size == read->size;
}

int64_t ClaimStore::CountFailures(const std::string& shard_id) const {
  int64_t failures = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job_.AttemptsDir(shard_id), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string path = JobPaths::AttemptRecordPath(it->path().string());
    try {
      failures += CountsAsFailure(AttemptRecord::FromJson(disk_.Read(path), path).status);
    } catch (const Error&) {
      // An attempt whose record never got written (a crash right after the
      // claim) has not run: it is not a failure.
    }
  }
  return failures;
}

double ClaimStore::RetryBackoffLeft(const std::string& shard_id, double backoff_secs,
                                    int64_t fs_now_ns) const {
  if (backoff_secs <= 0) return 0;
  int64_t failed = 0, last_ns = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job_.AttemptsDir(shard_id), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string path = JobPaths::AttemptRecordPath(it->path().string());
    try {
      if (AttemptRecord::FromJson(disk_.Read(path), path).status != AttemptStatus::kFailed)
        continue;
      // The record was last written when the attempt failed, and its mtime
      // comes from the filesystem's clock, like the lease's.
      const std::optional<io::FileStat> st = disk_.Stat(path);
      ++failed;
      if (st) last_ns = std::max(last_ns, st->mtime_ns);
    } catch (const Error&) {
      // No readable record: not a failure.
    }
  }
  if (failed == 0) return 0;
  const double wait =
      std::min(kMaxRetryBackoffSecs,
               backoff_secs * std::ldexp(1.0, static_cast<int>(std::min<int64_t>(failed - 1, 30))));
  const double left = wait - static_cast<double>(fs_now_ns - last_ns) / 1e9;
  return left > 0 ? left : 0;
}

}  // namespace djshard::store
