#include "src/job/run_stop.h"

#include <cstdio>

#include "djshard/common/clock.h"
#include "djshard/common/error.h"
#include "djshard/common/log.h"
#include "djshard/common/signals.h"

namespace djshard::job {

using nlohmann::json;

RunStop::RunStop(const std::string& job_dir, EventLog& events) : job_dir_(job_dir) {
  watcher_ = std::make_unique<StopWatcher>(job_dir, [&events](const StopRequest& r, JobStop level) {
    const bool forced = level == JobStop::kForced;
    events.Emit("stop_requested", {{"status", forced ? "force" : "graceful"},
                                   {"metadata",
                                    {{"mode", r.mode},
                                     {"reason", r.reason.empty() ? json() : json(r.reason)},
                                     {"requested_at", r.requested_at},
                                     {"requested_by", r.hostname + ":" + std::to_string(r.pid)},
                                     {"escalated", forced && r.mode != "force"}}}});
    Log(LogLevel::kInfo, "stop",
        std::string(forced ? "forced stop" : "stop") + " requested by " + r.hostname + ":" +
            std::to_string(r.pid) + (r.reason.empty() ? "" : " (" + r.reason + ")") + ": " +
            (forced ? "aborting the partitions in flight"
                    : "finishing the partitions in flight, starting no other"));
  });
}

void RunStop::BeforePartition() const {
  watcher_->Look();
  ThrowIfStopRequested();
  if (!JobStopRequested()) return;
  throw Error("stopped by djshard stop", "the job stays resumable", kExitStopped);
}

bool RunStop::Stopping() { return StopRequested() || JobStopRequested(); }

json RunStop::SummaryJson() const {
  if (StopExitCode() == kExitInterrupted || StopExitCode() == kExitTerminated) {
    return {{"requested_at", FormatUtcIso8601Micros(NowNanos())},
            {"mode", "signal"},
            {"reason", StopExitCode() == kExitInterrupted ? "SIGINT" : "SIGTERM"}};
  }
  std::optional<StopRequest> r = watcher_->request();
  // A SIGUSR1 from `stop --force` may come before the watcher's next look.
  if (!r && JobStopRequested()) r = ReadStopRequest(job_dir_);
  if (r && JobStopRequested()) {
    return {{"requested_at", r->requested_at},
            {"mode", JobStopLevel() == JobStop::kForced ? "force" : "graceful"},
            {"reason", r->reason.empty() ? json() : json(r->reason)}};
  }
  return nullptr;
}

bool ClearStopOnResume(const std::string& job_dir) {
  return ClearStopRequest(job_dir, job_dir + "/metadata");
}

}  // namespace djshard::job
