#include "djshard/job/run_job.h"

#include <unistd.h>

#include <filesystem>

#include "djshard/common/error.h"
#include "djshard/exec/dedup_run.h"
#include "djshard/io/disk.h"
#include "djshard/io/output.h"
#include "djshard/model/device.h"
#include "djshard/recipe/dataset.h"
#include "djshard/recipe/recipe.h"
#include "src/job/job_mode.h"

namespace djshard::job {

namespace fs = std::filesystem;

RunOutcome RunRecipe(const RunRequest& request, io::Disk& disk) {
  const recipe::Recipe recipe = recipe::LoadRecipe(request.config_path);
  // A job's model operators are loaded after preflight when there are two or
  // more (their stages may have to alternate, SPEC-checkpoints §10.7).
  const bool job_mode = WantsJobMode(request, recipe);
  exec::Plan plan = [&] {
    if (!job_mode) return exec::CompilePlan(recipe, ops::Registry::Global(), false, true);
    const model::DeferWeightsScope deferred;
    return exec::CompilePlan(recipe, ops::Registry::Global(), false, true);
  }();
  exec::CheckDedupRecipe(recipe, plan, job_mode);
  if (job_mode) {
    const std::vector<size_t> model_ops = exec::ModelOperators(plan);
    if (model_ops.size() >= 2) {
      plan.models_deferred = true;
    } else {
      exec::RebuildOperators(recipe, ops::Registry::Global(), model_ops, true, &plan);
    }
  }

  const recipe::DatasetPath dataset = recipe::ResolveDatasetPath(recipe, request.dataset_path);
  const std::vector<io::InputCandidate> inputs = io::DiscoverInputs(dataset.path, dataset.display);

  RunOutcome outcome;
  if (request.export_path) {
    outcome.export_path = fs::absolute(*request.export_path).lexically_normal().string();
  } else if (recipe.export_path) {
    outcome.export_path = recipe::ResolveRecipePath(recipe, *recipe.export_path);
  } else {
    throw Error(request.config_path, 0, "no export path",
                "pass --export-path or set export_path in the recipe");
  }
  outcome.stats_path = outcome.export_path + ".stats.json";
  outcome.errors_path = io::ErrorsFileOf(outcome.export_path);
  for (const io::InputCandidate& in : inputs) {
    if (in.path == outcome.export_path) {
      throw Error(outcome.export_path, 0, "export path is one of the input files",
                  "choose another --export-path");
    }
  }

  const int threads = exec::ThreadCount(request.threads, recipe, plan);
  outcome.threads = threads;

  std::error_code ec;
  fs::create_directories(fs::path(outcome.export_path).parent_path(), ec);
  if (job_mode) {
    RunJob(request, recipe, plan, dataset, inputs, outcome, disk);
    return outcome;
  }
  io::OutputStream output(outcome.export_path, /*overwrite=*/true, disk);
  io::OutputStream errors(outcome.errors_path, /*overwrite=*/true, disk);
  exec::ExecOptions options;
  options.threads = threads;
  options.progress = request.progress;
  if (exec::DedupOperators(plan).empty()) {
    outcome.summary = exec::Execute(plan, inputs, output, &errors, options);
  } else {
    // Rows reaching a deduplicator are spilled next to the export.
    std::string spill_name = ".";
    spill_name += fs::path(outcome.export_path).filename().string();
    spill_name += ".dedup-";
    spill_name += std::to_string(static_cast<long>(getpid()));
    const std::string spill_dir =
        (fs::path(outcome.export_path).parent_path() / spill_name).string();
    outcome.summary = exec::ExecuteWithDedup(plan, inputs, output, errors, options, spill_dir);
  }
  output.Commit();
  errors.Commit();
  disk.WriteAtomic(outcome.stats_path, exec::SummaryJson(outcome.summary, threads));
  return outcome;
}

}  // namespace djshard::job
