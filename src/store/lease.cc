#include "djshard/store/lease.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/crash_point.h"
#include "djshard/common/error.h"
#include "djshard/io/fd.h"

namespace djshard::store {

namespace {

// Holds a Disk flock on an fd for a scope.
class FlockGuard {
 public:
  FlockGuard(io::Disk& disk, int fd, bool blocking)
      : disk_(disk), fd_(fd), held_(disk.Flock(fd, blocking)) {}
  ~FlockGuard() {
    if (held_) disk_.Unflock(fd_);
  }
  bool held() const { return held_; }

 private:
  io::Disk& disk_;
  int fd_;
  bool held_;
};

// The lock's content, or "" for a lock cut short by a crash or unreadable.
std::string ReadContent(int fd, const std::string& path) {
  try {
    return io::ReadFromStart(fd, path);
  } catch (const Error&) {
    return "";
  }
}

}  // namespace

LeasedLock::LeasedLock(LeasedLock&& o) noexcept
    : disk_(o.disk_),
      path_(std::move(o.path_)),
      token_(std::move(o.token_)),
      content_(std::move(o.content_)),
      fd_(o.fd_),
      file_(o.file_),
      fence_(std::move(o.fence_)) {
  o.fd_ = -1;
}

LeasedLock& LeasedLock::operator=(LeasedLock&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    disk_ = o.disk_;
    path_ = std::move(o.path_);
    token_ = std::move(o.token_);
    content_ = std::move(o.content_);
    fd_ = o.fd_;
    file_ = o.file_;
    fence_ = std::move(o.fence_);
    o.fd_ = -1;
  }
  return *this;
}

LeasedLock::~LeasedLock() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<LeasedLock> LeasedLock::Create(io::Disk& disk, const std::string& path,
                                             const std::string& content, const std::string& token,
                                             bool durable) {
  if (!disk.CreateExclusive(path, content, durable)) return std::nullopt;
  LeasedLock lock;
  lock.disk_ = &disk;
  lock.path_ = path;
  lock.token_ = token;
  lock.content_ = content;
  lock.fd_ = disk.OpenExisting(path);
  // Between create and open, another process may have removed the new lock
  // as a leftover (a shard finished meanwhile), or taken it over after a
  // full lease and made its own: the missing file and the token check tell.
  if (lock.fd_ < 0) return std::nullopt;
  lock.file_ = disk.StatFd(lock.fd_, path);
  if (io::ReadFromStart(lock.fd_, path).find(token) == std::string::npos) return std::nullopt;
  return lock;
}

bool LeasedLock::AsOwner(const std::function<void()>& fn) const {
  if (fd_ < 0) return false;
  std::lock_guard<std::mutex> in_process(*fence_);
  FlockGuard guard(*disk_, fd_, /*blocking=*/true);
  if (!guard.held()) return false;
  const std::optional<io::FileStat> by_path = disk_->Stat(path_);
  if (!by_path || !by_path->SameFile(file_)) return false;
  if (io::ReadFromStart(fd_, path_).find(token_) == std::string::npos) return false;
  fn();
  return true;
}

bool LeasedLock::Heartbeat() const {
  // The fenced section only verifies: a process frozen inside it (SIGSTOP, a
  // hung node, an fsync stuck on a dead server) would hold the flock and keep
  // every other process from taking the lock over, so the write and its
  // fsync come after it. They go to our own lock file (its inode): had the
  // lease been taken over in between, that file now lies among the stale
  // locks (or is gone), so a late refresh extends no one's lease.
  if (!AsOwner([] {})) return false;
  CrashPoint("heartbeat_write");
  // Rewriting the same bytes makes the filesystem (the NFS server, for a
  // shared directory) stamp the mtime with its own clock; a timestamp set by
  // this process would carry this node's clock, skew included. Readers never
  // see other bytes than the lock's own.
  disk_->Rewrite(fd_, content_, path_);
  return true;
}

bool WithIdleLock(io::Disk& disk, const std::string& path,
                  const std::function<bool(int, const io::FileStat&)>& look,
                  const std::function<bool(int, const io::FileStat&)>& fenced) {
  const io::ScopedFd lock(disk.OpenExisting(path));
  if (lock.get() < 0) return false;
  if (!look(lock.get(), disk.StatFd(lock.get(), path))) return false;
  FlockGuard guard(disk, lock.get(), /*blocking=*/false);
  if (!guard.held()) return false;
  const io::FileStat by_fd = disk.StatFd(lock.get(), path);
  const std::optional<io::FileStat> by_path = disk.Stat(path);
  if (!by_path || !by_fd.SameFile(*by_path)) return false;
  return fenced(lock.get(), by_fd);
}

std::optional<StaleLock> TakeOverStaleLock(io::Disk& disk, const std::string& path,
                                           const StaleTakeover& how) {
  // The age is judged against the filesystem's clock read once before the
  // flock, and judged again under it: a heartbeat since then makes the lock
  // younger, and the takeover gives up. Under the flock only checks and
  // renames run, so a taker frozen there blocks no one for long.
  int64_t fs_now = 0;
  StaleLock stale;
  const bool taken = WithIdleLock(
      disk, path,
      [&](int fd, const io::FileStat& lock) {
        fs_now = how.fs_now_ns();
        stale.age_secs = static_cast<double>(fs_now - lock.mtime_ns) / 1e9;
        if (stale.age_secs <= how.lease_secs) return false;
        stale.content = ReadContent(fd, path);
        return !how.prepare || how.prepare(stale);
      },
      [&](int, const io::FileStat& lock) {
        if (static_cast<double>(fs_now - lock.mtime_ns) / 1e9 <= how.lease_secs) return false;
        if (how.fenced && !how.fenced()) return false;
        disk.Rename(path, how.stale_path);
        return true;
      });
  if (!taken) return std::nullopt;
  disk.SyncDir(std::filesystem::path(path).parent_path().string());
  return stale;
}

HeartbeatThread::HeartbeatThread(std::function<bool()> beat, double interval,
                                 std::atomic<bool>* lost) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) ThrowSystemError("pipe", "cannot create");
  thread_ = std::thread([this, beat = std::move(beat), interval, lost] {
    for (;;) {
      const double next = MonotonicSeconds() + interval;
      for (double left = interval; left > 0; left = next - MonotonicSeconds()) {
        pollfd pfd{wake_[0], POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(left * 1000) + 1) > 0) return;  // Stop()
      }
      bool ok = false;
      try {
        ok = beat();
      } catch (const std::exception&) {
        ok = false;
      }
      if (!ok) {
        lost->store(true);
        return;
      }
    }
  });
}

HeartbeatThread::~HeartbeatThread() {
  Stop();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

void HeartbeatThread::Stop() {
  if (!thread_.joinable()) return;
  const char byte = 1;
  while (::write(wake_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
}

}  // namespace djshard::store
