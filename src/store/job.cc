#include "djshard/store/job.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/io/disk.h"

namespace djshard::store {

namespace fs = std::filesystem;
using nlohmann::json;

const char* ShardStateName(ShardState state) {
  switch (state) {
    case ShardState::kPending:
      return "pending";
    case ShardState::kRunning:
      return "running";
    case ShardState::kStale:
      return "stale";
    case ShardState::kDone:
      return "done";
    case ShardState::kFailed:
      return "failed";
  }
  return "unknown";
}

DoneRecord DoneRecord::FromJson(const std::string& text, const std::string& path) {
  DoneRecord r;
  try {
    const json j = json::parse(text);
    r.shard_id = j.at("shard_id").get<std::string>();
    r.hostname = j.value("hostname", "");
    r.pid = j.value("pid", int64_t{0});
    r.token = j.value("token", "");
    r.attempt_number = j.value("attempt_number", int64_t{0});
    r.output_path = j.at("output_path").get<std::string>();
    r.rows = j.at("rows").get<uint64_t>();
    r.size_bytes = j.at("size_bytes").get<uint64_t>();
    r.sha256 = j.at("sha256").get<std::string>();
    r.completed_at = j.value("completed_at", "");
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("done record is not valid: ") + e.what(),
                "retry the shard to produce a new one");
  }
  return r;
}

void CheckShardIdIsName(const std::string& shard_id) {
  if (shard_id.empty() || shard_id.find('/') != std::string::npos ||
      shard_id.find("..") != std::string::npos) {
    throw Error("invalid shard id '" + shard_id + "'",
                "a shard id is a name like part-00003-of-00016, never a path");
  }
}

JobDir JobDir::Open(const std::string& dir) {
  JobDir job;
  job.dir_ = fs::absolute(dir).lexically_normal().string();
  while (job.dir_.size() > 1 && job.dir_.back() == '/') job.dir_.pop_back();
  const std::string manifest_path = job.dir_ + "/manifest.json";
  std::error_code ec;
  if (!fs::is_regular_file(manifest_path, ec)) {
    throw Error(dir, 0, "not a prepared job directory (no manifest.json)",
                "run 'djshard prepare' first, or check --job-dir");
  }
  job.manifest_ = Manifest::FromJson(io::ReadFile(manifest_path), manifest_path);
  return job;
}

std::string JobDir::LockPath(const std::string& id) const {
  return dir_ + "/state/locks/" + id + ".lock";
}
std::string JobDir::DonePath(const std::string& id) const {
  return dir_ + "/state/done/" + id + ".json";
}
std::string JobDir::FailedPath(const std::string& id) const {
  return dir_ + "/state/failed/" + id + ".json";
}
std::string JobDir::AttemptsDir(const std::string& id) const { return dir_ + "/attempts/" + id; }

const ShardEntry* JobDir::FindShard(const std::string& shard_id) const {
  for (const ShardEntry& s : manifest_.shards) {
    if (s.id == shard_id) return &s;
  }
  return nullptr;
}

int64_t JobDir::FilesystemNowNanos() const {
  const std::string probe = StateDir() + "/.clock-probe." + HostName() + "." +
                            std::to_string(::getpid()) + "." + RandomHex(8);
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return NowNanos();
  struct stat st {};
  const int rc = ::fstat(fd, &st);
  ::close(fd);
  ::unlink(probe.c_str());
  if (rc != 0) return NowNanos();
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

std::vector<ShardStatus> JobDir::Statuses() const {
  std::vector<ShardStatus> out;
  std::optional<int64_t> fs_now;
  const double lease = static_cast<double>(manifest_.policy.lease_secs);
  for (const ShardEntry& shard : manifest_.shards) {
    ShardStatus s;
    s.shard = &shard;
    std::error_code ec;
    if (fs::exists(DonePath(shard.id), ec)) {
      s.state = ShardState::kDone;
      try {
        const DoneRecord done =
            DoneRecord::FromJson(io::ReadFile(DonePath(shard.id)), DonePath(shard.id));
        s.owner = done.hostname;
        s.pid = done.pid;
      } catch (const Error& e) {
        s.error = e.message();
      }
    } else if (fs::exists(FailedPath(shard.id), ec)) {
      s.state = ShardState::kFailed;
      try {
        const json j = json::parse(io::ReadFile(FailedPath(shard.id)));
        s.error = j.value("last_error", "");
      } catch (const std::exception& e) {
        s.error = std::string("unreadable failed record: ") + e.what();
      }
    }
    const std::string lock_path = LockPath(shard.id);
    struct stat st {};
    if (::stat(lock_path.c_str(), &st) == 0) {
      if (!fs_now) fs_now = FilesystemNowNanos();
      LockInfo lock;
      const int64_t mtime =
          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
      lock.age_secs = static_cast<double>(*fs_now - mtime) / 1e9;
      try {
        const json j = json::parse(io::ReadFile(lock_path));
        lock.hostname = j.value("hostname", "");
        lock.pid = j.value("pid", int64_t{0});
        lock.token = j.value("token", "");
      } catch (const std::exception&) {
        // A lock being written right now; its age still tells whether it is live.
      }
      if (s.state == ShardState::kPending) {
        s.state = lock.age_secs > lease ? ShardState::kStale : ShardState::kRunning;
        s.owner = lock.hostname;
        s.pid = lock.pid;
      }
      s.lock = lock;
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace djshard::store
