#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "djshard/common/signals.h"
#include "djshard/io/disk.h"

namespace djshard::job {

// How long a graceful stop lets the work in flight finish before it is
// aborted as a forced one (SPEC-checkpoints §9).
inline constexpr double kStopGraceSecs = 60;
// How often every process of a job looks for a stop request.
inline constexpr double kStopPollSecs = 1;

// stop_request.json in a job directory (`run` or elastic), published by
// `djshard stop` with link(): who asked, when, how and why.
struct StopRequest {
  std::string requested_at;  // UTC ISO-8601
  std::string hostname;
  int64_t pid = 0;
  std::string user;
  std::string mode = "graceful";  // graceful | force
  std::string reason;
  double grace_secs = kStopGraceSecs;

  std::string ToJson() const;
  // Throws Error naming `path` for text that is not a stop request.
  static StopRequest FromJson(const std::string& text, const std::string& path);
  // A request made by this process now.
  static StopRequest Now(const std::string& mode, const std::string& reason, double grace_secs);
};

// <job_dir>/stop_request.json and <job_dir>/stop_request.force.json.
std::string StopRequestPath(const std::string& job_dir);
std::string ForceStopPath(const std::string& job_dir);

// The job's stop request; its mode is "force" when the force file exists too
// (a force file alone counts as a forced request). nullopt when there is none.
std::optional<StopRequest> ReadStopRequest(const std::string& job_dir,
                                           io::Disk& disk = io::RealDisk());

// Publishes `request` as stop_request.json by link() (first writer wins);
// false, changing nothing, when one exists already.
bool PublishStopRequest(const std::string& job_dir, const StopRequest& request,
                        io::Disk& disk = io::RealDisk());
// Publishes stop_request.force.json the same way; false when it exists.
bool PublishForceStop(const std::string& job_dir, const StopRequest& request,
                      io::Disk& disk = io::RealDisk());

// Moves stop_request.json and stop_request.force.json into `history_dir`
// (created when missing) as stop_request.<stamp>.<random>[.force].json, so
// that the job may go on. False when there was no request.
bool ClearStopRequest(const std::string& job_dir, const std::string& history_dir,
                      io::Disk& disk = io::RealDisk());

// Looks for the job's stop request when constructed and then every
// kStopPollSecs on its own thread, and records what it finds with
// RequestJobStop: a graceful request at once, a forced one when the force
// file appears or when the request's grace has passed since it was first
// seen. `on_stop` is called (from the watching thread, or from the
// constructor) each time the level rises. Stops watching when destroyed.
class StopWatcher {
 public:
  using Callback = std::function<void(const StopRequest&, JobStop)>;
  StopWatcher(std::string job_dir, Callback on_stop, io::Disk& disk = io::RealDisk());
  ~StopWatcher();
  StopWatcher(const StopWatcher&) = delete;
  StopWatcher& operator=(const StopWatcher&) = delete;

  // The request seen, if any.
  std::optional<StopRequest> request() const;

  // Looks now, on the caller's thread: before a claim or a partition, so that
  // nothing starts after a request was published, not even within a poll.
  void Look();

 private:
  const std::string job_dir_;
  const Callback on_stop_;
  io::Disk& disk_;
  mutable std::mutex mu_;
  std::optional<StopRequest> seen_;
  double seen_at_ = 0;  // monotonic seconds when the request was first seen
  JobStop level_ = JobStop::kNone;
  int wake_[2] = {-1, -1};  // a pipe: the destructor ends the thread at once
  std::thread thread_;
};

}  // namespace djshard::job
