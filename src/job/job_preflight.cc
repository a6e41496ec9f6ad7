#include "src/job/job_preflight.h"

#include "djshard/common/log.h"

namespace djshard::job {

JobPreflight RunJobPreflight(const recipe::Recipe& recipe, const exec::Plan& plan,
                             const JobSettings& settings,
                             const std::vector<io::InputCandidate>& inputs,
                             const std::string& job_dir, int threads, bool threads_explicit,
                             uint64_t num_partitions, uint64_t total_rows,
                             const std::function<nlohmann::json()>& plan_json, EventLog& events,
                             io::Disk& disk) {
  preflight::PreflightContext cx;
  cx.recipe = &recipe;
  cx.plan = &plan;
  cx.settings = settings.preflight;
  for (const io::InputCandidate& in : inputs) cx.inputs.push_back(in.path);
  cx.job_dir = job_dir;
  cx.threads = threads;
  cx.partitions_in_flight = settings.max_concurrent_partitions;
  cx.num_partitions = num_partitions;
  cx.total_rows = total_rows;
  cx.emit = [&events](const std::string& type, nlohmann::json fields) {
    events.Emit(type, std::move(fields));
  };
  const preflight::PreflightResult result = preflight::RunPreflight(cx);
  JobPreflight out;
  out.threads = threads;
  if (!result.has_model_ops) return out;
  out.phases = result.phases;
  out.group_size = result.group_size;
  nlohmann::json doc = plan_json();
  preflight::AddPreflightToPlan(result, &doc);
  const int run_threads = preflight::ThreadsAfterPlan(result, threads, threads_explicit);
  disk.WriteAtomic(job_dir + "/dag_execution_plan.json", doc.dump(2) + "\n");
  for (const std::string& line : result.printout) Log(LogLevel::kInfo, "preflight", line);
  if (run_threads != threads) {
    Log(LogLevel::kInfo, "preflight",
        "  executor threads: " + std::to_string(run_threads) + " (every core would be " +
            std::to_string(threads) + ": memory)");
  }
  out.threads = run_threads;
  return out;
}

}  // namespace djshard::job
