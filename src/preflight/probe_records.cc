#include "djshard/preflight/probe_records.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"

namespace djshard::preflight {

using nlohmann::json;

ProbeRecords::ProbeRecords(std::string dir, double lease_secs, double heartbeat_secs,
                           io::Disk& disk)
    : dir_(std::move(dir)), lease_secs_(lease_secs), heartbeat_secs_(heartbeat_secs), disk_(disk) {
  disk_.MakeDirs(dir_);
}

ProbeRecords::~ProbeRecords() {
  while (!held_.empty()) {
    const std::string key = held_.begin()->first;  // a copy: Unlock erases the entry
    try {
      Unlock(key);
    } catch (const std::exception&) {
      // The lock goes stale after the lease instead.
      const auto it = held_.find(key);
      if (it != held_.end()) {
        if (it->second.fd >= 0) ::close(it->second.fd);
        held_.erase(it);
      }
    }
  }
}

int64_t ProbeRecords::FilesystemNowNanos() {
  return io::FilesystemNowNanos(dir_ + "/.clock." + HostName() + "." + std::to_string(::getpid()) +
                                "." + RandomHex(8));
}

std::optional<double> ProbeRecords::AgeSecs(const std::string& path) {
  const std::optional<io::FileStat> st = disk_.Stat(path);
  if (!st) return std::nullopt;
  return static_cast<double>(FilesystemNowNanos() - st->mtime_ns) / 1e9;
}

json ProbeRecords::ReadJson(const std::string& path) {
  std::string text;
  try {
    text = disk_.Read(path);
  } catch (const Error&) {
    return nullptr;  // gone between the look and the read
  }
  json j = json::parse(text, nullptr, false);
  return j.is_object() ? j : json(nullptr);
}

bool ProbeRecords::Settled(const std::string& key, Look* look) {
  json record = ReadJson(RecordPath(key));
  if (record.is_object()) {
    look->state = State::kRecord;
    look->record = std::move(record);
    return true;
  }
  const std::optional<double> age = AgeSecs(FailurePath(key));
  if (age && *age <= lease_secs_) {
    json failure = ReadJson(FailurePath(key));
    if (failure.is_object()) {
      look->state = State::kFailed;
      look->record = std::move(failure);
      return true;
    }
  }
  return false;
}

ProbeRecords::Look ProbeRecords::TryKey(const std::string& key) {
  Look look;
  if (Settled(key, &look)) return look;
  const std::string lock = LockPath(key);
  const std::string content = json({{"cache_key", key},
                                    {"hostname", HostName()},
                                    {"pid", ::getpid()},
                                    {"token", RandomHex(32)},
                                    {"created_at", FormatUtcIso8601(NowNanos())}})
                                  .dump() +
                              "\n";
  if (!disk_.CreateExclusive(lock, content)) {
    const json holder = ReadJson(lock);
    if (holder.is_object()) {
      look.holder =
          holder.value("hostname", "?") + ":" + std::to_string(holder.value("pid", int64_t{0}));
    }
    if (!RemoveStale(key) || !disk_.CreateExclusive(lock, content)) return look;
  }
  Held h;
  h.fd = disk_.OpenExisting(lock);
  if (h.fd < 0) return look;  // removed as stale at once: a slow node; look again
  h.file = disk_.StatFd(h.fd, lock);
  h.content = content;
  held_[key] = h;
  // A prober that finished between the first look and the create.
  if (Settled(key, &look)) {
    Unlock(key);
    return look;
  }
  look.state = State::kMine;
  look.holder.clear();
  return look;
}

bool ProbeRecords::LockIsStale(const std::string& key) {
  const std::optional<double> age = AgeSecs(LockPath(key));
  return age && *age > lease_secs_;
}

bool ProbeRecords::RemoveStaleLock(const std::string& key) {
  bool unlinked = false;
  RemoveStale(key, &unlinked, /*dead_work_dir=*/false);
  return unlinked;
}

bool ProbeRecords::RemoveStale(const std::string& key, bool* unlinked, bool dead_work_dir) {
  const std::string path = LockPath(key);
  const io::ScopedFd fd(disk_.OpenExisting(path));
  if (fd.get() < 0) return true;  // released meanwhile
  const json holder = ReadJson(path);
  // The flock orders the workers that find the same stale lock: the second
  // finds another file (or none) at the path once the first removed it.
  if (!disk_.Flock(fd.get(), /*blocking=*/false)) return false;
  bool removed = false;
  try {
    const io::FileStat by_fd = disk_.StatFd(fd.get(), path);
    const std::optional<io::FileStat> by_path = disk_.Stat(path);
    if (by_path && by_fd.SameFile(*by_path) &&
        static_cast<double>(FilesystemNowNanos() - by_path->mtime_ns) / 1e9 > lease_secs_) {
      removed = disk_.Unlink(path);
      if (unlinked != nullptr) *unlinked = removed;
    }
  } catch (...) {
    disk_.Unflock(fd.get());
    throw;
  }
  disk_.Unflock(fd.get());
  if (removed && dead_work_dir) RemoveDeadWorkDir(holder);
  return removed;
}

void ProbeRecords::RemoveDeadWorkDir(const json& holder) {
  // Only a holder on this host can be known dead (other hosts' are left to
  // `djshard gc`): a live one, merely slow, still works in its directory.
  if (!holder.is_object() || holder.value("hostname", "") != HostName()) return;
  const int64_t pid = holder.value("pid", int64_t{0});
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) return;
  std::error_code ec;
  std::filesystem::remove_all(dir_ + "/work." + HostName() + "." + std::to_string(pid), ec);
}

