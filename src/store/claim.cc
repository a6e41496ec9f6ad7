#include "djshard/store/claim.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

// Holds flock(LOCK_EX) on an fd for a scope.
class FlockGuard {
 public:
  FlockGuard(int fd, bool blocking) : fd_(fd) {
    for (;;) {
      if (::flock(fd_, LOCK_EX | (blocking ? 0 : LOCK_NB)) == 0) {
        held_ = true;
        return;
      }
      if (errno != EINTR) return;
    }
  }
  ~FlockGuard() {
    if (held_) ::flock(fd_, LOCK_UN);
  }
  bool held() const { return held_; }

 private:
  int fd_;
  bool held_ = false;
};

// Opens the lock at `path` and calls fn(fd, stat of the lock) under its flock
// when no one else holds the flock and the path still names the opened file.
// Returns what fn returns; false when the lock is gone, busy or replaced.
template <typename Fn>
bool WithIdleLock(const std::string& path, Fn&& fn) {
  struct Fd {
    int fd;
    ~Fd() {
      if (fd >= 0) ::close(fd);
    }
  } lock{::open(path.c_str(), O_RDWR | O_CLOEXEC)};
  if (lock.fd < 0) return false;
  FlockGuard guard(lock.fd, /*blocking=*/false);
  struct stat by_fd {
  }, by_path{};
  if (!guard.held() || ::fstat(lock.fd, &by_fd) != 0 || ::stat(path.c_str(), &by_path) != 0 ||
      by_fd.st_ino != by_path.st_ino || by_fd.st_dev != by_path.st_dev) {
    return false;
  }
  return fn(lock.fd, by_fd);
}

std::string ReadSmall(int fd) {
  std::string out;
  char buf[4096];
  off_t off = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    off += n;
  }
  return out;
}

}  // namespace

Claim::Claim(Claim&& o) noexcept
    : shard_id_(std::move(o.shard_id_)),
      token_(std::move(o.token_)),
      attempt_rel_(std::move(o.attempt_rel_)),
      attempt_dir_(std::move(o.attempt_dir_)),
      claimed_at_(std::move(o.claimed_at_)),
      lock_path_(std::move(o.lock_path_)),
      lock_json_(std::move(o.lock_json_)),
      attempt_number_(o.attempt_number_),
      fd_(o.fd_),
      dev_(o.dev_),
      ino_(o.ino_) {
  o.fd_ = -1;
}

Claim& Claim::operator=(Claim&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    shard_id_ = std::move(o.shard_id_);
    token_ = std::move(o.token_);
    attempt_rel_ = std::move(o.attempt_rel_);
    attempt_dir_ = std::move(o.attempt_dir_);
    claimed_at_ = std::move(o.claimed_at_);
    lock_path_ = std::move(o.lock_path_);
    lock_json_ = std::move(o.lock_json_);
    attempt_number_ = o.attempt_number_;
    fd_ = o.fd_;
    dev_ = o.dev_;
    ino_ = o.ino_;
    o.fd_ = -1;
  }
  return *this;
}

Claim::~Claim() {
  if (fd_ >= 0) ::close(fd_);
}

namespace {
// Where a record's temporary file goes: the attempt's directory when it
// exists, else (empty) beside the record.
std::string AttemptTempDir(const Claim& claim) {
  std::error_code ec;
  return fs::is_directory(claim.attempt_dir(), ec) ? claim.attempt_dir() : std::string();
}
}  // namespace

