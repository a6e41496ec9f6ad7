#pragma once

// The hook by which a `run` job calls preflight (SPEC-checkpoints §10).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/job/checkpoint.h"
#include "djshard/job/job_files.h"
#include "djshard/preflight/preflight.h"
#include "djshard/recipe/recipe.h"

namespace djshard::job {

// What preflight decided for a run job.
struct JobPreflight {
  // The executor threads the job runs: `threads`, or on the CPU the replicas
  // the plan's memory holds when fewer and not `threads_explicit` (an
  // explicit count is kept, with a warning).
  int threads = 1;
  // More than one: the execution groups alternate these phases (SPEC-checkpoints §10.7).
  std::vector<preflight::PreflightResult::Phase> phases;
  uint64_t group_size = 0;  // partitions per execution group
};

// Runs preflight for a job whose directory is `job_dir`; when the recipe has
// model operators, rewrites dag_execution_plan.json (`plan_json` makes the
// job's document) with the replica plan and prints the plan to stderr.
// Throws Error (exit 2) as RunPreflight does.
JobPreflight RunJobPreflight(const recipe::Recipe& recipe, const exec::Plan& plan,
                             const JobSettings& settings,
                             const std::vector<io::InputCandidate>& inputs,
                             const std::string& job_dir, int threads, bool threads_explicit,
                             uint64_t num_partitions, uint64_t total_rows,
                             const std::function<nlohmann::json()>& plan_json, EventLog& events,
                             io::Disk& disk);

}  // namespace djshard::job
