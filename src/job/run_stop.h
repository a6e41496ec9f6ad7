#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "djshard/job/job_files.h"
#include "djshard/job/stop_request.h"

namespace djshard::job {

// A `run` job's side of `djshard stop` (SPEC-checkpoints §9): watches the
// job directory from construction to destruction, logs stop_requested events
// and says on stderr what happens. A graceful request lets the partitions in
// flight finish and commit; a forced one (or its grace passed) aborts them
// like a signal.
class RunStop {
 public:
  // `events` must outlive this.
  RunStop(const std::string& job_dir, EventLog& events);

  // Throws Error (exit 3, or 130/143 after a signal) when the job must stop:
  // no partition starts after a stop request.
  void BeforePartition() const;

  // Whether the run is ending by a stop request or a signal, not a failure.
  static bool Stopping();

  // The summary's "stop" block: the request, or the signal; null when neither.
  nlohmann::json SummaryJson() const;

 private:
  std::string job_dir_;
  std::unique_ptr<StopWatcher> watcher_;
};

// `run --resume` clears a stop request itself: it moves into metadata/.
// True when there was one.
bool ClearStopOnResume(const std::string& job_dir);

}  // namespace djshard::job