ClaimStore::ClaimStore(const JobDir& job, io::Disk& disk) : job_(job), disk_(disk) {}

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
  claim.shard_id_ = shard_id;
  claim.token_ = RandomHex(32);
  claim.attempt_number_ = attempts + 1;
  claim.attempt_rel_ =
      "attempts/" + shard_id + "/" + ZeroPad(claim.attempt_number_, 4) + "-" + claim.token_;
  claim.attempt_dir_ = job_.dir() + "/" + claim.attempt_rel_;
  claim.claimed_at_ = FormatUtcIso8601(NowNanos());
  claim.lock_path_ = job_.LockPath(shard_id);
  const json lock = {{"shard_id", shard_id},
                     {"token", claim.token_},
                     {"hostname", HostName()},
                     {"pid", static_cast<int64_t>(::getpid())},
                     {"claimed_at", claim.claimed_at_},
                     {"attempt_number", claim.attempt_number_},
                     {"attempt_dir", claim.attempt_rel_}};
  claim.lock_json_ = lock.dump();
  // A claim need not survive a crash of this node (fencing re-checks it before
  // anything is published), so its create is not fsynced.
  if (!disk_.CreateExclusive(claim.lock_path_, claim.lock_json_ + "\n", /*durable=*/false)) {
    return std::nullopt;
  }
  claim.fd_ = ::open(claim.lock_path_.c_str(), O_RDWR | O_CLOEXEC);
  // Between create and open, a worker that found the shard's record already
  // published may have removed the new lock as a leftover (ClearFinishedLock):
  // the shard is finished, and this claim never was one.
  if (claim.fd_ < 0 && errno == ENOENT) return std::nullopt;
  struct stat st {};
  if (claim.fd_ < 0 || ::fstat(claim.fd_, &st) != 0) {
    ThrowSystemError(claim.lock_path_, "cannot open the new claim");
  }
  claim.dev_ = st.st_dev;
  claim.ino_ = st.st_ino;
  // Between create and open another node may have taken the lock over (only
  // after a full lease) or replaced a removed one; the token check catches it.
  if (ReadSmall(claim.fd_).find(claim.token_) == std::string::npos) return std::nullopt;
  // The shard may have been finished between the caller's scan and this create:
  // its owner links the done (or failed) record before it unlinks the lock, so a
  // record is visible now if it ever will be for that owner. Hand the lock back.
  struct stat record {};
  if (::stat(job_.DonePath(shard_id).c_str(), &record) == 0 ||
      ::stat(job_.FailedPath(shard_id).c_str(), &record) == 0) {
    WithOwnership(claim, [&] { ::unlink(claim.lock_path_.c_str()); });
    return std::nullopt;
  }
  return claim;
}

bool ClaimStore::ClearFinishedLock(const std::string& shard_id) {
  const std::string path = job_.LockPath(shard_id);
  // The lock is opened before the records are looked at: a lock made after a
  // failed record was moved away by `retry` then never counts as leftover.
  return WithIdleLock(path, [&](int fd, const struct stat&) {
    struct stat record {};
    const bool done = ::stat(job_.DonePath(shard_id).c_str(), &record) == 0;
    const bool failed = !done && ::stat(job_.FailedPath(shard_id).c_str(), &record) == 0;
    if (!done && !failed) return false;
    std::string attempt_rel, token;
    try {
      const json lock = json::parse(ReadSmall(fd));
      attempt_rel = lock.value("attempt_dir", "");
      token = lock.value("token", "");
    } catch (const std::exception&) {
      // A lock cut short by a crash: no attempt to mark.
    }
    if (!attempt_rel.empty() && attempt_rel.find("..") == std::string::npos) {
      const std::string attempt_dir = job_.dir() + "/" + attempt_rel;
      std::string status;
      try {
        status = json::parse(io::ReadFile(attempt_dir + "/attempt.json")).value("status", "");
      } catch (const std::exception&) {
        // No record: the claimant died before its attempt started.
      }
      if (status == "running") {
        std::string published_by;
        if (done) {
          try {
            published_by = json::parse(io::ReadFile(job_.DonePath(shard_id))).value("token", "");
          } catch (const std::exception&) {
            // Unreadable record: the attempt is not known to have published.
          }
        }
        if (!token.empty() && published_by == token) {
          SetAttemptStatus(attempt_dir, "done", "", disk_);
        } else {
          SetAttemptStatus(attempt_dir, "lost", "the shard was finished by another attempt", disk_);
        }
      }
    }
    ::unlink(path.c_str());
    disk_.SyncDir(job_.StateDir() + "/locks");
    return true;
  });
}

std::optional<double> ClaimStore::LockAge(const std::string& shard_id, int64_t fs_now_ns) const {
  struct stat st {};
  if (::stat(job_.LockPath(shard_id).c_str(), &st) != 0) return std::nullopt;
  return static_cast<double>(fs_now_ns - MtimeNs(st)) / 1e9;
}

bool ClaimStore::TakeOverStale(const std::string& shard_id, double lease_secs) {
  const std::string path = job_.LockPath(shard_id);
  return WithIdleLock(path, [&](int fd, const struct stat& lock) {
    // Re-check the age now that the lock is ours to inspect.
    const double age = static_cast<double>(job_.FilesystemNowNanos() - MtimeNs(lock)) / 1e9;
    if (age <= lease_secs) return false;
    std::string attempt_rel;
    try {
      attempt_rel = json::parse(ReadSmall(fd)).value("attempt_dir", "");
    } catch (const std::exception&) {
      // A lock cut short by a crash: nothing to mark.
    }
    // The old attempt is marked before the lock disappears, so its owner, if
    // it is still alive, finds "stale" when it looks.
    if (!attempt_rel.empty() && attempt_rel.find("..") == std::string::npos) {
      SetAttemptStatus(job_.dir() + "/" + attempt_rel, "stale",
                       "lease expired after " + std::to_string(static_cast<int64_t>(age)) +
                           " s without heartbeat",
                       disk_);
    }
    const std::string target = job_.StateDir() + "/stale_locks/" + shard_id + "." +
                               std::to_string(NowNanos() / 1000000000) + "." + RandomHex(8) +
                               ".lock";
    disk_.Rename(path, target);
    disk_.SyncDir(job_.StateDir() + "/locks");
    return true;
  });
}