void ProbeRecords::Refresh() {
  if (held_.empty() || MonotonicSeconds() - last_refresh_ < heartbeat_secs_) return;
  last_refresh_ = MonotonicSeconds();
  for (auto it = held_.begin(); it != held_.end();) {
    const std::string path = LockPath(it->first);
    bool ours = false;
    try {
      const std::optional<io::FileStat> now = disk_.Stat(path);
      ours = now && now->SameFile(it->second.file);
      if (ours) disk_.Rewrite(it->second.fd, it->second.content, path);
    } catch (const Error&) {
      ours = false;  // removed under us (ESTALE on NFS)
    }
    if (ours) {
      ++it;
      continue;
    }
    // Removed as stale while this process was slow: another prober may be
    // at work. This probe goes on; the first record published stands.
    ::close(it->second.fd);
    it = held_.erase(it);
  }
}

void ProbeRecords::Unlock(const std::string& key) {
  const auto it = held_.find(key);
  if (it == held_.end()) return;
  const Held h = it->second;
  held_.erase(it);
  const io::ScopedFd fd(h.fd);
  // Under the lock's flock, as RemoveStale looks at it: the path cannot
  // change between the look and the unlink. While a worker examines the
  // lock (briefly), wait; one that holds it longer takes it as stale anyway.
  bool locked = false;
  for (int i = 0; i < 100 && !(locked = disk_.Flock(fd.get(), /*blocking=*/false)); ++i) {
    ::usleep(10000);
  }
  if (!locked) return;
  try {
    const std::optional<io::FileStat> now = disk_.Stat(LockPath(key));
    // Removed as stale (and maybe taken by another prober): not ours to remove.
    if (now && now->SameFile(h.file)) disk_.Unlink(LockPath(key));
  } catch (...) {
    disk_.Unflock(fd.get());
    throw;
  }
  disk_.Unflock(fd.get());
}

json ProbeRecords::Publish(const std::string& key, const json& entry) {
  const bool first = disk_.PublishLink(RecordPath(key), entry.dump(2) + "\n");
  Unlock(key);
  if (first) return entry;
  const json standing = ReadJson(RecordPath(key));
  return standing.is_object() ? standing : entry;
}

void ProbeRecords::PublishFailure(const std::string& key, const json& failure) {
  // Before the unlock: a worker that finds no lock finds the failure.
  disk_.WriteAtomic(FailurePath(key), failure.dump(2) + "\n");
  Unlock(key);
}

}  // namespace djshard::preflight
