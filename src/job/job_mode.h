#pragma once

#include "djshard/exec/plan.h"
#include "djshard/io/discover.h"
#include "djshard/job/run_job.h"
#include "djshard/recipe/dataset.h"

namespace djshard::job {

// Whether `request` and `recipe` ask for job mode (partitions, checkpoints, a
// job directory).
bool WantsJobMode(const RunRequest& request, const recipe::Recipe& recipe);

// `djshard run` in job mode (SPEC-checkpoints §3-6, 8): `outcome` holds the
// export, stats and errors paths and the thread count already.
// With plan.models_deferred the model operators are loaded after preflight:
// all at once, or phase by phase when the execution groups alternate.
void RunJob(const RunRequest& request, const recipe::Recipe& recipe, exec::Plan& plan,
            const recipe::DatasetPath& dataset, const std::vector<io::InputCandidate>& inputs,
            RunOutcome& outcome, io::Disk& disk);

}  // namespace djshard::job
