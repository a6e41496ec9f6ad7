#include "src/coord/scan_tasks.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/sha256.h"
#include "src/coord/coordinator_claim.h"

namespace djshard::coord {

ScanTasks::ScanTasks(io::Disk& disk, std::string coordination_dir, double lease_secs,
                     double heartbeat_secs, int threads, double poll_secs,
                     std::function<void(const std::string&)> say)
    : disk_(disk),
      dir_(std::move(coordination_dir)),
      lease_secs_(lease_secs),
      heartbeat_secs_(heartbeat_secs),
      threads_(threads > 0 ? threads
                           : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      poll_secs_(poll_secs),
      say_(std::move(say)) {}

std::string ScanTasks::TasksDir(const std::string& plan_text) const {
  io::Sha256 h;
  h.Update(plan_text);
  return dir_ + "/scan-" + h.HexDigest().substr(0, 16);
}

std::string ScanTasks::ResultPath(const std::string& tasks_dir, const store::ScanPlan& plan,
                                  size_t task) const {
  return tasks_dir + "/" + plan.TaskId(task) + ".json";
}

std::vector<store::ScanTaskResult> ScanTasks::Lead(const store::ScanPlan& plan, io::Disk& fenced) {
  const std::string text = plan.ToJson();
  const std::string tasks_dir = TasksDir(text);
  disk_.MakeDirs(tasks_dir);
  fenced.WriteAtomic(PlanPath(), text);
  for (;;) {
    bool all = true;
    for (size_t i = 0; i < plan.tasks.size(); ++i) {
      if (disk_.Stat(ResultPath(tasks_dir, plan, i))) continue;
      all = false;
      TryTask(plan, tasks_dir, i);
    }
    if (all) break;
    ThrowIfStopRequested();
    if (JobStopRequested()) throw Error("stopped by djshard stop", "", kExitStopped);
    SleepInterruptibly(poll_secs_ / 4);
  }
  std::vector<store::ScanTaskResult> results;
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    const std::string path = ResultPath(tasks_dir, plan, i);
    try {
      results.push_back(store::ScanTaskResult::FromJson(nlohmann::json::parse(disk_.Read(path))));
    } catch (const nlohmann::json::exception& e) {
      throw Error(path, 0, std::string("scan task result is not valid: ") + e.what(),
                  "the coordination directory was edited; start the run with a new run id");
    }
    results.back().data_file = tasks_dir + "/" + results.back().data_file;
  }
  return results;
}

bool ScanTasks::WorkOnOne() {
  if (!disk_.Stat(PlanPath())) return false;
  const std::string text = disk_.Read(PlanPath());
  const store::ScanPlan plan = store::ScanPlan::FromJson(text, PlanPath());
  const std::string tasks_dir = TasksDir(text);
  for (size_t i = 0; i < plan.tasks.size(); ++i) {
    if (disk_.Stat(ResultPath(tasks_dir, plan, i))) continue;
    if (TryTask(plan, tasks_dir, i)) return true;
  }
  return false;
}

bool ScanTasks::TryTask(const store::ScanPlan& plan, const std::string& tasks_dir, size_t task) {
  const CoordinatorLockPaths lock{tasks_dir, plan.TaskId(task)};
  const CoordinatorLook look = LookAtCoordinator(disk_, lock, lease_secs_);
  if (look.state == CoordinatorLook::kLive) return false;
  if (look.state == CoordinatorLook::kStale) {
    const std::optional<CoordinatorHolder> from = TakeOverCoordinator(disk_, lock, lease_secs_);
    if (!from) return false;
    say_("took over " + lock.phase + " from " + from->hostname + " pid " +
         std::to_string(from->pid) + ": its lease went stale");
  }
  const std::unique_ptr<CoordinatorClaim> claim =
      CoordinatorClaim::TryClaim(disk_, lock, lease_secs_, heartbeat_secs_);
  if (!claim) return false;
  const std::string result_path = ResultPath(tasks_dir, plan, task);
  if (disk_.Stat(result_path)) {
    claim->Release();
    return false;
  }
  store::ScanTaskResult result;
  try {
    result = store::RunScanTask(plan, task, threads_, tasks_dir, claim->token());
  } catch (const Error& e) {
    // A failure that is not a bad line ends the prepare too: the coordinator
    // reports the first one in input order.
    result.task = task;
    result.error_file = e.file();
    result.error_message = e.message();
    result.error_hint = e.hint();
    result.error_code = e.code();
  }
  if (claim->PublishAndRelease(result_path, result.ToJson().dump(2) + "\n")) {
    const store::ScanPlan::File& file = plan.files[plan.tasks[task].file];
    say_("scanned " + lock.phase + ": " + std::to_string(result.rows) + " line(s) of " +
         file.display_path + (result.failed() ? ", failed: " + result.error_message : ""));
  }
  return true;
}

void ScanTasks::RemoveAll() {
  if (!disk_.Stat(PlanPath())) return;
  const std::string tasks_dir = TasksDir(disk_.Read(PlanPath()));
  disk_.Unlink(PlanPath());
  io::RemoveTreeQuietly(tasks_dir);
}

}  // namespace djshard::coord
