#include "djshard/job/job_files.h"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
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

std::string ExportTempTag(const std::string& job_id) {
  return "run-" + job_id + "@" + HostName() + "@" + std::to_string(::getpid());
}

namespace {

// Whether the writer `<host>@<pid>` named by `rest` ("<host>@<pid>.<16 hex>",
// what follows the job's prefix) is dead; false when `rest` is not that.
bool WriterIsDead(std::string_view rest, bool other_hosts_ended) {
  const size_t at = rest.rfind('@');
  const size_t dot = rest.find('.', at == std::string_view::npos ? 0 : at);
  if (at == std::string_view::npos || dot == std::string_view::npos || dot == at + 1 ||
      rest.size() != dot + 17 || rest.find_first_not_of("0123456789", at + 1) != dot ||
      rest.find_first_not_of("0123456789abcdef", dot + 1) != std::string_view::npos) {
    return false;
  }
  if (rest.substr(0, at) != HostName()) return other_hosts_ended;
  const long pid = std::strtol(std::string(rest.substr(at + 1, dot - at - 1)).c_str(), nullptr, 10);
  return pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

std::vector<std::string> RemoveExportLeftovers(const std::string& export_path,
                                               const std::string& job_id, bool other_hosts_ended,
                                               io::Disk& disk, bool dry_run) {
  std::vector<std::string> removed;
  for (const std::string& file : {export_path, io::ErrorsFileOf(export_path)}) {
    // Job ids cannot hold '@': the prefix names this job alone.
    const fs::path prefix_path(io::TempPrefix(file, "run-" + job_id + "@"));
    std::string prefix = prefix_path.filename().string();
    prefix.pop_back();  // TempPrefix's "." after the tag
    const fs::path dir = prefix_path.has_parent_path() ? prefix_path.parent_path() : ".";
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.rfind(prefix, 0) != 0 ||
          !WriterIsDead(std::string_view(name).substr(prefix.size()), other_hosts_ended)) {
        continue;
      }
      if (dry_run || disk.Unlink(it->path().string())) removed.push_back(it->path().string());
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
