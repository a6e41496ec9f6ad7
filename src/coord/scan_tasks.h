#pragma once

#include <functional>
#include <string>
#include <vector>

#include "djshard/io/disk.h"
#include "djshard/store/prepare_scan.h"

namespace djshard::coord {

// The scan tasks of a distributed prepare under dlc, in the run's
// coordination directory: scan-plan.json, published by the prepare
// coordinator, and per plan a directory scan-<16 hex of the plan's SHA-256>
// holding each task's lock (<task>.lock, leased, heartbeated and taken over
// like a coordinator's), its result (<task>.json, published under the lock's
// fence, first writer wins) and its data file. A coordinator that takes over
// plans the same tasks (same files, sizes and mtimes) and so keeps every
// result already published.
class ScanTasks {
 public:
  // `say` gets a line for each task this instance runs or takes over.
  ScanTasks(io::Disk& disk, std::string coordination_dir, double lease_secs, double heartbeat_secs,
            int threads, double poll_secs, std::function<void(const std::string&)> say);

  // The prepare coordinator: publishes `plan` through `fenced` (its claim's
  // disk), works on tasks no live instance holds, and waits until every task
  // has a result; returns them in task order, data files named absolutely.
  // Throws Error when stopped.
  std::vector<store::ScanTaskResult> Lead(const store::ScanPlan& plan, io::Disk& fenced);

  // Any instance while the prepare coordinator lives: runs one task of the
  // published plan that no live instance holds and none finished. True when
  // it ran one.
  bool WorkOnOne();

  // Once the job is published: the plan and its tasks' files.
  void RemoveAll();

 private:
  std::string PlanPath() const { return dir_ + "/scan-plan.json"; }
  std::string TasksDir(const std::string& plan_text) const;
  std::string ResultPath(const std::string& tasks_dir, const store::ScanPlan& plan,
                         size_t task) const;
  // Claims task `task` (taking a stale claim over) and runs it; false when
  // it is held, or finished meanwhile.
  bool TryTask(const store::ScanPlan& plan, const std::string& tasks_dir, size_t task);

  io::Disk& disk_;
  const std::string dir_;
  const double lease_secs_, heartbeat_secs_;
  const int threads_;
  const double poll_secs_;
  const std::function<void(const std::string&)> say_;
};

}  // namespace djshard::coord
