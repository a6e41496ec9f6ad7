#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/io/disk.h"

namespace djshard::coord {

// The tasks of a phase that one dlc instance leads and every instance works
// on: a distributed prepare's scan tasks, a distributed merge's copy tasks.
// In the run's coordination directory: <kind>-plan.json, published by the
// phase's coordinator, and per plan a directory <kind>-<16 hex of the plan's
// SHA-256> holding each task's lock (<kind>-00003.lock, leased, heartbeated
// and taken over like a coordinator's), its result (<kind>-00003.json,
// published under the lock's fence, first writer wins) and any file it
// writes. A coordinator that takes over and plans the same tasks keeps
// every result already published.
class TaskPool {
 public:
  // What the tasks of a kind are.
  struct Kind {
    std::string name;  // "scan", "copy"
    // How many tasks the plan holds.
    std::function<size_t(const std::string& plan)> count;
    // Runs task `task` of the plan; files it writes go into `dir`, named with
    // `tag`. `owned` says whether the task's claim is still this instance's:
    // a task that writes where others may write stops once it is not. An
    // Error it throws is published as its result ("error"), which ends the
    // phase, unless it is a stop or the filesystem's (Error::IsInfrastructure):
    // then the claim goes back and the Error reaches the caller.
    std::function<nlohmann::json(const std::string& plan, size_t task, const std::string& dir,
                                 const std::string& tag, const std::function<bool()>& owned)>
        run;
    // A line for the log once a task ran.
    std::function<std::string(const nlohmann::json& result)> describe;
  };

  TaskPool(io::Disk& disk, std::string coordination_dir, Kind kind, double lease_secs,
           double heartbeat_secs, double poll_secs, std::function<void(const std::string&)> say);

  // The coordinator: publishes `plan` through `fenced` (its claim's disk),
  // works on tasks no live instance holds, and waits until every task has a
  // result; returns them in task order, or (ending early) those up to the
  // first that failed. A task its own filesystem failed goes back to the pool
  // a few times before that failure is the phase's. Throws Error when stopped.
  std::vector<nlohmann::json> Lead(const std::string& plan, io::Disk& fenced);

  // Any instance while the phase's coordinator lives: runs one task of the
  // published plan that no live instance holds and none finished. True when
  // it ran one.
  bool WorkOnOne();

  // The directory of the plan's task files.
  std::string TasksDir(const std::string& plan) const;
  // The coordination directory the pool's plans and task directories are in.
  const std::string& dir() const { return dir_; }

  // Once the phase is over: the plan and the files of its tasks, and of any
  // plan a coordinator that was taken over published.
  void RemoveAll();

  // How far the published plan's tasks are, for `status` and `monitor`:
  // "3 of 7 scan tasks done; running: scan-00004 on node-b, ..."; empty when
  // no plan is published.
  std::string Progress() const;

 private:
  std::string PlanPath() const { return dir_ + "/" + kind_.name + "-plan.json"; }
  std::string TaskId(size_t task) const;
  // Claims task `task` (taking a stale claim over) and runs it; false when
  // it is held, or finished meanwhile.
  bool TryTask(const std::string& plan, const std::string& tasks_dir, size_t task);

  io::Disk& disk_;
  const std::string dir_;
  const Kind kind_;
  const double lease_secs_, heartbeat_secs_, poll_secs_;
  const std::function<void(const std::string&)> say_;
  std::map<std::string, size_t> first_open_;  // per plan's directory: tasks before have results
};

}  // namespace djshard::coord
