#pragma once

// The hook by which a `run` job calls preflight (SPEC-checkpoints §10).
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "djshard/exec/checkpoint.h"
#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/io/disk.h"
#include "djshard/recipe/recipe.h"
#include "src/exec/job_files.h"

namespace djshard::exec {

// Runs preflight for a job whose directory is `job_dir`; when the recipe has
// model operators, rewrites dag_execution_plan.json (`plan_json` makes the
// job's document) with the replica plan and prints the plan to stderr.
// Throws Error (exit 2) as RunPreflight does.
void RunJobPreflight(const recipe::Recipe& recipe, const Plan& plan, const JobSettings& settings,
                     const std::vector<io::InputCandidate>& inputs, const std::string& job_dir,
                     int threads, uint64_t num_partitions,
                     const std::function<nlohmann::json()>& plan_json, EventLog& events,
                     io::Disk& disk);

}  // namespace djshard::exec
