#include "djshard/exec/run.h"

#include <filesystem>
#include <thread>

#include "djshard/common/error.h"
#include "djshard/io/disk.h"
#include "djshard/recipe/recipe.h"

namespace djshard::exec {

namespace fs = std::filesystem;

RunOutcome RunRecipe(const RunRequest& request) {
  const recipe::Recipe recipe = recipe::LoadRecipe(request.config_path);
  const Plan plan = CompilePlan(recipe, ops::Registry::Global());

  std::string dataset, display;
  if (request.dataset_path) {
    display = *request.dataset_path;
    dataset = fs::absolute(*request.dataset_path).lexically_normal().string();
  } else if (recipe.dataset_path) {
    dataset = recipe::ResolveRecipePath(recipe, *recipe.dataset_path);
    display = dataset;
  } else {
    throw Error(request.config_path, 0, "no dataset path",
                "pass --dataset-path or set dataset_path in the recipe");
  }
  std::error_code ec;
  if (!fs::exists(dataset, ec)) {
    throw Error(display, 0, "dataset path does not exist", "check --dataset-path or dataset_path");
  }
  const std::vector<io::InputCandidate> inputs = io::DiscoverInputs(dataset, display);

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
  outcome.errors_path = outcome.export_path + ".errors.jsonl";
  for (const io::InputCandidate& in : inputs) {
    if (in.path == outcome.export_path) {
      throw Error(outcome.export_path, 0, "export path is one of the input files",
                  "choose another --export-path");
    }
  }

  // --threads, else the recipe's np, else the operators' num_proc, else every core.
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (plan.num_proc > 0) threads = plan.num_proc;
  if (recipe.np) threads = static_cast<int>(*recipe.np);
  if (request.threads) threads = *request.threads;
  if (threads < 1) throw Error("--threads must be at least 1");
  outcome.threads = threads;

  fs::create_directories(fs::path(outcome.export_path).parent_path(), ec);
  io::OutputStream output(outcome.export_path, /*overwrite=*/true);
  io::OutputStream errors(outcome.errors_path, /*overwrite=*/true);
  ExecOptions options;
  options.threads = threads;
  options.progress = request.progress;
  outcome.summary = Execute(plan, inputs, output, &errors, options);
  output.Commit();
  errors.Commit();
  io::RealDisk().WriteAtomic(outcome.stats_path, SummaryJson(outcome.summary, threads));
  return outcome;
}

}  // namespace djshard::exec
