#include "djshard/job/job_files.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/common/text.h"
#include "djshard/io/fd.h"
#include "djshard/io/output.h"

namespace djshard::job {

namespace fs = std::filesystem;

std::string ExportTempTag(const std::string& job_id) { return "run-" + job_id; }

std::vector<std::string> RemoveExportLeftovers(const std::string& export_path,
                                               const std::string& job_id, io::Disk& disk,
                                               bool dry_run) {
  std::vector<std::string> removed;
  for (const std::string& file : {export_path, export_path + ".errors.jsonl"}) {
    const fs::path prefix_path(io::TempPrefix(file, ExportTempTag(job_id)));
    const std::string prefix = prefix_path.filename().string();
    const fs::path dir = prefix_path.has_parent_path() ? prefix_path.parent_path() : ".";
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // The prefix, then the writer's 16 hex digits: not another job's whose
      // id starts with this one's and a dot.
      if (name.size() != prefix.size() + 16 || name.rfind(prefix, 0) != 0 ||
          name.find_first_not_of("0123456789abcdef", prefix.size()) != std::string::npos) {
        continue;
      }
      if (!dry_run) disk.Unlink(it->path().string());
      removed.push_back(it->path().string());
    }
  }
  return removed;
}

std::string RunJobPaths::TapStem(size_t op_idx, uint64_t partition, uint64_t num_partitions) {
  const int width = std::max(5, DecimalDigits(num_partitions));
  return "checkpoint_op_" + ZeroPad(op_idx, 4) + "_partition_" + ZeroPad(partition, width);
}

std::string RunJobPaths::JournalStem(const std::string& region, uint64_t partition,
                                     uint64_t num_partitions) {
  const int width = std::max(5, DecimalDigits(num_partitions));
  return "lineage_" + region + "_partition_" + ZeroPad(partition, width);
}

EventLog::EventLog(std::string path, std::string job_id)
    : path_(std::move(path)), job_id_(std::move(job_id)), hostname_(HostName()) {
  if (path_.empty()) return;
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0) ThrowSystemError(path_, "cannot open the events file");
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::Emit(const std::string& type, nlohmann::json fields) {
  // Every event is a debug record of the log too (`--log-level debug`).
  LogRecord r;
  r.level = LogLevel::kDebug;
  r.event = type;
  r.job_id = job_id_;
  for (const char* key : {"partition_id", "shard_id"}) {
    const auto it = fields.find(key);
    if (it == fields.end() || it->is_null()) continue;
    (std::string(key) == "shard_id" ? r.shard_id : r.partition_id) =
        it->is_string() ? it->get<std::string>() : it->dump();
  }
  r.message = type + " " + fields.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  Log(r);
  if (fd_ < 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  nlohmann::json e;
  e["event_id"] = std::to_string(::getpid()) + "-" + std::to_string(++seq_);
  e["event_type"] = type;
  e["timestamp"] = FormatUtcIso8601Micros(NowNanos());
  e["job_id"] = job_id_;
  e["hostname"] = hostname_;
  e["pid"] = ::getpid();
  e["thread_id"] = static_cast<int64_t>(::syscall(SYS_gettid));
  for (auto it = fields.begin(); it != fields.end(); ++it) {
    if (!it.value().is_null()) e[it.key()] = it.value();
  }
  // One write(2) of the whole line: readers never see half of it.
  const std::string line = e.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  io::WriteFully(fd_, line, path_);
}

}  // namespace djshard::job
