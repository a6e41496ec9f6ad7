// `djshard stop`'s request file and the watcher every process of a job runs
// (SPEC-checkpoints §9).
#include "djshard/job/stop_request.h"

#include <fcntl.h>
#include <poll.h>
#include <pwd.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/text.h"
#include "djshard/job/job_files.h"

namespace djshard::job {

using nlohmann::json;

namespace {
std::string UserName() {
  if (const passwd* pw = ::getpwuid(::geteuid()); pw != nullptr && pw->pw_name != nullptr) {
    return pw->pw_name;
  }
  if (const char* u = ::getenv("USER"); u != nullptr) return u;
  return std::to_string(::geteuid());
}
}  // namespace

std::string StopRequest::ToJson() const {
  return json({{"requested_at", requested_at},
               {"requested_by", {{"hostname", hostname}, {"pid", pid}, {"user", user}}},
               {"mode", mode},
               {"reason", reason.empty() ? json() : json(reason)},
               {"grace_secs", grace_secs}})
             .dump(2) +
         "\n";
}

StopRequest StopRequest::FromJson(const std::string& text, const std::string& path) {
  const json j = json::parse(text, nullptr, false);
  if (!j.is_object()) throw Error(path, 0, "stop request is not a JSON object");
  StopRequest r;
  try {
    r.requested_at = j.value("requested_at", "");
    const json by = j.value("requested_by", json::object());
    if (by.is_object()) {
      r.hostname = by.value("hostname", "");
      r.pid = by.value("pid", int64_t{0});
      r.user = by.value("user", "");
    }
    r.mode = j.value("mode", "graceful");
    if (j.contains("reason") && j["reason"].is_string()) r.reason = j["reason"].get<std::string>();
    if (j.contains("grace_secs") && j["grace_secs"].is_number()) {
      r.grace_secs = j["grace_secs"].get<double>();
    }
  } catch (const json::exception& e) {
    throw Error(path, 0, std::string("stop request is not valid: ") + e.what());
  }
  return r;
}

StopRequest StopRequest::Now(const std::string& mode, const std::string& reason,
                             double grace_secs) {
  StopRequest r;
  r.requested_at = FormatUtcIso8601Micros(NowNanos());
  r.hostname = HostName();
  r.pid = ::getpid();
  r.user = UserName();
  r.mode = mode;
  r.reason = reason;
  r.grace_secs = grace_secs;
  return r;
}

std::string StopRequestPath(const std::string& job_dir) { return job_dir + "/stop_request.json"; }
std::string ForceStopPath(const std::string& job_dir) {
  return job_dir + "/stop_request.force.json";
}

std::optional<StopRequest> ReadStopRequest(const std::string& job_dir, io::Disk& disk) {
  const std::string path = StopRequestPath(job_dir), force = ForceStopPath(job_dir);
  const bool forced = disk.Stat(force).has_value();
  std::optional<StopRequest> r;
  if (disk.Stat(path)) {
    try {
      r = StopRequest::FromJson(disk.Read(path), path);
    } catch (const Error&) {
      // Moved away (stop --clear) between the stat and the read, or damaged:
      // a request that exists still counts.
      if (disk.Stat(path)) r = StopRequest{};
    }
  }
  if (forced) {
    if (!r) {
      try {
        r = StopRequest::FromJson(disk.Read(force), force);
      } catch (const Error&) {
        r = StopRequest{};
      }
    }
    r->mode = "force";
  }
  return r;
}

bool PublishStopRequest(const std::string& job_dir, const StopRequest& request, io::Disk& disk) {
  return disk.PublishLink(StopRequestPath(job_dir), request.ToJson());
}

bool PublishForceStop(const std::string& job_dir, const StopRequest& request, io::Disk& disk) {
  return disk.PublishLink(ForceStopPath(job_dir), request.ToJson());
}

bool ClearStopRequest(const std::string& job_dir, const std::string& history_dir, io::Disk& disk) {
  const std::string stem =
      history_dir + "/stop_request." + FormatUtcForName(NowNanos()) + "." + RandomHex(8);
  bool any = false;
  // The force file goes first: a request is never left forced without its request.
  for (const auto& [from, to] : {std::pair{ForceStopPath(job_dir), stem + ".force.json"},
                                 std::pair{StopRequestPath(job_dir), stem + ".json"}}) {
    if (!disk.Stat(from)) continue;
    disk.MakeDirs(history_dir);
    disk.Rename(from, to);
    any = true;
  }
  if (any) disk.SyncDir(job_dir);
  return any;
}

StopWatcher::StopWatcher(std::string job_dir, Callback on_stop, io::Disk& disk)
    : job_dir_(std::move(job_dir)), on_stop_(std::move(on_stop)), disk_(disk) {
  Look();
  if (::pipe2(wake_, O_CLOEXEC) != 0) ThrowSystemError("pipe", "cannot create");
  thread_ = std::thread([this] {
    for (;;) {
      pollfd pfd{wake_[0], POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(kStopPollSecs * 1000)) > 0) return;
      try {
        Look();
      } catch (const std::exception&) {
        // An unreadable directory for a moment: the next look tells.
      }
    }
  });
}

StopWatcher::~StopWatcher() {
  const char byte = 1;
  while (::write(wake_[1], &byte, 1) < 0 && errno == EINTR) {
  }
  thread_.join();
  ::close(wake_[0]);
  ::close(wake_[1]);
}

std::optional<StopRequest> StopWatcher::request() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seen_;
}

void StopWatcher::Look() {
  JobStop level = JobStop::kNone;
  StopRequest request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (level_ == JobStop::kForced) return;
    std::optional<StopRequest> now = ReadStopRequest(job_dir_, disk_);
    if (!now) return;  // a cleared request does not undo a stop already begun
    if (!seen_) seen_at_ = MonotonicSeconds();
    seen_ = now;
    level = now->mode == "force" || MonotonicSeconds() - seen_at_ >= now->grace_secs
                ? JobStop::kForced
                : JobStop::kGraceful;
    if (level == level_) return;
    level_ = level;
    request = *now;
  }
  RequestJobStop(level);
  if (on_stop_) on_stop_(request, level);
}

}  // namespace djshard::job
