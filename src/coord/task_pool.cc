#include "src/coord/task_pool.h"

#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <utility>

#include "djshard/common/error.h"
#include "djshard/common/signals.h"
#include "djshard/io/json_fields.h"
#include "djshard/io/sha256.h"
#include "src/coord/coordinator_claim.h"

namespace djshard::coord {

namespace fs = std::filesystem;

namespace {
// How often the coordinator's own filesystem may fail its tasks before the
// phase fails: a full or broken filesystem is everyone's.
constexpr int kMaxFilesystemFailures = 3;
}  // namespace

using nlohmann::json;

TaskPool::TaskPool(io::Disk& disk, std::string coordination_dir, Kind kind, double lease_secs,
                   double heartbeat_secs, double poll_secs,
                   std::function<void(const std::string&)> say)
    : disk_(disk),
      dir_(std::move(coordination_dir)),
      kind_(std::move(kind)),
      lease_secs_(lease_secs),
      heartbeat_secs_(heartbeat_secs),
      poll_secs_(poll_secs),
      say_(std::move(say)) {}

std::string TaskPool::TasksDir(const std::string& plan) const {
  io::Sha256 h;
  h.Update(plan);
  return dir_ + "/" + kind_.name + "-" + h.HexDigest().substr(0, 16);
}

std::string TaskPool::TaskId(size_t task) const {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "-%05zu", task);
  return kind_.name + buf;
}

std::vector<json> TaskPool::Lead(const std::string& plan, io::Disk& fenced) {
  const std::string tasks_dir = TasksDir(plan);
  const size_t count = kind_.count(plan);
  disk_.MakeDirs(tasks_dir);
  fenced.WriteAtomic(PlanPath(), plan);
  const auto result_path = [&](size_t i) { return tasks_dir + "/" + TaskId(i) + ".json"; };
  const auto stop = [] {
    ThrowIfStopRequested();
    if (JobStopRequested()) throw Error("stopped by djshard stop", "", kExitStopped);
  };
  // Results in task order, up to the first failure: that one ends the phase.
  std::vector<json> results;
  int filesystem_failures = 0;
  while (results.size() < count) {
    for (size_t i = results.size(); i < count; ++i) {
      stop();
      if (!disk_.Stat(result_path(i))) {
        try {
          TryTask(plan, tasks_dir, i);
        } catch (const Error& e) {
          // This instance's filesystem failed the task and handed it back:
          // another instance, or this one later, runs it again.
          if (!e.IsInfrastructure() || ++filesystem_failures > kMaxFilesystemFailures) throw;
          say_(TaskId(i) + ": handed back after " + e.what());
        }
      }
      if (i != results.size() || !disk_.Stat(result_path(i))) continue;
      try {
        results.push_back(json::parse(disk_.Read(result_path(i))));
      } catch (const json::exception& e) {
        throw Error(result_path(i), 0, std::string("task result is not valid JSON: ") + e.what(),
                    "the coordination directory was edited; start the run with a new run id");
      }
      if (results.back().contains("error")) return results;
    }
    if (results.size() < count) SleepInterruptibly(poll_secs_ / 4);
  }
  return results;
}

bool TaskPool::WorkOnOne() {
  if (!disk_.Stat(PlanPath())) return false;
  const std::string plan = disk_.Read(PlanPath());
  const std::string tasks_dir = TasksDir(plan);
  const size_t count = kind_.count(plan);
  // Tasks before the cursor have results, which stay.
  size_t& first_open = first_open_[tasks_dir];
  for (size_t i = first_open; i < count; ++i) {
    if (disk_.Stat(tasks_dir + "/" + TaskId(i) + ".json")) {
      if (i == first_open) ++first_open;
      continue;
    }
    if (TryTask(plan, tasks_dir, i)) return true;
  }
  return false;
}

bool TaskPool::TryTask(const std::string& plan, const std::string& tasks_dir, size_t task) {
  const CoordinatorLockPaths lock{tasks_dir, TaskId(task)};
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
  const std::string result_path = tasks_dir + "/" + lock.phase + ".json";
  // The task finished meanwhile, or the phase is over and its files go.
  if (disk_.Stat(result_path) || !disk_.Stat(PlanPath())) {
    claim->Release();
    return false;
  }
  json result;
  try {
    result = kind_.run(plan, task, tasks_dir, claim->token(), [&claim] { return claim->Owned(); });
  } catch (const Error& e) {
    // A stop or a failing filesystem is this instance's, not the task's: the
    // claim goes back for another instance. Anything else (a bad line, an
    // input or an output that differs) ends the phase.
    if (StopRequested() || JobStopRequested() || e.IsInfrastructure()) {
      claim->Release();
      throw;
    }
    result = {{"task", task}, {"error", io::ErrorToJson(e)}};
  }
  if (claim->PublishAndRelease(result_path, result.dump(2) + "\n")) {
    say_(lock.phase + ": " + kind_.describe(result));
  }
  return true;
}

std::string TaskPool::Progress() const {
  if (!disk_.Stat(PlanPath())) return "";
  const std::string plan = disk_.Read(PlanPath());
  const std::string tasks_dir = TasksDir(plan);
  const size_t count = kind_.count(plan);
  size_t done = 0;
  std::string running;
  for (size_t i = 0; i < count; ++i) {
    if (disk_.Stat(tasks_dir + "/" + TaskId(i) + ".json")) {
      ++done;
      continue;
    }
    const CoordinatorLook look = LookAtCoordinator(disk_, {tasks_dir, TaskId(i)}, lease_secs_);
    if (look.state == CoordinatorLook::kNone) continue;
    running += std::string(running.empty() ? "" : ", ") + TaskId(i) + " on " +
               look.holder.hostname + (look.state == CoordinatorLook::kStale ? " (stale)" : "");
  }
  return std::to_string(done) + " of " + std::to_string(count) + " " + kind_.name + " tasks done" +
         (running.empty() ? "" : "; running: " + running);
}

void TaskPool::RemoveAll() {
  disk_.Unlink(PlanPath());
  // Every plan's directory: a coordinator that was taken over may have
  // published another plan.
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind(kind_.name + "-", 0) == 0 && it->is_directory(ec)) {
      io::RemoveTreeQuietly(it->path().string());
    }
  }
}

}  // namespace djshard::coord