template <typename Fn>
bool ClaimStore::WithOwnership(const Claim& claim, Fn&& fn) {
  if (claim.fd_ < 0) return false;
  FlockGuard guard(claim.fd_, /*blocking=*/true);
  if (!guard.held()) return false;
  struct stat by_path {};
  if (::stat(claim.lock_path_.c_str(), &by_path) != 0 || by_path.st_ino != claim.ino_ ||
      by_path.st_dev != claim.dev_) {
    return false;
  }
  if (ReadSmall(claim.fd_).find(claim.token_) == std::string::npos) return false;
  fn();
  return true;
}

bool ClaimStore::Heartbeat(const Claim& claim) {
  return WithOwnership(claim, [&] {
    // Rewriting the same bytes makes the filesystem (the NFS server, for a
    // shared directory) stamp the mtime with its own clock; a timestamp set by
    // this process would carry this node's clock, skew included. fsync sends
    // the write to the server now rather than at close.
    const std::string content = claim.lock_json_ + "\n";
    if (::pwrite(claim.fd_, content.data(), content.size(), 0) !=
            static_cast<ssize_t>(content.size()) ||
        ::fsync(claim.fd_) != 0) {
      ThrowSystemError(claim.lock_path_, "cannot refresh the lease");
    }
  });
}

ClaimStore::PublishResult ClaimStore::PublishDone(const Claim& claim,
                                                  const std::string& done_json) {
  bool already = false;
  const bool owned = WithOwnership(claim, [&] {
    // The temporary record is written in the attempt's directory: a crash
    // before the link leaves it there, not in state/done.
    already = !disk_.PublishLink(job_.DonePath(claim.shard_id_), done_json, AttemptTempDir(claim));
    CrashPoint("after_link");
    // A lock that comes back after a crash is harmless: the done record wins.
    ::unlink(claim.lock_path_.c_str());
  });
  if (!owned) return PublishResult::kLost;
  return already ? PublishResult::kAlreadyDone : PublishResult::kPublished;
}

bool ClaimStore::Release(const Claim& claim, const std::string& failed_json) {
  return WithOwnership(claim, [&] {
    if (!failed_json.empty()) {
      disk_.PublishLink(job_.FailedPath(claim.shard_id_), failed_json, AttemptTempDir(claim));
    }
    ::unlink(claim.lock_path_.c_str());
    disk_.SyncDir(job_.StateDir() + "/locks");
  });
}

void SetAttemptStatus(const std::string& attempt_dir, const std::string& status,
                      const std::string& error, io::Disk& disk) {
  const std::string path = attempt_dir + "/attempt.json";
  json j = json::object();
  try {
    j = json::parse(io::ReadFile(path));
  } catch (const std::exception&) {
    std::error_code ec;
    if (!fs::is_directory(attempt_dir, ec)) return;
  }
  if (j.value("status", "") == "stale" && status != "stale") return;
  j["status"] = status;
  if (!error.empty()) j["error"] = error;
  j["finished_at"] = FormatUtcIso8601(NowNanos());
  // Failures and takeovers are durable (they count toward retries); the rest
  // is a record for people.
  if (status == "failed" || status == "stale") {
    disk.WriteAtomic(path, j.dump(2) + "\n");
  } else {
    disk.WriteReplace(path, j.dump(2) + "\n");
  }
}

int64_t CountFailures(const JobDir& job, const std::string& shard_id) {
  int64_t failures = 0;
  std::error_code ec;
  for (auto it = fs::directory_iterator(job.AttemptsDir(shard_id), ec);
       !ec && it != fs::directory_iterator(); it.increment(ec)) {
    try {
      const std::string status =
          json::parse(io::ReadFile(it->path().string() + "/attempt.json")).value("status", "");
      failures += (status == "failed" || status == "stale");
    } catch (const std::exception&) {
      // An attempt whose record never got written (a crash right after the
      // claim) has not run: it is not a failure.
    }
  }
  return failures;
}

}  // namespace djshard::store
